"""What LangBot's own nsjail backend costs here, beside bench_sandbox's figures.

Runs the reference's NsjailBackend (langbot-plugin, the version the conformance suite pins)
with the same nsjail binary boxd uses and a private base_dir (its default directory is
shared, and at start it deletes other instances' sessions there). Prints numbers in
bench_sandbox's format, asserts nothing. Usage: langbot_nsjail.py NSJAIL_BINARY
"""
import asyncio
import logging
import os
import sys
import tempfile
import time

from langbot_plugin.box.models import BoxSpec
from langbot_plugin.box.nsjail_backend import NsjailBackend


def report(what: str, values: list[float]) -> None:
    values = sorted(values)

    def pct(p: float) -> float:
        return values[min(len(values) - 1, int(p * len(values)))]

    print(f"{what:<44} p50 {pct(0.5):7.2f} ms  p99 {pct(0.99):7.2f} ms  "
          f"mean {sum(values) / len(values):7.2f} ms  ({len(values)} runs)")


async def main(binary: str) -> int:
    if os.geteuid() != 0:
        print("langbot_nsjail: needs root; skipped")
        return 0
    with tempfile.TemporaryDirectory(prefix="boxrt-bench-langbot-") as base:
        backend = NsjailBackend(logging.getLogger("langbot-nsjail"), nsjail_bin=binary, base_dir=base)
        if not await backend.is_available():
            print(f"langbot_nsjail: LangBot's nsjail backend is not available with {binary}; skipped")
            return 0
        spec = BoxSpec(session_id="bench", cmd="true")
        session = await backend.start_session(spec)
        for _ in range(10):
            await backend.exec(session, spec)
        warm = []
        for _ in range(300):
            t0 = time.perf_counter()
            result = await backend.exec(session, spec)
            warm.append((time.perf_counter() - t0) * 1000)
            if result.exit_code != 0:
                print(f"langbot_nsjail: exec failed: {result.stderr}")
                return 1
        await backend.stop_session(session)
        cold = []
        for i in range(50):
            t0 = time.perf_counter()
            s = await backend.start_session(BoxSpec(session_id=f"cold-{i}", cmd="true"))
            await backend.exec(s, spec)
            await backend.stop_session(s)
            cold.append((time.perf_counter() - t0) * 1000)
        print("== LangBot's nsjail backend (langbot-plugin, one nsjail per exec)")
        report("exec `true` on a started session", warm)
        report("session start+exec+stop", cold)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
