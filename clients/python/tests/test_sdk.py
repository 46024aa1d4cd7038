"""The boxrt Python SDK against a real boxd on loopback (BOXD: its path; BOXRT_NSJAIL: the
nsjail make build provides): commands, streams read slower than they are written, files
up to 64 MiB, sessions, host-control calls, errors, the sync wrapper, a dropped
connection. Sandboxes on bubblewrap and nsjail (root), else the process backend."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile

import pytest
import pytest_asyncio

import boxrt
import boxrt.sync

TOKEN = "sdk-test-token-0123456789abcdef0123456789"
INSTANCE = "sdk-instance"
MIB = 1 << 20


class Boxd:
    def __init__(self, box: dict, testing: bool = False, listen: str = "127.0.0.1:0", folder: str | None = None):
        self.dir = folder or tempfile.mkdtemp(prefix="boxrt-sdk-")
        box = json.loads(json.dumps(box))
        box.setdefault("local", {})["host_root"] = os.path.join(self.dir, "box")
        config = {"server": {"listen": listen, "control_token": TOKEN, "testing": testing,
                             "transfer_dir": os.path.join(self.dir, "transfers")}, "box": box}
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log = open(os.path.join(self.dir, "boxd.log"), "w")
        self.proc = subprocess.Popen([os.environ["BOXD"], "--config", path], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("boxd listening on "), line
        self.url = line.split()[-1]

    def stop(self, keep: bool = False):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def backends():
    if os.geteuid() == 0 and shutil.which("bwrap"):
        out = [{"backend": "bwrap"}]
        nsjail = os.environ.get("BOXRT_NSJAIL", "")
        if nsjail and os.access(nsjail, os.X_OK):
            out.append({"backend": "nsjail", "local": {"nsjail_path": nsjail}})
        return out
    return [{"backend": "process"}]


@pytest.fixture(scope="module", params=backends(), ids=lambda b: b["backend"])
def boxd(request):
    b = Boxd(request.param)
    yield b
    b.stop()


@pytest_asyncio.fixture
async def client(boxd):
    c = await boxrt.connect(boxd.url, token=TOKEN, instance=INSTANCE)
    yield c
    await c.close()


async def test_exec_returns_output_and_exit_codes(client):
    ws = client.workspace("sdk-exec")
    r = await ws.exec("echo hello; echo oops >&2")
    assert (r.stdout, r.stderr, r.exit_code, r.ok) == ("hello", "oops", 0, True)
    bad = await ws.exec("exit 3")
    assert bad.exit_code == 3 and not bad.ok
    slow = await ws.exec("sleep 5", timeout=1)
    assert slow.status == "timed_out" and slow.exit_code is None


async def test_a_stream_read_slower_than_it_is_written(client):
    ws = client.workspace("sdk-stream")
    stream = ws.exec_stream("seq 1 30000")
    text, offset = [], 0
    async for chunk in stream:
        assert chunk.stream == "stdout" and chunk.offset == offset
        offset += len(chunk.data.encode())
        text.append(chunk.data)
        await asyncio.sleep(0.002)  # a consumer slower than the producer (flow control holds it)
    assert "".join(text) == "".join(f"{i}\n" for i in range(1, 30001))
    assert stream.exit_code == 0 and stream.result["ended"] == "exit"
    # Leaving early cancels the command; the session goes on.
    endless = ws.exec_stream("yes")
    async for chunk in endless:
        break
    await endless.aclose()
    assert (await ws.exec("echo after")).stdout == "after"


async def test_files_up_to_64_mib_and_every_file_call(client, tmp_path):
    ws = client.workspace("sdk-files")
    await ws.exec("true")  # the session "default"
    data = os.urandom(64 * MIB)
    assert await ws.files.write("/workspace/big.bin", data) == len(data)
    back = await ws.files.read("big.bin")
    assert hashlib.sha256(back).hexdigest() == hashlib.sha256(data).hexdigest()
    assert await ws.files.read("big.bin", offset=10, length=5) == data[10:15]
    await ws.files.mkdir("d/e")
    await ws.files.write("d/e/t.txt", "héllo")
    assert await ws.files.read_text("d/e/t.txt") == "héllo"
    st = await ws.files.stat("d/e/t.txt")
    assert (st.type, st.size) == ("file", 6)
    names = {e.path for e in await ws.files.list(".", depth=3)}
    assert {"big.bin", "d", "d/e", "d/e/t.txt"} <= names
    assert not any(".boxrt-part" in n for n in names)
    await ws.files.move("d/e/t.txt", "moved.txt")
    local = tmp_path / "up.txt"
    local.write_text("uploaded")
    await ws.files.upload(local, "up.txt")
    await ws.files.download("up.txt", tmp_path / "down.txt")
    assert (tmp_path / "down.txt").read_text() == "uploaded"
    assert (await ws.exec("cat moved.txt up.txt")).stdout == "héllo"  "uploaded"
    await ws.files.remove("d", recursive=True)
    with pytest.raises(boxrt.BoxValidationError) as e:
        await ws.files.read("/etc/passwd")
    assert str(e.value) == "BoxValidationError: path /etc/passwd is outside the workspace /workspace"
    with pytest.raises(boxrt.BoxError) as e:
        await ws.files.stat("nope")
    assert str(e.value) == "BoxError: [Errno 2] No such file or directory: '/workspace/nope'"
    with pytest.raises(boxrt.BoxSessionNotFoundError):
        await ws.in_session("nobody").files.list(".")


async def test_sessions_and_host_calls(client):
    ws = client.workspace("sdk-sessions")
    await ws.sessions.create("s1")
    assert (await ws.sessions.get("s1"))["session_id"] == "s1"
    assert [s["session_id"] for s in await ws.sessions.list()] == ["s1"]
    await ws.sessions.delete("s1")
    with pytest.raises(boxrt.BoxSessionNotFoundError) as e:
        await ws.sessions.get("s1")
    assert str(e.value) == "BoxSessionNotFoundError: session s1 not found"
    assert "available" in await client.backend_info()
    await client.health()
    everything = await client.list_all_sessions()
    assert everything["truncated"] is False and isinstance(everything["sessions"], list)
    assert "capacity" in await ws.status()
    # The workspace's egress policy (docs/network.md): set, read back, refused, cleared.
    assert (await ws.network_policy())["source"] == "none"
    set_ = await ws.set_network_policy({"allow_domains": ["PyPI.org"]})
    assert set_["source"] == "workspace" and set_["policy"]["allow_domains"] == ["pypi.org"]
    assert (await ws.network_policy())["effective"]["allow_ports"] == [80, 443]
    with pytest.raises(boxrt.BoxValidationError) as bad:
        await ws.set_network_policy({"allow_ports": [0]})
    assert "policy.allow_ports[0]" in str(bad.value)
    assert (await ws.network_policy())["policy"]["allow_domains"] == ["pypi.org"]
    assert (await ws.set_network_policy(None))["source"] == "none"


def test_the_sync_wrapper(boxd):
    with boxrt.sync.connect(boxd.url, token=TOKEN, instance=INSTANCE) as client:
        ws = client.workspace("sdk-sync")
        assert ws.exec("echo sync").stdout == "sync"
        assert "".join(c.data for c in ws.exec_stream("printf 'a\\nb'")) == "a\nb"
        ws.files.write("s.txt", "x")
        assert ws.files.read("s.txt") == b"x"


async def test_a_wrong_instance_is_explained(boxd):
    with pytest.raises(boxrt.BoxError) as e:
        await boxrt.connect(boxd.url, token=TOKEN, instance="someone-else")
    assert "HTTP 401" in str(e.value) and "pinned" in str(e.value)


ADMISSION = {
    "backend": "scripted",
    "scripted": {"available": True, "ready_keys": [
        "cgroup_v2", "resource_limits", "namespace_isolation", "mount_isolation", "network_isolation",
        "hard_workspace_quota", "hard_skill_storage_quota", "bounded_ephemeral_storage", "inode_quota"]},
    "admission": {"required": True, "required_backend": "scripted", "max_sessions": 1,
                  "max_managed_processes": 0, "max_grant_ttl_sec": 300, "max_timeout_sec": 60, "cpus": 0.5,
                  "memory_mb": 256, "pids_limit": 64, "workspace_quota_mb": 32, "readiness_cache_sec": 0},
}


async def test_admission_calls_and_their_errors():
    b = Boxd(ADMISSION, testing=True)
    try:
        async with await boxrt.connect(b.url, token=TOKEN, instance=INSTANCE) as client:
            ws = client.workspace("sdk-cloud", session="global")
            with pytest.raises(boxrt.BoxAdmissionError):
                await ws.exec("true")
            snap = {"instance_uuid": INSTANCE, "workspace_uuid": "sdk-cloud", "entitlement_revision": 1,
                    "status": "active", "not_before": 1, "expires_at": 4000000000,
                    "features": {"managed_sandbox": True}, "limits": {"managed_sandbox_sessions": 1}}
            assert (await client.put_entitlement(snap))["entitlement_revision"] == 1
            assert (await ws.exec("echo admitted")).ok
            revoked = await client.revoke_grant({"instance_uuid": INSTANCE, "workspace_uuid": "sdk-cloud",
                                                 "entitlement_revision": 1})
            assert revoked["revoked"] is True
            with pytest.raises(boxrt.BoxAdmissionError) as e:
                await ws.exec("true")
            assert str(e.value) == "BoxAdmissionError: Sandbox admission grant revision was revoked"
            # A grant pushed by itself (LangBot's admission controller's way).
            import datetime as dt
            expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120)).replace(microsecond=0)
            receipt = await client.upsert_grant({
                "instance_uuid": INSTANCE, "workspace_uuid": "sdk-grant", "execution_generation": 1,
                "entitlement_revision": 1, "expires_at": expires.isoformat(), "max_sessions": 1,
                "max_managed_processes": 0})
            assert receipt["installed"] is True
            assert (await client.workspace("sdk-grant", session="global").exec("echo granted")).stdout == "granted"
    finally:
        b.stop()


async def test_a_dropped_connection_says_the_call_may_have_run():
    b = Boxd(backends()[0])  # a live backend: the first output comes while the command runs
    try:
        client = await boxrt.connect(b.url, token=TOKEN, instance=INSTANCE)
        ws = client.workspace("sdk-drop")
        stream = ws.exec_stream("echo started; sleep 30")
        first = await stream.__anext__()  # the command runs
        assert first.data.strip() == "started"
        b.proc.kill()
        with pytest.raises(boxrt.ConnectionLost) as e:
            await asyncio.wait_for(stream.__anext__(), 30)
        assert "may or may not have run" in str(e.value)
        with pytest.raises(boxrt.ConnectionLost):
            await ws.exec("true")
    finally:
        b.stop()


async def test_a_managed_process_and_its_stdio(client):
    ws = client.workspace("sdk-proc")
    await ws.exec("true")
    # A line echo server: each line in comes back upper-cased.
    info = await ws.processes.start("sh", ["-c", "while read l; do echo \"$l\" | tr a-z A-Z; done"], process_id="up")
    assert info["status"] == "running" and info["process_id"] == "up"
    stdio = await ws.processes.attach("up")
    await stdio.send("hello")
    assert (await stdio.__anext__()).strip() == "HELLO"
    await stdio.close()
    assert (await ws.processes.get("up"))["status"] == "running"
    await ws.processes.stop("up")
    with pytest.raises(boxrt.BoxError):
        await ws.processes.get("up")
    with pytest.raises(boxrt.BoxError):
        await ws.processes.attach("nope")


async def test_the_next_call_opens_a_new_connection():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = Boxd({"backend": "process"}, listen=f"127.0.0.1:{port}")
    try:
        client = await boxrt.connect(b.url, token=TOKEN, instance=INSTANCE)
        ws = client.workspace("sdk-again")
        await ws.exec("echo kept > kept.txt")
        folder = b.dir
        b.proc.kill()
        b.proc.wait()
        b.stop(keep=True)
        b = Boxd({"backend": "process"}, listen=f"127.0.0.1:{port}", folder=folder)
        # The connection dropped while nothing was in flight: the next calls open a new one.
        assert "available" in await client.health()
        assert (await ws.exec("echo again > again.txt; echo again")).stdout == "again"
        assert await ws.files.read("again.txt") == b"again\n"
        await client.close()
    finally:
        b.stop()


async def test_an_uploaded_skill_zip_is_previewed(client):
    import io
    import zipfile
    ws = client.workspace("sdk-skill")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:  # larger than one 16 KiB chunk
        z.writestr("demo/SKILL.md", "---\nname: demo\ndescription: a demo\n---\n" + os.urandom(30000).hex())
    key = await client.upload(buf.getvalue())
    preview = await ws.skill_action("box_preview_skill_zip", {"file_key": key, "filename": "demo.zip"})
    assert [s["name"] for s in preview["skills"]] == ["demo"]
    with pytest.raises(boxrt.BoxValidationError) as e:  # a key is consumed by its action
        await ws.skill_action("box_preview_skill_zip", {"file_key": key, "filename": "demo.zip"})
    assert str(e.value) == f"BoxValidationError: Uploaded file {key} was not found"
