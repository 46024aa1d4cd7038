"""Egress policy figures (docs/network.md), printed, never asserted: what boxd's resolver
and filter cost a network-on sandbox against the same sandbox without a policy.

Two network namespaces it makes (nothing leaves them): boxd runs in `out`, joined by a
veth pair to `up`, where tests/wire/upstream/ serves DNS and HTTP(S) for allowed.test
(a test CA). For each mode, none and policy (allow_domains ["allowed.test"]):

- connection setup: N sequential HTTPS requests (resolve, connect, TLS handshake, a small
  GET, close) from inside one sandbox; median and p90;
- a download of M MiB over HTTPS from inside the sandbox; MiB/s (best of 3);
- memory: K more network-on sandboxes started idle in fresh workspaces; per sandbox, the
  change of boxd's RSS, the PSS of their slirp4netns stacks, and the host's
  MemTotal - MemAvailable.

usage: BOXD=build/boxd BOXCTL=build/boxctl python3 benchmarks/egress_bench.py
         [--driver bwrap|nsjail] [--mib 64] [--connections 40] [--sandboxes 40]
Root only."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
upstream_dir = os.path.join(here, "..", "tests", "wire", "upstream")
OUT, UP = "boxrt-eb-out", "boxrt-eb-up"
TOKEN = "egress-bench-token-0123456789abcdef0123"
PORT = 5419

PROBE = r"""
import json, os, socket, ssl, sys, time
ctx = ssl.create_default_context(cafile='/tmp/ca.pem')
def get(path):
    s = socket.create_connection(('allowed.test', 443), 20)
    t = ctx.wrap_socket(s, server_hostname='allowed.test')
    t.sendall(('GET %s HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n' % path).encode())
    n = 0
    while True:
        c = t.recv(1 << 18)
        if not c:
            return n
        n += len(c)
setup = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter(); get('/'); setup.append(time.perf_counter() - t0)
setup.sort()
mib = int(sys.argv[2]); rates = []
for _ in range(3):
    t0 = time.perf_counter(); n = get('/bytes/%d' % (mib << 20)); rates.append(n / (1 << 20) / (time.perf_counter() - t0))
print(json.dumps({'setup_p50_ms': setup[len(setup) // 2] * 1000, 'setup_p90_ms': setup[len(setup) * 9 // 10] * 1000,
                  'mib_s': max(rates)}))
"""


def sh(cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def boxctl(*args: str, stdin: str | None = None) -> str:
    env = dict(os.environ, BOXCTL_URL=f"ws://127.0.0.1:{PORT}", LANGBOT_BOX_CONTROL_TOKEN=TOKEN)
    r = subprocess.run(["ip", "netns", "exec", OUT, os.path.abspath(os.environ.get("BOXCTL", "build/boxctl")), *args],
                       input=stdin, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"boxctl {' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def wait_for(paths: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready: {paths}")
        time.sleep(0.05)


def network_up(d: str) -> list[subprocess.Popen]:
    for ns in (OUT, UP):
        sh(f"ip netns del {ns}", check=False)
    cmds = [f"ip netns add {OUT}", f"ip netns add {UP}", "ip link add bxebo type veth peer name bxebu",
            f"ip link set bxebo netns {OUT}", f"ip link set bxebu netns {UP}",
            f"ip -n {OUT} addr add 10.203.0.2/24 dev bxebo", f"ip -n {OUT} link set bxebo up",
            f"ip -n {OUT} link set lo up", f"ip -n {UP} link set bxebu up", f"ip -n {UP} link set lo up"]
    cmds += [f"ip -n {UP} addr add 10.203.0.{a}/24 dev bxebu" for a in (1, 10, 20, 21, 22)]
    cmds += [f"ip -n {OUT} route add default via 10.203.0.1"]
    for c in cmds:
        sh(c)
    os.makedirs(f"/etc/netns/{OUT}", exist_ok=True)
    with open(f"/etc/netns/{OUT}/resolv.conf", "w") as f:
        f.write("nameserver 10.203.0.10\n")
    sh(f"sh {upstream_dir}/certs.sh {d}")
    procs = [subprocess.Popen(["ip", "netns", "exec", UP, "python3", f"{upstream_dir}/{name}.py", d],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name in ("web", "dns")]
    wait_for([f"{d}/web.ready", f"{d}/dns.ready"], 30)
    return procs


def boxd_up(d: str, driver: str) -> subprocess.Popen:
    cfg = {"server": {"listen": f"127.0.0.1:{PORT}", "control_token": TOKEN},
           "box": {"backend": driver, "local": {"host_root": f"{d}/box"},
                   "limits": {"max_sessions": 1000, "warm_pool": 0},
                   "network_egress": {"resolvers": ["10.203.0.10"]}}}
    with open(f"{d}/boxd.json", "w") as f:
        json.dump(cfg, f)
    log = open(f"{d}/boxd.log", "w")
    p = subprocess.Popen(["ip", "netns", "exec", OUT, os.path.abspath(os.environ.get("BOXD", "build/boxd")), "--config", f"{d}/boxd.json"],
                         stdout=log, stderr=log, cwd=d)
    deadline = time.monotonic() + 60
    while True:
        try:
            boxctl("health")
            return p
        except RuntimeError:
            if time.monotonic() > deadline or p.poll() is not None:
                raise RuntimeError("boxd did not start: " + open(f"{d}/boxd.log").read()[-2000:])
            time.sleep(0.1)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def meminfo() -> dict:
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            info[k] = int(v.split()[0])
    return info


def host_used_kib() -> int:
    m = meminfo()
    return m["MemTotal"] - m["MemAvailable"]


def stacks(pid: int) -> list[int]:
    r = sh(f"pgrep -P {pid} -x slirp4netns", check=False)
    return [int(x) for x in r.stdout.split()]


def measure(mode: str, args, ca: str, pid: int) -> dict:
    ws = f"bench-{mode}"
    if mode == "policy":
        boxctl("--workspace", ws, "network", "set", "-", stdin=json.dumps({"allow_domains": ["allowed.test"]}))
    boxctl("--workspace", ws, "exec", "--session", "probe", "--network", "on", "--no-stream", "-i", "--",
           "cat > /tmp/ca.pem", stdin=ca)
    out = boxctl("--workspace", ws, "exec", "--session", "probe", "--network", "on", "--no-stream", "--timeout",
                 "600", "-i", "--", f"python3 - {args.connections} {args.mib}", stdin=PROBE)
    row = json.loads(out.strip().splitlines()[-1])
    # Memory: K more idle network-on sandboxes, each in a workspace of its own.
    sh("sync; echo 3 > /proc/sys/vm/drop_caches", check=False)
    rss0, host0, slab0 = rss_kib(pid), host_used_kib(), meminfo()["Slab"]
    for i in range(args.sandboxes):
        w = f"bench-{mode}-{i}"
        if mode == "policy":
            boxctl("--workspace", w, "network", "set", "-", stdin=json.dumps({"allow_domains": ["allowed.test"]}))
        boxctl("--workspace", w, "exec", "--session", "idle", "--network", "on", "--no-stream", "--", "true")
    sh("sync; echo 3 > /proc/sys/vm/drop_caches", check=False)
    k = args.sandboxes
    row["boxd_rss_kib_per_sandbox"] = (rss_kib(pid) - rss0) / k
    row["host_kib_per_sandbox"] = (host_used_kib() - host0) / k
    row["slab_kib_per_sandbox"] = (meminfo()["Slab"] - slab0) / k
    pids = stacks(pid)
    row["slirp4netns_pss_kib_each"] = sum(pss_kib(p) for p in pids) / max(len(pids), 1)
    for i in range(args.sandboxes):
        boxctl("--workspace", f"bench-{mode}-{i}", "delete", "idle")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", default="bwrap")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--sandboxes", type=int, default=40)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("egress_bench: needs root (network namespaces, sandboxes)", file=sys.stderr)
        return 2
    d = tempfile.mkdtemp(prefix="boxrt-egress-bench-")
    procs: list[subprocess.Popen] = []
    try:
        procs = network_up(d)
        boxd = boxd_up(d, args.driver)
        procs.append(boxd)
        ca = open(f"{d}/ca.pem").read()
        # `ip netns exec` execs boxd: the same process.
        rows = {mode: measure(mode, args, ca, boxd.pid) for mode in ("none", "policy")}
        print(f"egress ({args.driver}, {args.connections} HTTPS requests, {args.mib} MiB HTTPS download, "
              f"{args.sandboxes} idle sandboxes)")
        print("| policy | setup p50 / p90 ms | download MiB/s | boxd RSS KiB/sandbox | slirp4netns PSS KiB each "
              "| slab KiB/sandbox | host KiB/sandbox |")
        print("|---|---|---|---|---|---|---|")
        for mode, r in rows.items():
            print(f"| {mode} | {r['setup_p50_ms']:.2f} / {r['setup_p90_ms']:.2f} | {r['mib_s']:.0f} | "
                  f"{r['boxd_rss_kib_per_sandbox']:.0f} | {r['slirp4netns_pss_kib_each']:.0f} | "
                  f"{r['slab_kib_per_sandbox']:.0f} | {r['host_kib_per_sandbox']:.0f} |")
        return 0
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for ns in (OUT, UP):
            sh(f"ip netns del {ns}", check=False)
        shutil.rmtree(f"/etc/netns/{OUT}", ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
