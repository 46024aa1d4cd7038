"""The file actions (docs/files.md) over a real WebSocket, called with langbot-plugin
0.7.16's Handler.call_action against a boxd on bubblewrap: a 256 MiB file written and
read back in ranged calls of 1 MiB with boxd's memory bounded, odd names, the wire's
errors, the capability, and admission mode's gate (runs in the conformance_stream
entry, beside its 40 s quiet stream)."""

from __future__ import annotations

import asyncio
import base64
import enum
import hashlib
import json
import random
import threading
import time

import pytest

from langbot_plugin.runtime.io.handler import ActionCallError

from langbot_plugin.runtime.io import handler as sdk_handler

from conftest import ADMISSION_BOX, INSTANCE, TOKEN, Boxd, BoxConnection
# The stream suite's helpers and fixtures (boxd is module-scoped: this module gets a boxd
# of its own, as before).
from test_exec_stream import RawCaller, boxd, ctx, ctx_json, handler, rss_kib  # noqa: F401


class Action(enum.Enum):
    CREATE = "box_create_session"
    EXEC = "box_exec"
    READ = "box_read_file"
    WRITE = "box_write_file"
    LIST = "box_list_files"
    STAT = "box_stat_file"
    REMOVE = "box_remove_file"
    MKDIR = "box_make_dir"
    MOVE = "box_move_file"
    INFO = "box_get_backend_info"


MIB = 1 << 20


async def call(handler, action: Action, data: dict, workspace: str = "files", timeout: float = 30) -> dict:
    return await handler.call_action(action, data, timeout=timeout, action_context=ctx(workspace))


class PeakRss:
    """boxd's highest RSS while the block runs (sampled every 20 ms on a thread)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self):
        self.start = rss_kib(self.pid)
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_kib(self.pid))

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_kib(self.pid))


def piece(i: int) -> bytes:
    return random.Random(i).randbytes(MIB)


async def test_a_256_mib_file_round_trips_in_ranged_calls_with_memory_bounded(boxd, handler):
    await call(handler, Action.CREATE, {"session_id": "big"})
    pieces = 256
    want = hashlib.sha256()
    # Warm up: the first calls' allocations are not growth.
    await call(handler, Action.WRITE, {"session_id": "big", "path": "warm", "content": "x"})
    with PeakRss(boxd.proc.pid) as during_write:
        t0 = time.monotonic()
        for i in range(pieces):
            data = piece(i)
            want.update(data)
            r = await call(handler, Action.WRITE, {
                "session_id": "big", "path": "/workspace/big.bin", "offset": i * MIB,
                "content": base64.b64encode(data).decode(), "encoding": "base64",
            })
            assert r["written"] == MIB and r["size"] == (i + 1) * MIB
        write_s = time.monotonic() - t0
    got = hashlib.sha256()
    with PeakRss(boxd.proc.pid) as during_read:
        t0 = time.monotonic()
        offset = 0
        while True:
            r = await call(handler, Action.READ, {
                "session_id": "big", "path": "big.bin", "offset": offset, "length": MIB, "encoding": "base64",
            })
            data = base64.b64decode(r["content"])
            got.update(data)
            offset += len(data)
            if r["eof"]:
                break
        read_s = time.monotonic() - t0
    assert offset == pieces * MIB
    assert got.hexdigest() == want.hexdigest()
    # The same file in one streamed read (the SDK's generator acknowledges every 4 frames).
    streamed = hashlib.sha256()
    with PeakRss(boxd.proc.pid) as during_stream:
        t0 = time.monotonic()
        frames = []
        async for f in handler.call_action_generator(
                Action.READ, {"session_id": "big", "path": "big.bin", "encoding": "base64"},
                timeout=30, action_context=ctx("files")):
            frames.append(f)
            if f["stream"] == "data":
                assert f["offset"] == sum(len(x["bytes"]) for x in frames[:-1] if "bytes" in x)
                f["bytes"] = base64.b64decode(f.pop("data"))
                streamed.update(f["bytes"])
        stream_s = time.monotonic() - t0
    assert streamed.hexdigest() == want.hexdigest()
    assert frames[-1] == {"stream": "result", "path": "/workspace/big.bin", "encoding": "base64", "offset": 0,
                          "length": pieces * MIB, "size": pieces * MIB, "eof": True, "ended": "eof"}
    print(f"\n256 MiB: write {256 / write_s:.0f} MiB/s, read {256 / read_s:.0f} MiB/s, streamed read "
          f"{256 / stream_s:.0f} MiB/s in {len(frames) - 1} frames; boxd RSS "
          f"+{(during_write.peak - during_write.start) / 1024:.1f} MiB writing, "
          f"+{(during_read.peak - during_read.start) / 1024:.1f} MiB reading, "
          f"+{(during_stream.peak - during_stream.start) / 1024:.1f} MiB streaming")
    assert during_write.peak - during_write.start <= 16 * 1024
    assert during_read.peak - during_read.start <= 16 * 1024
    assert during_stream.peak - during_stream.start <= 16 * 1024


async def read_stream(handler, data: dict, workspace: str = "files") -> list[dict]:
    return [f async for f in handler.call_action_generator(
        Action.READ, data, timeout=30, action_context=ctx(workspace))]


async def test_streamed_reads_text_ranges_and_errors(handler):
    """A caller with flow control gets any read as frames: text never split inside a
    character, a range, an empty file, and the one-call errors as the stream's error."""
    await call(handler, Action.CREATE, {"session_id": "sread"})
    text = "aé€😀" * 40000  # 400,000 bytes: several frames, characters across their edges
    raw = text.encode()
    await call(handler, Action.WRITE, {"session_id": "sread", "path": "t.txt",
                                       "content": base64.b64encode(raw).decode(), "encoding": "base64"})
    frames = await read_stream(handler, {"session_id": "sread", "path": "t.txt"})
    data = [f for f in frames if f["stream"] == "data"]
    assert len(data) > 2
    assert "".join(f["data"] for f in data) == text
    assert [f["offset"] for f in data] == [sum(len(x["data"].encode()) for x in data[:i]) for i in range(len(data))]
    assert frames[-1]["length"] == len(raw) and frames[-1]["encoding"] == "utf-8" and frames[-1]["ended"] == "eof"
    # A range: base64, from an offset, for a length that ends before the file does.
    frames = await read_stream(handler, {"session_id": "sread", "path": "t.txt", "offset": 7,
                                         "length": 300000, "encoding": "base64"})
    got = b"".join(base64.b64decode(f["data"]) for f in frames if f["stream"] == "data")
    assert got == raw[7:300007]
    assert frames[-1]["offset"] == 7 and frames[-1]["length"] == 300000
    assert frames[-1]["eof"] is False and frames[-1]["ended"] == "length"
    await call(handler, Action.WRITE, {"session_id": "sread", "path": "empty", "content": ""})
    frames = await read_stream(handler, {"session_id": "sread", "path": "empty"})
    assert frames == [{"stream": "result", "path": "/workspace/empty", "encoding": "utf-8", "offset": 0,
                       "length": 0, "size": 0, "eof": True, "ended": "eof"}]
    for data, message in [
        ({"session_id": "sread", "path": "nope"}, "BoxError: [Errno 2] No such file or directory: '/workspace/nope'"),
        ({"session_id": "sread", "path": "/etc/passwd"},
         "BoxValidationError: path /etc/passwd is outside the workspace /workspace"),
        ({"session_id": "sread", "path": "t.txt", "offset": -1}, "BoxValidationError: offset must not be negative"),
    ]:
        with pytest.raises(ActionCallError) as e:
            await read_stream(handler, data)
        assert str(e.value) == message


async def test_a_streamed_read_to_a_caller_that_never_acknowledges(boxd, handler):
    """A 64 MiB file to a caller that asked for flow control and never acknowledges:
    exactly a window of frames is read and sent, nothing more, with boxd's memory
    bounded; the caller's cancel ends the stream with a result that says so."""
    await call(handler, Action.CREATE, {"session_id": "sflood"}, workspace="sflood")
    await call(handler, Action.EXEC, {"session_id": "sflood", "cmd": "head -c 67108864 /dev/zero > z"},
               workspace="sflood")
    async with RawCaller(boxd.url) as c:
        rss_before = rss_kib(boxd.proc.pid)
        seq = await c.send("box_read_file", {"session_id": "sflood", "path": "z", "encoding": "base64"},
                           ctx_json("sflood"), flow=True)
        frames = [await c.until(seq) for _ in range(sdk_handler.STREAM_WINDOW)]
        assert [f["stream_index"] for f in frames] == list(range(1, 9))
        assert all(f["data"]["stream"] == "data" for f in frames)
        assert all(len(json.dumps(f)) <= sdk_handler.MAX_STREAM_FRAME_BYTES for f in frames)
        assert rss_kib(boxd.proc.pid) - rss_before < 16 * 1024
        cancel = await c.send("__cancel_action", {"seq_id": seq}, ctx_json("sflood"))
        rest = await c.rest_after_cancel(cancel)
        # Nothing was read past the window: the result comes next.
        assert len(rest) == 2
        result = rest[0]["data"]
        assert result["stream"] == "result" and result["ended"] == "cancel" and result["eof"] is False
        assert result["length"] == sum(len(base64.b64decode(f["data"]["data"])) for f in frames)
        # Each frame is a read of its own: a session deleted mid-stream ends it at the next.
        seq = await c.send("box_read_file", {"session_id": "sflood", "path": "z", "encoding": "base64"},
                           ctx_json("sflood"), flow=True)
        frames = [await c.until(seq) for _ in range(sdk_handler.STREAM_WINDOW)]
        gone = await c.send("box_delete_session", {"session_id": "sflood"}, ctx_json("sflood"))
        assert (await c.until(gone))["code"] == 0
        await c.send("__stream_ack", {"seq_id": seq, "index": 8}, ctx_json("sflood"))
        while (m := await c.until(seq))["code"] == 0:
            assert m["chunk_status"] == "continue"  # a frame read before the deletion
        assert m["message"] == "BoxSessionNotFoundError: session sflood not found"


async def test_odd_names_listing_and_the_command_sees_the_files(handler):
    await call(handler, Action.CREATE, {"session_id": "odd"})
    odd = "dir with space/new\nline ü.txt"
    r = await call(handler, Action.WRITE, {"session_id": "odd", "path": odd, "content": "héllo", "make_parents": True})
    assert r == {"path": "/workspace/" + odd, "written": 6, "size": 6}
    raw = b"caf\xe9.bin"
    await call(handler, Action.WRITE, {
        "session_id": "odd", "path": base64.b64encode(raw).decode(), "path_encoding": "base64", "content": "",
    })
    listing = await call(handler, Action.LIST, {"session_id": "odd", "path": "/workspace", "depth": 2})
    by = {e["path"]: e for e in listing["entries"]}
    assert by["dir with space"]["type"] == "dir"
    assert by[odd]["size"] == 6 and by[odd]["name"] == "new\nline ü.txt"
    latin = [e for e in listing["entries"] if e.get("path_base64") == base64.b64encode(raw).decode()]
    assert len(latin) == 1 and latin[0]["path"] == "caf\ufffd.bin"
    out = await call(handler, Action.EXEC, {"session_id": "odd", "cmd": "cat '/workspace/dir with space/new\nline ü.txt'"})
    assert out["stdout"] == "héllo"
    r = await call(handler, Action.READ, {"session_id": "odd", "path": odd})
    assert r["content"] == "héllo" and r["eof"] is True and r["size"] == 6 and r["encoding"] == "utf-8"
    st = await call(handler, Action.STAT, {"session_id": "odd", "path": odd})
    assert st["type"] == "file" and st["size"] == 6 and st["mode"] == 0o644
    await call(handler, Action.MKDIR, {"session_id": "odd", "path": "a/b", "make_parents": True})
    mv = await call(handler, Action.MOVE, {"session_id": "odd", "path": odd, "to": "a/b/moved.txt"})
    assert mv == {"path": "/workspace/" + odd, "to": "/workspace/a/b/moved.txt"}
    rm = await call(handler, Action.REMOVE, {"session_id": "odd", "path": "a", "recursive": True})
    assert rm == {"path": "/workspace/a", "removed": True}


async def test_errors_are_typed_and_clear(handler):
    await call(handler, Action.CREATE, {"session_id": "errs"})
    cases = [
        ({"session_id": "errs", "path": "/etc/passwd"},
         "BoxValidationError: path /etc/passwd is outside the workspace /workspace"),
        ({"session_id": "errs", "path": "../x"}, "BoxValidationError: path ../x is outside the workspace /workspace"),
        ({"session_id": "errs", "path": "nope"}, "BoxError: [Errno 2] No such file or directory: '/workspace/nope'"),
        ({"session_id": "errs", "path": "/workspace"}, "BoxError: [Errno 21] Is a directory: '/workspace'"),
        ({"session_id": "errs", "path": "x", "length": MIB + 1},  # one call; a stream may
         "BoxValidationError: length 1048577 is more than one call may read (1048576 bytes, server.max_file_call_bytes)"),
        ({"session_id": "errs", "path": 5}, "BoxValidationError: path must be a string"),
        ({"session_id": "errs"}, "KeyError: 'path'"),
        ({"session_id": "nobody", "path": "x"}, "BoxSessionNotFoundError: session nobody not found"),
    ]
    for data, text in cases:
        with pytest.raises(ActionCallError) as e:
            await call(handler, Action.READ, data)
        assert str(e.value) == text, data
    with pytest.raises(ActionCallError) as e:
        await call(handler, Action.WRITE, {"session_id": "errs", "path": "big", "content": "x" * (MIB + 1)})
    assert "server.max_file_call_bytes" in str(e.value)
    with pytest.raises(ActionCallError) as e:
        await call(handler, Action.LIST, {"session_id": "errs", "path": "x"})
    assert str(e.value) == "BoxError: [Errno 2] No such file or directory: '/workspace/x'"
    info = await handler.call_action(Action.INFO, {})
    assert "files" in info["capabilities"]


@pytest.fixture(scope="module")
def admission_boxd():
    b = Boxd(ADMISSION_BOX, testing=True)
    yield b
    b.stop()


async def test_admission_mode_gates_file_actions_as_box_exec(admission_boxd):
    """Without a grant a file action is refused exactly as box_exec is; a forged
    host-controlled field is refused before anything else."""
    async with BoxConnection(admission_boxd.url, TOKEN, INSTANCE) as conn:
        h = conn.handler
        with pytest.raises(ActionCallError) as exec_refusal:
            await call(h, Action.EXEC, {"session_id": "default", "cmd": "true"}, workspace="cloud-ws")
        with pytest.raises(ActionCallError) as file_refusal:
            await call(h, Action.READ, {"session_id": "default", "path": "x"}, workspace="cloud-ws")
        assert str(file_refusal.value) == str(exec_refusal.value)
        with pytest.raises(ActionCallError) as forged_exec:
            await call(h, Action.EXEC, {"session_id": "default", "cmd": "true", "host_path": "/srv"}, workspace="cloud-ws")
        with pytest.raises(ActionCallError) as forged_file:
            await call(h, Action.READ, {"session_id": "default", "path": "x", "host_path": "/srv"}, workspace="cloud-ws")
        assert str(forged_file.value) == str(forged_exec.value)
