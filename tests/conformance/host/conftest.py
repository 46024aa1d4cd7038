"""LangBot's own host code against a live boxd: in Cloud mode on real nsjail, and in
standard (single-Workspace) mode on bwrap. Runs with either host generation's
environment (run.sh picks it): LangBot 4.10.11 with SDK 0.5.8, or LangBot 4.11.2 with
SDK 0.7.16; the tests tell them apart by what the installed code has, not by version.

Only the app object, the entitlement provider (and the workspace binding the app
carries) are test doubles; BoxService, its connector and WebSocket client, the
EntitlementResolver and the admission controller, the native exec tool and (4.11.2)
the Runner Box binding and the SkillRepository are LangBot's, unpatched. Every test
gets a boxd of its own: grants, tombstones and fences persist inside one."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import types

import pytest
import pytest_asyncio

TOKEN = "host-conformance-token-0123456789abcdef0123"
INSTANCE = "instance-a"

# Read by LangBot's connector when BoxService is constructed.
os.environ["LANGBOT_BOX_CONTROL_TOKEN"] = TOKEN

from langbot.pkg.api.http.context import ExecutionContext  # noqa: E402
from langbot.pkg.box.service import BoxService  # noqa: E402
from langbot.pkg.cloud.entitlements import EntitlementResolver, EntitlementSnapshot  # noqa: E402
from langbot.pkg.provider.tools.loaders.native import NativeToolLoader  # noqa: E402
from langbot.pkg.workspace.entities import WorkspaceExecutionBinding  # noqa: E402

# LangBot 4.11's Runner-owned Box binding (pkg/box/runner.py): its tools need a Box bound
# to the run; 4.10 has neither the module nor the requirement.
HAS_RUNNER_BINDING = importlib.util.find_spec("langbot.pkg.box.runner") is not None
# 4.10's BoxService keeps skills in the runtime (the SDK's skill actions); 4.11 keeps
# them in its own SkillRepository and mounts published revisions read-only.
HAS_RUNTIME_SKILLS = hasattr(BoxService, "create_skill")

# admission.md §5: the Cloud stack's policy, sent by LangBot in box_init and given to
# boxd at start alike.
ADMISSION = {
    "required": True,
    "logical_session_id": "global",
    "required_backend": "nsjail",
    "max_sessions": 1,
    "max_managed_processes": 0,
    "max_grant_ttl_sec": 300,
    "max_timeout_sec": 60,
    "cpus": 0.5,
    "memory_mb": 256,
    "pids_limit": 64,
    "read_only_rootfs": True,
    "workspace_quota_mb": 32,
    "readiness_cache_sec": 0,
}


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="real nsjail sandboxes need root, as CI runs")
        for item in items:
            item.add_marker(skip)


class Boxd:
    """One boxd process, its data folder shared with LangBot's Core: Cloud (admission
    on nsjail) by default, or standard mode on another backend (bwrap)."""

    def __init__(self, backend: str = "nsjail", cloud: bool = True):
        self.backend = backend
        self.cloud = cloud
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="boxd-host-"))
        self.host_root = os.path.join(self.dir, "box")
        self.default_workspace = os.path.join(self.host_root, "default")
        os.makedirs(self.default_workspace)
        # BOXRT_HOST_SKILLS_ROOT=outside: LangBot's skills.root, an absolute path outside
        # host_root (boxd never receives it: its mount rules go by the revisions' layout).
        self.skills_root = None
        if os.environ.get("BOXRT_HOST_SKILLS_ROOT") == "outside":
            self.skills_root = os.path.join(self.dir, "skills-elsewhere")
            os.makedirs(self.skills_root)
        box = {"backend": backend, "local": self.local()}
        if cloud:
            box["admission"] = ADMISSION
        config = {
            "server": {
                "listen": "127.0.0.1:0",
                "control_token": TOKEN,
                "trusted_instance_uuid": INSTANCE,
                "transfer_dir": os.path.join(self.dir, "transfers"),
            },
            "box": box,
        }
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log = open(os.path.join(self.dir, "boxd.log"), "w")
        self.proc = subprocess.Popen(
            [os.environ["BOXD"], "--config", path], stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        line = self.proc.stdout.readline()
        if not line.startswith("boxd listening on "):
            self.stop()
            raise RuntimeError(f"boxd did not start: {line!r}; log in {self.log.name}")
        # LangBot's connector takes the runtime's base URL and adds /rpc/ws itself.
        self.url = line.split()[-1]

    def local(self) -> dict:
        return {
            "host_root": self.host_root,
            "default_workspace": self.default_workspace,
            "allowed_mount_roots": [self.host_root] + ([self.skills_root] if self.skills_root else []),
        }

    def host_skills_root(self) -> str:
        """Where LangBot 4.11's SkillRepository keeps its store: skills.root when set,
        else its default, <host_root>/skills."""
        return self.skills_root or os.path.join(self.host_root, "skills")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Entitlements:
    """The entitlement provider LangBot's resolver asks (the test double)."""

    def __init__(self):
        self.snapshots: dict[str, EntitlementSnapshot] = {}

    def set(self, workspace: str, revision: int = 1, eligible: bool = True) -> None:
        self.snapshots[workspace] = EntitlementSnapshot(
            instance_uuid=INSTANCE,
            workspace_uuid=workspace,
            entitlement_revision=revision,
            status="active",
            not_before=1,
            expires_at=4_000_000_000,
            features={"managed_sandbox": eligible},
            limits={"managed_sandbox_sessions": 1 if eligible else 0},
        )

    async def get_workspace_entitlement(self, workspace_uuid: str) -> EntitlementSnapshot:
        return self.snapshots[workspace_uuid]


class Workspaces:
    """The app's workspace service: every workspace active at generation 1."""

    instance_uuid = INSTANCE

    async def get_execution_binding(self, workspace_uuid, *, expected_generation=None):
        return WorkspaceExecutionBinding(
            instance_uuid=INSTANCE,
            workspace_uuid=workspace_uuid,
            placement_generation=1,
            write_fenced=False,
            state="active",
        )


def make_app(boxd: Boxd, provider: Entitlements):
    """The app object (the test double). BoxService takes its mode from
    deployment.multi_workspace_enabled alone: True is Cloud (admission, the global
    session, the policy), False is the standard single-Workspace mode. No skills.root
    unless the run asks for one outside host_root (Boxd.skills_root): 4.11's
    SkillRepository then keeps its store under box.local.host_root/skills, its default,
    the same host_root boxd has."""
    box = {
        "enabled": True,
        "backend": boxd.backend,
        # An endpoint: LangBot's WebSocket transport, the filesystem not shared.
        "runtime": {"endpoint": boxd.url},
        "local": boxd.local(),
    }
    if boxd.cloud:
        box["admission"] = dict(ADMISSION)
    config = {"box": box, "system": {"limitation": {}}}
    if boxd.skills_root:
        config["skills"] = {"root": boxd.skills_root}
    return types.SimpleNamespace(
        logger=logging.getLogger("langbot"),
        instance_config=types.SimpleNamespace(data=config),
        deployment=types.SimpleNamespace(
            mode="cloud" if boxd.cloud else "oss", multi_workspace_enabled=boxd.cloud
        ),
        workspace_service=Workspaces(),
        entitlement_resolver=EntitlementResolver(INSTANCE, provider),
    )


def skill_repository(app):
    """LangBot 4.11's own SkillRepository (pkg/skill/repository.py) over the SDK's
    SkillStore. Loaded without pkg/skill/__init__.py, which imports the SkillManager and
    through it the whole Core application (every platform adapter, RAG, vector stores);
    the module itself is LangBot's, unpatched."""
    name = "langbot.pkg.skill"
    if name not in sys.modules:
        import langbot.pkg

        package = types.ModuleType(name)
        package.__path__ = [os.path.join(os.path.dirname(langbot.pkg.__file__), "skill")]
        sys.modules[name] = package
    from langbot.pkg.skill.repository import SkillRepository

    return SkillRepository(app)


def context(workspace: str) -> ExecutionContext:
    return ExecutionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=1)


_query_ids = iter(range(1, 1_000_000))


def query(workspace: str, launcher_id: str = "1"):
    """The pipeline query LangBot's tools receive, carrying its execution context (and,
    for the standard mode's per-conversation session, its launcher)."""
    q = types.SimpleNamespace(
        query_id=next(_query_ids),
        query_uuid=None,
        variables={},
        instance_uuid=INSTANCE,
        workspace_uuid=workspace,
        placement_generation=1,
        launcher_type="person",
        launcher_id=launcher_id,
        sender_id=launcher_id,
        pipeline_config={},
    )
    q._execution_context = context(workspace)
    return q


@pytest.fixture
def boxd():
    b = Boxd()
    yield b
    b.stop()


@pytest.fixture
def entitlements():
    return Entitlements()


async def started_service(boxd, entitlements):
    """LangBot's BoxService over `boxd`, initialised, and known to the app as its own."""
    app = make_app(boxd, entitlements)
    svc = BoxService(app)
    app.box_service = svc
    await svc.initialize()
    return svc


@pytest_asyncio.fixture
async def service(boxd, entitlements):
    svc = await started_service(boxd, entitlements)
    yield svc
    await svc.shutdown()


@pytest.fixture
def tools(service):
    """LangBot's native sandbox tools (exec, read, ...) over the app's BoxService."""
    return NativeToolLoader(service.ap)


@pytest.fixture
def bwrap_boxd():
    if not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.skip("the standard-mode suite needs bubblewrap")
    b = Boxd(backend="bwrap", cloud=False)
    yield b
    b.stop()


@pytest_asyncio.fixture
async def standard_service(bwrap_boxd, entitlements):
    svc = await started_service(bwrap_boxd, entitlements)
    yield svc
    await svc.shutdown()


async def bind_box(service, q, reuse_key: str | None = None) -> dict:
    """LangBot 4.11's Runner acquiring a run's Box and binding it to the run
    (RunnerBoxService in pkg/box/runner.py): reuse key `global` in Cloud, as the host
    demands, else one per conversation. The acquire creates the session with the
    run's activated skills as read-only mounts."""
    from langbot.pkg.box.runner import RunnerBoxService

    runner = RunnerBoxService(service)
    if reuse_key is None:
        reuse_key = "global" if service.managed_admission_required else f"conversation-{q.launcher_id}"
    box = await runner.acquire(q._execution_context, {"reuse_key": reuse_key}, q)
    await runner.bind(q._execution_context, q, f"run-{q.query_id}", box["id"])
    return box


async def run_exec(tools, q, command: str, **parameters) -> dict:
    """One agent `exec` call as LangBot makes it, through its native exec tool. 4.11
    first has the Runner bind the run's Box (bind_box), unless the run has one; 4.10's
    tool takes the session from the query."""
    if HAS_RUNNER_BINDING and getattr(q, "_box_binding", None) is None:
        await bind_box(tools.ap.box_service, q)
    return await tools.invoke_tool("exec", {"command": command, **parameters}, q)
