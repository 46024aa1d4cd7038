"""boxd as a cluster (docs/cluster.md), with real processes on loopback: one real etcd,
three boxd nodes each in its own mount namespace, LangBot's own client on each node. The
admission checks run on the scripted backend (server.testing lets it make admission mode
ready); the sandbox checks (watchdog, one live sandbox, quota files) on real bubblewrap."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request

import pytest
import websockets

from langbot_plugin.box.errors import BoxAdmissionError, BoxError
from langbot_plugin.box.models import BoxSpec, SandboxAdmissionGrant, SandboxAdmissionRevocation
from langbot_plugin.entities.io.context import ActionContext

from conftest import BoxConnection  # the conformance suite's client
from cluster import INSTANCE, TOKEN, Cluster, live_sandboxes, wait_for

READY = ["cgroup_v2", "resource_limits", "namespace_isolation", "mount_isolation", "network_isolation",
         "hard_workspace_quota", "hard_skill_storage_quota", "bounded_ephemeral_storage", "inode_quota"]
ADMISSION = {
    "backend": "scripted",
    "scripted": {"available": True, "ready_keys": READY},
    "admission": {
        "required": True, "required_backend": "scripted", "max_sessions": 1, "max_managed_processes": 0,
        "max_grant_ttl_sec": 300, "max_timeout_sec": 60, "cpus": 0.5, "memory_mb": 256, "pids_limit": 64,
        "workspace_quota_mb": 32, "readiness_cache_sec": 0,
    },
}


def ctx(workspace: str, generation: int = 1) -> ActionContext:
    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=generation)


def grant(workspace: str, generation: int = 1, revision: int = 1) -> SandboxAdmissionGrant:
    return SandboxAdmissionGrant(
        instance_uuid=INSTANCE, workspace_uuid=workspace, execution_generation=generation,
        entitlement_revision=revision, expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=280),
        max_sessions=1, max_managed_processes=0)


def revocation(workspace: str, revision: int = 1) -> SandboxAdmissionRevocation:
    return SandboxAdmissionRevocation(instance_uuid=INSTANCE, workspace_uuid=workspace, entitlement_revision=revision)


def metric(node, name: str) -> float:
    req = urllib.request.Request(node.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as res:
        text = res.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


@pytest.fixture(scope="module")
def admission_cluster():
    c = Cluster(ADMISSION, testing=True)
    yield c
    c.stop()


async def test_one_session_seen_alike_through_every_node(admission_cluster):
    c = admission_cluster
    n1, n2, n3 = c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a, BoxConnection(n2.url, TOKEN, INSTANCE) as b, \
            BoxConnection(n3.url, TOKEN, INSTANCE) as d:
        await a.client.upsert_sandbox_admission_grant(grant("ws-one"))
        r = await a.client.execute(BoxSpec(session_id="global", cmd="echo hi"), action_context=ctx("ws-one"))
        assert r.stdout == "hi"
        lists = [await x.client.get_sessions(action_context=ctx("ws-one")) for x in (a, b, d)]
        assert lists[0] == lists[1] == lists[2]
        assert [s["session_id"] for s in lists[0]] == ["global"]
        owner = n2.owner("ws-one")
        assert owner["owner"] in c.nodes and isinstance(owner["epoch"], int) and owner["epoch"] >= 1
        assert n3.owner("ws-one") == owner

        # Concurrent first use of one session through two nodes: one session.
        await d.client.upsert_sandbox_admission_grant(grant("ws-two"))
        first = await asyncio.gather(
            a.client.execute(BoxSpec(session_id="global", cmd="echo a"), action_context=ctx("ws-two")),
            b.client.execute(BoxSpec(session_id="global", cmd="echo b"), action_context=ctx("ws-two")))
        assert sorted(x.stdout for x in first) == ["a", "b"]
        listed = await d.client.get_sessions(action_context=ctx("ws-two"))
        assert [s["session_id"] for s in listed] == ["global"]
        starts = sum(metric(n, "boxd_session_starts_total") for n in c.nodes.values())

        # Revocation through a third node: the owner's session is gone before the reply.
        owner_two = c.nodes[n1.owner("ws-two")["owner"]]
        before = metric(owner_two, "boxd_sessions")
        assert before >= 1
        entry = next(x for x, n in ((a, n1), (b, n2), (d, n3)) if n is not owner_two)
        revoked = await entry.client.revoke_sandbox_admission_grant(revocation("ws-two"))
        assert revoked["revoked"] is True
        assert metric(owner_two, "boxd_sessions") == before - 1
        with pytest.raises(BoxAdmissionError, match="Sandbox admission grant is missing"):
            await b.client.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=ctx("ws-two"))
        assert starts == 2  # ws-one's session and ws-two's: the concurrent first use started one


async def test_operator_endpoints(admission_cluster):
    n1 = admission_cluster.nodes["n1"]
    code, body = n1.get("/cluster", token=False)
    assert code == 401
    code, status = n1.get("/cluster")
    assert code == 200 and status["node_id"] == "n1" and status["serving"] is True and status["etcd"] == "up"
    assert {m["node_id"] for m in status["members"]} >= {"n1", "n2", "n3"}
    assert [m["self"] for m in status["members"] if m["node_id"] == "n1"] == [True]
    assert n1.get("/cluster/owner?instance=x")[0] == 400
    free = n1.owner("never-used-ws")
    assert free["owner"] is None and free["epoch"] is None and free["workspace_namespace"].startswith("ws-")
    code, health = n1.get("/healthz")
    assert health["node_id"] == "n1"


async def test_etcd_stopped_fails_closed_and_resumes(admission_cluster):
    c = admission_cluster
    n1 = c.nodes["n1"]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        await a.client.upsert_sandbox_admission_grant(grant("ws-etcd"))
        assert (await a.client.execute(BoxSpec(session_id="global", cmd="echo up"), action_context=ctx("ws-etcd"))).stdout == "up"
        c.etcd.pause()
        try:
            stopped = time.monotonic()
            for n in c.nodes.values():
                wait_for(f"{n.id} stops serving", lambda n=n: n.status()["serving"] is False,
                         c.lease_ms / 1000 + 1.5)
            assert time.monotonic() - stopped <= c.lease_ms / 1000 + 1.5
            with pytest.raises(BoxError, match="Box cluster node n1 is not serving"):
                await a.client.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=ctx("ws-etcd"))
        finally:
            c.etcd.resume()
        for n in c.nodes.values():
            wait_for(f"{n.id} serves again", lambda n=n: n.status()["serving"] is True, 30)

        async def answered():
            try:
                r = await a.client.execute(BoxSpec(session_id="global", cmd="echo back"), action_context=ctx("ws-etcd"))
                return r.stdout == "back"
            except BoxError:
                return False
        end = time.monotonic() + 30
        while not await answered():  # no re-push of the grant
            assert time.monotonic() < end, "service did not resume within 30 s"
            await asyncio.sleep(0.2)


class Strangers:
    """Peers that are not members keep knocking at every node's cluster port from a
    thread, for as long as it runs: a TLS client with another CA's certificate, one with an
    expired certificate of the cluster's CA, plain TCP that sends garbage and closes (or
    resets), and a TLS client that sends its ClientHello and then stalls before it resets.
    Each knock is bounded by a short timeout; only loopback is reached."""

    def __init__(self, cluster):
        import threading
        from cluster import make_cert, make_expired_cert
        self.ports = [n.peer_port for n in cluster.nodes.values()]
        self.contexts = []
        for tls in (make_cert(cluster.pki, "otherca", "stranger"),
                    make_expired_cert(cluster.pki, "ca", "expired")):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.load_cert_chain(tls["certificate"], tls["key"])
            self.contexts.append(ctx)
        self.knocks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _knock(self, port: int, kind: int) -> None:
        import struct
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            if kind < 2:
                try:
                    with self.contexts[kind].wrap_socket(s) as t:
                        t.sendall(b"x" * 64)
                        t.recv(1)
                except (ssl.SSLError, OSError):
                    pass
            elif kind == 2:
                s.sendall(os.urandom(512))
                if self.knocks % 2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
                half = ssl.create_default_context().wrap_bio(incoming, outgoing)
                try:
                    half.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                s.sendall(outgoing.read())
                self._stop.wait(0.5)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _run(self):
        while not self._stop.is_set():
            for port in self.ports:
                try:
                    self._knock(port, self.knocks % 4)
                except OSError:
                    pass
                self.knocks += 1

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.knocks


async def test_strangers_never_break_forwarded_requests(admission_cluster):
    """Before, one of twelve requests forwarded between healthy nodes failed with "Box
    cluster node n3 was lost while serving the request" while a peer of another CA kept
    trying to join: every failed TLS handshake left its errors in the OpenSSL error queue
    of CAF's multiplexer thread, and the next read on a healthy link took them for its own
    failure and closed the link."""
    c = admission_cluster
    n1 = c.nodes["n1"]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        names = []
        for i in range(12):
            ws = f"ws-stranger-{i}"
            await a.client.upsert_sandbox_admission_grant(grant(ws))
            assert (await a.client.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=ctx(ws))).stdout
            if n1.owner(ws)["owner"] != n1.id:
                names.append(ws)
        assert names, "every workspace landed on the entry node"
        strangers = Strangers(c)
        failures = []
        sent = 0
        started = time.monotonic()
        try:
            async def one(i: int) -> None:
                try:
                    r = await a.client.execute(BoxSpec(session_id="global", cmd="echo ok"),
                                               action_context=ctx(names[i % len(names)]))
                    if r.stdout != "ok":
                        failures.append(repr(r))
                except BoxError as exc:
                    failures.append(str(exc))
            # 1,000 execs through a node that owns none of them, spread over at least 20 s.
            while sent < 1000 or time.monotonic() - started < 20:
                batch = 8 if sent < 1000 else 1
                await asyncio.gather(*(one(sent + k) for k in range(batch)))
                sent += batch
                if sent >= 1000:
                    await asyncio.sleep(0.05)
                assert time.monotonic() - started < 120, "the execs took over 120 s"
        finally:
            knocks = strangers.stop()
        assert knocks > 20, f"the strangers knocked only {knocks} times"
        assert not failures, f"{len(failures)} of {sent} forwarded execs failed: {failures[:3]}"
        assert {"n2", "n3"} <= n1.alive_peers()


async def test_killed_owner(admission_cluster):
    c = admission_cluster
    n1 = c.nodes["n1"]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        await a.client.upsert_sandbox_admission_grant(grant("ws-kill", generation=2))
        await a.client.upsert_sandbox_admission_grant(grant("ws-revoked"))
        assert (await a.client.execute(BoxSpec(session_id="global", cmd="echo 1"), action_context=ctx("ws-kill", 2))).stdout == "1"
        assert (await a.client.execute(BoxSpec(session_id="global", cmd="echo 1"), action_context=ctx("ws-revoked"))).stdout == "1"
        await a.client.revoke_sandbox_admission_grant(revocation("ws-revoked"))
    owner = n1.owner("ws-kill")["owner"]
    victim = c.nodes[owner]
    victim.kill()
    survivor = next(n for n in c.nodes.values() if n.id not in (owner,) and n.proc.poll() is None)
    async with BoxConnection(survivor.url, TOKEN, INSTANCE) as s:
        r = await s.client.execute(BoxSpec(session_id="global", cmd="echo 2"), action_context=ctx("ws-kill", 2))
        assert r.stdout == "2"  # the grant is still in force: nothing was pushed again
        assert survivor.owner("ws-kill")["owner"] != owner
        with pytest.raises(BoxError, match="Stale Box placement generation"):
            await s.client.execute(BoxSpec(session_id="global", cmd="echo 3"), action_context=ctx("ws-kill", 1))
        with pytest.raises(BoxAdmissionError, match="Sandbox admission grant"):
            await s.client.execute(BoxSpec(session_id="global", cmd="echo 3"), action_context=ctx("ws-revoked"))
        with pytest.raises(BoxAdmissionError, match="revoked"):
            await s.client.upsert_sandbox_admission_grant(grant("ws-revoked"))
    del c.nodes[owner]


async def test_box_init_reaches_every_node(admission_cluster):
    """box_init through one node is stored in etcd and applied by every node."""
    c = admission_cluster
    nodes = list(c.nodes.values())

    def box(required_backend: str) -> dict:
        b = json.loads(json.dumps(c.box))
        b["admission"]["required_backend"] = required_backend
        return b

    def ready(n) -> bool:
        return n.get("/readyz")[1]["ready"]

    async with BoxConnection(nodes[0].url, TOKEN, INSTANCE) as a:
        await a.client.init(box("nsjail"))
        for n in nodes:
            wait_for(f"{n.id} applies the stricter box_init", lambda n=n: not ready(n), 15)
        await a.client.init(box("scripted"))
        for n in nodes:
            wait_for(f"{n.id} applies the box_init back", lambda n=n: ready(n), 15)


async def test_one_trusted_instance_for_the_cluster_and_boxctl(admission_cluster):
    c = admission_cluster
    nodes = list(c.nodes.values())
    # The first pin holds on every node: INSTANCE pins it here unless an earlier test
    # did, and every node then refuses another instance's handshake with 401.
    async with BoxConnection(nodes[0].url, TOKEN, INSTANCE):
        pass
    for n in nodes:
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            async with BoxConnection(n.url, TOKEN, "instance-b"):
                pass
        assert refused.value.response.status_code == 401
    # The pinned instance is still admitted on every node.
    for n in nodes:
        async with BoxConnection(n.url, TOKEN, INSTANCE):
            pass
    boxctl = os.path.join(os.path.dirname(os.environ["BOXD"]), "boxctl")
    url = nodes[0].url[: -len("/rpc/ws")]
    out = subprocess.run([boxctl, "--url", url, "--token", TOKEN, "cluster"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["node_id"] == nodes[0].id
    out = subprocess.run([boxctl, "--url", url, "--token", TOKEN, "cluster", "owner", "--instance", INSTANCE,
                          "--workspace", "ws-one"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["owner"] in c.nodes or json.loads(out.stdout)["owner"] is None


async def test_refused_peers(admission_cluster):
    # Last on this cluster: CAF's middleman may drop healthy links once when such a peer
    # leaves (the links are dialed again at once; see docs/cluster.md "Limits").
    c = admission_cluster
    n1 = next(iter(c.nodes.values()))  # a node still running (another test killed one)
    # No certificate at all: the TLS handshake fails.
    raw = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    raw.check_hostname = False
    raw.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", n1.peer_port), timeout=5) as s:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with raw.wrap_socket(s) as t:
                t.sendall(b"x" * 64)
                assert t.recv(1) != b""
    # A certificate from another CA, registered in the cluster's prefix: never alive.
    foreign = c.add("xforeign", ca="otherca")
    wait_for("n1 reports xforeign's link failure", lambda: any(
        m["node_id"] == "xforeign" and not m["alive"] and m.get("link_error")
        for m in n1.status()["members"]), 30)
    # The right CA, but a node_id the cluster never registered: its hello is refused.
    c.etcd.put(f"/boxrt/other/members/{n1.id}", '{"address": "%s"}' % n1.address)
    intruder = c.add("intruder", prefix="/boxrt/other")
    refused = wait_for("n1 refuses the intruder", lambda: [r for r in n1.status()["refused"]
                                                           if r["node_id"] == "intruder"], 30)
    assert "not a registered member" in refused[0]["reason"]
    assert "intruder" not in n1.alive_peers() and "xforeign" not in n1.alive_peers()
    for extra in (foreign, intruder):
        extra.stop()
        del c.nodes[extra.id]


# Cloud mode on real bubblewrap sandboxes.
SANDBOXED = {
    "backend": "bwrap",
    "admission": {
        "required": True, "logical_session_id": "global", "required_backend": "bwrap", "max_sessions": 1,
        "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60, "cpus": 0.5,
        "memory_mb": 256, "pids_limit": 64, "read_only_rootfs": True, "workspace_quota_mb": 32,
        "readiness_cache_sec": 0,
    },
}


@pytest.fixture(scope="module")
def sandbox_cluster():
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    c = Cluster(SANDBOXED)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def outage_cluster():
    """Real sandboxes with a long readiness cache: a verdict taken while a node was fenced
    would stand for a minute, so only a node that probes again once it serves recovers."""
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    box = json.loads(json.dumps(SANDBOXED))
    box["admission"]["readiness_cache_sec"] = 60
    c = Cluster(box)
    yield c
    c.stop()


async def etcd_outage_and_return(c, rounds: int, tag: str) -> None:
    """Workspaces owned by every node, files written; then etcd killed until every node
    stops serving, and started again on the same data folder: within 30 s every node
    answers every workspace's exec with no re-push, its readiness as before, the files
    and the admission state intact. Before, two of three nodes refused every exec with
    BoxReadinessError (a probe run while fenced) until their next probe."""
    n1 = c.nodes["n1"]
    names = [f"ws-{tag}-{i}" for i in range(6)]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        for ws in names:
            await a.client.upsert_sandbox_admission_grant(grant(ws))
            r = await a.client.execute(BoxSpec(session_id="global", cmd=f"echo {ws} > /workspace/mark && echo ok"),
                                       action_context=ctx(ws))
            assert r.stdout == "ok", r
    owners = {n1.owner(ws)["owner"] for ws in names}
    for _ in range(rounds):
        c.etcd.kill()
        try:
            for n in c.nodes.values():
                wait_for(f"{n.id} stops serving", lambda n=n: n.status()["serving"] is False,
                         c.lease_ms / 1000 + 3)
        finally:
            c.etcd.start()
        back = time.monotonic()
        for n in c.nodes.values():
            async with BoxConnection(n.url, TOKEN, INSTANCE) as b:
                for ws in names:
                    last = None
                    while True:
                        try:
                            r = await b.client.execute(BoxSpec(session_id="global", cmd="cat /workspace/mark"),
                                                       action_context=ctx(ws))
                            assert r.stdout == ws, r
                            break
                        except BoxError as exc:  # not serving yet
                            last = exc
                        assert time.monotonic() - back < 30, f"{n.id} did not answer {ws} within 30 s: {last}"
                        await asyncio.sleep(0.2)
            code, _ = n.get("/readyz", token=False)
            assert code == 200, f"{n.id} is not ready again"
    # A revocation pushed before an outage holds after it: the admission state is etcd's.
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        await a.client.revoke_sandbox_admission_grant(revocation(names[0]))
        c.etcd.kill()
        c.etcd.start()
        for n in c.nodes.values():
            wait_for(f"{n.id} serves again", lambda n=n: n.status()["serving"] is True, 30)
        with pytest.raises(BoxAdmissionError):
            await a.client.execute(BoxSpec(session_id="global", cmd="true"), action_context=ctx(names[0]))
    assert len(owners) >= 2, f"the workspaces landed on one node only: {owners}"


async def test_every_node_serves_again_after_an_etcd_outage(outage_cluster):
    await etcd_outage_and_return(outage_cluster, rounds=1, tag="once")


async def test_every_node_serves_again_after_two_etcd_outages_in_a_row(outage_cluster):
    await etcd_outage_and_return(outage_cluster, rounds=2, tag="twice")


class SandboxWatch:
    """Counts, every few milliseconds from a thread, the live sandboxes of a workspace on
    every node (each node's cgroup subtree), keeping the highest count seen."""

    def __init__(self, cluster):
        import threading
        self.cluster = cluster
        self.highest = 0
        self.seen = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            count = sum(len(live_sandboxes(self.cluster, n)) for n in list(self.cluster.nodes))
            self.highest = max(self.highest, count)
            self.seen.append(count)
            self._stop.wait(0.01)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.highest


async def test_stdio_relay_through_a_node_that_does_not_own_the_workspace():
    """The relay WebSocket on one node, the managed process on its owner: lines in, stdout
    out in order and complete past the relay's 1 MiB queue, the attachment seen by the
    owner, the process's end closing the relay. (Admission mode allows no managed
    processes, so these nodes run without it.)"""
    import websockets
    from langbot_plugin.box.models import BoxManagedProcessSpec

    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    c = Cluster({"backend": "bwrap"}, nodes=2)
    try:
        await relay_through_the_other_node(c, websockets, BoxManagedProcessSpec)
        await network_policy_outlives_its_owner(c)
    finally:
        c.stop()


class NetworkAction(enum.Enum):
    SET = "box_set_network_policy"
    GET = "box_get_network_policy"


async def network_policy_outlives_its_owner(c):
    """A workspace's egress policy (docs/network.md) is kept where the cluster keeps
    admission state: set through one node, read back through the other after its owner
    was killed."""
    n1 = c.nodes["n1"]
    ws = {"instance_uuid": INSTANCE, "workspace_uuid": "ws-net"}
    policy = {"allow_domains": ["pypi.org", "*.pythonhosted.org"]}
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        # A first use makes the workspace's owner; the policy goes to it through n1.
        await a.client.execute(BoxSpec(session_id="s", cmd="true"), action_context=ctx("ws-net"))
        r = await a.handler.call_action(NetworkAction.SET, {**ws, "policy": policy})
        assert r["source"] == "workspace" and r["policy"]["allow_domains"] == ["*.pythonhosted.org", "pypi.org"], r
    owner = c.nodes[n1.owner("ws-net")["owner"]]
    survivor = next(n for n in c.nodes.values() if n is not owner)
    owner.kill()
    async with BoxConnection(survivor.url, TOKEN, INSTANCE) as s:
        r = await s.handler.call_action(NetworkAction.GET, ws)
        assert r["source"] == "workspace" and r["policy"]["allow_domains"] == ["*.pythonhosted.org", "pypi.org"], r
    del c.nodes[owner.id]


async def relay_through_the_other_node(c, websockets, BoxManagedProcessSpec):
    n1 = c.nodes["n1"]
    w = ctx("ws-relay")
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        r = await a.client.execute(BoxSpec(session_id="global", cmd="echo up"), action_context=w)
        assert r.stdout == "up", r
        owner = c.nodes[n1.owner("ws-relay")["owner"]]
        entry = next(n for n in c.nodes.values() if n is not owner)
        await a.client.start_managed_process("global", BoxManagedProcessSpec(process_id="echo", command="cat"),
                                             action_context=w)
        headers = {"X-LangBot-Box-Control-Token": TOKEN, "X-LangBot-Instance-Id": INSTANCE,
                   "X-LangBot-Workspace-Id": "ws-relay", "X-LangBot-Placement-Generation": "1"}

        def relay_url(process_id: str) -> str:
            return a.client.get_managed_process_websocket_url("global", entry.http, process_id=process_id,
                                                              action_context=w)

        async with BoxConnection(owner.url, TOKEN, INSTANCE) as o:
            async with websockets.connect(relay_url("echo"), additional_headers=headers, max_size=None,
                                          open_timeout=10) as ws:
                await ws.send("hello")
                assert (await asyncio.wait_for(ws.recv(), 10)).strip() == "hello"
                assert (await o.client.get_managed_process("global", "echo", action_context=w)).attached is True
                # 4 MiB through a 1 MiB queue: the pump waits for credit, nothing is lost.
                lines = [f"{i:05d}" + "x" * 32_000 for i in range(128)]
                expected = "".join(line + "\n" for line in lines)

                async def send():
                    for line in lines:
                        await ws.send(line)

                async def receive() -> str:
                    got = []
                    size = 0
                    while size < len(expected):
                        part = await asyncio.wait_for(ws.recv(), 20)
                        got.append(part)
                        size += len(part)
                    return "".join(got)

                _, echoed = await asyncio.gather(send(), receive())
                assert echoed == expected
            async def detached() -> bool:
                for _ in range(200):
                    if not (await o.client.get_managed_process("global", "echo", action_context=w)).attached:
                        return True
                    await asyncio.sleep(0.05)
                return False
            assert await detached(), "the owner still holds a relay that closed"

        # The process's end closes the relay with its reason.
        await a.client.stop_managed_process("global", "echo", action_context=w)
        await a.client.start_managed_process(
            "global", BoxManagedProcessSpec(process_id="once", command="sh", args=["-c", "read x; echo got $x"]),
            action_context=w)
        async with websockets.connect(relay_url("once"), additional_headers=headers, open_timeout=10) as ws:
            await ws.send("1")
            assert (await asyncio.wait_for(ws.recv(), 10)).strip() == "got 1"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.reason == "managed process exited"
        await a.client.stop_managed_process("global", "once", action_context=w)

        # A process that floods stdout to a client that does not read: neither node holds
        # more than the relay's bound (1 MiB queued, 1 MiB of credit in flight); the
        # process waits on its pipe instead. Nothing is lost once the client reads.
        flood = 64 << 20
        await a.client.start_managed_process(
            "global", BoxManagedProcessSpec(process_id="flood", command="sh",
                                            args=["-c", f"head -c {flood} /dev/zero | tr '\\0' x"]),
            action_context=w)

        def rss_kib(node) -> int:
            with open(f"/proc/{node.proc.pid}/status") as f:
                return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))

        before = {n.id: rss_kib(n) for n in (owner, entry)}
        async with websockets.connect(relay_url("flood"), additional_headers=headers, max_size=None,
                                      open_timeout=10, max_queue=1) as ws:
            grown = {}
            for _ in range(40):  # two seconds of not reading, sampled
                for n in (owner, entry):
                    grown[n.id] = max(grown.get(n.id, 0), rss_kib(n) - before[n.id])
                await asyncio.sleep(0.05)
            assert all(g < 8 * 1024 for g in grown.values()), f"RSS grew (KiB) while the client did not read: {grown}"
            got = 0
            while got < flood:
                got += len(await asyncio.wait_for(ws.recv(), 20))
            assert got == flood
        await a.client.stop_managed_process("global", "flood", action_context=w)


async def test_stopped_owner_is_fenced_and_replaced(sandbox_cluster):
    c = sandbox_cluster
    n1 = c.nodes["n1"]
    async with BoxConnection(n1.url, TOKEN, INSTANCE) as a:
        await a.client.upsert_sandbox_admission_grant(grant("ws-stop"))
        r = await a.client.execute(BoxSpec(session_id="global", cmd="echo kept > /workspace/mark && echo ok"),
                                   action_context=ctx("ws-stop"))
        assert r.stdout == "ok", r
    owner = c.nodes[n1.owner("ws-stop")["owner"]]
    assert len(live_sandboxes(c, owner.id)) == 1
    watch = SandboxWatch(c)
    try:
        owner.signal(signal.SIGSTOP)
        # Its watchdog kills the sandbox before the lease can expire at etcd.
        wait_for("the stopped owner's sandbox is killed", lambda: not live_sandboxes(c, owner.id),
                 c.lease_ms / 1000 + 3)
        entry = next(n for n in c.nodes.values() if n is not owner)
        # A request sent to the stopped owner before its lease ended fails (its outcome
        # is unknown); once the lease has ended, the workspace is taken over.
        wait_for("the stopped owner's lease ends", lambda: owner.id not in {m["node_id"] for m in entry.status()["members"]},
                 2 * c.lease_ms / 1000 + 2)
        async with BoxConnection(entry.url, TOKEN, INSTANCE) as b:
            r = await b.client.execute(BoxSpec(session_id="global", cmd="cat /workspace/mark"),
                                       action_context=ctx("ws-stop"))
            assert r.stdout == "kept", r
        successor = entry.owner("ws-stop")["owner"]
        assert successor != owner.id
        owner.signal(signal.SIGCONT)
        wait_for("the resumed node serves again", lambda: owner.status()["serving"] is True,
                 2 * c.lease_ms / 1000 + 10)
        wait_for("the resumed node is alive for the others",
                 lambda: all(owner.id in n.alive_peers() for n in c.nodes.values() if n is not owner),
                 2 * c.lease_ms / 1000 + 10)
        async with BoxConnection(owner.url, TOKEN, INSTANCE) as d:
            r = await d.client.execute(BoxSpec(session_id="global", cmd="cat /workspace/mark"),
                                       action_context=ctx("ws-stop"))
            assert r.stdout == "kept", r
        # The old node serves nothing of its old session: the successor does.
        assert not live_sandboxes(c, owner.id)
        assert len(live_sandboxes(c, successor)) == 1
    finally:
        owner.signal(signal.SIGCONT)
        highest = watch.stop()
    assert highest <= 1, f"two live sandboxes of one workspace at once ({watch.seen})"


async def test_killed_owner_leaves_quota_files_intact(sandbox_cluster):
    c = sandbox_cluster
    # An earlier test resumed a stopped node, which links again to every other: a link
    # replaced then closes, and a request in flight on it fails (its outcome unknown).
    # This test is about the kill below, so it starts once every link stands.
    for n in c.nodes.values():
        wait_for(f"{n.id} is linked to every other node",
                 lambda n=n: n.alive_peers() == set(c.nodes) - {n.id}, 30)
    first = next(iter(c.nodes.values()))
    async with BoxConnection(first.url, TOKEN, INSTANCE) as a:
        await a.client.upsert_sandbox_admission_grant(grant("ws-quota"))
        r = await a.client.execute(
            BoxSpec(session_id="global", cmd="head -c 1000000 /dev/urandom > /workspace/blob && sha256sum /workspace/blob"),
            action_context=ctx("ws-quota"))
        digest = r.stdout.split()[0]
    owner = c.nodes[first.owner("ws-quota")["owner"]]
    owner.kill()
    del c.nodes[owner.id]
    survivor = next(iter(c.nodes.values()))
    async with BoxConnection(survivor.url, TOKEN, INSTANCE) as b:
        r = await b.client.execute(BoxSpec(session_id="global", cmd="sha256sum /workspace/blob"),
                                   action_context=ctx("ws-quota"))
        assert r.stdout.split()[0] == digest, r
    assert survivor.owner("ws-quota")["owner"] != owner.id


async def test_etcd_over_tls_with_client_certificates():
    """etcd with --client-cert-auth: nodes whose client certificate its CA signed serve; a
    node whose certificate comes from another CA never serves."""
    c = Cluster(ADMISSION, nodes=2, testing=True, etcd_tls=True)
    try:
        assert c.etcd.endpoint.startswith("https://")
        for n in c.nodes.values():
            assert n.status()["serving"] is True and n.status()["etcd"] == "up"
        async with BoxConnection(c.nodes["n1"].url, TOKEN, INSTANCE) as a:
            await a.client.upsert_sandbox_admission_grant(grant("ws-tls"))
            r = await a.client.execute(BoxSpec(session_id="global", cmd="echo tls"), action_context=ctx("ws-tls"))
            assert r.stdout == "tls"
        stranger = c.add("n3", ca="otherca")
        # Its first try at etcd has failed once its reason names the failure (before any
        # try it reads as the default text): from then on it must not serve.
        default_reason = "its etcd lease could not be renewed in time"
        wait_for("the stranger's first etcd call failed",
                 lambda: stranger.status().get("reason", default_reason) != default_reason, 30)
        status = stranger.status()
        assert status["serving"] is False and status["etcd"] == "down", status
        assert status["reason"], status
    finally:
        c.stop()


def test_a_node_on_the_default_backend_runs_real_sandboxes():
    """`backend` left to auto: bwrap's self-test at start reserves a uid under the node's
    lease, so the node registers before it selects its backend."""
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    c = Cluster({}, nodes=1)
    try:
        backend = c.nodes["n1"].get("/readyz")[1]["backend"]
        assert backend == {"name": "bwrap", "available": True}
    finally:
        c.stop()


EMBEDDED = {
    "backend": "bwrap",
    "admission": {
        "required": True, "logical_session_id": "global", "required_backend": "bwrap", "max_sessions": 1,
        "max_managed_processes": 0, "max_timeout_sec": 60, "cpus": 0.5, "memory_mb": 256, "pids_limit": 64,
        "workspace_quota_mb": 16, "readiness_cache_sec": 0,
    },
}


async def test_an_embedded_application_is_one_node_of_the_cluster():
    """tests/embed's example (built against an installed tree, docs/embedding.md) joins a
    one-node cluster as a second node: its entitlement and exec, sent as typed messages,
    reach the workspace's owner, and the first node lists the session it made."""
    example = os.environ.get("BOXRT_EMBED_EXAMPLE")
    if not example:
        pytest.skip("tests/embed/run.sh runs this with the example it built")
    if os.geteuid() != 0 or not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("real sandboxes need root and bubblewrap")
    from cluster import PREFIX, free_port, make_cert
    c = Cluster(EMBEDDED, nodes=1)
    proc = None
    try:
        tls = make_cert(c.pki, "ca", "e1")
        env = dict(os.environ, BOXRT_EMBED_NODE_ID="e1", BOXRT_EMBED_LISTEN=f"127.0.0.1:{free_port()}",
                   BOXRT_EMBED_ETCD=c.etcd.endpoint, BOXRT_EMBED_PREFIX=PREFIX, BOXRT_EMBED_CERT=tls["certificate"],
                   BOXRT_EMBED_KEY=tls["key"], BOXRT_EMBED_CA=tls["ca_file"], BOXRT_EMBED_UID_FIRST="1879048192",
                   BOXRT_EMBED_UID_LAST="1879113727", BOXRT_EMBED_LEASE_MS=str(c.lease_ms))
        state = os.path.join(c.host_root, "state")
        log = open(os.path.join(c.dir, "embedded.log"), "w")
        script = f'mount -t tmpfs -o mode=0700 tmpfs "{state}" && exec "{example}" "{c.host_root}" bwrap'
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        # Its output, line by line, from a thread: every wait below is bounded.
        import queue
        import threading
        out: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [out.put(x.strip()) for x in proc.stdout], daemon=True).start()
        lines = []
        deadline = time.monotonic() + 60
        while not lines or lines[-1] != "waiting":
            try:
                lines.append(out.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        assert lines and lines[-1] == "waiting", f"the embedded node did not run its exec: {lines}"
        assert any(x.startswith("exit 0: hello from") for x in lines), lines
        n1 = c.nodes["n1"]
        wait_for("n1 holds a verified link to the embedded node", lambda: "e1" in n1.alive_peers(), 30)
        owner = n1.owner("workspace-1", instance="embedding-host")
        assert owner["owner"] in ("n1", "e1") and owner["epoch"] >= 1, owner
        ctx = ActionContext(instance_uuid="embedding-host", workspace_uuid="workspace-1", placement_generation=1)
        async with BoxConnection(n1.url, TOKEN, "embedding-host") as a:
            listed = await a.client.get_sessions(action_context=ctx)
            assert [s["session_id"] for s in listed] == ["global"]
        proc.stdin.write("go on\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        c.stop()
