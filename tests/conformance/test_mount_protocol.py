"""The 0.7.13+ mount protocol and the status calls, with LangBot's own client.

The mount tests need a client whose BoxMountSpec has content_digest (langbot-plugin
0.7.13+); they are skipped with an older one. The status calls exist in both
generations and run with both."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os

import pydantic
import pytest
import websockets

from langbot_plugin.box.models import BoxMountSpec, BoxSpec

from conftest import INSTANCE, TOKEN, BoxConnection

needs_artifact_mounts = pytest.mark.skipif(
    "content_digest" not in BoxMountSpec.model_fields, reason="this client predates content-addressed mounts (0.7.13)"
)

CTX = {"instance_uuid": INSTANCE, "workspace_uuid": "mounts-ws", "placement_generation": 1}


def action_context(workspace: str):
    from langbot_plugin.entities.io.context import ActionContext

    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=1)


@contextlib.asynccontextmanager
async def recording_relay(upstream: str):
    """A WebSocket relay in front of boxd that keeps every frame the client sends."""
    sent: list[dict] = []

    async def relay(client):
        headers = {k: v for k, v in client.request.headers.items() if k.lower().startswith("x-langbot-")}
        async with websockets.connect(upstream, additional_headers=headers, max_size=None) as server:
            async def up():
                async for frame in client:
                    sent.append(json.loads(frame))
                    await server.send(frame)

            async def down():
                async for frame in server:
                    await client.send(frame)

            tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                t.cancel()

    async with websockets.serve(relay, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}/rpc/ws", sent


def artifact(host_root: str, name: str) -> dict:
    """A published package and its manifest under boxd's host_root, as a host lays them
    out; the digest is only the right shape (no runtime verifies trees here)."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    base = os.path.join(host_root, "artifacts", digest)
    os.makedirs(os.path.join(base, "package"), exist_ok=True)
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump({"algorithm": "sha256-tree-v1", "files": [], "total_bytes": 0}, f)
    return {
        "host_path": os.path.join(base, "package"),
        "mount_path": f"/opt/langbot-artifacts/{digest}",
        "mode": "ro",
        "content_digest": f"sha256:{digest}",
        "manifest_path": os.path.join(base, "manifest.json"),
    }


@needs_artifact_mounts
async def test_the_client_sends_digest_and_manifest_on_extra_mounts(standard_boxd):
    host_root = os.path.join(standard_boxd.dir, "box")
    mount = artifact(host_root, "skill-a")
    plain = {"host_path": host_root, "mount_path": "/workspace/data", "mode": "ro"}
    async with recording_relay(standard_boxd.url) as (url, sent):
        async with BoxConnection(url, TOKEN, INSTANCE) as conn:
            spec = BoxSpec(session_id="artifacts", cmd="echo ok", extra_mounts=[mount, plain])
            result = await conn.client.execute(spec, action_context=action_context("mounts-ws"))
    assert result.stdout == "ok"
    [frame] = [f for f in sent if f.get("action") == "box_exec"]
    # Every mount with all five keys; the unused ones as null.
    assert frame["data"]["extra_mounts"] == [mount, {**plain, "content_digest": None, "manifest_path": None}]
    assert "skill_name" not in frame["data"]


# Bad mounts as a raw frame would carry them (the client's own models refuse them
# first): boxd answers each with the SDK's own validator text.
BAD_MOUNTS = [
    {"host_path": "/tmp", "mount_path": "/w/", "mode": "ro"},
    {"host_path": "/tmp", "mount_path": "/w//x", "mode": "ro"},
    {"host_path": "/tmp", "mount_path": "/w/../x", "mode": "ro"},
    {"host_path": "/tmp", "mount_path": "/w", "mode": "ro", "content_digest": "md5:00"},
    {"host_path": "/tmp", "mount_path": "/w", "mode": "ro", "content_digest": "sha256:ABC"},
    {"host_path": "/tmp", "mount_path": "/w", "mode": "ro", "manifest_path": "manifest.json"},
    {"host_path": "/tmp", "mount_path": "/opt/langbot-artifacts/" + "a" * 64, "mode": "ro"},
    {"host_path": "/tmp", "mount_path": "/opt/langbot-artifacts/" + "a" * 64, "mode": "rw",
     "content_digest": "sha256:" + "a" * 64, "manifest_path": "/tmp/manifest.json"},
]


def sdk_message(mount: dict) -> str:
    with pytest.raises(pydantic.ValidationError) as err:
        BoxMountSpec.model_validate(mount)
    return err.value.errors()[0]["msg"].removeprefix("Value error, ")


@needs_artifact_mounts
@pytest.mark.parametrize("mount", BAD_MOUNTS, ids=[str(i) for i in range(len(BAD_MOUNTS))])
async def test_bad_mounts_get_the_sdk_validator_texts(standard_boxd, mount):
    headers = {"X-LangBot-Instance-Id": INSTANCE, "X-LangBot-Box-Control-Token": TOKEN}
    frame = {"seq_id": 1, "action": "box_exec", "context": CTX,
             "data": {"session_id": "bad", "cmd": "true", "extra_mounts": [mount]}}
    async with websockets.connect(standard_boxd.url, additional_headers=headers) as ws:
        await ws.send(json.dumps(frame))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert reply["code"] == 1
    assert reply["message"].startswith("BoxValidationError: ")
    assert sdk_message(mount) in reply["message"]


async def test_status_has_capacity(box):
    """capacity = {limit: the workspace's cap, used: its sessions, remaining: what it may
    still start, the instance's cap (shared with the other tests' workspaces) included}."""
    c = action_context("capacity-ws")
    before = await box.get_status(action_context=c)
    assert before["capacity"]["limit"] == 64 and before["capacity"]["used"] == 0
    assert 0 < before["capacity"]["remaining"] <= 64
    await box.execute(BoxSpec(session_id="cap", cmd="true"), action_context=c)
    after = await box.get_status(action_context=c)
    assert after["capacity"] == {"limit": 64, "used": 1, "remaining": before["capacity"]["remaining"] - 1}
    assert after["active_sessions"] == 1


async def test_storage_analysis_has_the_reference_shape(box):
    c = action_context("storage-ws")
    await box.execute(BoxSpec(session_id="st", cmd="true"), action_context=c)
    analysis = await box.get_storage_analysis(action_context=c)
    assert set(analysis) == {"size_bytes", "directories", "active_sessions", "managed_processes"}
    assert analysis["active_sessions"] == 1 and analysis["managed_processes"] == 0
    for entry in analysis["directories"]:
        assert {"key", "path", "kind", "exists", "size_bytes", "scope"} <= set(entry)
        assert entry["kind"] in ("root", "detail")
    assert analysis["size_bytes"] == sum(e["size_bytes"] for e in analysis["directories"] if e["kind"] == "root")
