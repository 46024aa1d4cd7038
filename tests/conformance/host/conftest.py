"""LangBot's own host code in Cloud mode against a live boxd on real nsjail.

Only the app object, the entitlement provider (and the workspace binding the app
carries) are test doubles; BoxService, its connector and WebSocket client, the
EntitlementResolver and the admission controller are LangBot's, unpatched. Every test
gets a boxd of its own: grants, tombstones and fences persist inside one."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
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
from langbot.pkg.workspace.entities import WorkspaceExecutionBinding  # noqa: E402

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
    """One boxd process on nsjail, its data folder shared with LangBot's Core."""

    def __init__(self):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="boxd-host-"))
        self.host_root = os.path.join(self.dir, "box")
        self.default_workspace = os.path.join(self.host_root, "default")
        os.makedirs(self.default_workspace)
        config = {
            "server": {
                "listen": "127.0.0.1:0",
                "control_token": TOKEN,
                "trusted_instance_uuid": INSTANCE,
                "transfer_dir": os.path.join(self.dir, "transfers"),
            },
            "box": {"backend": "nsjail", "local": self.local(), "admission": ADMISSION},
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
            "allowed_mount_roots": [self.host_root],
        }

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
    config = {
        "box": {
            "enabled": True,
            "backend": "nsjail",
            # An endpoint: LangBot's WebSocket transport, the filesystem not shared.
            "runtime": {"endpoint": boxd.url},
            "local": boxd.local(),
            "admission": dict(ADMISSION),
        },
        "system": {"limitation": {}},
    }
    return types.SimpleNamespace(
        logger=logging.getLogger("langbot"),
        instance_config=types.SimpleNamespace(data=config),
        deployment=types.SimpleNamespace(mode="cloud", multi_workspace_enabled=True),
        workspace_service=Workspaces(),
        entitlement_resolver=EntitlementResolver(INSTANCE, provider),
    )


def context(workspace: str) -> ExecutionContext:
    return ExecutionContext(instance_uuid=INSTANCE, workspace_uuid=workspace, placement_generation=1)


_query_ids = iter(range(1, 1_000_000))


def query(workspace: str):
    """The pipeline query LangBot's tools receive, carrying its execution context."""
    q = types.SimpleNamespace(
        query_id=next(_query_ids),
        query_uuid=None,
        variables={},
        instance_uuid=INSTANCE,
        workspace_uuid=workspace,
        placement_generation=1,
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


@pytest_asyncio.fixture
async def service(boxd, entitlements):
    svc = BoxService(make_app(boxd, entitlements))
    await svc.initialize()
    yield svc
    await svc.shutdown()
