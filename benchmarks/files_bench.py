"""File action figures (docs/files.md), printed, never asserted, on one boxd with
bubblewrap sandboxes over a real WebSocket on loopback: a file of N MiB (256 by default)
written and read back in ranged calls of 1 MiB (base64 on the wire), by a plain client
(websockets) and by langbot-plugin 0.7.16's own Handler.call_action, sha256-checked,
then in one streamed read through its call_action_generator, with boxd's peak RSS growth; beside `cp` of the same file on the same disk (boxd's
workspace folder), page cache warm in both.

usage: BOXD=build/boxd python files_bench.py [--mib N]   (the 0.7.16 environment)"""

from __future__ import annotations

import argparse
import asyncio
import base64
import enum
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "conformance"))

import websockets  # noqa: E402
from conftest import INSTANCE, TOKEN, Boxd, BoxConnection  # noqa: E402
from langbot_plugin.box.security import BOX_CONTROL_TOKEN_HEADER, BOX_INSTANCE_HEADER  # noqa: E402
from langbot_plugin.entities.io.context import ActionContext  # noqa: E402

MIB = 1 << 20


class Action(enum.Enum):
    CREATE = "box_create_session"
    READ = "box_read_file"
    WRITE = "box_write_file"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Peak:
    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def __enter__(self):
        self.start = rss_kib(self.pid)
        self.t = threading.Thread(target=lambda: [self.sample() for _ in iter(lambda: self.stop.wait(0.02), True)])
        self.t.start()
        return self

    def sample(self):
        self.peak = max(self.peak, rss_kib(self.pid))

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()
        self.sample()

    @property
    def growth_mib(self):
        return (self.peak - self.start) / 1024


def pieces(n):
    for i in range(n):
        yield hashlib.sha256(str(i).encode()).digest() * (MIB // 32)


async def round_trip(call, n, pid, path):
    want, got = hashlib.sha256(), hashlib.sha256()
    with Peak(pid) as pw:
        t0 = time.monotonic()
        for i, data in enumerate(pieces(n)):
            want.update(data)
            await call(Action.WRITE, {"path": path, "offset": i * MIB, "encoding": "base64",
                                      "content": base64.b64encode(data).decode()})
        write_s = time.monotonic() - t0
    with Peak(pid) as pr:
        t0 = time.monotonic()
        offset = 0
        while True:
            r = await call(Action.READ, {"path": path, "offset": offset, "length": MIB, "encoding": "base64"})
            data = base64.b64decode(r["content"])
            got.update(data)
            offset += len(data)
            if r["eof"]:
                break
        read_s = time.monotonic() - t0
    assert want.hexdigest() == got.hexdigest() and offset == n * MIB
    return n / write_s, n / read_s, pw.growth_mib, pr.growth_mib


async def main(n: int) -> None:
    b = Boxd({"backend": "bwrap"})
    try:
        ctx = {"instance_uuid": INSTANCE, "workspace_uuid": "bench-files", "placement_generation": 1}
        async with websockets.connect(b.url, max_size=None, additional_headers={
                BOX_INSTANCE_HEADER: INSTANCE, BOX_CONTROL_TOKEN_HEADER: TOKEN}) as ws:
            seq = 0

            async def raw(action, data):
                nonlocal seq
                seq += 1
                await ws.send(json.dumps({"seq_id": seq, "action": action.value, "context": ctx,
                                          "data": {"session_id": "files", **data}}))
                m = json.loads(await ws.recv())
                if m["code"] != 0:
                    raise RuntimeError(m["message"])
                return m["data"]

            await raw(Action.CREATE, {})
            w, r, gw, gr = await round_trip(raw, n, b.proc.pid, "raw.bin")
            print(f"plain client:   write {w:6.0f} MiB/s  read {r:6.0f} MiB/s  boxd RSS +{gw:.1f} / +{gr:.1f} MiB")
        async with BoxConnection(b.url, TOKEN, INSTANCE) as conn:
            actx = ActionContext(instance_uuid=INSTANCE, workspace_uuid="bench-files", placement_generation=1)

            async def sdk(action, data):
                return await conn.handler.call_action(action, {"session_id": "files", **data}, timeout=60,
                                                      action_context=actx)

            w, r, gw, gr = await round_trip(sdk, n, b.proc.pid, "sdk.bin")
            print(f"0.7.16 SDK:     write {w:6.0f} MiB/s  read {r:6.0f} MiB/s  boxd RSS +{gw:.1f} / +{gr:.1f} MiB")
            # The same file in one streamed read (call_action_generator, flow control).
            with Peak(b.proc.pid) as ps:
                t0 = time.monotonic()
                got = 0
                async for f in conn.handler.call_action_generator(
                        Action.READ, {"session_id": "files", "path": "sdk.bin", "encoding": "base64"},
                        timeout=60, action_context=actx):
                    if f["stream"] == "data":
                        got += len(base64.b64decode(f["data"]))
                stream_s = time.monotonic() - t0
            assert got == n * MIB
            print(f"0.7.16 SDK:     streamed read {n / stream_s:6.0f} MiB/s  boxd RSS +{ps.growth_mib:.1f} MiB")
        # cp on the same disk (boxd's data folder, where the workspaces are).
        src = os.path.join(b.dir, "cp-src.bin")
        with open(src, "wb") as f:
            for data in pieces(n):
                f.write(data)
        dst = os.path.join(b.dir, "cp-dst.bin")
        t0 = time.monotonic()
        subprocess.run(["cp", src, dst], check=True)
        cp_s = time.monotonic() - t0
        print(f"cp, same disk:  {n / cp_s:6.0f} MiB/s (read and written)")
    finally:
        b.stop()
        shutil.rmtree(b.dir, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=256)
    asyncio.run(main(p.parse_args().mib))
