"""Starts the reference: LangBot's own Box runtime (`lbp box`, langbot-plugin's
`langbot_plugin.box.server.main`) on loopback, for the side-by-side benchmarks.

It is the shipped server, started the way the conformance suite starts it (the
`box` command's arguments as an argparse namespace: `lbp box --host 127.0.0.1
--ws-control-port PORT`), with one change: `BoxRuntime` in `langbot_plugin.box.server`
is replaced by a subclass that passes its own backend list, so that the benchmark
measures the runtime and not Docker:

  --backend scripted  a zero-cost backend shaped like boxd's scripted backend: a session
                      start is instant, an exec returns at once with exit 0 and the
                      command as its stdout (`echo X` gives X);
  --backend nsjail    the reference's own NsjailBackend with the given nsjail binary and
                      a private base_dir (its default directory is shared, and at start it
                      deletes other instances' sessions there).

  --admission         admission mode (`box.admission.required`); the zero-cost backend
                      then calls itself "nsjail" (the only backend the policy accepts) and
                      reports every strict isolation check as ready.
  --log-level L       INFO is the level as shipped (two INFO lines per exec); WARNING
                      silences them.
  --starts-file F     on SIGUSR1, writes the number of session starts the backend saw.

Usage: reference_box.py --port P --workdir DIR [--backend scripted|nsjail]
                        [--nsjail-bin PATH] [--admission] [--max-sessions N]
                        [--log-level INFO|WARNING] [--starts-file F]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import signal
import sys


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--backend", default="scripted", choices=["scripted", "nsjail"])
    p.add_argument("--nsjail-bin", default="nsjail")
    p.add_argument("--admission", action="store_true")
    p.add_argument("--max-sessions", type=int, default=5000)
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--starts-file", default="")
    a = p.parse_args()

    host_root = os.path.join(a.workdir, "box")
    os.makedirs(host_root, exist_ok=True)
    backend_name = "nsjail" if (a.backend == "nsjail" or a.admission) else "scripted"
    config: dict = {
        "backend": backend_name,
        "limits": {"max_sessions": a.max_sessions},
        "local": {"host_root": host_root},
    }
    if a.admission:
        config["admission"] = {
            "required": True, "max_sessions": 1, "max_managed_processes": 0,
            "max_grant_ttl_sec": 300, "max_timeout_sec": 60, "readiness_cache_sec": 15,
        }
    # BoxRuntime reads LANGBOT_BOX_CONFIG in its constructor, as when LangBot starts it.
    os.environ["LANGBOT_BOX_CONFIG"] = json.dumps(config)

    from langbot_plugin.box import server
    from langbot_plugin.box.backend import BaseSandboxBackend
    from langbot_plugin.box.models import (
        BoxExecutionResult, BoxExecutionStatus, BoxSessionInfo,
    )
    from langbot_plugin.box.runtime import BoxRuntime

    starts = [0]

    class ZeroCostBackend(BaseSandboxBackend):
        """boxd's scripted backend, in the reference's backend interface."""

        name = backend_name

        async def is_available(self) -> bool:
            return True

        async def get_readiness(self, *, workspace_path=None, strict=False) -> dict:
            if not a.admission:
                return await super().get_readiness(workspace_path=workspace_path, strict=strict)
            return {k: True for k in (
                "available", "cgroup_v2", "namespace_isolation", "mount_isolation",
                "network_isolation", "hard_workspace_quota", "hard_skill_storage_quota",
                "bounded_ephemeral_storage", "inode_quota")}

        async def start_session(self, spec) -> BoxSessionInfo:
            starts[0] += 1
            now = dt.datetime.now(dt.timezone.utc)
            return BoxSessionInfo(
                session_id=spec.session_id, backend_name=self.name,
                backend_session_id=spec.session_id, image=spec.image, network=spec.network,
                host_path=spec.host_path, host_path_mode=spec.host_path_mode,
                mount_path=spec.mount_path, cpus=spec.cpus, memory_mb=spec.memory_mb,
                pids_limit=spec.pids_limit, read_only_rootfs=spec.read_only_rootfs,
                workspace_quota_mb=spec.workspace_quota_mb, persistent=spec.persistent,
                created_at=now, last_used_at=now)

        async def exec(self, session, spec) -> BoxExecutionResult:
            cmd = spec.cmd
            out = cmd[5:] if cmd.startswith("echo ") else cmd
            return BoxExecutionResult(
                session_id=session.session_id, backend_name=self.name,
                status=BoxExecutionStatus.COMPLETED, exit_code=0, stdout=out, stderr="",
                duration_ms=0)

        async def stop_session(self, session) -> None:
            return None

    def make_backends(logger):
        if a.backend == "nsjail":
            from langbot_plugin.box.nsjail_backend import NsjailBackend
            base = os.path.join(a.workdir, "nsjail")
            os.makedirs(base, exist_ok=True)
            return [NsjailBackend(logger, nsjail_bin=a.nsjail_bin, base_dir=base)]
        return [ZeroCostBackend(logger)]

    class BenchRuntime(BoxRuntime):
        def __init__(self, logger, **kwargs):
            kwargs["backends"] = make_backends(logger)
            super().__init__(logger, **kwargs)

    server.BoxRuntime = BenchRuntime

    shipped_logging = server.configure_process_logging
    level = getattr(logging, a.log_level.upper())

    def configure_logging(**kwargs):
        shipped_logging(**kwargs)
        logging.getLogger().setLevel(level)

    server.configure_process_logging = configure_logging

    if a.starts_file:
        def dump_starts(*_):
            with open(a.starts_file, "w") as f:
                f.write(str(starts[0]))
        signal.signal(signal.SIGUSR1, dump_starts)

    server.main(argparse.Namespace(host="127.0.0.1", stdio_control=False,
                                   ws_control_port=a.port))


if __name__ == "__main__":
    sys.exit(main())
