"""box_exec_stream (docs/streaming.md) consumed by LangBot's own client: langbot-plugin
0.7.16's Handler.call_action_generator with its defaults (window 8, acknowledgements every
4 frames, 15 s per frame) against a boxd on bubblewrap, over a real WebSocket; then
hostile callers: a flood to a consumer that never acknowledges, a command that takes its
own sandbox down, and a 0.5.x-style caller without flow control."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import threading
import time
import uuid

import pytest
import pytest_asyncio
import websockets

from langbot_plugin.box.security import BOX_CONTROL_TOKEN_HEADER, BOX_INSTANCE_HEADER
from langbot_plugin.entities.io.context import ActionContext
from langbot_plugin.runtime.io import handler as sdk_handler
from langbot_plugin.runtime.io.handler import ActionCallError

from conftest import INSTANCE, TOKEN, Boxd, BoxConnection

if not hasattr(sdk_handler, "STREAM_WINDOW"):
    pytest.skip("this langbot-plugin has no stream flow control (0.7.13+)", allow_module_level=True)


class Action(enum.Enum):
    """The action as the SDK's call_action_generator takes one (an enum with a value)."""

    EXEC_STREAM = "box_exec_stream"


def ctx(workspace: str) -> ActionContext:
    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=1)


def ctx_json(workspace: str) -> dict:
    return ctx(workspace).model_dump(mode="json", exclude_none=True)


@pytest.fixture(scope="module")
def boxd():
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    b = Boxd({"backend": "bwrap"})
    yield b
    b.stop()


@pytest_asyncio.fixture
async def handler(boxd):
    async with BoxConnection(boxd.url, TOKEN, INSTANCE) as conn:
        yield conn.handler


# The 40 s quiet command runs beside the other tests (its own connection, its own thread
# and event loop), started with the first of them and judged by the last one: its time is
# spent waiting, and the suite need not wait for it alone.


async def _quiet_stream(url: str) -> list:
    frames = []
    async with BoxConnection(url, TOKEN, INSTANCE) as conn:
        async for data in conn.handler.call_action_generator(
            Action.EXEC_STREAM, {"session_id": "quiet", "cmd": "sleep 40; echo done", "timeout_sec": 120},
            action_context=ctx("stream-quiet"),
        ):
            frames.append(data)
    return frames


@pytest.fixture(scope="module", autouse=True)
def quiet_stream(boxd):
    outcome: dict = {}

    def run():
        try:
            outcome["frames"] = asyncio.run(_quiet_stream(boxd.url))
        except BaseException as e:  # judged by the test
            outcome["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield t, outcome
    t.join(timeout=120)


# --- what the host can see of a sandbox's processes -------------------------------------


def pids_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (the sandbox's pid namespace is a
    child of the host's, so the host sees them)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(name))
        except OSError:
            pass
    return out


async def wait_for(predicate, seconds: float, what: str):
    """Polls `predicate` until it holds; fails after `seconds`."""
    end = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"not within {seconds} s: {what}")
        await asyncio.sleep(0.02)


def blocked_writing(pid: int) -> bool:
    """True when `pid` sleeps in a pipe write (its reader stopped reading)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip() in ("pipe_write", "anon_pipe_write")
    except OSError:
        return False


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- LangBot's own consumer ---------------------------------------------------------------


async def test_output_arrives_as_the_command_writes_it(handler):
    """The first frame of a command that prints, sleeps 2 s and prints again reaches the
    consumer before the second print happens (the command prints its own clock)."""
    frames = []
    first_seen = None
    async for data in handler.call_action_generator(
        Action.EXEC_STREAM,
        {"session_id": "live", "cmd": "date +%s%N; sleep 2; date +%s%N", "timeout_sec": 30},
        action_context=ctx("stream-live"),
    ):
        if first_seen is None:
            first_seen = time.time_ns()
        frames.append(data)
    out = [f for f in frames if f["stream"] == "stdout"]
    printed = "".join(f["data"] for f in out).split()
    assert len(printed) == 2, frames
    # Received before the command printed its second line: live, not at the end.
    assert first_seen < int(printed[1])
    assert out[0]["offset"] == 0 and out[0]["data"] == printed[0] + "\n"
    result = frames[-1]
    assert result["stream"] == "result"
    assert result["status"] == "completed" and result["exit_code"] == 0
    assert result["ended"] == "exit"
    assert result["stdout_bytes"] == sum(len(f["data"].encode()) for f in out)
    assert result["stderr_bytes"] == 0
    assert result["session_id"] == "live"


async def test_many_frames_are_acknowledged_in_order(handler):
    """More than a window of frames: the SDK acknowledges every 4, checks every index in
    order, and the frames' offsets and text add up to the command's whole output, on
    both streams, with box_exec's invalid-UTF-8 handling."""
    cmd = (
        "i=0; while [ $i -lt 3000 ]; do echo \"line $i $(printf '%0300d' 0)\"; i=$((i+1)); done;"
        " printf 'caf\\303\\251 \\377 end' >&2"
    )
    frames = []
    async for data in handler.call_action_generator(
        Action.EXEC_STREAM, {"session_id": "many", "cmd": cmd, "timeout_sec": 60},
        action_context=ctx("stream-many"),
    ):
        frames.append(data)
    result = frames.pop()
    assert result["stream"] == "result" and result["exit_code"] == 0, result
    text = {"stdout": "", "stderr": ""}
    for f in frames:
        if f["stream"] == "keepalive":
            continue
        if f["stream"] == "stdout":  # ASCII: raw offsets are text offsets
            assert f["offset"] == len(text["stdout"]), f["offset"]
        text[f["stream"]] += f["data"]
    lines = text["stdout"].splitlines()
    assert len(lines) == 3000 and lines[2999].startswith("line 2999 ")
    assert len(frames) > 2 * sdk_handler.STREAM_WINDOW
    assert text["stderr"] == "caf\u00e9 \ufffd end"
    assert result["stdout_bytes"] == len(text["stdout"])
    assert result["stderr_bytes"] == 11  # the raw bytes, the invalid one included


async def test_a_consumer_that_stops_reading_blocks_the_command_until_its_timeout(boxd, handler):
    """The consumer takes one frame and stops: boxd stops reading the command's pipes,
    the command blocks on its write (not killed), boxd's memory stays put, and the
    timeout ends it; the last frame says so."""
    marker = f"stall-{uuid.uuid4().hex[:8]}"
    gen = handler.call_action_generator(
        Action.EXEC_STREAM,
        {"session_id": "stall", "cmd": f"cat /dev/zero /nonexistent/{marker}", "timeout_sec": 6},
        action_context=ctx("stream-stall"),
    )
    async with contextlib.aclosing(gen):
        first = await anext(gen)
        assert first["stream"] == "stdout"
        rss_before = rss_kib(boxd.proc.pid)
        pids = await wait_for(lambda: pids_with(marker), 5, "the command runs")
        await wait_for(lambda: any(blocked_writing(p) for p in pids), 5, "the command blocks on its write")
        # Still blocked, not killed, and boxd holds no more than a window of frames.
        assert pids_with(marker) == pids
        assert rss_kib(boxd.proc.pid) - rss_before < 32 * 1024
        frames = [first]
        async for data in gen:
            frames.append(data)
    result = frames[-1]
    assert result["stream"] == "result"
    assert result["status"] == "timed_out" and result["ended"] == "timeout"
    assert not pids_with(marker)


async def test_cancel_ends_the_command_within_a_second(handler):
    """Leaving the generator makes the SDK send __cancel_action: the command's process
    group is gone within 1 s."""
    marker = f"cancel-{uuid.uuid4().hex[:8]}"
    gen = handler.call_action_generator(
        Action.EXEC_STREAM,
        {"session_id": "cancel", "cmd": f"echo started; sleep 1000; : {marker}", "timeout_sec": 120},
        action_context=ctx("stream-cancel"),
    )
    async with contextlib.aclosing(gen):
        first = await anext(gen)
        assert first["data"] == "started\n"
        await wait_for(lambda: pids_with(marker), 5, "the command runs")
    # aclose() sent __cancel_action and had its answer.
    await wait_for(lambda: not pids_with(marker), 1, "the cancelled command is gone")


# --- hostile callers and commands ---------------------------------------------------------


class RawCaller:
    """A caller writing the protocol by hand (websockets): what an old or hostile client
    does that the SDK never would."""

    def __init__(self, url: str):
        self.url = url
        self.seq = 0

    async def __aenter__(self):
        self.ws = await websockets.connect(
            self.url, max_size=None, max_queue=4,
            additional_headers={BOX_INSTANCE_HEADER: INSTANCE, BOX_CONTROL_TOKEN_HEADER: TOKEN},
        )
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def send(self, action: str, data: dict, context: dict | None = None, flow: bool = False) -> int:
        self.seq += 1
        msg = {"seq_id": self.seq, "action": action, "data": data}
        if context is not None:
            msg["context"] = context
        if flow:
            msg["stream_flow_control"] = 1
        await self.ws.send(json.dumps(msg))
        return self.seq

    async def recv(self, timeout: float = 15) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def until(self, seq: int, timeout: float = 15) -> dict:
        """The next message for `seq` (others are dropped)."""
        while True:
            m = await self.recv(timeout)
            if m.get("seq_id") == seq:
                return m

    async def rest_after_cancel(self, cancel: int) -> list[dict]:
        """A stream's messages up to its end frame, after `__cancel_action` (sequence
        `cancel`, whose own answer is checked and left out)."""
        rest = []
        while True:
            m = await self.recv()
            if m["seq_id"] == cancel:
                assert m["data"] == {"cancelled": True}
                continue
            rest.append(m)
            if m.get("chunk_status") == "end":
                return rest


async def test_a_flood_to_a_consumer_that_never_acknowledges(boxd):
    """64 MiB of output to a caller that asked for flow control and never acknowledges:
    exactly a window of frames, then the command blocks; boxd's memory stays put;
    the caller's cancel ends it and the last frame says so."""
    marker = f"flood-{uuid.uuid4().hex[:8]}"
    async with RawCaller(boxd.url) as c:
        rss_before = rss_kib(boxd.proc.pid)
        seq = await c.send(
            "box_exec_stream",
            {"session_id": "flood", "cmd": f"head -c 67108864 /dev/zero | cat - /nonexistent/{marker}", "timeout_sec": 120},
            ctx_json("stream-flood"), flow=True,
        )
        frames = [await c.until(seq) for _ in range(sdk_handler.STREAM_WINDOW)]
        assert [f["stream_index"] for f in frames] == list(range(1, 9))
        assert all(f["chunk_status"] == "continue" and f["code"] == 0 for f in frames)
        # Every frame within the SDK's 1 MiB, even though each NUL is sent as \u0000.
        assert all(len(json.dumps(f)) <= sdk_handler.MAX_STREAM_FRAME_BYTES for f in frames)
        pids = await wait_for(lambda: pids_with(marker), 5, "the command runs")
        await wait_for(lambda: any(blocked_writing(p) for p in pids_with(marker)), 5,
                       "the command blocks on its write")
        assert rss_kib(boxd.proc.pid) - rss_before < 32 * 1024
        # A wrong acknowledgement is refused with the SDK's texts; __cancel_action answers.
        bad = await c.send("__stream_ack", {"seq_id": seq, "index": 9}, ctx_json("stream-flood"))
        assert (await c.until(bad))["message"] == "ValueError: Invalid stream acknowledgement index"
        other = await c.send("__stream_ack", {"seq_id": seq, "index": 1}, ctx_json("stream-other"))
        assert (await c.until(other))["data"] == {"accepted": False}
        cancel = await c.send("__cancel_action", {"seq_id": seq}, ctx_json("stream-flood"))
        rest = await c.rest_after_cancel(cancel)
        assert rest[-2]["data"]["stream"] == "result" and rest[-2]["data"]["ended"] == "cancel"
        assert rest[-1]["data"] == {}
    await wait_for(lambda: not pids_with(marker), 5, "the cancelled command is gone")


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


async def test_a_sandbox_that_dies_mid_stream_ends_it_with_an_error(handler):
    """A command cannot take its own sandbox down (its signals to boxrt-init, or to
    every process it may signal, are refused): it says so on stderr. Then the sandbox
    dies mid-stream anyway (its init killed from the host, as the OOM killer or an
    operator would): the consumer gets an error frame at once, never a hang; the next
    command gets a fresh sandbox of the same session."""
    marker = f"doomed-{uuid.uuid4().hex[:8]}"
    frames = []
    gen = handler.call_action_generator(
        Action.EXEC_STREAM,
        {"session_id": "doomed",
         "cmd": f"kill -9 $PPID; kill -9 -1; echo alive; sleep 1000; : {marker}", "timeout_sec": 120},
        action_context=ctx("stream-doomed"),
    )
    with pytest.raises(ActionCallError) as err:
        async with contextlib.aclosing(gen):
            async for data in gen:
                frames.append(data)
                if data.get("data", "").endswith("alive\n"):
                    shell = (await wait_for(lambda: pids_with(marker), 5, "the command runs"))[0]
                    os.kill(parent(shell), 9)  # boxrt-init
    assert "exited during the command" in str(err.value)
    stderr = "".join(f["data"] for f in frames if f["stream"] == "stderr")
    assert stderr.count("Operation not permitted") == 2, frames
    again = [d async for d in handler.call_action_generator(
        Action.EXEC_STREAM, {"session_id": "doomed", "cmd": "echo again"},
        action_context=ctx("stream-doomed"),
    )]
    assert again[0]["data"] == "again\n" and again[-1]["exit_code"] == 0


async def test_a_caller_without_flow_control(boxd):
    """A 0.5.x caller never acknowledges and sends no stream_flow_control: frames carry
    no stream_index and come without a window, as fast as it reads; one that stops
    reading holds the command up instead of boxd's memory."""
    async with RawCaller(boxd.url) as c:
        seq = await c.send(
            "box_exec_stream",
            {"session_id": "legacy", "cmd": "head -c 3000000 /dev/zero | tr '\\0' a; echo", "timeout_sec": 60},
            ctx_json("stream-legacy"),
        )
        frames = []
        while True:
            m = await c.until(seq)
            frames.append(m)
            if m["chunk_status"] == "end":
                break
        assert all("stream_index" not in f for f in frames)
        data = [f["data"] for f in frames[:-1]]
        assert data[-1]["stream"] == "result" and data[-1]["stdout_bytes"] == 3000001
        assert sum(len(d.get("data", "")) for d in data[:-1]) == 3000001

    marker = f"legacy-{uuid.uuid4().hex[:8]}"
    async with RawCaller(boxd.url) as c:
        rss_before = rss_kib(boxd.proc.pid)
        await c.send(
            "box_exec_stream",
            {"session_id": "legacy-stall", "cmd": f"cat /dev/zero /nonexistent/{marker}", "timeout_sec": 60},
            ctx_json("stream-legacy"),
        )
        # Nothing read from here on: the command fills the socket and then blocks.
        await wait_for(lambda: any(blocked_writing(p) for p in pids_with(marker)), 10,
                       "the command blocks on its write")
        assert rss_kib(boxd.proc.pid) - rss_before < 64 * 1024
    # The caller went away: its command is ended.
    await wait_for(lambda: not pids_with(marker), 10, "the command of a closed connection is gone")


def test_a_quiet_command_gets_keepalives_within_the_sdks_frame_wait(quiet_stream):
    """40 s without output: keepalive frames (server.stream_keepalive_ms, 5 s) keep the
    SDK's default 15 s wait per frame from expiring (started with the first test)."""
    t, outcome = quiet_stream
    t.join(timeout=120)
    assert not t.is_alive(), "the quiet stream did not end"
    assert "error" not in outcome, repr(outcome.get("error"))
    frames = outcome["frames"]
    kinds = [f["stream"] for f in frames]
    assert kinds.count("keepalive") >= 6, kinds
    assert frames[-2] == {"stream": "stdout", "data": "done\n", "offset": 0}
    assert frames[-1]["ended"] == "exit" and frames[-1]["exit_code"] == 0
