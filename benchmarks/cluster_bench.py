"""Cluster figures (docs/cluster.md), printed, never asserted: box_exec latency and
throughput through a workspace's owner and through a node that forwards to it (the
forwarding overhead), and the time from the owner's kill -9 to the first exec answered
by its successor (failover). Three boxd nodes on loopback with one real etcd, each node
in its own mount namespace, on the scripted backend so the figures are boxd's own.

usage: BOXD=build/boxd python cluster_bench.py [--seconds S]"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "cluster"))
sys.path.insert(0, os.path.join(here, "..", "tests", "conformance"))

from cluster import INSTANCE, TOKEN, Cluster  # noqa: E402

WORKSPACE = "bench-ws"


def boxbench(node, connections: int, seconds: float) -> dict:
    exe = os.path.join(os.path.dirname(os.environ["BOXD"]), "boxbench")
    out = subprocess.run([exe, "--url", node.url[: -len("/rpc/ws")], "--token", TOKEN, "--instance", INSTANCE,
                          "--workspace", WORKSPACE, "--action", "exec", "--connections", str(connections),
                          "--seconds", str(seconds), "--json"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def owner_of(c: Cluster) -> str:
    for n in c.nodes.values():
        with open(n.log.name) as f:
            if "owns " in f.read():
                return n.id
    raise RuntimeError("no node owns the bench workspace")


async def failover(c: Cluster, owner: str, entry) -> float:
    from conftest import BoxConnection  # the conformance suite's client
    from langbot_plugin.box.errors import BoxError
    from langbot_plugin.box.models import BoxSpec
    from langbot_plugin.entities.io.context import ActionContext
    ctx = ActionContext(instance_uuid=INSTANCE, workspace_uuid=WORKSPACE, placement_generation=1)
    async with BoxConnection(entry.url, TOKEN, INSTANCE) as conn:
        await conn.client.execute(BoxSpec(session_id="failover", cmd="true"), action_context=ctx)
        c.nodes[owner].kill()
        killed = time.monotonic()
        while True:
            try:
                await conn.client.execute(BoxSpec(session_id="failover", cmd="true"), action_context=ctx)
                return time.monotonic() - killed
            except BoxError:
                if time.monotonic() - killed > 60:
                    raise
                await asyncio.sleep(0.01)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    args = ap.parse_args()
    box = {"backend": "scripted", "limits": {"max_sessions": 1024, "max_sessions_per_workspace": 1024}}
    c = Cluster(box, lease_ms=3000, takeover_wait_ms=10000)
    try:
        first = next(iter(c.nodes.values()))
        boxbench(first, 1, 0.5)
        owner = owner_of(c)
        forwarder = next(n for n in c.nodes.values() if n.id != owner)
        print(f"== cluster: 3 nodes, one etcd, scripted backend; owner {owner}, forwarding node {forwarder.id}")
        print("| path | connections | exec/s | p50 µs | p99 µs |")
        print("|---|---|---|---|---|")
        rows = {}
        for label, node in (("through the owner", c.nodes[owner]), ("through a forwarding node", forwarder)):
            for conns in (1, 16):
                r = boxbench(node, conns, args.seconds)
                rows[(label, conns)] = r
                print(f"| {label} | {conns} | {r['round_trips_per_s']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['errors']} errors")
        added = rows[("through a forwarding node", 1)].get("p50_us", 0) - rows[("through the owner", 1)].get("p50_us", 0)
        print(f"forwarding overhead, p50 at 1 connection: {added:.0f} µs added")
        took = asyncio.run(failover(c, owner, forwarder))
        print(f"failover (lease_ms {c.lease_ms}): kill -9 of the owner to the first exec answered by its "
              f"successor: {took * 1000:.0f} ms ({took * 1000 / c.lease_ms:.2f} x lease_ms)")
        del c.nodes[owner]
    finally:
        c.stop()


if __name__ == "__main__":
    main()
