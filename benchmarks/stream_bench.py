"""box_exec_stream figures (docs/streaming.md), printed, never asserted, on one boxd with
bubblewrap sandboxes, consumed by langbot-plugin 0.7.16's own Handler.call_action_generator
over a real WebSocket on loopback:
- first output: when a command that prints, sleeps 1 s and prints again shows its first
  line, with box_exec (the whole reply) and with box_exec_stream (the first frame);
- throughput: MiB/s of a command writing N MiB, through the SDK's consumer (its window
  of 8, an acknowledgement every 4 frames), text and NUL bytes (escaped six times);
- memory: boxd's RSS growth while a consumer holds a 64 MiB flood unread.

usage: BOXD=build/boxd python stream_bench.py [--mib N]   (the 0.7.16 environment)"""

from __future__ import annotations

import argparse
import asyncio
import enum
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "conformance"))

from conftest import INSTANCE, TOKEN, Boxd, BoxConnection  # noqa: E402
from langbot_plugin.entities.io.context import ActionContext  # noqa: E402


class Action(enum.Enum):
    EXEC = "box_exec"
    EXEC_STREAM = "box_exec_stream"


def ctx(ws: str) -> ActionContext:
    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=ws, placement_generation=1)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def first_output(h) -> None:
    cmd = {"session_id": "first", "cmd": "echo one; sleep 1; echo two", "timeout_sec": 30}
    await h.call_action(Action.EXEC, {**cmd, "cmd": "true"}, action_context=ctx("bench-first"))  # warm
    t0 = time.monotonic()
    await h.call_action(Action.EXEC, cmd, timeout=60, action_context=ctx("bench-first"))
    whole = time.monotonic() - t0
    t0 = time.monotonic()
    first = None
    async for _ in h.call_action_generator(Action.EXEC_STREAM, cmd, action_context=ctx("bench-first")):
        if first is None:
            first = time.monotonic() - t0
    total = time.monotonic() - t0
    print(f"first output: box_exec {whole * 1000:.0f} ms (at its end); "
          f"box_exec_stream {first * 1000:.1f} ms (stream ends at {total * 1000:.0f} ms)")


async def throughput(h, mib: int) -> None:
    for label, gen in (("text", "tr '\\0' a"), ("NUL bytes", "cat")):
        cmd = {"session_id": "tp", "cmd": f"head -c {mib << 20} /dev/zero | {gen}", "timeout_sec": 300}
        t0 = time.monotonic()
        frames = 0
        result = None
        async for d in h.call_action_generator(Action.EXEC_STREAM, cmd, action_context=ctx("bench-tp")):
            frames += 1
            result = d
        s = time.monotonic() - t0
        print(f"throughput ({label}): {mib} MiB in {s:.2f} s = {mib / s:.0f} MiB/s, "
              f"{frames} frames, {result['stdout_bytes']} bytes")


async def stalled(h, pid: int) -> None:
    before = rss_mib(pid)
    cmd = {"session_id": "stall", "cmd": "head -c 67108864 /dev/zero", "timeout_sec": 5}
    gen = h.call_action_generator(Action.EXEC_STREAM, cmd, action_context=ctx("bench-stall"))
    await anext(gen)
    await asyncio.sleep(2)  # a consumer that does not read for 2 s
    during = rss_mib(pid)
    await gen.aclose()
    print(f"memory: boxd RSS {before:.1f} MiB before, {during:.1f} MiB while a 64 MiB flood waits unread")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()
    boxd = Boxd({"backend": "bwrap"})
    try:
        async with BoxConnection(boxd.url, TOKEN, INSTANCE) as conn:
            await first_output(conn.handler)
            await throughput(conn.handler, args.mib)
            await stalled(conn.handler, boxd.proc.pid)
    finally:
        boxd.stop()


if __name__ == "__main__":
    asyncio.run(main())
