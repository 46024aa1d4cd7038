"""The envelope, frame for frame, against LangBot's own Box server.

Starts the reference server shipped in the pinned langbot-plugin (what `lbp box` runs,
langbot_plugin.box.server.main, started directly: the CLI module imports every other
command's dependencies) and a boxd,
sends each frame below to both (one connection per frame) and compares every reply.
The frames are the edges of the envelope: duplicate keys, numbers only Python's json
reads, lax integers, unpaired surrogates, wrong types, several errors at once.

Deliberate differences (docs/protocol-notes.md, "Envelope"):
- a context of the wrong shape: both reply a ValidationError, boxd in its own words;
- a seq_id that is a list or an object: the reference drops the connection (it cannot
  use the value as a key), boxd replies the validation error;
- an integer beyond 64 bits inside the context: boxd refuses it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import websockets

from conftest import TOKEN, Boxd

SENTINEL = '{"seq_id":-424242,"action":"__sentinel__","data":{}}'

FRAMES = [
  ('dup_action', '{"seq_id":1,"action":"box_health","action":"__ping","data":{}}'),
  ('dup_action_rev', '{"seq_id":1,"action":"__ping","action":"nope","data":{}}'),
  ('dup_seq', '{"seq_id":1,"seq_id":2,"action":"__ping","data":{}}'),
  ('dup_data', '{"seq_id":3,"action":"__ping","data":5,"data":{}}'),
  ('dup_data2', '{"seq_id":4,"action":"__ping","data":{},"data":5}'),
  ('dup_context', '{"seq_id":8,"action":"box_status","data":{},"context":{"instance_uuid":"a","workspace_uuid":"w"},"context":5}'),
  ('dup_context_null', '{"seq_id":8,"action":"__ping","data":{},"context":5,"context":null}'),
  ('big_seq', '{"seq_id":123456789012345678901234567890,"action":"__ping","data":{}}'),
  ('neg_big_seq', '{"seq_id":-123456789012345678901234567890,"action":"__ping","data":{}}'),
  ('int64_min_minus', '{"seq_id":-9223372036854775809,"action":"__ping","data":{}}'),
  ('uint64_max', '{"seq_id":18446744073709551615,"action":"__ping","data":{}}'),
  ('uint64_max_plus', '{"seq_id":18446744073709551616,"action":"__ping","data":{}}'),
  ('float_seq', '{"seq_id":1.5,"action":"__ping","data":{}}'),
  ('float_whole', '{"seq_id":1.0,"action":"__ping","data":{}}'),
  ('float_exp', '{"seq_id":1e2,"action":"__ping","data":{}}'),
  ('float_huge_whole', '{"seq_id":1e300,"action":"__ping","data":{}}'),
  ('neg_zero', '{"seq_id":-0,"action":"__ping","data":{}}'),
  ('neg_zero_float', '{"seq_id":-0.0,"action":"__ping","data":{}}'),
  ('huge_exp', '{"seq_id":1e400,"action":"__ping","data":{}}'),
  ('neg_huge_exp', '{"seq_id":-1e400,"action":"__ping","data":{}}'),
  ('nan_seq', '{"seq_id":NaN,"action":"__ping","data":{}}'),
  ('inf_seq', '{"seq_id":Infinity,"action":"__ping","data":{}}'),
  ('neg_inf_seq', '{"seq_id":-Infinity,"action":"__ping","data":{}}'),
  ('seq_true', '{"seq_id":true,"action":"__ping","data":{}}'),
  ('seq_false', '{"seq_id":false,"action":"__ping","data":{}}'),
  ('seq_str', '{"seq_id":"11","action":"__ping","data":{}}'),
  ('seq_str_ws', '{"seq_id":" 12 ","action":"__ping","data":{}}'),
  ('seq_str_plus', '{"seq_id":"+13","action":"__ping","data":{}}'),
  ('seq_str_under', '{"seq_id":"1_4","action":"__ping","data":{}}'),
  ('seq_str_float', '{"seq_id":"15.0","action":"__ping","data":{}}'),
  ('seq_str_frac', '{"seq_id":"15.5","action":"__ping","data":{}}'),
  ('seq_str_big', '{"seq_id":"123456789012345678901234567890","action":"__ping","data":{}}'),
  ('seq_str_abc', '{"seq_id":"abc","action":"__ping","data":{}}'),
  ('seq_str_empty', '{"seq_id":"","action":"__ping","data":{}}'),
  ('seq_str_surrogate', '{"seq_id":"\\ud800","action":"__ping","data":{}}'),
  ('seq_null', '{"seq_id":null,"action":"__ping","data":{}}'),
  ('seq_list', '{"seq_id":[1],"action":"__ping","data":{}}'),
  ('seq_obj', '{"seq_id":{"a":1},"action":"__ping","data":{}}'),
  ('seq_missing', '{"action":"__ping","data":{}}'),
  ('seq_escaped_key', '{"seq\\u005fid":7,"action":"__ping","data":{}}'),
  ('lone_surrogate_action', '{"seq_id":5,"action":"\\ud800","data":{}}'),
  ('lone_low_action', '{"seq_id":5,"action":"x\\udc00y","data":{}}'),
  ('pair_action', '{"seq_id":5,"action":"\\ud83d\\ude00","data":{}}'),
  ('lone_surrogate_data', '{"seq_id":6,"action":"__ping","data":{"x":"\\udc00"}}'),
  ('lone_surrogate_key', '{"seq_id":7,"action":"__ping","data":{"\\ud800":1}}'),
  ('two_highs', '{"seq_id":7,"action":"__ping","data":{"x":"\\ud800\\ud800"}}'),
  ('nan_data', '{"seq_id":10,"action":"__ping","data":{"x":NaN}}'),
  ('inf_data', '{"seq_id":10,"action":"__ping","data":{"x":[Infinity,-Infinity]}}'),
  ('bigint_data', '{"seq_id":10,"action":"__ping","data":{"x":99999999999999999999999}}'),
  ('irregular_dropped_dup', '{"seq_id":10,"action":"__ping","data":{"x":NaN},"data":{}}'),
  ('nan_data_tenant', '{"seq_id":10,"action":"box_exec","data":{"cmd":NaN}}'),
  ('unknown_bad_context', '{"seq_id":11,"action":"nope","data":{},"context":5}'),
  ('unknown_bad_data', '{"seq_id":11,"action":"nope","data":5}'),
  ('unknown_bad_seq', '{"seq_id":null,"action":"nope","data":{}}'),
  ('action_int', '{"seq_id":12,"action":5,"data":{}}'),
  ('action_null', '{"seq_id":12,"action":null,"data":{}}'),
  ('data_missing', '{"seq_id":13,"action":"__ping"}'),
  ('data_list', '{"seq_id":13,"action":"__ping","data":[]}'),
  ('two_errors', '{"seq_id":null,"action":"__ping","data":5}'),
  ('sfc_one', '{"seq_id":14,"action":"__ping","data":{},"stream_flow_control":1}'),
  ('sfc_two', '{"seq_id":14,"action":"__ping","data":{},"stream_flow_control":2}'),
  ('sfc_null', '{"seq_id":14,"action":"__ping","data":{},"stream_flow_control":null}'),
  ('extra_top', '{"seq_id":15,"action":"__ping","data":{},"whatever":[1,2]}'),
  ('response_frame', '{"seq_id":16,"code":0,"message":"success","data":{}}'),
  ('response_with_action', '{"seq_id":16,"code":0,"action":"__ping","data":{}}'),
  ('no_action', '{"seq_id":17,"data":{}}'),
  ('not_object', '[1,2]'),
  ('bad_json', '{"seq_id":18,'),
  ('bom', '\ufeff{"seq_id":19,"action":"__ping","data":{}}'),
  ('control_char', '{"seq_id":20,"action":"__ping","data":{"x":"a\tb"}}'),
  ('nan_bad_json', '{"seq_id":21,"action":"__ping","data":{"x":NaN,}}'),
  ('tenant_no_ctx_dup', '{"seq_id":9,"action":"box_exec","data":{"session_id":"x","session_id":"y","cmd":"true"}}'),
  ('ping_ctx_empty', '{"seq_id":22,"action":"__ping","data":{},"context":{}}'),
  ('ctx_surrogate', '{"seq_id":23,"action":"__ping","data":{},"context":{"instance_uuid":"inst-1\\ud800","workspace_uuid":"w"}}'),
  ('ctx_bigint', '{"seq_id":23,"action":"__ping","data":{},"context":{"instance_uuid":"inst-1","workspace_uuid":"w","placement_generation":99999999999999999999999}}'),
]


# Frames where the two servers differ on purpose (see the module docstring).
SHAPE_ONLY = {"dup_context", "unknown_bad_context", "ping_ctx_empty"}
REFERENCE_DROPS = {"seq_list", "seq_obj"}
BOXD_REFUSES = {"ctx_bigint"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference():
    workdir = tempfile.mkdtemp(prefix="lbp-box-")
    port = free_port()
    log = open(os.path.join(workdir, "lbp.log"), "w")
    # The `box` command's arguments, as `lbp box --host 127.0.0.1 --ws-control-port PORT`.
    start = (
        "import argparse; from langbot_plugin.box.server import main; "
        f"main(argparse.Namespace(host='127.0.0.1', stdio_control=False, ws_control_port={port}))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", start],
        cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the reference server exited; log in {log.name}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the reference server did not listen; log in {log.name}")
            time.sleep(0.1)
    yield f"ws://127.0.0.1:{port}/rpc/ws"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def boxd():
    server = Boxd({"backend": "scripted"})
    yield server.url
    server.stop()


async def replies(url: str, token: str | None, frame: str, at_least: int = 0) -> list:
    """What a server sends back to `frame`: every reply until both the reply to a
    sentinel request sent after it and `at_least` others have arrived (the reference
    handles frames concurrently, so its reply may follow the sentinel's)."""
    headers = {"X-LangBot-Instance-Id": "inst-1"}  # the instance the frames name
    if token:
        headers["X-LangBot-Box-Control-Token"] = token
    out = []
    sentinel_seen = False
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        await ws.send(frame)
        await ws.send(SENTINEL)
        while True:
            try:
                text = await asyncio.wait_for(ws.recv(), 10)
            except websockets.exceptions.ConnectionClosed:
                out.append("CLOSED")
                return out
            # Python's json reads what both servers may echo (NaN, big integers).
            reply = json.loads(text)
            if reply.get("seq_id") == -424242:
                sentinel_seen = True
            else:
                out.append(reply)
            if sentinel_seen and len(out) >= at_least:
                return out


@pytest.mark.parametrize("name,frame", FRAMES, ids=[n for n, _ in FRAMES])
def test_envelope_matches_reference(reference, boxd, name, frame):
    box = asyncio.run(replies(boxd, TOKEN, frame))
    expected = 0 if box == ["CLOSED"] else len(box)
    ref = asyncio.run(replies(reference, None, frame, expected))
    if name in SHAPE_ONLY:
        assert len(ref) == len(box) == 1
        for r in (ref[0], box[0]):
            assert r["code"] == 1 and r["message"].startswith("ValidationError: ")
        assert ref[0]["seq_id"] == box[0]["seq_id"]
    elif name in REFERENCE_DROPS:
        assert ref == ["CLOSED"]
        assert len(box) == 1 and box[0]["code"] == 1
        assert "[type=int_type," in box[0]["message"]
    elif name in BOXD_REFUSES:
        assert ref[0]["code"] == 0
        assert box[0]["message"] == (
            "ValidationError: placement_generation must be less than or equal to "
            "9223372036854775807"
        )
    else:
        assert box == ref
