"""Starts boxd (scripted backend) on port 0 for the conformance suite and connects
LangBot's own client to it, the way LangBot's BoxRuntimeConnector does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import tempfile

import pytest
import pytest_asyncio

from langbot_plugin.box.client import ActionRPCBoxClient
from langbot_plugin.box.security import BOX_CONTROL_TOKEN_HEADER, BOX_INSTANCE_HEADER
from langbot_plugin.entities.io.actions.enums import CommonAction
from langbot_plugin.runtime.io.connection import Connection
from langbot_plugin.runtime.io.controllers.ws.client import WebSocketClientController
from langbot_plugin.runtime.io.handler import Handler

TOKEN = "conformance-token-0123456789abcdef0123456789"
INSTANCE = "instance-a"


class Boxd:
    """One boxd process with its own config and data folder."""

    def __init__(self, box: dict, testing: bool = False, server: dict | None = None):
        """`server`: more keys of the server section (benchmarks/density.py's)."""
        self.dir = tempfile.mkdtemp(prefix="boxd-conformance-")
        box = dict(box)
        box.setdefault("local", {})["host_root"] = os.path.join(self.dir, "box")
        config = {
            "server": {
                "listen": "127.0.0.1:0",
                "control_token": TOKEN,
                "transfer_dir": os.path.join(self.dir, "transfers"),
                # Lets the scripted backend make admission ready: tests only.
                "testing": testing,
                **(server or {}),
            },
            "box": box,
        }
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log = open(os.path.join(self.dir, "boxd.log"), "w")
        self.proc = subprocess.Popen(
            [os.environ["BOXD"], "--config", path],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("boxd listening on "):
            self.stop()
            raise RuntimeError(f"boxd did not start: {line!r}; log in {self.log.name}")
        self.url = line.split()[-1] + "/rpc/ws"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class BoxConnection:
    """The SDK's own WebSocket controller, connection and handler (no hand-written protocol)."""

    def __init__(self, url: str, token: str | None, instance: str):
        self.url = url
        self.headers = {BOX_INSTANCE_HEADER: instance}
        if token:
            self.headers[BOX_CONTROL_TOKEN_HEADER] = token
        self.client = ActionRPCBoxClient(logger=logging.getLogger("box-client"))
        self.handler: Handler | None = None
        self._ready = asyncio.Event()
        self._error: BaseException | None = None
        self._tasks: list[asyncio.Task] = []

    async def __aenter__(self) -> "BoxConnection":
        async def on_failed(ctrl, exc):
            self._error = exc or RuntimeError("ws connection failed")
            self._ready.set()

        async def on_connected(conn: Connection) -> None:
            handler = Handler(conn)
            self.handler = handler
            self.client.set_handler(handler)
            task = asyncio.create_task(handler.run())
            self._tasks.append(task)
            try:
                await handler.call_action(CommonAction.PING, {})
            except Exception as exc:  # noqa: BLE001 - reported to the test
                self._error = exc
            self._ready.set()
            # The controller closes the socket when this callback returns.
            await task

        ctrl = WebSocketClientController(
            ws_url=self.url, make_connection_failed_callback=on_failed, additional_headers=self.headers
        )
        self._tasks.append(asyncio.create_task(ctrl.run(on_connected)))
        await asyncio.wait_for(self._ready.wait(), 15)
        if self._error is not None:
            await self.__aexit__()
            raise self._error
        return self

    async def __aexit__(self, *exc) -> None:
        if self.handler is not None:
            with contextlib.suppress(Exception):
                await self.handler.close()
        self.client.set_handler(None)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@pytest.fixture(scope="module")
def standard_boxd():
    boxd = Boxd({"backend": "scripted"})
    yield boxd
    boxd.stop()


@pytest.fixture(scope="module")
def bwrap_boxd():
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    boxd = Boxd({"backend": "bwrap"})
    yield boxd
    boxd.stop()


ALL_READY = [
    "cgroup_v2", "resource_limits", "namespace_isolation", "mount_isolation", "network_isolation",
    "hard_workspace_quota", "hard_skill_storage_quota", "bounded_ephemeral_storage", "inode_quota",
]


# A Cloud (admission-mode) boxd on the scripted backend, which server.testing lets
# stand in for an isolating one.
ADMISSION_BOX = {
    "backend": "scripted",
    "scripted": {"available": True, "ready_keys": ALL_READY},
    "admission": {
        "required": True, "required_backend": "scripted", "max_sessions": 1,
        "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
        "cpus": 0.5, "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32,
        "readiness_cache_sec": 0,
    },
}


@pytest.fixture(scope="module")
def admission_boxd():
    boxd = Boxd(ADMISSION_BOX, testing=True)
    yield boxd
    boxd.stop()


@pytest_asyncio.fixture
async def box(standard_boxd):
    async with BoxConnection(standard_boxd.url, TOKEN, INSTANCE) as conn:
        yield conn.client


@pytest_asyncio.fixture
async def sandboxed_box(bwrap_boxd):
    async with BoxConnection(bwrap_boxd.url, TOKEN, INSTANCE) as conn:
        yield conn.client


@pytest_asyncio.fixture
async def admitted_box(admission_boxd):
    async with BoxConnection(admission_boxd.url, TOKEN, INSTANCE) as conn:
        yield conn.client
