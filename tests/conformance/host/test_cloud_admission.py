"""admission.md §5.1, the five Cloud admission scenarios, driven through LangBot's own
host code (BoxService in Cloud mode, its connector and WebSocket client, the
EntitlementResolver, the SandboxAdmissionController, the native exec tool and, in 4.11,
the Runner's Box binding) against boxd on real nsjail, for both host generations. Where
LangBot's own test reads an in-process backend's recorded specs, this suite asks boxd
over the same socket, or looks from inside the sandbox. Two more checks inside: the
command is not uid 0, and the workspace quota is hard. 4.11's skills are in
test_cloud_skills_411.py."""

from __future__ import annotations

import asyncio

import pytest

from conftest import HAS_RUNNER_BINDING, HAS_RUNTIME_SKILLS, INSTANCE, context, query, run_exec
from langbot.pkg.cloud.entitlements import EntitlementUnavailableError
from langbot_plugin.box.errors import BoxAdmissionError
from langbot_plugin.entities.io.context import ActionContext


async def runtime_status(service, workspace: str) -> dict:
    """boxd's own status of a workspace (box_status is not gated by admission)."""
    return await service.client.get_status(
        action_context=ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=1)
    )


async def test_startup_finds_a_ready_nsjail(service):
    # initialize() checked box_get_backend_info for nsjail, available, itself; it raises
    # BoxValidationError otherwise.
    assert service.available


async def test_ac01_concurrent_first_use_gives_one_persistent_global_session(service, tools, entitlements):
    entitlements.set("workspace-a")
    first, second = await asyncio.gather(
        run_exec(tools, query("workspace-a"), "echo first"),
        run_exec(tools, query("workspace-a"), "echo second"),
    )
    assert first["session_id"] == "global" and second["session_id"] == "global"
    assert first["ok"] and second["ok"]
    assert (first["stdout"].strip(), second["stdout"].strip()) == ("first", "second")
    assert first["backend"] == "nsjail"
    sessions = await service.get_sessions(context("workspace-a"))
    assert len(sessions) == 1
    s = sessions[0]
    # The policy's values, not the profile's defaults.
    assert s["persistent"] is True
    assert s["network"] == "off"
    assert s["cpus"] == 0.5
    assert s["memory_mb"] == 256
    assert s["pids_limit"] == 64
    assert s["workspace_quota_mb"] == 32
    assert s["backend_name"] == "nsjail"
    # Started exactly once: a later exec reaches the same physical session.
    third = await run_exec(tools, query("workspace-a"), "echo third")
    assert third["ok"]
    again = await service.get_sessions(context("workspace-a"))
    assert [x["backend_session_id"] for x in again] == [s["backend_session_id"]]
    assert again[0]["created_at"] == s["created_at"]


async def test_ac02_entitlement_loss_revokes_and_closes(service, tools, entitlements):
    entitlements.set("workspace-a", revision=1)
    result = await run_exec(tools, query("workspace-a"), "echo kept > /tmp/marker; echo ok")
    assert result["ok"]
    assert len(await service.get_sessions(context("workspace-a"))) == 1
    assert (await runtime_status(service, "workspace-a"))["active_sessions"] == 1
    entitlements.set("workspace-a", revision=2, eligible=False)
    with pytest.raises(EntitlementUnavailableError):
        await run_exec(tools, query("workspace-a"), "echo denied")
    # LangBot only logs a failed revocation: boxd itself must have closed the session.
    assert (await runtime_status(service, "workspace-a"))["active_sessions"] == 0
    # Granted again at a later revision: a fresh sandbox, nothing of the old one's /tmp.
    entitlements.set("workspace-a", revision=3)
    fresh = await run_exec(tools, query("workspace-a"), "cat /tmp/marker 2>/dev/null || echo gone")
    assert fresh["stdout"].strip() == "gone"


async def test_ac03_two_workspaces_are_isolated(service, tools, entitlements):
    for ws in ("workspace-a", "workspace-b"):
        entitlements.set(ws)
    a = await run_exec(tools, query("workspace-a"), "echo secret-a > /workspace/mine.txt && cat /workspace/mine.txt")
    b = await run_exec(tools, query("workspace-b"), "ls -a /workspace; cat /workspace/mine.txt 2>/dev/null; true")
    assert a["session_id"] == "global" and b["session_id"] == "global"
    assert a["stdout"].strip() == "secret-a"
    assert "secret-a" not in b["stdout"] and "mine.txt" not in b["stdout"]
    sa = await service.get_sessions(context("workspace-a"))
    sb = await service.get_sessions(context("workspace-b"))
    assert len(sa) == 1 and len(sb) == 1
    assert sa[0]["backend_session_id"] != sb[0]["backend_session_id"]
    assert sa[0]["host_path"] != sb[0]["host_path"]
    assert "/tenants/ws-" in sa[0]["host_path"] and "/tenants/ws-" in sb[0]["host_path"]
    # Two physical sessions in boxd, one per workspace.
    assert (await runtime_status(service, "workspace-a"))["active_sessions"] == 1
    assert (await runtime_status(service, "workspace-b"))["active_sessions"] == 1


@pytest.mark.skipif(not HAS_RUNTIME_SKILLS, reason="this host keeps skills itself (test_cloud_skills_411.py)")
async def test_ac04_cloud_skills(service, entitlements):
    for ws in ("workspace-a", "workspace-b"):
        entitlements.set(ws)
    entitlements.set("workspace-free", eligible=False)
    a, b = context("workspace-a"), context("workspace-b")
    private = await service.create_skill(b, {"name": "private", "instructions": "Private instructions."})
    await service.create_skill(a, {"name": "runner", "instructions": "Run the project."})
    await service.write_skill_file(a, "runner", "scripts/main.py", "print('ok')\n")
    await service.write_skill_file(a, "runner", "requirements.txt", "\n")
    runner = await service.get_skill(a, "runner")
    assert runner["python_project"] is True
    result = await service.execute_tool(
        {
            "command": "python3 /workspace/.skills/runner/scripts/main.py; ls /workspace/.skills; "
            "touch /workspace/.skills/runner/x 2>/dev/null && echo writable || echo read-only",
            "workdir": "/workspace/.skills/runner",
        },
        query("workspace-a"),
        skill_name="runner",
    )
    assert result["ok"], result
    # Exactly the one skill, read-only, at its Cloud path.
    assert result["stdout"].split() == ["ok", "runner", "read-only"]
    with pytest.raises(BoxAdmissionError, match="Scanning arbitrary host"):
        await service.scan_skill_directory(a, private["package_root"])
    with pytest.raises(BoxAdmissionError, match="package_root is runtime-owned"):
        await service.create_skill(a, {"name": "stolen", "package_root": private["package_root"]})
    assert await service.get_skill(a, "private") is None
    with pytest.raises(EntitlementUnavailableError):
        await service.list_skills(context("workspace-free"))


async def test_ac05_forged_fields_never_reach_the_runtime(service, entitlements):
    """4.10 refuses them in its exec path; 4.11's exec needs a bound Box, so here they go
    to create_session, the call a Runner's acquire makes, which refuses them the same way
    (caller extra_mounts too: 4.11's own skill mounts never come from the caller)."""
    entitlements.set("workspace-a")
    q = query("workspace-a")
    forgeries = [
        ({"plan": "pro"}, "host-controlled"),
        ({"max_sessions": 8, "backend": "host"}, "host-controlled: backend, max_sessions"),
        ({"network": "on"}, "network access is disabled"),
        ({"session_id": "attacker"}, "session_id is runtime-owned"),
        ({"mount_path": "/mnt"}, "mount_path is runtime-owned"),
        ({"host_path": "/etc"}, "host_path is runtime-owned"),
        ({"extra_mounts": [{"host_path": "/etc", "mount_path": "/workspace/etc", "mode": "ro"}]},
         "additional host mounts are disabled"),
    ]
    for forged, message in forgeries:
        payload = {"cmd": "true", "session_id": "global"}
        payload.update(forged)
        with pytest.raises(BoxAdmissionError, match=message):
            if HAS_RUNNER_BINDING:
                await service.create_session(context("workspace-a"), payload)
            else:
                await service.execute_spec_payload(payload, q)
    with pytest.raises(BoxAdmissionError, match="Managed processes are disabled"):
        await service.start_managed_process(context("workspace-a"), "global", {"command": "sleep", "args": ["60"]})
    assert await service.get_sessions(context("workspace-a")) == []
    assert (await runtime_status(service, "workspace-a"))["active_sessions"] == 0


async def test_the_command_is_not_root_and_the_workspace_quota_is_hard(service, tools, entitlements):
    entitlements.set("workspace-a")
    q = query("workspace-a")
    who = await run_exec(tools, q, "id -u; cat /proc/self/uid_map")
    uid, inside, outside, count = who["stdout"].split()[:4]
    assert uid != "0"
    assert (inside, outside, count) == (uid, uid, "1")  # mapped onto the same host uid
    # 40 MiB into a 32 MiB workspace: the image is full before the write is done. LangBot
    # walks the tree after the exec; the file is removed in the same command.
    fill = await run_exec(tools, q, "dd if=/dev/zero of=/workspace/big bs=1M count=40 2>&1; rm -f /workspace/big")
    assert "No space left on device" in fill["stdout"], fill
