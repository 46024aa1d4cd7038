"""LangBot 4.11.2 in Cloud mode on real nsjail: what its own host does with skills and
what it reads back about capacity and storage. The skill is published through the
host's own SkillRepository (the SDK's SkillStore) at its default root,
<box host_root>/skills, the same host_root boxd has (or, in the second run, at a
skills.root outside host_root); activated the way the host's
`activate` tool records it; and reaches the sandbox only as the read-only,
content-addressed mount the host composes (build_execution_mounts) on the Runner's
acquire and on every exec of the native tool."""

from __future__ import annotations

import os

import pytest

from conftest import HAS_RUNNER_BINDING, INSTANCE, bind_box, context, query, run_exec, skill_repository

pytestmark = pytest.mark.skipif(
    not HAS_RUNNER_BINDING, reason="the host's own skill store and the Runner's Box binding are LangBot 4.11's"
)

SKILL_TEXT = "hello from the skill\n"


async def publish_skill(repository, workspace: str, name: str = "greeter") -> dict:
    """Create a skill and publish one more file, as the host's management API does;
    returns the snapshot the `activate` tool pins (get_skill(snapshot=True))."""
    ctx = context(workspace)
    created = await repository.create_skill(ctx, {"name": name, "description": "Greets.", "instructions": "Greet."})
    await repository.write_skill_file(ctx, name, "data/hello.txt", SKILL_TEXT, base_revision=created["revision"])
    return await repository.get_skill(ctx, name, snapshot=True)


def activate(q, snapshot: dict) -> None:
    """What the host's `activate` tool records for the run once the pin is checked."""
    from langbot.pkg.provider.tools.loaders import skill as skill_loader

    skill_loader.register_activated_skill(q, snapshot)


async def read_activated_skill(tools, q, root: str) -> None:
    """Inside the run's sandbox: the skill's file is readable at `root`, nothing can be
    written there, and the mount at `root` is read-only in /proc/self/mountinfo."""
    result = await run_exec(
        tools,
        q,
        f"cat {root}/data/hello.txt; touch {root}/x 2>/dev/null && echo writable || echo read-only; "
        "cat /proc/self/mountinfo",
    )
    assert result["ok"], result
    lines = result["stdout"].splitlines()
    assert lines[:2] == [SKILL_TEXT.strip(), "read-only"]
    assert "ro" in mount_options("\n".join(lines[2:]), root)


def mount_options(mountinfo: str, target: str) -> set[str]:
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[4] == target:
            return set(fields[5].split(","))
    raise AssertionError(f"{target} is not a mount point:\n{mountinfo}")


async def test_the_host_skill_store_is_unchanged_after_a_box_starts(service, entitlements, boxd):
    """The host's default skill root is <host_root>/skills/tenants/ws-…, the very folder
    boxd once covered with its own skill-storage image while a session existed: the
    published revision must stay listed and readable on the host once a Box runs."""
    entitlements.set("workspace-a")
    repository = skill_repository(service.ap)
    snapshot = await publish_skill(repository, "workspace-a")
    store = repository.storage_root(context("workspace-a"))
    assert store.startswith(os.path.join(boxd.host_skills_root(), "tenants", "ws-"))
    assert snapshot["package_root"].startswith(store + "/.langbot-skill-store/revisions/")
    # A Box starts for the Workspace (no skill activated in this run).
    await bind_box(service, query("workspace-a"))
    assert (await service.get_status(context("workspace-a")))["active_sessions"] == 1
    assert os.path.isfile(snapshot["manifest_path"])
    assert [s["name"] for s in await repository.list_skills(context("workspace-a"))] == ["greeter"]
    read = await repository.read_skill_file(context("workspace-a"), "greeter", "data/hello.txt")
    assert read["content"] == SKILL_TEXT
    again = await repository.get_skill(context("workspace-a"), "greeter", snapshot=True)
    assert again["revision"] == snapshot["revision"]


async def test_an_activated_skill_is_read_only_at_its_artifact_path(service, tools, entitlements):
    """Readable at /opt/langbot-artifacts/<hex>/…, not writable, its mount read-only in
    /proc/self/mountinfo; another Workspace sees neither the skill nor the mount."""
    for ws in ("workspace-a", "workspace-b"):
        entitlements.set(ws)
    repository = skill_repository(service.ap)
    snapshot = await publish_skill(repository, "workspace-a")
    digest = snapshot["revision"].removeprefix("sha256:")
    root = f"/opt/langbot-artifacts/{digest}"
    q = query("workspace-a")
    activate(q, snapshot)
    await read_activated_skill(tools, q, root)
    # The same run again on the warm session: the mount travels with every exec.
    again = await run_exec(tools, q, f"ls {root}/data")
    assert again["stdout"].split() == ["hello.txt"]
    # Another Workspace: no such skill in its store, nothing under the artifact root
    # (boxd binds an empty per-session view there; no artifact is mounted in it).
    assert await repository.get_skill(context("workspace-b"), "greeter") is None
    other = await run_exec(
        tools, query("workspace-b"), "ls -A /opt/langbot-artifacts 2>&1; grep -c ' /opt/langbot-artifacts/' /proc/self/mountinfo; true"
    )
    assert digest not in other["stdout"]
    assert other["stdout"].split() == ["0"]


async def test_sessions_carry_the_policy_not_the_callers_values(service, tools, entitlements):
    """The Runner may only choose an image; LangBot refuses the rest host-side, and what
    boxd holds is the Cloud policy."""
    from langbot.pkg.box.runner import RunnerBoxService
    from langbot_plugin.box.errors import BoxValidationError

    entitlements.set("workspace-a")
    q = query("workspace-a")
    with pytest.raises(BoxValidationError, match="resource limits are Host-owned"):
        await RunnerBoxService(service).acquire(context("workspace-a"), {"reuse_key": "global", "options": {"cpus": 4}}, q)
    with pytest.raises(BoxValidationError, match="global Box reuse key"):
        await RunnerBoxService(service).acquire(context("workspace-a"), {"reuse_key": "mine"}, q)
    assert (await service.get_status(context("workspace-a")))["active_sessions"] == 0
    await run_exec(tools, q, "true")
    [s] = await service.get_sessions(context("workspace-a"))
    assert (s["session_id"], s["persistent"], s["network"]) == ("global", True, "off")
    assert (s["cpus"], s["memory_mb"], s["pids_limit"], s["workspace_quota_mb"]) == (0.5, 256, 64, 32)
    assert s["read_only_rootfs"] is True


async def test_capacity_counts_the_global_session(service, tools, entitlements):
    """box_status.capacity, as 4.11's Runner reads it (RunnerBoxService.status)."""
    from langbot.pkg.box.runner import RunnerBoxService

    entitlements.set("workspace-a")
    runner = RunnerBoxService(service)
    before = await runner.status(context("workspace-a"))
    assert (before["limit"], before["used"], before["remaining"]) == (1, 0, 1)
    assert before["available"] is True and before["required_reuse_key"] == "global"
    await run_exec(tools, query("workspace-a"), "true")
    after = await runner.status(context("workspace-a"))
    assert (after["limit"], after["used"], after["remaining"]) == (1, 1, 0)


async def test_storage_analysis_answers(service, tools, entitlements):
    """box_get_storage_analysis through BoxService, in the reference's shape."""
    entitlements.set("workspace-a")
    await run_exec(tools, query("workspace-a"), "echo data > /workspace/f")
    analysis = await service.get_storage_analysis(context("workspace-a"))
    assert set(analysis) >= {"size_bytes", "directories", "active_sessions", "managed_processes"}
    assert analysis["active_sessions"] == 1 and analysis["managed_processes"] == 0
    assert isinstance(analysis["size_bytes"], int) and analysis["size_bytes"] >= 0
    for entry in analysis["directories"]:
        assert {"key", "path", "kind", "exists", "size_bytes", "scope"} <= set(entry)
    assert analysis["size_bytes"] == sum(e["size_bytes"] for e in analysis["directories"] if e["kind"] == "root")
