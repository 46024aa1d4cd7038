"""LangBot's own host in standard (single-Workspace, non-Cloud) mode against boxd on
bwrap, for both host generations: BoxService with deployment.multi_workspace_enabled
off, so no admission, no entitlement and no global session; LangBot's native exec tool
picks the session itself (4.10: the pipeline's template, `{launcher_type}_{launcher_id}`;
4.11: the Runner's Box, `runner-<sha256(reuse key)>`). 4.11 also mounts an activated
skill from its own store, which standard mode allows."""

from __future__ import annotations

import hashlib
import os

import pytest
import pytest_asyncio

from conftest import HAS_RUNNER_BINDING, NativeToolLoader, context, query, run_exec, skill_repository


@pytest_asyncio.fixture
async def std_tools(standard_service):
    return NativeToolLoader(standard_service.ap)


def expected_session(launcher_id: str) -> str:
    if HAS_RUNNER_BINDING:
        return "runner-" + hashlib.sha256(f"conversation-{launcher_id}".encode()).hexdigest()
    return f"person_{launcher_id}"


async def test_standard_mode_starts_on_bwrap(standard_service, std_tools):
    assert standard_service.available
    assert standard_service.managed_admission_required is False
    status = await standard_service.get_backend_status()
    assert status["backend"]["name"] == "bwrap" and status["available"] is True
    # The native tools offer themselves: the backend is ready.
    assert {t.name for t in await std_tools.get_tools()} >= {"exec", "read", "write"}


async def test_a_conversation_keeps_its_sandbox(standard_service, std_tools):
    """One session per conversation, warm across calls, not root, with the network of
    the host's profile: its `default` profile has it off in 4.10 (SDK 0.5.8) and on in
    4.11 (SDK 0.7.16), and boxd gives the sandbox exactly that."""
    q = query("workspace-a", launcher_id="1")
    first = await run_exec(std_tools, q, "echo kept > /workspace/f; echo warm > /tmp/t; id -u")
    assert first["ok"], first
    assert first["backend"] == "bwrap"
    assert first["session_id"] == expected_session("1")
    assert first["stdout"].strip() != "0"
    again = await run_exec(std_tools, q, "cat /workspace/f /tmp/t; awk -F: 'NR>2{print $1}' /proc/net/dev | tr -d ' '")
    words = again["stdout"].split()
    assert words[:3] == ["kept", "warm", "lo"]
    [s] = await standard_service.get_sessions(context("workspace-a"))
    assert s["network"] == standard_service.profile.network.value
    if s["network"] == "off":
        assert words[3:] == []  # loopback alone
    else:
        assert words[3:] != []
    assert s["session_id"] == expected_session("1")
    assert s["backend_name"] == "bwrap"
    # The Workspace's own folder under default_workspace/tenants, as the host chose it.
    assert s["host_path"].startswith(os.path.join(standard_service.default_workspace, "tenants", "ws-"))


async def test_two_conversations_get_two_sandboxes(standard_service, std_tools):
    """Two conversations: two sessions, each with its own /tmp; /workspace is the one
    Workspace folder of a standard install, shared by design."""
    a = await run_exec(std_tools, query("workspace-a", launcher_id="1"), "echo a > /tmp/mine; echo shared > /workspace/s")
    b = await run_exec(std_tools, query("workspace-a", launcher_id="2"), "cat /tmp/mine 2>/dev/null || echo none; cat /workspace/s")
    assert a["ok"] and b["ok"]
    assert b["stdout"].split() == ["none", "shared"]
    sessions = await standard_service.get_sessions(context("workspace-a"))
    assert sorted(s["session_id"] for s in sessions) == sorted([expected_session("1"), expected_session("2")])
    assert len({s["backend_session_id"] for s in sessions}) == 2


@pytest.mark.skipif(not HAS_RUNNER_BINDING, reason="the host's own skill store is LangBot 4.11's")
async def test_an_activated_skill_is_read_only_in_standard_mode(standard_service, std_tools):
    """The skill published in the host's default store (<host_root>/skills) and
    activated for the run: readable at /opt/langbot-artifacts/<hex>, not writable, its
    mount read-only; the host's store unchanged while the Box runs."""
    from test_cloud_skills_411 import activate, publish_skill, read_activated_skill

    repository = skill_repository(standard_service.ap)
    snapshot = await publish_skill(repository, "workspace-a")
    root = "/opt/langbot-artifacts/" + snapshot["revision"].removeprefix("sha256:")
    q = query("workspace-a", launcher_id="1")
    activate(q, snapshot)
    await read_activated_skill(std_tools, q, root)
    assert os.path.isfile(snapshot["manifest_path"])
    assert [s["name"] for s in await repository.list_skills(context("workspace-a"))] == ["greeter"]
    # Another conversation without the activation: no artifact there.
    other = await run_exec(std_tools, query("workspace-a", launcher_id="2"), "ls -A /opt/langbot-artifacts 2>&1; true")
    assert snapshot["revision"].removeprefix("sha256:") not in other["stdout"]
