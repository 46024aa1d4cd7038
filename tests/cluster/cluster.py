"""Helpers of the cluster suite (docs/cluster.md): a real etcd from Debian's etcd-server on
loopback, a CA and node certificates made with openssl, and boxd nodes, each in its own
mount namespace with a node-local `<host_root>/state` (as a separate host would have)
over one shared `host_root`. Every wait is bounded and polls an observed condition."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

TOKEN = "cluster-token-0123456789abcdef0123456789abcd"
INSTANCE = "instance-a"
PREFIX = "/boxrt/c1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float, every: float = 0.05):
    """Polls `check` until it returns a truthy value; fails the test after `timeout` s."""
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001 - the condition is not there yet
            last = exc
        if time.monotonic() >= end:
            raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")
        time.sleep(every)


def openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(dir: str, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=dir)


def make_cert(dir: str, ca: str, name: str, san: str | None = None) -> dict:
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=dir)
    extra = []
    if san:
        with open(os.path.join(dir, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        extra = ["-extfile", f"{name}.ext"]
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *extra, cwd=dir)
    return {"certificate": os.path.join(dir, f"{name}.pem"), "key": os.path.join(dir, f"{name}.key"),
            "ca_file": os.path.join(dir, f"{ca}.pem")}


def make_expired_cert(dir: str, ca: str, name: str) -> dict:
    """A certificate of CA `ca` that expired in 2020 (`openssl ca` sets the dates)."""
    with open(os.path.join(dir, "expired.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca = c\n[c]\ndatabase = expired-index.txt\nnew_certs_dir = .\n"
                "serial = expired-serial\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n")
    open(os.path.join(dir, "expired-index.txt"), "w").close()
    with open(os.path.join(dir, "expired-serial"), "w") as f:
        f.write("01\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=dir)
    openssl("ca", "-batch", "-config", "expired.cnf", "-cert", f"{ca}.pem", "-keyfile", f"{ca}.key",
            "-in", f"{name}.csr", "-out", f"{name}.pem", "-startdate", "20200101000000Z",
            "-enddate", "20200102000000Z", "-notext", cwd=dir)
    return {"certificate": os.path.join(dir, f"{name}.pem"), "key": os.path.join(dir, f"{name}.key"),
            "ca_file": os.path.join(dir, f"{ca}.pem")}


class Etcd:
    """`tls`: {"certificate", "key", "ca_file"} of etcd's server certificate; clients must
    then show a certificate of the same CA (--client-cert-auth), as in production."""

    def __init__(self, dir: str, tls: dict | None = None, client: dict | None = None):
        self.dir = os.path.join(dir, "etcd")
        os.makedirs(self.dir)
        self.port = free_port()
        peer = free_port()
        self.endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.ssl = None
        secure = []
        if tls:
            secure = ["--cert-file", tls["certificate"], "--key-file", tls["key"],
                      "--trusted-ca-file", tls["ca_file"], "--client-cert-auth"]
            import ssl
            self.ssl = ssl.create_default_context(cafile=tls["ca_file"])
            self.ssl.load_cert_chain(client["certificate"], client["key"])
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.args = ["/usr/bin/etcd", "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
                     "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
                     "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                     "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                     "--initial-cluster", f"t=http://127.0.0.1:{peer}", *secure]
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("etcd answers", lambda: self.get("/probe") is None or True, 20)

    def kill(self) -> None:
        """An outage: etcd gone at once (kill -9); start() brings it back on the same data
        folder and address."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def call(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5, context=self.ssl) as res:
            return json.loads(res.read())

    def get(self, key: str):
        import base64
        r = self.call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = r.get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def put(self, key: str, value: str) -> None:
        import base64
        self.call("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                 "value": base64.b64encode(value.encode()).decode()})

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()


class Node:
    """One boxd cluster node: its own mount namespace, whose `<host_root>/state` is a
    private tmpfs, over the cluster's shared host_root."""

    def __init__(self, cluster: "Cluster", node_id: str, tls: dict, prefix: str = PREFIX, etcd_tls: dict | None = None):
        self.cluster = cluster
        self.id = node_id
        self.dir = os.path.join(cluster.dir, node_id)
        os.makedirs(self.dir, exist_ok=True)
        self.peer_port = free_port()
        self.address = f"127.0.0.1:{self.peer_port}"
        config = {
            "server": {"listen": "127.0.0.1:0", "control_token": TOKEN,
                       "transfer_dir": os.path.join(self.dir, "transfers"), "testing": cluster.testing},
            "box": cluster.box,
            "cluster": {"node_id": node_id, "listen": self.address, "advertise": self.address,
                        "etcd": {"endpoints": [cluster.etcd.endpoint], "prefix": prefix,
                                 **({"tls": etcd_tls} if etcd_tls else {})},
                        "tls": tls, "lease_ms": cluster.lease_ms, "takeover_wait_ms": cluster.takeover_wait_ms,
                        "uid_range": [1879048192, 1879113727]},
        }
        self.config = os.path.join(self.dir, "config.json")
        with open(self.config, "w") as f:
            json.dump(config, f)
        self.start()

    def start(self) -> None:
        state = os.path.join(self.cluster.host_root, "state")
        self.log = open(os.path.join(self.dir, "boxd.log"), "a")
        script = f'mount -t tmpfs -o mode=0700 tmpfs "{state}" && exec "{os.environ["BOXD"]}" --config "{self.config}"'
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("boxd listening on "):
            self.kill()
            raise RuntimeError(f"node {self.id} did not start: {line!r}; log in {self.log.name}")
        self.url = line.split()[-1] + "/rpc/ws"
        self.http = line.split()[-1].replace("ws://", "http://")

    def get(self, path: str, token: bool = True) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
        req = urllib.request.Request(self.http + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, json.loads(body)
            except ValueError:
                return e.code, {"text": body.decode()}

    def status(self) -> dict:
        return self.get("/cluster")[1]

    def alive_peers(self) -> set[str]:
        return {m["node_id"] for m in self.status()["members"] if m["alive"] and not m["self"]}

    def owner(self, workspace: str, instance: str = INSTANCE) -> dict:
        return self.get(f"/cluster/owner?instance={instance}&workspace={workspace}")[1]

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


class Cluster:
    def __init__(self, box: dict, nodes: int = 3, testing: bool = False, lease_ms: int = 2000,
                 takeover_wait_ms: int = 8000, etcd_tls: bool = False):
        self.dir = tempfile.mkdtemp(prefix="boxd-cluster-")
        self.host_root = os.path.join(self.dir, "box")
        os.makedirs(os.path.join(self.host_root, "state"))
        self.box = json.loads(json.dumps(box))
        self.box.setdefault("local", {})["host_root"] = self.host_root
        self.testing = testing
        self.lease_ms = lease_ms
        self.takeover_wait_ms = takeover_wait_ms
        self.pki = os.path.join(self.dir, "pki")
        os.makedirs(self.pki)
        make_ca(self.pki, "ca")
        make_ca(self.pki, "otherca")
        self.etcd_tls = etcd_tls
        if etcd_tls:
            self.etcd = Etcd(self.dir, make_cert(self.pki, "ca", "etcd", san="IP:127.0.0.1"),
                             make_cert(self.pki, "ca", "etcd-client"))
        else:
            self.etcd = Etcd(self.dir)
        self.nodes: dict[str, Node] = {}
        for i in range(1, nodes + 1):
            self.add(f"n{i}")
        ids = set(self.nodes)
        for n in self.nodes.values():
            wait_for(f"{n.id} links to every other node", lambda n=n: n.alive_peers() == ids - {n.id}, 30)

    def add(self, node_id: str, ca: str = "ca", prefix: str = PREFIX) -> Node:
        tls = make_cert(self.pki, ca, node_id)
        node = Node(self, node_id, tls, prefix, etcd_tls=tls if self.etcd_tls else None)
        self.nodes[node_id] = node
        return node

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()
        self.etcd.stop()
        if os.environ.get("BOXD_CLUSTER_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def cgroup_base(cluster: "Cluster", node_id: str) -> str:
    """The folder name of a node's cgroups (backends/sandbox/backend.cpp names them by
    state directory and node id)."""
    import hashlib
    state = os.path.normpath(os.path.abspath(os.path.join(cluster.host_root, "state")))
    return "boxrt-" + hashlib.sha256((state + "\n" + node_id).encode()).hexdigest()[:12]


# A sandbox is named <driver>-<sha256 of its session id, 12 hex>-<n>; the readiness probe's
# session is "readiness": a throw-away sandbox each node runs now and then, no workspace's.
PROBE_TAG = __import__("hashlib").sha256(b"readiness").hexdigest()[:12]


def live_sandboxes(cluster: "Cluster", node_id: str) -> set[str]:
    """The workspaces' sandboxes of a node with a process alive (its cgroup subtree, read
    from the host), the readiness probe's left out."""
    import glob
    live = set()
    base = cgroup_base(cluster, node_id)
    for procs in glob.glob(f"/sys/fs/cgroup/*/{base}/*/cgroup.procs") + glob.glob(f"/sys/fs/cgroup/{base}/*/cgroup.procs"):
        if os.path.basename(os.path.dirname(procs)).split("-")[1:2] == [PROBE_TAG]:
            continue
        try:
            with open(procs) as f:
                if f.read().strip():
                    live.add(os.path.basename(os.path.dirname(procs)))
        except OSError:
            pass
    return live
