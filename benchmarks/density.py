"""Density figures (docs/performance.md), printed, never asserted: how starts, first
exec, warm exec and memory behave as one host fills with warm sandboxes.

One boxd on loopback with real sandboxes (bwrap or nsjail), standard mode (one session
per workspace, no quota) or Cloud mode (admission, a grant and a 32 MiB quota image
per workspace). Workspaces are opened with `true` over several connections (LangBot's
own client), in batches; between batches the host is measured after
`sync; echo 3 > /proc/sys/vm/drop_caches`:

- starts/s of the last batch before the level and its first-exec p50/p90 (a start is
  the first exec of a new workspace as the client sees it, warm-pool adoptions count);
- warm exec p50 in live sessions (with and without a per-exec artifact mount);
- host memory per sandbox: the change of MemTotal - MemAvailable since boxd started
  idle, with the PSS of the sandbox processes, Slab and PageTables beside it;
- mounts in boxd's mount namespace, boxd's descriptors, cgroups, idle CPU (boxd and
  its sandboxes, and the whole host, over a few seconds with nothing asked).
At the end boxd gets SIGTERM: the time it takes and what it leaves (mounts, loop
devices, cgroups, processes); with --end kill9 it gets SIGKILL instead, and a new boxd
started on the same state folder is timed until nothing is left.
The host's idle CPU is given with the share of the machine's own processes beside it: its
pid 1 (here a VM agent that walks /proc, so it costs more with every process on the host)
and the kernel's memory monitor threads (kdamond), neither of them boxd's.

The floor: the same measure for bare idle bwrap sandboxes (the same namespaces, a
sleeping static process, nothing else), when --floor names the static program.

usage: BOXD=build/boxd python density.py --driver bwrap --mode standard --levels 100,250,500,1000
         [--batch 100] [--connections 8] [--pool 2] [--floor build/benchmarks/idle_static]
         [--json out.json] [--time-limit 1800] [--end sigterm|kill9]
Root only (sandbox uids, cgroups, drop_caches)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "conformance"))

from conftest import INSTANCE, TOKEN  # noqa: E402 - the conformance suite's boxd and client
from sidebyside import descendants  # noqa: E402 - every process below boxd


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])  # KiB
    return out


def slab_caches() -> dict[str, int]:
    """KiB per slab cache (active objects times their size)."""
    out = {}
    try:
        with open("/proc/slabinfo") as f:
            for line in f.readlines()[2:]:
                v = line.split()
                out[v[0]] = int(v[1]) * int(v[3]) // 1024
    except OSError:
        pass
    return out


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])  # utime stime cutime cstime
    except OSError:
        return 0


def machine_pids() -> list[int]:
    """The machine's own busy processes, not boxd's: pid 1 and kdamond threads."""
    out = [1]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().startswith("kdamond"):
                        out.append(int(d))
            except OSError:
                pass
    return out


def host_busy_ticks() -> int:
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
    v = [int(x) for x in cpu]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def count_lines(path: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def cgroups_of(tag: str) -> int:
    return sum(1 for _ in glob.glob(f"/sys/fs/cgroup/*/{tag}*/*/")) if tag else 0


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def start_boxd(args):
    """One boxd with its own folder (the conformance suite's Boxd), on the run's driver
    and mode."""
    from conftest import Boxd
    box: dict = {"backend": args.driver,
                 "limits": {"max_sessions": 5000, "max_sessions_per_workspace": 1, "session_ttl_sec": 0,
                            "warm_pool": args.pool, "max_idle_workspaces": 250000}}
    if args.nsjail:
        box["local"] = {"nsjail_path": args.nsjail}
    if args.mode == "cloud":
        box["admission"] = {"required": True, "required_backend": args.driver, "max_sessions": 1,
                            "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
                            "cpus": 0.5, "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32,
                            "readiness_cache_sec": 600}
    boxd = Boxd(box, server={"trusted_instance_uuid": INSTANCE, "max_connections": 64})
    boxd.pid = boxd.proc.pid
    return boxd


def stop_boxd(boxd) -> tuple[float, int]:
    """SIGTERM, and how long boxd takes to exit (it is killed after 300 s)."""
    t0 = time.monotonic()
    boxd.proc.send_signal(signal.SIGTERM)
    try:
        rc = boxd.proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        boxd.proc.kill()
        rc = boxd.proc.wait()
    took = time.monotonic() - t0
    boxd.stop()  # closes its log
    return took, rc


def kill_and_restart(boxd, work: str, cgroups_before: int, live: int) -> dict:
    """SIGKILL with `live` sandboxes, what that leaves, then a new boxd on the same
    config (without a warm pool) and state folder: how long until nothing is left (at most 120 s), then SIGTERM."""
    boxd.proc.kill()
    boxd.proc.wait()
    boxd.stop()
    t0 = time.monotonic()
    left_after_kill, clean_after = {}, float("nan")
    # What the dead boxd left once its sandboxes (tied to it by a parent-death signal) are gone.
    while time.monotonic() - t0 < 30:
        left_after_kill = leftovers(work, cgroups_before)
        if left_after_kill["processes"] == 0:
            break
        time.sleep(0.2)
    log = open(os.path.join(work, "boxd-restart.log"), "w")
    t1 = time.monotonic()
    # The same config and state but no warm pool: what is left is the dead boxd's, not new sandboxes.
    with open(os.path.join(work, "config.json")) as f:
        config = json.load(f)
    config["box"]["limits"]["warm_pool"] = 0
    restart_config = os.path.join(work, "config-restart.json")
    with open(restart_config, "w") as f:
        json.dump(config, f)
    proc = subprocess.Popen([os.environ["BOXD"], "--config", restart_config],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    listening = time.monotonic() - t1
    left = left_after_kill
    while line.startswith("boxd listening on ") and time.monotonic() - t1 < 120:
        left = leftovers(work, cgroups_before, proc.pid)
        if left["mounts"] == 0 and left["loop_devices"] == 0 and left["cgroups"] == 0 and left["processes"] == 0:
            clean_after = time.monotonic() - t1
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    out = {"live": live, "left_after_kill": left_after_kill, "listening_s": listening, "clean_after_s": clean_after,
           "left": left}
    print(f"SIGKILL with {live} live sandboxes left {left_after_kill.get('mounts')} mounts, "
          f"{left_after_kill.get('loop_devices')} loop devices, {left_after_kill.get('cgroups')} cgroups, "
          f"{left_after_kill.get('processes')} processes; a new boxd on the same state listened after "
          f"{listening:.1f} s and left nothing after {clean_after:.1f} s (now: {left['mounts']} mounts, "
          f"{left['loop_devices']} loop devices, {left['cgroups']} cgroups, {left['processes']} processes)", flush=True)
    return out


def ctx(ws: str):
    from langbot_plugin.entities.io.context import ActionContext
    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=ws, placement_generation=1)


async def open_batch(conns, names: list[str], cloud: bool) -> tuple[float, list[float], list[str]]:
    """Opens one workspace per name over the connections; returns (seconds, first-exec
    latencies, the names opened)."""
    from langbot_plugin.box.models import BoxSpec, SandboxAdmissionGrant
    if cloud:
        # Grants are the host's part, not the start's: pushed before the clock starts.
        g = conns[0].client
        exp = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=295)  # the Cloud ceiling is 300 s
        await asyncio.gather(*(g.upsert_sandbox_admission_grant(SandboxAdmissionGrant(
            instance_uuid=INSTANCE, workspace_uuid=n, execution_generation=1, entitlement_revision=1,
            expires_at=exp, max_sessions=1, max_managed_processes=0)) for n in names))
    queue = list(names)
    lat: list[float] = []
    opened: list[str] = []
    first_error: list[str] = []

    async def worker(conn):
        while queue:
            n = queue.pop()
            t = time.monotonic()
            try:
                sid = "global" if cloud else n  # Cloud mode: the runtime owns the session id
                r = await conn.client.execute(BoxSpec(session_id=sid, cmd="true"), action_context=ctx(n))
                if r.exit_code != 0:
                    raise RuntimeError(f"exit {r.exit_code}: {r.stderr[:200]}")
                lat.append(time.monotonic() - t)
                opened.append(n)
            except Exception as e:  # noqa: BLE001 - counted and shown
                if not first_error:
                    first_error.append(str(e)[:300])

    t0 = time.monotonic()
    await asyncio.gather(*(worker(c) for c in conns))
    took = time.monotonic() - t0
    if first_error:
        print(f"   first failure: {first_error[0]}", flush=True)
    return took, lat, opened


async def warm_exec(conn, names: list[str], n: int, artifact: tuple[str, str] | None, cloud: bool = False) -> float:
    from langbot_plugin.box.models import BoxSpec
    lat = []
    for _ in range(n):
        ws = random.choice(names)
        spec = {"session_id": "global" if cloud else ws, "cmd": "true"}
        if artifact:
            digest, host = artifact
            # A skill mount (every SDK version carries it): attached for this exec inside
            # the sandbox, dropped by the next exec without it.
            spec["extra_mounts"] = [{"host_path": host, "mount_path": f"/workspace/.skills/{digest}", "mode": "ro"}]
        t = time.monotonic()
        try:
            await conn.client.execute(BoxSpec(**spec), action_context=ctx(ws))
        except Exception as e:  # noqa: BLE001 - shown, the figure is left out
            print(f"   warm exec failed: {str(e)[:300]}", flush=True)
            return float("nan")
        lat.append(time.monotonic() - t)
    return pct(lat, 0.5) * 1000


def measure(host, base: dict, live: int, idle_seconds: float) -> dict:
    drop_caches()
    m = meminfo()
    kids = descendants(host.pid)
    row = {
        "used_kib": (m["MemTotal"] - m["MemAvailable"]) - base["used_kib"],
        "slab_kib": m["Slab"] - base["slab_kib"],
        "pagetables_kib": m["PageTables"] - base["pagetables_kib"],
        "pss_kib": sum(pss_kib(p) for p in kids) - base["pss_kib"],
        "boxd_pss_kib": pss_kib(host.pid),
        "processes": len(kids),
        "mounts": count_lines(f"/proc/{host.pid}/mountinfo") - base["mounts"],
        "host_mounts": count_lines("/proc/1/mountinfo") - base["host_mounts"],
        "boxd_fds": len(os.listdir(f"/proc/{host.pid}/fd")),
        "cgroups": cgroups_of("boxrt-") - base["cgroups"],
    }
    slabs = slab_caches()
    grown = {k: v - base["slabs"].get(k, 0) for k, v in slabs.items()}
    row["slab_top"] = dict(sorted(grown.items(), key=lambda kv: -kv[1])[:12])
    if idle_seconds > 0:
        tick = os.sysconf("SC_CLK_TCK")
        procs = [host.pid] + kids
        a = sum(cpu_ticks(p) for p in procs)
        h = host_busy_ticks()
        machine = machine_pids()
        one = sum(cpu_ticks(p) for p in machine)
        time.sleep(idle_seconds)
        row["idle_cpu_boxd"] = (sum(cpu_ticks(p) for p in procs) - a) / tick / idle_seconds
        row["idle_cpu_host"] = (host_busy_ticks() - h) / tick / idle_seconds
        row["idle_cpu_machine"] = (sum(cpu_ticks(p) for p in machine) - one) / tick / idle_seconds
    return row


def baseline(host) -> dict:
    drop_caches()
    m = meminfo()
    kids = descendants(host.pid) if host else []
    return {"used_kib": m["MemTotal"] - m["MemAvailable"], "slab_kib": m["Slab"], "pagetables_kib": m["PageTables"],
            "pss_kib": sum(pss_kib(p) for p in kids), "mounts": count_lines(f"/proc/{host.pid}/mountinfo") if host else 0,
            "host_mounts": count_lines("/proc/1/mountinfo"), "cgroups": cgroups_of("boxrt-"), "slabs": slab_caches()}


def leftovers(work: str, cgroups_before: int, boxd_pid: int = 0) -> dict:
    mounts = 0
    with open("/proc/1/mountinfo") as f:
        mounts = sum(1 for line in f if work in line or "boxrt" in line)
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    procs = 0
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != boxd_pid:
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if work.encode() in cmd or cmd.startswith(b"bwrap") or b"/.boxrt/init" in cmd:
                procs += 1
    return {"mounts": mounts, "loop_devices": sum(1 for line in loops.splitlines() if work in line),
            "cgroups": cgroups_of("boxrt-") - cgroups_before, "processes": procs}


def floor(program: str, count: int) -> dict:
    """Bare idle bwrap sandboxes: the same namespaces, a sleeping static process."""
    base = baseline(None)
    procs = []
    for i in range(count):
        procs.append(subprocess.Popen(
            ["bwrap", "--unshare-all", "--as-pid-1", "--die-with-parent", "--tmpfs", "/", "--ro-bind", program, "/idle",
             "--proc", "/proc", "--dev", "/dev", "/idle"], stdin=subprocess.DEVNULL))
    time.sleep(1.0)  # a benchmark's settle time, not a synchronisation
    drop_caches()
    m = meminfo()
    pss = 0
    for p in procs:
        pss += pss_kib(p.pid) + sum(pss_kib(c) for c in descendants(p.pid))
    used = (m["MemTotal"] - m["MemAvailable"]) - base["used_kib"]
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
    return {"count": count, "used_kib_per": used / count, "pss_kib_per": pss / count,
            "slab_kib_per": (m["Slab"] - base["slab_kib"]) / count,
            "pagetables_kib_per": (m["PageTables"] - base["pagetables_kib"]) / count}


async def run(args) -> dict:
    from conftest import BoxConnection
    report: dict = {"driver": args.driver, "mode": args.mode, "pool": args.pool, "rows": []}
    if args.floor:
        f = floor(args.floor, args.floor_count)
        report["floor"] = f
        print(f"floor: bare idle bwrap sandbox ({f['count']}): {f['used_kib_per']:.0f} KiB host memory each, "
              f"PSS {f['pss_kib_per']:.0f} KiB, slab {f['slab_kib_per']:.0f} KiB, "
              f"page tables {f['pagetables_kib_per']:.0f} KiB", flush=True)
    cgroups_before = cgroups_of("boxrt-")
    host = start_boxd(args)
    work = host.dir
    deadline = time.monotonic() + args.time_limit
    live: list[str] = []
    try:
        conns = [await BoxConnection(host.url, TOKEN, INSTANCE).__aenter__() for _ in range(args.connections)]
        # One exec first, so the readiness probe and the pool are behind us.
        _, _, opened = await open_batch(conns[:1], ["density-warmup"], args.mode == "cloud")
        if not opened:
            raise RuntimeError("the first workspace could not be opened")
        live.append("density-warmup")
        time.sleep(1.0)
        base = baseline(host)
        artifact = None
        if args.mode == "standard":
            adir = os.path.join(work, "box", "skills", "density-skill")
            os.makedirs(adir, exist_ok=True)
            with open(os.path.join(adir, "SKILL.md"), "w") as f:
                f.write("a skill\n")
            artifact = ("density-skill", adir)
        print(f"== density: {args.driver}, {args.mode} mode, warm pool {args.pool}, "
              f"{args.connections} connections, batches of {args.batch}", flush=True)
        print("| live | starts/s | first exec p50 / p90 ms | failed | warm exec p50 ms | with a mount | "
              "host KiB/sandbox | PSS KiB/sandbox | slab KiB/sandbox | page tables KiB/sandbox | "
              "mounts in boxd's ns | boxd fds | cgroups | idle CPU boxd / host (of it the machine's own) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        seq = 0
        for level in args.levels:
            if time.monotonic() > deadline:
                print(f"(time limit reached before {level})")
                break
            rate, lat, failed = float("nan"), [], 0
            while len(live) < level:
                n = min(args.batch, level - len(live))
                names = [f"density-{seq + i}" for i in range(n)]
                seq += n
                took, lat, opened = await open_batch(conns, names, args.mode == "cloud")
                failed = n - len(opened)
                rate = len(opened) / took
                live.extend(opened)
                if failed == n:
                    break
            warm = await warm_exec(conns[0], live, args.warm, None, args.mode == "cloud")
            warm_mount = await warm_exec(conns[0], live, args.warm, artifact) if artifact else float("nan")
            row = measure(host, base, len(live), args.idle)
            n = max(1, len(live))
            row.update({"live": len(live), "starts_per_s": rate, "p50_ms": pct(lat, 0.5) * 1000,
                        "p90_ms": pct(lat, 0.9) * 1000, "failed": failed, "warm_p50_ms": warm,
                        "warm_mount_p50_ms": warm_mount})
            report["rows"].append(row)
            print(f"| {row['live']} | {rate:.1f} | {row['p50_ms']:.0f} / {row['p90_ms']:.0f} | {failed} | "
                  f"{warm:.2f} | {warm_mount:.2f} | {row['used_kib'] / n:.0f} | {row['pss_kib'] / n:.0f} | "
                  f"{row['slab_kib'] / n:.0f} | {row['pagetables_kib'] / n:.0f} | {row['mounts']} | "
                  f"{row['boxd_fds']} | {row['cgroups']} | "
                  f"{row.get('idle_cpu_boxd', float('nan')):.3f} / {row.get('idle_cpu_host', float('nan')):.3f} "
                  f"({row.get('idle_cpu_machine', float('nan')):.3f}) |",
                  flush=True)
        for c in conns:
            await c.__aexit__()
    finally:
        if args.end == "kill9":
            report["kill9"] = kill_and_restart(host, work, cgroups_before, len(live))
        else:
            took, rc = stop_boxd(host)
            left = leftovers(work, cgroups_before)
            report["shutdown"] = {"seconds": took, "rc": rc, "live": len(live), **left}
            print(f"SIGTERM with {len(live)} live sandboxes: boxd exited (rc {rc}) after {took:.1f} s; left "
                  f"{left['mounts']} mounts, {left['loop_devices']} loop devices, {left['cgroups']} cgroups, "
                  f"{left['processes']} processes", flush=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", choices=["bwrap", "nsjail"], default="bwrap")
    ap.add_argument("--mode", choices=["standard", "cloud"], default="standard")
    ap.add_argument("--levels", default="100,250,500,1000")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--pool", type=int, default=2)
    ap.add_argument("--warm", type=int, default=100, help="warm execs per level")
    ap.add_argument("--idle", type=float, default=3.0, help="seconds of idle CPU measure per level")
    ap.add_argument("--nsjail", default="")
    ap.add_argument("--floor", default="", help="a static sleeping program: measure the bare bwrap floor")
    ap.add_argument("--floor-count", type=int, default=100)
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--time-limit", type=float, default=1800)
    ap.add_argument("--end", choices=["sigterm", "kill9"], default="sigterm")
    args = ap.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    report = asyncio.run(run(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
