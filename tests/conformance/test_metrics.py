"""GET /metrics after a known workload, read with Prometheus's own text parser: the
counters equal what was done, the scrape needs the control token, and no label carries a
workspace."""

from __future__ import annotations

import datetime as dt
import urllib.error
import urllib.request

import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from langbot_plugin.box.errors import BoxAdmissionError
from langbot_plugin.box.models import BoxSpec, SandboxAdmissionGrant, SandboxAdmissionRevocation
from langbot_plugin.entities.io.context import ActionContext

from conftest import ADMISSION_BOX, INSTANCE, TOKEN, Boxd, BoxConnection

WORKSPACE = "metrics-ws-7f3a"
EXECS = 5
REFUSALS = 3


@pytest.fixture(scope="module")
def metrics_boxd():
    # Its own boxd: the counters start at zero.
    boxd = Boxd(ADMISSION_BOX, testing=True)
    yield boxd
    boxd.stop()


def metrics_url(boxd: Boxd) -> str:
    return boxd.url[: -len("/rpc/ws")].replace("ws://", "http://") + "/metrics"


def scrape(boxd: Boxd, headers: dict[str, str]) -> tuple[str, str]:
    req = urllib.request.Request(metrics_url(boxd), headers=headers)
    with urllib.request.urlopen(req, timeout=10) as res:
        return res.headers["Content-Type"], res.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(values: dict, name: str, **labels) -> float:
    return values.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_a_known_workload(metrics_boxd):
    c = ActionContext(instance_uuid=INSTANCE, workspace_uuid=WORKSPACE, placement_generation=1)
    async with BoxConnection(metrics_boxd.url, TOKEN, INSTANCE) as conn:
        box = conn.client
        for _ in range(REFUSALS):
            with pytest.raises(BoxAdmissionError, match="Sandbox admission grant is missing"):
                await box.execute(BoxSpec(session_id="global", cmd="echo x"), action_context=c)
        grant = SandboxAdmissionGrant(
            instance_uuid=INSTANCE, workspace_uuid=WORKSPACE, execution_generation=1,
            entitlement_revision=1,
            expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120),
            max_sessions=1, max_managed_processes=0,
        )
        await box.upsert_sandbox_admission_grant(grant)
        for i in range(EXECS):
            result = await box.execute(BoxSpec(session_id="global", cmd=f"echo {i}"), action_context=c)
            assert result.stdout == str(i)

        # A frame that is no request, then a ping on the same socket: once the ping is
        # answered, the bad frame has been counted.
        headers = {"X-LangBot-Box-Control-Token": TOKEN, "X-LangBot-Instance-Id": INSTANCE}
        async with websockets.connect(metrics_boxd.url, additional_headers=headers) as ws:
            await ws.send("this is not json")
            await ws.send('{"seq_id": 1, "action": "__ping", "data": {}}')
            assert '"code":0' in (await ws.recv()).replace(" ", "")
            # Refused envelopes: an unknown action, and a request without its data.
            await ws.send('{"seq_id": 2, "action": "box_no_such_action", "data": {}}')
            assert "ValueError: Action box_no_such_action not found" in await ws.recv()
            await ws.send('{"seq_id": 3, "action": "box_status"}')
            assert "ValidationError" in await ws.recv()

        content_type, text = scrape(metrics_boxd, {"Authorization": f"Bearer {TOKEN}"})
        assert content_type.startswith("text/plain; version=0.0.4")
        live = samples(text)
        assert value(live, "boxd_requests_total", action="box_exec", result="ok") == EXECS
        assert value(live, "boxd_requests_total", action="box_exec", result="BoxAdmissionError") == REFUSALS
        assert value(live, "boxd_request_duration_seconds_count", action="box_exec") == EXECS + REFUSALS
        assert value(live, "boxd_admission_decisions_total", decision="admit", reason="grant") == EXECS
        assert value(live, "boxd_admission_decisions_total", decision="refuse",
                     reason="sandbox_admission_grant_is_missing") == REFUSALS
        assert value(live, "boxd_sessions", state="idle", backend="scripted") == 1
        assert value(live, "boxd_session_starts_total", backend="scripted", result="ok") == 1
        assert value(live, "boxd_decode_errors_total") == 3
        assert value(live, "boxd_requests_total", action="unknown", result="ValueError") == 1
        assert value(live, "boxd_requests_total", action="unknown", result="ValidationError") == 1
        assert value(live, "boxd_revocations_total") == 0
        assert value(live, "boxd_connections") >= 1
        assert value(live, "boxd_pool_threads") >= 1
        assert value(live, "process_resident_memory_bytes") > 0
        # Tenants stay out of the labels.
        assert WORKSPACE not in text and "ws-" not in text

        await box.revoke_sandbox_admission_grant(
            SandboxAdmissionRevocation(instance_uuid=INSTANCE, workspace_uuid=WORKSPACE,
                                       entitlement_revision=1))
        # The control-token header works too.
        _, text = scrape(metrics_boxd, {"X-LangBot-Box-Control-Token": TOKEN})
        after = samples(text)
        assert value(after, "boxd_revocations_total") == 1
        # Stopped before the revocation's reply.
        assert value(after, "boxd_sessions", state="idle", backend="scripted") == 0
        assert value(after, "boxd_sessions", state="running", backend="scripted") == 0


def test_metrics_need_the_control_token(metrics_boxd):
    for headers in ({}, {"Authorization": "Bearer " + "x" * 40}, {"Authorization": TOKEN},
                    {"X-LangBot-Box-Control-Token": "y" * 40}):
        with pytest.raises(urllib.error.HTTPError) as err:
            scrape(metrics_boxd, headers)
        assert err.value.code == 401
    req = urllib.request.Request(metrics_url(metrics_boxd), method="POST", data=b"",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 405


async def test_a_new_workspaces_first_use_adopts_a_warm_sandbox(bwrap_boxd, sandboxed_box):
    """The default warm pool on bwrap: a first use in a new workspace takes a sandbox
    started ahead (or the one starting), and the scrape says so."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    before = samples(scrape(bwrap_boxd, auth)[1])
    c = ActionContext(instance_uuid=INSTANCE, workspace_uuid="warm-pool-ws", placement_generation=1)
    first = await sandboxed_box.execute(BoxSpec(session_id="warm", cmd="id -u; ls -a /workspace"),
                                        action_context=c)
    assert first.exit_code == 0 and int(first.stdout.split()[0]) >= 0x70000000
    assert ".skills" in first.stdout.split()
    after = samples(scrape(bwrap_boxd, auth)[1])
    adopted = "boxd_warm_pool_takes_total"
    assert value(after, adopted, result="adopted") == value(before, adopted, result="adopted") + 1
    # Without a host path each session has a folder of its own: a second one adopts too,
    # and the two never share a uid.
    second = await sandboxed_box.execute(BoxSpec(session_id="other", cmd="id -u"), action_context=c)
    assert second.stdout != first.stdout.split()[0]
    again = samples(scrape(bwrap_boxd, auth)[1])
    assert value(again, adopted, result="adopted") == value(after, adopted, result="adopted") + 1
