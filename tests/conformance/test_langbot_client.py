"""boxd driven by LangBot's own client (langbot-plugin): what an unmodified LangBot host
does, with the SDK's exception types as the host sees them."""

from __future__ import annotations

import datetime as dt

import pytest

from langbot_plugin.box.client import ActionRPCBoxClient
from langbot_plugin.box.errors import (
    BoxAdmissionError,
    BoxError,
    BoxSessionConflictError,
    BoxSessionNotFoundError,
    BoxValidationError,
)
from langbot_plugin.box.models import (
    BoxExecutionStatus,
    BoxNetworkMode,
    BoxSpec,
    SandboxAdmissionGrant,
    SandboxAdmissionRevocation,
)
from langbot_plugin.entities.io.context import ActionContext

from conftest import INSTANCE, TOKEN, BoxConnection


# The skill actions left the client (and the runtime) in langbot-plugin 0.7.13: hosts from
# 4.11 keep skills themselves. boxd keeps serving them for the older clients.
needs_skill_actions = pytest.mark.skipif(
    not hasattr(ActionRPCBoxClient, "create_skill"), reason="this client has no skill actions (0.7.13+)"
)


def ctx(workspace: str = "workspace-a", generation: int = 1) -> ActionContext:
    return ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=generation)


async def test_health_and_backend_info(box):
    await box.initialize()  # box_health; raises BoxRuntimeUnavailableError on failure
    info = await box.get_backend_info()
    # boxd lists its extensions beside the reference's two keys.
    assert info == {"name": "scripted", "available": True, "capabilities": ["exec_stream"]}


async def test_status_counts_this_placement(box):
    status = await box.get_status(action_context=ctx("status-ws"))
    assert status["backend"] == {"name": "scripted", "available": True}
    assert status["active_sessions"] == 0
    assert status["managed_processes"] == 0
    assert status["limits"]["max_sessions"] == 64


async def test_exec_round_trip(box):
    result = await box.execute(BoxSpec(session_id="s1", cmd="echo hello"), action_context=ctx())
    assert result.status == BoxExecutionStatus.COMPLETED
    assert result.exit_code == 0
    assert result.stdout == "hello"
    assert result.session_id == "s1"
    assert result.backend_name == "scripted"


async def test_create_get_list_delete(box):
    c = ctx("crud-ws")
    info = await box.create_session(BoxSpec(session_id="shared"), action_context=c)
    assert info["session_id"] == "shared"
    got = await box.get_session("shared", action_context=c)
    assert got["session_id"] == "shared"
    assert got["persistent"] is False
    assert [s["session_id"] for s in await box.get_sessions(action_context=c)] == ["shared"]
    await box.delete_session("shared", action_context=c)
    assert await box.get_sessions(action_context=c) == []
    with pytest.raises(BoxSessionNotFoundError) as err:
        await box.get_session("shared", action_context=c)
    assert "BoxSessionNotFoundError: session shared not found" in str(err.value)


async def test_reuse_with_another_network_conflicts(box):
    c = ctx("conflict-ws")
    await box.execute(BoxSpec(session_id="s", cmd="echo a"), action_context=c)
    with pytest.raises(BoxSessionConflictError) as err:
        await box.execute(BoxSpec(session_id="s", cmd="echo b", network=BoxNetworkMode.ON), action_context=c)
    assert "Box session s already exists with network=off" in str(err.value)


async def test_validation_error_maps_to_box_validation_error(box):
    with pytest.raises(BoxValidationError) as err:
        await box.execute(BoxSpec(session_id="s1", cmd="   "), action_context=ctx())
    assert "BoxValidationError: cmd must not be empty" in str(err.value)


async def test_tenant_action_without_context_is_refused(box):
    with pytest.raises(BoxError) as err:
        await box.get_status()
    assert "PermissionError: Box tenant action requires a trusted Workspace context" in str(err.value)


async def test_generation_fence(box):
    await box.execute(BoxSpec(session_id="shared", cmd="echo g1"), action_context=ctx("fence-ws", 1))
    await box.execute(BoxSpec(session_id="shared", cmd="echo g2"), action_context=ctx("fence-ws", 2))
    sessions = await box.get_sessions(action_context=ctx("fence-ws", 2))
    assert [s["session_id"] for s in sessions] == ["shared"]
    with pytest.raises(BoxError) as err:
        await box.execute(BoxSpec(session_id="shared", cmd="echo old"), action_context=ctx("fence-ws", 1))
    assert "PermissionError: Stale Box placement generation" in str(err.value)


async def test_grants_are_refused_in_standard_mode(box):
    grant = SandboxAdmissionGrant(
        instance_uuid=INSTANCE, workspace_uuid="workspace-a", execution_generation=1,
        entitlement_revision=1, expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120),
        max_sessions=1, max_managed_processes=0,
    )
    with pytest.raises(BoxAdmissionError) as err:
        await box.upsert_sandbox_admission_grant(grant)
    assert "Sandbox admission enforcement is not enabled" in str(err.value)


async def test_wrong_token_is_unauthorized(standard_boxd):
    with pytest.raises(Exception) as err:
        async with BoxConnection(standard_boxd.url, "x" * 40, INSTANCE):
            pass
    assert "401" in str(err.value)


async def test_grant_upsert_and_revoke_receipts(admitted_box):
    c = ctx("grant-ws", 3)
    with pytest.raises(BoxAdmissionError) as err:
        await admitted_box.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=c)
    assert "Sandbox admission grant is missing" in str(err.value)
    expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120)).replace(microsecond=0)
    grant = SandboxAdmissionGrant(
        instance_uuid=INSTANCE, workspace_uuid="grant-ws", execution_generation=3,
        entitlement_revision=7, expires_at=expires, max_sessions=1, max_managed_processes=0,
    )
    receipt = await admitted_box.upsert_sandbox_admission_grant(grant)
    # The fields LangBot's admission controller checks, one by one.
    assert receipt["installed"] is True
    assert receipt["workspace_uuid"] == "grant-ws"
    assert receipt["execution_generation"] == 3
    assert receipt["entitlement_revision"] == 7
    assert receipt["max_sessions"] == 1
    assert receipt["max_managed_processes"] == 0
    assert dt.datetime.fromisoformat(receipt["expires_at"]) == expires
    result = await admitted_box.execute(BoxSpec(session_id="global", cmd="echo admitted"), action_context=c)
    assert result.stdout == "admitted"
    assert result.session_id == "global"
    revoked = await admitted_box.revoke_sandbox_admission_grant(
        SandboxAdmissionRevocation(instance_uuid=INSTANCE, workspace_uuid="grant-ws", entitlement_revision=7)
    )
    assert revoked == {"revoked": True, "workspace_uuid": "grant-ws", "entitlement_revision": 7}
    assert await admitted_box.get_status(action_context=c) is not None
    with pytest.raises(BoxAdmissionError) as err:
        await admitted_box.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=c)
    assert "Sandbox admission grant is missing" in str(err.value)
    with pytest.raises(BoxAdmissionError) as err:
        await admitted_box.upsert_sandbox_admission_grant(grant)
    assert "Sandbox admission grant revision was revoked" in str(err.value)


async def test_admission_mode_rejects_a_foreign_session_id(admitted_box):
    c = ctx("owned-ws")
    grant = SandboxAdmissionGrant(
        instance_uuid=INSTANCE, workspace_uuid="owned-ws", execution_generation=1,
        entitlement_revision=1, expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120),
        max_sessions=1, max_managed_processes=0,
    )
    await admitted_box.upsert_sandbox_admission_grant(grant)
    with pytest.raises(BoxAdmissionError) as err:
        await admitted_box.execute(BoxSpec(session_id="attacker", cmd="echo x"), action_context=c)
    assert "Managed sandbox session_id is runtime-owned" in str(err.value)


async def test_exec_in_a_real_sandbox(sandboxed_box):
    """The same client against bwrap: a warm session keeps files, the command is not
    root, the network is off and a timeout comes back as the SDK's timed_out."""
    c = ctx("sandbox-ws")
    first = await sandboxed_box.execute(
        BoxSpec(session_id="real", cmd="echo kept > /workspace/f && id -u"), action_context=c)
    assert first.status == BoxExecutionStatus.COMPLETED
    assert first.backend_name == "bwrap"
    # The workspace's own uid from the sandbox uid range (server.sandbox_uid_range).
    assert first.stdout.isdigit() and int(first.stdout) >= 0x70000000
    second = await sandboxed_box.execute(
        BoxSpec(session_id="real", cmd="cat /workspace/f; awk -F: 'NR>2{print $1}' /proc/net/dev | tr -d ' '"), action_context=c)
    assert second.stdout.split() == ["kept", "lo"]
    slow = await sandboxed_box.execute(
        BoxSpec(session_id="slow", cmd="sleep 30", timeout_sec=1), action_context=c)
    assert slow.status == BoxExecutionStatus.TIMED_OUT
    assert slow.exit_code is None


async def test_status_reports_each_sessions_usage(sandboxed_box):
    """box_status's session_stats: CPU time and memory from the session's cgroup, bytes
    from statfs of its quota image, null without one."""
    c = ctx("stats-ws")
    quota = await sandboxed_box.execute(
        BoxSpec(session_id="quota", workspace_quota_mb=32,
                cmd="head -c 6000000 /dev/urandom > /workspace/blob && sync && "
                    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo ok"),
        action_context=c)
    assert quota.stdout == "ok", quota
    plain = await sandboxed_box.execute(BoxSpec(session_id="plain", cmd="true"), action_context=c)
    assert plain.exit_code == 0
    status = await sandboxed_box.get_status(action_context=c)
    stats = {s["session_id"]: s for s in status["session_stats"]}
    assert set(stats) == {"quota", "plain"}
    q = stats["quota"]
    assert q["backend"] == "bwrap"
    assert q["cpu_seconds"] is not None and q["cpu_seconds"] > 0
    assert q["memory_bytes"] is not None and q["memory_bytes"] > 0
    assert q["workspace_bytes"] is not None and 6_000_000 <= q["workspace_bytes"] < 32 << 20
    assert stats["plain"]["workspace_bytes"] is None
    assert stats["plain"]["memory_bytes"] is not None
    # Another workspace sees none of them.
    other = await sandboxed_box.get_status(action_context=ctx("stats-other-ws"))
    assert other["session_stats"] == []


def _zip(files: dict[str, str]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


@needs_skill_actions
async def test_skill_crud_and_files(box):
    c = ctx("skills-ws")
    created = await box.create_skill({"name": "demo", "description": "d", "instructions": "Do it"}, action_context=c)
    assert created["name"] == "demo"
    assert created["entry_file"] == "SKILL.md"
    assert "/tenants/ws-" in created["package_root"]
    await box.write_skill_file("demo", "requirements.txt", "requests\n", action_context=c)
    got = await box.get_skill("demo", action_context=c)
    assert got["python_project"] is True
    files = await box.list_skill_files("demo", action_context=c)
    assert [e["name"] for e in files["entries"]] == ["SKILL.md", "requirements.txt"]
    assert (await box.read_skill_file("demo", "requirements.txt", action_context=c))["content"] == "requests\n"
    updated = await box.update_skill("demo", {"name": "demo", "description": "new"}, action_context=c)
    assert updated["description"] == "new"
    assert [s["name"] for s in await box.list_skills(action_context=c)] == ["demo"]
    # Another workspace sees none of it.
    assert await box.get_skill("demo", action_context=ctx("other-skills-ws")) is None
    with pytest.raises(BoxValidationError, match="already exists"):
        await box.create_skill({"name": "demo"}, action_context=c)
    with pytest.raises(BoxValidationError, match="stay within the skill package root"):
        await box.read_skill_file("demo", "../../x", action_context=c)
    await box.delete_skill("demo", action_context=c)
    assert await box.get_skill("demo", action_context=c) is None


@needs_skill_actions
async def test_skill_zip_upload_through_the_sdk_file_transfer(box):
    c = ctx("zip-ws")
    archive = _zip({"pkg/SKILL.md": "---\nname: zipped\ndescription: from a zip\n---\n\nHello", "pkg/run.sh": "echo hi\n"})
    preview = await box.preview_skill_zip(archive, "My Skill!.zip", action_context=c)
    assert [s["name"] for s in preview] == ["zipped"]
    assert preview[0]["package_root"].endswith("/My-Skill-upload")
    installed = await box.install_skill_zip(archive, "My Skill!.zip", action_context=c)
    assert [s["name"] for s in installed] == ["zipped"]
    assert (await box.get_skill("zipped", action_context=c))["description"] == "from a zip"
    # A zip-slip archive is refused and installs nothing.
    evil = _zip({"../evil/SKILL.md": "x"})
    with pytest.raises(BoxValidationError, match="unsafe path"):
        await box.install_skill_zip(evil, "evil.zip", action_context=c)
    assert [s["name"] for s in await box.list_skills(action_context=c)] == ["zipped"]


@needs_skill_actions
async def test_cloud_skill_rules(admitted_box):
    c = ctx("cloud-skills-ws")
    with pytest.raises(BoxAdmissionError, match="Sandbox admission grant is missing"):
        await admitted_box.list_skills(action_context=c)
    grant = SandboxAdmissionGrant(
        instance_uuid=INSTANCE, workspace_uuid="cloud-skills-ws", execution_generation=1,
        entitlement_revision=1, expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120),
        max_sessions=1, max_managed_processes=0,
    )
    await admitted_box.upsert_sandbox_admission_grant(grant)
    assert await admitted_box.list_skills(action_context=c) == []
    with pytest.raises(BoxAdmissionError, match="Cloud skill package_root is runtime-owned"):
        await admitted_box.create_skill({"name": "x", "package_root": "/etc"}, action_context=c)
    with pytest.raises(BoxAdmissionError, match="Scanning arbitrary host skill directories is disabled in Cloud"):
        await admitted_box.scan_skill_directory("/", action_context=c)
    created = await admitted_box.create_skill({"name": "runner"}, action_context=c)
    assert created["name"] == "runner"


async def test_managed_process_and_its_stdio_relay(box, standard_boxd):
    """Start an echo server as a managed process, talk to it through the relay URL the
    SDK builds (the SDK's own relay headers), then stop it."""
    import websockets
    from langbot_plugin.box.models import BoxManagedProcessSpec

    c = ctx("relay-ws")
    await box.execute(BoxSpec(session_id="mcp", cmd="echo up"), action_context=c)
    info = await box.start_managed_process(
        "mcp", BoxManagedProcessSpec(process_id="echo", command="cat"), action_context=c)
    assert info.status.value == "running"
    assert info.process_id == "echo"
    base = standard_boxd.url[: -len("/rpc/ws")].replace("ws://", "http://")
    url = box.get_managed_process_websocket_url("mcp", base, process_id="echo", action_context=c)
    assert "/v1/sessions/ws-" in url
    headers = {
        "X-LangBot-Box-Control-Token": TOKEN,
        "X-LangBot-Instance-Id": INSTANCE,
        "X-LangBot-Workspace-Id": "relay-ws",
        "X-LangBot-Placement-Generation": "1",
    }
    async with websockets.connect(url, additional_headers=headers, subprotocols=["mcp"]) as ws:
        assert ws.subprotocol == "mcp"
        await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
        echoed = await ws.recv()
        assert echoed.strip() == '{"jsonrpc":"2.0","id":1,"method":"ping"}'
        attached = await box.get_managed_process("mcp", "echo", action_context=c)
        assert attached.attached is True
    await box.stop_managed_process("mcp", "echo", action_context=c)
    with pytest.raises(BoxError):
        await box.get_managed_process("mcp", "echo", action_context=c)
