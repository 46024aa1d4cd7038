"""Side by side: LangBot's own Box runtime (the reference) and boxd, same workloads, same
clients, same machine, one run. Prints figures as it goes and writes OUT/results.json;
benchmarks/sidebyside_report.py turns that into OUT/report.md and the plots.

Run with the conformance environment's python (it has langbot-plugin and websockets):

  sidebyside.py --build BUILD --out OUT [--boxd B] [--boxbench B] [--floor B]
                [--seconds S] [--rounds R] [--quick] [--only W1,W2,...]

Servers (all on 127.0.0.1, nothing else is ever a target):
- the reference: benchmarks/reference_box.py, i.e. `lbp box`'s own server.main() with a
  zero-cost backend shaped like boxd's scripted one (or its own nsjail backend), as shipped
  (INFO logging: two lines per exec) and with logging at WARNING;
- boxd with the scripted backend (or bwrap / nsjail), default server options.

Workloads (each one runs the reference, then boxd, with the same client; throughput
rounds alternate):
  throughput  boxbench: __ping on 1 connection; box_exec over 1/16/256 connections, all
              connections in one workspace and one workspace per connection; server CPU
              seconds per request from /proc/PID/stat (utime+stime, whole run incl. warm-up)
  fixedrate   a Python open-loop client offering 1,000 then 2,000 box_exec/s over 16
              connections (one workspace each): server CPU-s per wall second, CPU per
              request and client-side latency (boxbench has no fixed-rate mode)
  firstuse    10,000 concurrent first uses of one new session in a fresh workspace, over
              80 connections (125 each: both servers cap a connection at 128 concurrent
              actions): drain time, replies ok/failed, backend starts
  memory      RSS/PSS of the server at 0, 1000, 2000, 5000 idle sessions (one per
              workspace), then after 5,000 more first uses refused at the session cap
  sandbox     real exec: fork+exec floor, fresh bwrap, warm and cold exec over the wire on
              boxd bwrap, boxd nsjail and the reference's nsjail backend
  revocation  admission mode: push a revocation for a workspace with a live session and
              time push -> sessions stopped -> reply; then check the session is gone
Benchmarks print numbers; nothing asserts on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
INSTANCE = "boxbench"  # boxbench's default instance: every client of a server uses it
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ── measuring a server process ────────────────────────────────────────


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_kib(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("Rss:", "Pss:"):
                out[parts[0][:-1].lower() + "_kib"] = int(parts[1])
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def metric_value(url: str, name: str) -> float | None:
    """One unlabelled sample of boxd's /metrics (`url` is its ws:// address)."""
    import urllib.request
    http = url.replace("ws://", "http://").rsplit("/rpc/ws", 1)[0] + "/metrics"
    try:
        with urllib.request.urlopen(http, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


# ── servers ───────────────────────────────────────────────────────────


class Server:
    def __init__(self, kind: str, label: str, proc: subprocess.Popen, url: str, workdir: str,
                 log: str, starts_file: str = ""):
        self.kind, self.label, self.proc, self.url = kind, label, proc, url
        self.workdir, self.log, self.starts_file = workdir, log, starts_file

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def memory(self) -> dict:
        return memory_kib(self.pid)

    def starts(self) -> int:
        """Backend session starts so far (boxd: its session_start log events)."""
        if self.kind == "boxd":
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if "session_start " in line)
        os.kill(self.pid, signal.SIGUSR1)
        for _ in range(100):
            time.sleep(0.02)
            try:
                with open(self.starts_file) as f:
                    text = f.read().strip()
                if text:
                    os.unlink(self.starts_file)
                    return int(text)
            except FileNotFoundError:
                pass
        return -1

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Harness:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.boxd = args.boxd or os.path.join(self.build, "boxd")
        self.boxbench = args.boxbench or os.path.join(self.build, "boxbench")
        self.nsjail = args.nsjail or os.path.join(self.build, "nsjail")
        self.tmp = tempfile.mkdtemp(prefix="boxrt-sidebyside-")
        self.servers: list[Server] = []
        self.results: dict = {"workloads": {}}

    def close(self) -> None:
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_boxd(self, label: str, box: dict, server: dict | None = None) -> Server:
        work = tempfile.mkdtemp(prefix="boxd-", dir=self.tmp)
        box = json.loads(json.dumps(box))
        box.setdefault("local", {})["host_root"] = os.path.join(work, "box")
        config = {"server": {"listen": "127.0.0.1:0",
                             "transfer_dir": os.path.join(work, "transfers"), **(server or {})},
                  "box": box}
        path = os.path.join(work, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        log = os.path.join(work, "log")
        proc = subprocess.Popen([self.boxd, "--config", path], stdout=subprocess.PIPE,
                                stderr=open(log, "w"), text=True)
        line = proc.stdout.readline()
        if not line.startswith("boxd listening on "):
            proc.kill()
            raise RuntimeError(f"boxd did not start: {line!r}; see {log}:\n"
                               + open(log).read()[-2000:])
        s = Server("boxd", label, proc, line.split()[-1] + "/rpc/ws", work, log)
        self.servers.append(s)
        return s

    def start_reference(self, label: str, log_level: str = "INFO", backend: str = "scripted",
                        admission: bool = False, max_sessions: int = 5000) -> Server:
        work = tempfile.mkdtemp(prefix="reference-", dir=self.tmp)
        port = free_port()
        log = os.path.join(work, "log")
        starts_file = os.path.join(work, "starts")
        cmd = [sys.executable, os.path.join(HERE, "reference_box.py"), "--port", str(port),
               "--workdir", work, "--backend", backend, "--nsjail-bin", self.nsjail,
               "--max-sessions", str(max_sessions), "--log-level", log_level,
               "--starts-file", starts_file]
        if admission:
            cmd.append("--admission")
        proc = subprocess.Popen(cmd, cwd=work, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the reference exited; see {log}:\n" + open(log).read()[-3000:])
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"the reference did not listen; see {log}")
                time.sleep(0.1)
        s = Server("reference", label, proc, f"ws://127.0.0.1:{port}/rpc/ws", work, log,
                   starts_file)
        self.servers.append(s)
        return s

    def stop(self, *servers: Server) -> None:
        for s in servers:
            s.stop()
            if s in self.servers:
                self.servers.remove(s)

    # ── boxbench ──────────────────────────────────────────────────────

    def run_boxbench(self, server: Server, action: str, connections: int, per_workspace: bool,
                 seconds: float, cmd: str = "true", workspace: str = "bench") -> dict:
        argv = [self.boxbench, "--url", server.url, "--action", action, "--connections",
                str(connections), "--seconds", str(seconds), "--cmd", cmd, "--workspace",
                workspace, "--json"]
        if per_workspace:
            argv.append("--workspace-per-connection")
        cpu0, t0 = server.cpu(), time.monotonic()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
        wall, cpu = time.monotonic() - t0, server.cpu() - cpu0
        if out.returncode != 0 or not out.stdout.strip():
            return {"error": (out.stderr or out.stdout).strip()[-500:]}
        r = json.loads(out.stdout.strip().splitlines()[-1])
        # The server's CPU over the whole boxbench run (connect, 0.5 s warm-up, measure),
        # divided by the requests of that run (the rate times warm-up + measured time).
        requests = r["round_trips_per_s"] * (r["seconds"] + 0.5)
        r["server_cpu_s"] = cpu
        r["wall_s"] = wall
        r["server_cpu_us_per_request"] = cpu / requests * 1e6 if requests else None
        r["server_cores"] = cpu / wall if wall else None
        return r


# ── a small Python Action-RPC client (for workloads where client cost does not matter) ─


def ctx(workspace: str, generation: int = 1) -> dict:
    return {"instance_uuid": INSTANCE, "workspace_uuid": workspace,
            "placement_generation": generation}


class Conn:
    """One WebSocket, requests by seq_id, replies matched to futures."""

    def __init__(self, url: str):
        self.url = url
        self.seq = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.ws = None
        self.reader = None

    async def __aenter__(self):
        self.ws = await websockets.connect(
            self.url, additional_headers={"X-LangBot-Instance-Id": INSTANCE}, max_size=None,
            compression=None, ping_interval=None, open_timeout=30)
        self.reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc):
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)
        await self.ws.close()

    async def _read(self):
        try:
            async for text in self.ws:
                reply = json.loads(text)
                fut = self.pending.pop(reply.get("seq_id"), None)
                if fut is not None and not fut.done():
                    fut.set_result((time.perf_counter(), reply))
        except websockets.exceptions.ConnectionClosed as exc:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(exc)

    async def send(self, action: str, data: dict, context: dict | None = None) -> asyncio.Future:
        self.seq += 1
        frame = {"seq_id": self.seq, "action": action, "data": data}
        if context is not None:
            frame["context"] = context
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.seq] = fut
        await self.ws.send(json.dumps(frame))
        return fut

    async def call(self, action: str, data: dict, context: dict | None = None,
                   timeout: float = 60) -> tuple[float, dict]:
        """(seconds, reply) of one round trip."""
        t0 = time.perf_counter()
        fut = await self.send(action, data, context)
        t1, reply = await asyncio.wait_for(fut, timeout)
        return t1 - t0, reply


async def fixed_rate(url: str, rate: float, connections: int, seconds: float,
                     warmup: float, on_window=None) -> dict:
    """Open loop: connection i sends box_exec at rate/connections per second on a fixed
    schedule whatever the replies; latency is send -> reply."""
    conns = [Conn(url) for _ in range(connections)]
    for c in conns:
        await c.__aenter__()
    lat: list[float] = []
    errors = [0]
    start = time.perf_counter() + 0.2
    end = start + warmup + seconds
    window = {}

    async def one(c: Conn, i: int):
        interval = connections / rate
        k = 0
        tasks = []
        while True:
            due = start + (k + i / connections) * interval
            if due >= end:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            t0 = time.perf_counter()
            fut = await c.send("box_exec", {"session_id": "fixed", "cmd": "true"},
                               ctx(f"fixed-{i}"))
            measured = t0 >= start + warmup

            async def wait(fut=fut, t0=t0, measured=measured):
                try:
                    t1, reply = await asyncio.wait_for(fut, 30)
                except Exception:
                    errors[0] += 1
                    return
                if reply.get("code") != 0:
                    errors[0] += 1
                if measured:
                    lat.append(t1 - t0)
            tasks.append(asyncio.create_task(wait()))
            k += 1
        await asyncio.gather(*tasks)

    async def sample():
        await asyncio.sleep(max(0.0, start + warmup - time.perf_counter()))
        window["begin"] = (time.perf_counter(), on_window() if on_window else None,
                           time.process_time())
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        window["end"] = (time.perf_counter(), on_window() if on_window else None,
                         time.process_time())

    await asyncio.gather(sample(), *(one(c, i) for i, c in enumerate(conns)))
    for c in conns:
        await c.__aexit__()
    (tb, cb, kb), (te, ce, ke) = window["begin"], window["end"]
    return {"offered_per_s": rate, "achieved_per_s": len(lat) / (te - tb), "samples": len(lat),
            "errors": errors[0], "latencies_ms": [x * 1000 for x in lat],
            "p50_us": pct(lat, 0.5) * 1e6, "p99_us": pct(lat, 0.99) * 1e6,
            "window_s": te - tb, "client_cpu_s_per_s": (ke - kb) / (te - tb),
            "server_cpu_s_per_s": (ce - cb) / (te - tb) if cb is not None else None,
            "server_cpu_us_per_request": (ce - cb) / len(lat) * 1e6 if lat and cb is not None
            else None}


async def burst(url: str, connections: int, frames_per_conn: list[list[tuple]],
                timeout: float = 300) -> dict:
    """Sends every frame of every connection at once; times until the last reply."""
    conns = [Conn(url) for _ in range(connections)]
    for c in conns:
        await c.__aenter__()
    t0 = time.perf_counter()
    futs = []
    for c, frames in zip(conns, frames_per_conn):
        for action, data, context in frames:
            futs.append(await c.send(action, data, context))
    ok = failed = 0
    messages: dict[str, int] = {}
    for r in await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), timeout):
        if isinstance(r, BaseException) or r[1].get("code") != 0:
            failed += 1
            msg = str(r) if isinstance(r, BaseException) else str(r[1].get("message"))
            key = msg.split(":")[0][:60]
            messages[key] = messages.get(key, 0) + 1
        else:
            ok += 1
    drain = time.perf_counter() - t0
    for c in conns:
        await c.__aexit__()
    return {"ok": ok, "failed": failed, "drain_s": drain, "errors": messages}


# ── workloads ─────────────────────────────────────────────────────────


def log(*a):
    print(*a, flush=True)


def w_throughput(h: Harness) -> None:
    a = h.args
    ref_info = h.start_reference("reference (INFO, as shipped)", "INFO")
    ref_warn = h.start_reference("reference (WARNING)", "WARNING")
    boxd = h.start_boxd("boxd", {"backend": "scripted",
                                 "limits": {"max_sessions": 5000,
                                            "max_sessions_per_workspace": 5000}})
    servers = [ref_info, ref_warn, boxd]
    configs = [("ping", 1, False)] + [("exec", n, per) for per in (False, True)
                                      for n in (1, 16, 256)]
    rows = []
    for action, n, per in configs:
        runs = {s.label: [] for s in servers}
        for rnd in range(a.rounds):
            order = servers if rnd % 2 == 0 else list(reversed(servers))
            for s in order:
                r = h.run_boxbench(s, action, n, per, a.seconds)
                runs[s.label].append(r)
        for s in servers:
            ok = [r for r in runs[s.label] if "error" not in r]
            row = {"server": s.label, "kind": s.kind, "action": action, "connections": n,
                   "workspaces": "none" if action == "ping" else ("per-connection" if per
                                                                  else "shared"),
                   "rounds": runs[s.label]}
            if ok:
                for k in ("round_trips_per_s", "p50_us", "p99_us", "server_cpu_us_per_request",
                          "server_cores"):
                    vals = [r[k] for r in ok if r.get(k) is not None]
                    row[k] = statistics.median(vals) if vals else None
                row["errors"] = sum(r["errors"] for r in ok)
            else:
                row["error"] = runs[s.label][0].get("error")
            rows.append(row)
            log(f"  {action:4} {n:3} conn {row['workspaces']:14} {s.label:30} "
                + (f"{row.get('round_trips_per_s', 0):9.0f}/s p50 {row.get('p50_us', 0):8.1f} us "
                   f"p99 {row.get('p99_us', 0):9.1f} us cpu/req "
                   f"{row.get('server_cpu_us_per_request') or 0:6.1f} us errors {row.get('errors')}"
                   if "error" not in row else f"ERROR {row['error']}"))
    h.results["workloads"]["throughput"] = rows
    h.stop(*servers)


def w_fixedrate(h: Harness) -> None:
    a = h.args
    conns = 16
    rows = []
    for make in (lambda: h.start_reference("reference (INFO, as shipped)", "INFO"),
                 lambda: h.start_reference("reference (WARNING)", "WARNING"),
                 lambda: h.start_boxd("boxd", {"backend": "scripted"}),
                 # boxd's I/O thread polls io_spin_us (default 50) before it sleeps;
                 # the second row shows what that polling costs at a fixed rate.
                 lambda: h.start_boxd("boxd (io_spin_us 0)", {"backend": "scripted"},
                                      {"io_spin_us": 0})):
        s = make()
        for rate in (1000.0, 2000.0):
            r = asyncio.run(fixed_rate(s.url, rate, conns, a.fixed_seconds, 1.0, s.cpu))
            r.update(server=s.label, kind=s.kind, connections=conns)
            rows.append(r)
            log(f"  {s.label:30} offered {rate:.0f}/s achieved {r['achieved_per_s']:7.0f}/s "
                f"server {r['server_cpu_s_per_s']:.3f} CPU-s/s ({r['server_cpu_us_per_request']:.1f} "
                f"us/req) p50 {r['p50_us']:.0f} us p99 {r['p99_us']:.0f} us errors {r['errors']} "
                f"(client {r['client_cpu_s_per_s']:.2f} CPU-s/s)")
        h.stop(s)
    h.results["workloads"]["fixedrate"] = rows


def w_firstuse(h: Harness) -> None:
    # Both servers allow 128 concurrent actions per connection (boxd's max_inflight,
    # the reference's handler): 125 per connection keeps every request admitted.
    n = h.args.first_uses
    conns = max(1, -(-n // 125))
    rows = []
    for make in (lambda: h.start_reference("reference (INFO, as shipped)", "INFO"),
                 lambda: h.start_boxd("boxd", {"backend": "scripted"})):
        s = make()
        before = s.starts()
        per = [[("box_exec", {"session_id": "first", "cmd": "true"}, ctx("firstuse"))
                for _ in range(n // conns + (1 if i < n % conns else 0))] for i in range(conns)]
        r = asyncio.run(burst(s.url, conns, per))
        time.sleep(0.2)
        r.update(server=s.label, kind=s.kind, requests=n, connections=conns,
                 starts=s.starts() - before)
        rows.append(r)
        log(f"  {s.label:30} {n} concurrent first uses of one session: drained in "
            f"{r['drain_s']*1000:.0f} ms, {r['ok']} ok, {r['failed']} failed {r['errors']}, "
            f"{r['starts']} backend start(s)")
        h.stop(s)
    h.results["workloads"]["firstuse"] = rows


async def create_sessions(url: str, first: int, last: int, prefix: str, conns: int = 16,
                          window: int = 32) -> dict:
    """First uses of session `s` in workspaces prefix-first .. prefix-(last-1), `window`
    in flight per connection."""
    ok = failed = 0
    messages: dict[str, int] = {}
    clients = [Conn(url) for _ in range(conns)]
    for c in clients:
        await c.__aenter__()
    queue = list(range(first, last))

    async def worker(c: Conn):
        nonlocal ok, failed
        while queue:
            batch = [queue.pop() for _ in range(min(window, len(queue)))]
            futs = [await c.send("box_exec", {"session_id": "s", "cmd": "true"},
                                 ctx(f"{prefix}-{i}")) for i in batch]
            for r in await asyncio.gather(*futs, return_exceptions=True):
                if isinstance(r, BaseException) or r[1].get("code") != 0:
                    failed += 1
                    msg = str(r) if isinstance(r, BaseException) else str(r[1].get("message"))
                    messages[msg[:70]] = messages.get(msg[:70], 0) + 1
                else:
                    ok += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    secs = time.perf_counter() - t0
    for c in clients:
        await c.__aexit__()
    return {"ok": ok, "failed": failed, "seconds": secs, "errors": messages}


def w_memory(h: Harness) -> None:
    steps = [0, 1000, 2000, 5000]
    refused_n = 5000
    rows = []
    for make in (lambda: h.start_reference("reference (INFO, as shipped)", "INFO"),
                 lambda: h.start_boxd("boxd", {"backend": "scripted",
                                               "limits": {"max_sessions": 5000}})):
        s = make()
        time.sleep(1.0)
        points = []
        done = 0
        for target in steps:
            r = asyncio.run(create_sessions(s.url, done, target, "mem")) if target > done else None
            done = target
            time.sleep(1.0)
            m = s.memory()
            points.append({"sessions": target, **m,
                           "create": r and {k: r[k] for k in ("ok", "failed", "seconds")}})
            log(f"  {s.label:30} {target:5} idle sessions: RSS {m['rss_kib']/1024:7.1f} MiB  "
                f"PSS {m['pss_kib']/1024:7.1f} MiB"
                + (f"  ({r['ok']} ok, {r['failed']} failed in {r['seconds']:.1f} s)" if r else ""))
        r = asyncio.run(create_sessions(s.url, 0, refused_n, "refused"))
        time.sleep(1.0)
        m = s.memory()
        refused = {"first_uses": refused_n, "refused": r["failed"], "ok": r["ok"],
                   "errors": r["errors"], "seconds": r["seconds"], **m}
        log(f"  {s.label:30} after {refused_n} first uses at the cap ({r['failed']} refused): "
            f"RSS {m['rss_kib']/1024:7.1f} MiB  PSS {m['pss_kib']/1024:7.1f} MiB")
        rows.append({"server": s.label, "kind": s.kind, "points": points,
                     "after_refused": refused})
        h.stop(s)
    h.results["workloads"]["memory"] = rows


def floor_binary(h: Harness) -> str | None:
    cand = h.args.floor or os.path.join(h.build, "benchmarks", "bench_floor")
    if os.access(cand, os.X_OK):
        return cand
    out = os.path.join(h.tmp, "bench_floor")
    r = subprocess.run(["cc", "-O2", "-o", out, os.path.join(HERE, "floor.c")],
                       capture_output=True, text=True)
    return out if r.returncode == 0 else None


async def cold_execs(url: str, n: int, prefix: str, gap: float = 0.0, extra: dict | None = None) -> dict:
    """First use of a new session in a new workspace (start + exec `true`), then its
    deletion (not timed). `gap`: seconds between first uses (a warm pool refills)."""
    lat, errors = [], 0
    async with Conn(url) as c:
        for i in range(n):
            if gap:
                await asyncio.sleep(gap)
            context = ctx(f"{prefix}-{i}")
            secs, reply = await c.call("box_exec", {"session_id": "cold", "cmd": "true", **(extra or {})},
                                       context, timeout=120)
            if reply.get("code") != 0:
                errors += 1
            else:
                lat.append(secs * 1000)
            await c.call("box_delete_session", {"session_id": "cold"}, context, timeout=120)
    return {"latencies_ms": lat, "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
            "runs": len(lat), "errors": errors}


def w_sandbox(h: Harness) -> None:
    a = h.args
    res: dict = {"floors": {}, "rows": []}
    fb = floor_binary(h)
    if fb:
        for name, extra in (("fork+exec /bin/sh -c true", []),
                            ("fresh bwrap --unshare-all --ro-bind / / /bin/sh -c true",
                             ["--", shutil.which("bwrap") or "/usr/bin/bwrap", "--unshare-all",
                              "--ro-bind", "/", "/", "/bin/sh", "-c", "true"])):
            if extra and not shutil.which("bwrap"):
                continue
            n = "1000" if not extra else "300"
            out = subprocess.run([fb, n, "--json", *extra], capture_output=True, text=True)
            if out.returncode == 0:
                res["floors"][name] = json.loads(out.stdout)
                log(f"  floor: {name}: p50 {res['floors'][name]['p50_ms']:.3f} ms "
                    f"p99 {res['floors'][name]['p99_ms']:.3f} ms")
            else:
                log(f"  floor: {name}: failed: {out.stderr.strip()[-300:]}")
    if os.geteuid() != 0:
        log("  real sandboxes need root; skipped")
        h.results["workloads"]["sandbox"] = res
        return
    # (name, start, warm rows too). The pool-off rows show the normal start: what a
    # workspace with a uid, network on or a quota pays, and a new one when the pool is
    # empty; the quota row adds its image (made at the first use, then mounted).
    plans = []
    if os.access(h.nsjail, os.X_OK):
        plans.append(("reference nsjail", lambda: h.start_reference(
            "reference nsjail (INFO)", "INFO", backend="nsjail"), True))
    if shutil.which("bwrap"):
        plans.append(("boxd bwrap", lambda: h.start_boxd("boxd bwrap", {"backend": "bwrap"}), True))
        plans.append(("boxd bwrap, warm pool off", lambda: h.start_boxd(
            "boxd bwrap, warm pool off", {"backend": "bwrap", "limits": {"warm_pool": 0}}), False))
    if os.access(h.nsjail, os.X_OK):
        plans.append(("boxd nsjail", lambda: h.start_boxd("boxd nsjail", {"backend": "nsjail"}), True))
        plans.append(("boxd nsjail, warm pool off", lambda: h.start_boxd(
            "boxd nsjail, warm pool off", {"backend": "nsjail", "limits": {"warm_pool": 0}}), False))
    for name, make, warm in plans:
        try:
            s = make()
        except RuntimeError as exc:
            log(f"  {name}: could not start: {str(exc)[:300]}")
            res["rows"].append({"server": name, "error": str(exc)[:500]})
            continue
        row = {"server": name, "kind": s.kind}
        if s.kind == "boxd" and warm:
            # The pool's cost: its processes and their memory, once it is full.
            deadline = time.monotonic() + 30
            while (metric_value(s.url, "boxd_warm_pool_ready") or 0) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            procs = descendants(s.pid)
            pss = sum(memory_kib(p).get("pss_kib", 0) for p in procs if os.path.exists(f"/proc/{p}"))
            row["pool"] = {"sandboxes": metric_value(s.url, "boxd_warm_pool_ready"),
                           "processes": len(procs), "pss_kib": pss}
            log(f"  {name}: warm pool of {row['pool']['sandboxes']:.0f}: {len(procs)} processes, "
                f"PSS {pss} KiB")
        for n in ((1, 4) if warm else ()):
            r = h.run_boxbench(s, "exec", n, True, a.seconds)
            row[f"warm_{n}"] = r
            if "error" in r:
                log(f"  {name}: warm exec {n} conn: ERROR {r['error']}")
            else:
                log(f"  {name}: warm exec `true` over the wire, {n} conn: p50 "
                    f"{r['p50_us']/1000:.3f} ms p99 {r['p99_us']/1000:.3f} ms "
                    f"{r['round_trips_per_s']:.0f}/s errors {r['errors']}")
        cold = asyncio.run(cold_execs(s.url, a.cold_runs, "cold", gap=0.25))
        row["cold"] = cold
        log(f"  {name}: cold first use (start + exec), new workspace, 0.25 s apart: p50 "
            f"{cold['p50_ms']:.2f} ms p99 {cold['p99_ms']:.2f} ms ({cold['runs']} runs, "
            f"{cold['errors']} errors)")
        if s.kind == "boxd" and warm:
            b2b = asyncio.run(cold_execs(s.url, a.cold_runs, "cold-b2b"))
            row["cold_back_to_back"] = b2b
            log(f"  {name}: cold first use back to back (the pool drains): p50 "
                f"{b2b['p50_ms']:.2f} ms p99 {b2b['p99_ms']:.2f} ms")
        if s.kind == "boxd" and not warm:
            q = asyncio.run(cold_execs(s.url, a.cold_runs, "cold-quota", gap=0.25,
                                       extra={"workspace_quota_mb": 16}))
            row["cold_quota"] = q
            log(f"  {name}: cold first use with a 16 MB quota image (made, then mounted): p50 "
                f"{q['p50_ms']:.2f} ms p99 {q['p99_ms']:.2f} ms ({q['errors']} errors)")
        res["rows"].append(row)
        h.stop(s)
    h.results["workloads"]["sandbox"] = res


async def revocations(url: str, n: int) -> dict:
    lat, errors, leftover = [], [], 0
    expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=250)).isoformat()
    async with Conn(url) as c:
        for i in range(n):
            ws = f"revoke-{i}"
            _, r = await c.call("box_upsert_sandbox_admission_grant", {
                "instance_uuid": INSTANCE, "workspace_uuid": ws, "execution_generation": 1,
                "entitlement_revision": 1, "expires_at": expires, "max_sessions": 1,
                "max_managed_processes": 0})
            if r.get("code") != 0:
                errors.append("upsert: " + str(r.get("message"))[:200])
                continue
            _, r = await c.call("box_exec", {"session_id": "global", "cmd": "true"}, ctx(ws))
            if r.get("code") != 0:
                errors.append("exec: " + str(r.get("message"))[:200])
                continue
            secs, r = await c.call("box_revoke_sandbox_admission_grant", {
                "instance_uuid": INSTANCE, "workspace_uuid": ws, "entitlement_revision": 2})
            if r.get("code") != 0:
                errors.append("revoke: " + str(r.get("message"))[:200])
                continue
            lat.append(secs * 1000)
            # The session must be gone: a new exec is refused (no grant).
            _, r = await c.call("box_exec", {"session_id": "global", "cmd": "true"}, ctx(ws))
            if r.get("code") == 0:
                leftover += 1
    return {"latencies_ms": lat, "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
            "runs": len(lat), "errors": errors[:5], "error_count": len(errors),
            "exec_after_revoke_succeeded": leftover}


def w_revocation(h: Harness) -> None:
    n = h.args.revocations
    rows = []
    ready = ["cgroup_v2", "resource_limits", "namespace_isolation", "mount_isolation",
             "network_isolation", "hard_workspace_quota", "hard_skill_storage_quota",
             "bounded_ephemeral_storage", "inode_quota"]
    for make in (lambda: h.start_reference("reference (INFO, as shipped)", "INFO",
                                           admission=True),
                 lambda: h.start_boxd("boxd", {
                     "backend": "scripted", "scripted": {"available": True, "ready_keys": ready},
                     "admission": {"required": True, "required_backend": "scripted",
                                   "max_sessions": 1, "max_managed_processes": 0,
                                   "max_grant_ttl_sec": 300, "max_timeout_sec": 60,
                                   "workspace_quota_mb": 32}},
                     {"testing": True})):
        s = make()
        before = s.starts()
        r = asyncio.run(revocations(s.url, n))
        r.update(server=s.label, kind=s.kind, starts=s.starts() - before)
        rows.append(r)
        log(f"  {s.label:30} revoke with one live session: p50 {r['p50_ms']:.3f} ms "
            f"p99 {r['p99_ms']:.3f} ms ({r['runs']} runs, {r['error_count']} errors "
            f"{r['errors'][:1]}, exec after revoke succeeded {r['exec_after_revoke_succeeded']}x,"
            f" {r['starts']} starts)")
        h.stop(s)
    h.results["workloads"]["revocation"] = rows


WORKLOADS = {"throughput": w_throughput, "fixedrate": w_fixedrate, "firstuse": w_firstuse,
             "memory": w_memory, "sandbox": w_sandbox, "revocation": w_revocation}


def machine() -> dict:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with open("/proc/meminfo") as f:
        mem = f.readline().split(":", 1)[1].strip()
    try:
        import importlib.metadata as md
        lbp = md.version("langbot-plugin")
    except Exception:
        lbp = "?"
    return {"cores": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "memory": mem, "python": platform.python_version(), "langbot_plugin": lbp,
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--out", required=True)
    p.add_argument("--boxd")
    p.add_argument("--boxbench")
    p.add_argument("--nsjail")
    p.add_argument("--floor")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--fixed-seconds", type=float, default=5.0)
    p.add_argument("--first-uses", type=int, default=10000)
    p.add_argument("--cold-runs", type=int, default=30)
    p.add_argument("--revocations", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="1 round, 2 s runs, fewer repeats")
    p.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
    p.add_argument("--command", default="", help="the command line to record in the report")
    args = p.parse_args()
    if args.quick:
        args.seconds, args.rounds, args.fixed_seconds = 2.0, 1, 3.0
        args.cold_runs, args.revocations = 15, 50
    os.makedirs(args.out, exist_ok=True)
    h = Harness(args)
    h.results["machine"] = machine()
    h.results["command"] = args.command or " ".join(sys.argv)
    h.results["settings"] = {k: getattr(args, k) for k in (
        "seconds", "rounds", "fixed_seconds", "first_uses", "cold_runs", "revocations")}
    only = [w for w in args.only.split(",") if w] or list(WORKLOADS)
    path = os.path.join(args.out, "results.json")
    try:
        for name in only:
            log(f"== side by side: {name}")
            t0 = time.monotonic()
            try:
                WORKLOADS[name](h)
            except Exception as exc:  # a workload that fails is reported, the rest still run
                import traceback
                log(f"  {name} failed: {exc!r}\n" + traceback.format_exc()[-1500:])
                h.results["workloads"][name] = {"failed": repr(exc)[:1000]}
                for s in list(h.servers):
                    h.stop(s)
            log(f"  ({time.monotonic() - t0:.0f} s)")
            with open(path, "w") as f:
                json.dump(h.results, f, indent=1)
    finally:
        h.close()
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
