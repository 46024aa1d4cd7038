"""The same API without ``await``: an event loop on a thread of its own runs the asyncio
client; each call waits for its result.

    with boxrt.sync.connect(url, token=...) as client:
        print(client.workspace("w1").exec("echo hi").stdout)
        for chunk in client.workspace("w1").exec_stream("make"):
            print(chunk.data, end="")"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Iterator

from . import _client

__all__ = ["connect"]


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="boxrt-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


class _Proxy:
    """Wraps an object of the asyncio client: its coroutines become calls that wait, its
    streams iterators, its parts proxies."""

    def __init__(self, target: Any, loop: _Loop):
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):
            return lambda *a, **k: self._wrap(self._loop.run(value(*a, **k)))
        if callable(value):
            return lambda *a, **k: self._wrap(value(*a, **k))
        return self._wrap(value)

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, _client.ExecStream):
            return self._iterate(value)
        if isinstance(value, (_client.Client, _client.Workspace, _client.Files, _client.Sessions)):
            return _Proxy(value, self._loop)
        return value

    def _iterate(self, stream: _client.ExecStream) -> Iterator[_client.OutputChunk]:
        try:
            while True:
                try:
                    yield self._loop.run(stream.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run(stream.aclose())


class SyncClient(_Proxy):
    def close(self) -> None:
        try:
            self._loop.run(self._target.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(*args: Any, **kwargs: Any) -> SyncClient:
    """``boxrt.connect``'s arguments; a client whose calls wait for their results."""
    loop = _Loop()
    try:
        client = loop.run(_client.connect(*args, **kwargs))
    except BaseException:
        loop.stop()
        raise
    return SyncClient(client, loop)
