#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds come from what the suites already use, so each validation message the
messages suite checks has an input that reaches it: every raw JSON literal of the codec
tests (routed to the decoders that file tests), the 75 envelope frames of the reference
comparison, and hostile inputs (deep nesting, huge numbers, invalid UTF-8, duplicate
keys, unpaired surrogates, zip bombs and zip-slip archives, truncated and oversized
init frames). Run it again after adding tests; files are named by content, so seeds
that are already there stay as they are (minimised crashers live beside them).
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import pathlib
import re
import struct
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"

# requests.cpp: the first byte chooses the decoder.
REQ = {"spec": 0, "spec_nocmd": 1, "facts": 2, "process": 3, "context": 4, "grant": 5,
       "revocation": 6, "snapshot": 7, "policy": 8, "limits": 9, "config": 10,
       "session_id": 11, "normalize": 12, "skill": 13}


def put(target: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    (folder / name).write_bytes(data)


def raw_literals(path: pathlib.Path) -> list[tuple[str, str]]:
    """(helper name, text) of every `helper(R"(...)"` and bare R"(...)" in a test."""
    text = path.read_text()
    out = []
    for m in re.finditer(r'(\w*)\(?\s*R"\((.*?)\)"', text, re.S):
        out.append((m.group(1), m.group(2)))
    return out


def codec_seeds() -> None:
    routes = {
        "spec_from": ["spec", "spec_nocmd", "normalize", "facts"],
        "process_from": ["process"],
        "context_from": ["context"],
        "facts_from": ["facts", "spec"],
        "grant_from": ["grant"],
        "revocation_from": ["revocation"],
        "snapshot_from": ["snapshot"],
        "policy_from": ["policy"],
        "limits_from": ["limits"],
        "config_from": ["config"],
    }
    per_file_default = {
        "codec_box_spec_test.cpp": ["spec", "process"],
        "codec_admission_test.cpp": ["snapshot", "grant", "revocation", "context", "policy"],
        "codec_config_test.cpp": ["config", "limits"],
        "codec_encode_test.cpp": ["spec", "snapshot"],
    }
    for path in sorted((ROOT / "tests/messages").glob("codec_*_test.cpp")):
        for helper, text in raw_literals(path):
            kinds = routes.get(helper, per_file_default.get(path.name, []))
            for kind in kinds:
                put("requests", bytes([REQ[kind]]) + text.encode())
            if path.name == "codec_admission_test.cpp":
                for op, kind in ((0, "snapshot"), (1, "grant"), (2, "revocation"), (3, "context")):
                    if helper == f"{kind}_from" or (helper == "" and kind in text):
                        put("admission", bytes([48 + op]) + text.replace("\n", " ").encode())
            if path.name == "codec_config_test.cpp":
                put("config", ('{"box": ' + text + "}").encode())
    for path in sorted((ROOT / "tests/messages").glob("*json*_test.cpp")):
        for _, text in raw_literals(path):
            put("envelope", ('{"seq_id":1,"action":"__ping","data":' + text + "}").encode())


def envelope_seeds() -> None:
    source = (ROOT / "tests/conformance/test_envelope_reference.py").read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FRAMES" for t in node.targets):
            for name, frame in ast.literal_eval(node.value):
                put("envelope", frame.encode("utf-8", "surrogatepass"))


def hostile_json() -> list[bytes]:
    return [
        b'{"seq_id":1,"action":"__ping","data":' + b"[" * 1100 + b"]" * 1100 + b"}",
        b'{"timeout_sec": 1' + b"0" * 400 + b"}",
        b'{"timeout_sec": 1e400, "cmd": "x"}',
        b'{"timeout_sec": -1e400, "cmd": "x"}',
        b'{"timeout_sec": NaN, "cmd": "x"}',
        b'{"cmd": "\xff\xfe", "workdir": "/workspace"}',
        b'{"cmd": "\xc0\x80"}',
        b'{"cmd": "\\ud800"}',
        b'{"cmd": "a", "cmd": "b", "cmd": 5}',
        b'{"cmd": "x", "extra_mounts": [' + b'{"host_path":"/a","mount_path":"/b"},' * 500 + b"{}]}",
        b'{"entitlement_revision": 340282366920938463463374607431768211456}',
        b'{"placement_generation": 9223372036854775808, "instance_uuid": "i", "workspace_uuid": "w"}',
        b'{"expires_at": -9223372036854775808}',
        b"\x00\x01\x02",
        b"",
    ]


def hostile_seeds() -> None:
    # Nesting deeper than simdjson's and Python's limits, once per reader.
    deep = [b"[" * 100000 + b"]" * 100000, b'{"a":' * 5000 + b"1" + b"}" * 5000]
    for text in deep:
        put("envelope", text)
        put("config", text)
        put("requests", bytes([REQ["spec"]]) + text)
    for text in hostile_json():
        put("envelope", text)
        put("config", b'{"server": ' + text + b"}")
        put("config", b'{"box": ' + text + b"}")
        for kind in ("spec", "process", "context", "grant", "snapshot", "policy", "limits", "config"):
            put("requests", bytes([REQ[kind]]) + text)
    put("config", b'{"server": {"port": 70000}}')
    put("config", b'{"server": {"host": "0.0.0.0"}}')
    put("config", b'{"server": {"control_token": "short"}}')
    put("config", b'{"server": {"max_message_bytes": -1, "max_inflight": 0}}')
    put("config", b'{"server": {"listen": "[::1]:99999"}}')
    put("config", b'{"box": {"backend": "bwrap", "admission": {"mode": "required"}}}')
    for sid in (b"global", b"  ", b"../../etc", b"a/b\\c", b"\xff" * 300, b"~" * 100, b"x" * 100000):
        put("requests", bytes([REQ["session_id"]]) + sid)
    for action in range(4):
        put("requests", bytes([REQ["skill"] + action]) + b'{"name": "../x", "path": "../../etc/passwd"}')
        put("requests", bytes([REQ["skill"] + action]) + b'{"name": "demo", "path": ".", "include_hidden": 1}')


def admission_seeds() -> None:
    snap = {"instance_uuid": "inst-1", "workspace_uuid": "ws-1", "entitlement_revision": 3,
            "status": "active", "not_before": 1700000000, "expires_at": 1800000000,
            "features": {"managed_sandbox": True}, "limits": {"managed_sandbox_sessions": 1}}
    grant = {"instance_uuid": "inst-1", "workspace_uuid": "ws-1", "execution_generation": 2,
             "entitlement_revision": 4, "expires_at": 1800000000000000, "max_sessions": 1,
             "max_managed_processes": 0}
    rev = {"instance_uuid": "inst-1", "workspace_uuid": "ws-1", "entitlement_revision": 5}
    ctx = {"instance_uuid": "inst-1", "workspace_uuid": "ws-1", "placement_generation": 2,
           "entitlement_revision": 3}
    lines = [b"0" + json.dumps(snap).encode(), b"3" + json.dumps(ctx).encode(),
             b"1" + json.dumps(grant).encode(), b"3" + json.dumps(ctx).encode(),
             b"4\xff", b"2" + json.dumps(rev).encode(), b"0" + json.dumps(snap).encode()]
    put("admission", b"\n".join(lines))
    older = dict(snap, entitlement_revision=2)
    equivocal = dict(snap, plan_name="other")
    suspended = dict(snap, entitlement_revision=6, status="suspended")
    put("admission", b"\n".join([b"0" + json.dumps(snap).encode(), b"0" + json.dumps(older).encode(),
                                b"0" + json.dumps(equivocal).encode(), b"0" + json.dumps(suspended).encode(),
                                b"5{}", b'5{"version":1}']))


def init_frame(*fields: bytes) -> bytes:
    body = b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<I", len(body)) + body


def init_seeds() -> None:
    ok = init_frame(b"result", b"0", b"hello", b"5", b"", b"0", b"3", b"")
    for cap in (0, 4, 10, 20):
        put("init_reply", bytes([cap]) + ok)
    put("init_reply", bytes([10]) + init_frame(b"ready") + ok + init_frame(b"reply", b"1", b"42", b""))
    put("init_reply", bytes([2]) + init_frame(b"result", b"0", b"x" * 100, b"0", b"", b"0", b"1", b""))
    put("init_reply", bytes([10]) + init_frame(b"result", b"99999999999999999999", b"", b"0", b"", b"0", b"0", b""))
    put("init_reply", bytes([10]) + init_frame(b"result", b"0", b"", b"-1", b"", b"-9223372036854775808", b"-1", b""))
    put("init_reply", bytes([10]) + struct.pack("<I", 0xFFFFFFFF) + b"x" * 16)
    put("init_reply", bytes([10]) + ok[:-3])
    put("init_reply", bytes([10]) + init_frame(b"exec", b"/workspace", b"true", b"1024", b"1", b"A=B"))
    put("init_reply", bytes([10]) + init_frame(b"spawn", b"1", b"p", b"sleep", b"/", b"1", b"9", b"0"))
    put("init_reply", bytes([10]) + init_frame(b"kill", b"1", b"p", b"15"))
    # A streamed exec: its request, output frames (a third stream is refused), a kill of
    # the running exec (empty name).
    put("init_reply", bytes([10]) + init_frame(b"stream", b"/workspace", b"yes", b"1024", b"0"))
    put("init_reply", bytes([10]) + init_frame(b"out", b"1", b"hello\n") + init_frame(b"out", b"2", b"\xff")
        + init_frame(b"out", b"3", b"x") + ok)
    put("init_reply", bytes([10]) + init_frame(b"kill", b"1", b"", b"15"))


def zip_bytes(members: list[tuple[str, bytes]], compression=zipfile.ZIP_DEFLATED, attrs=None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for i, (name, data) in enumerate(members):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = compression
            if attrs and i in attrs:
                info.external_attr = attrs[i]
            z.writestr(info, data)
    return buf.getvalue()


def zip_seeds() -> None:
    md = b"---\nname: demo\ndescription: A demo skill\n---\n\nDo the thing.\n"
    put("zip", zip_bytes([("SKILL.md", md)]))
    put("zip", zip_bytes([("demo/SKILL.md", md), ("demo/scripts/run.sh", b"#!/bin/sh\necho hi\n")]))
    put("zip", zip_bytes([("a/SKILL.md", md), ("b/SKILL.md", md.replace(b"demo", b"other"))]))
    put("zip", zip_bytes([("../evil/SKILL.md", md)]))
    put("zip", zip_bytes([("/abs/SKILL.md", md)]))
    put("zip", zip_bytes([("demo/SKILL.md", md), ("demo/link", b"/etc/passwd")], attrs={1: (0o120777 << 16)}))
    put("zip", zip_bytes([("bomb.txt", b"\0" * (4 << 20)), ("SKILL.md", md)]))
    put("zip", zip_bytes([(f"f{i}.txt", b"x") for i in range(600)]))
    put("zip", zip_bytes([("SKILL.md", b"---\nname: [unclosed\n---\n")]))
    put("zip", zip_bytes([("SKILL.md", b"---\n" + b"a: &x [*x]\n" + b"---\n")]))
    put("zip", zip_bytes([("dup/SKILL.md", md), ("dup/SKILL.md", md)]))
    put("zip", b"PK\x05\x06" + b"\0" * 18)
    put("zip", b"not a zip")


def relay_seeds() -> None:
    token = b"0123456789abcdef0123456789abcdef"
    good = [b"/v1/sessions/ws-abc-g2-global/managed-process/default/ws", token, b"inst-1", b"ws-1", b"2", b"mcp"]
    put("relay", b"\n".join(good))
    put("relay", b"\n".join([b"/v1/sessions/ws-abc/managed-process/ws", b"-", b" inst-1 ", b"w", b" 7 ", b"x, mcp"]))
    put("relay", b"\n".join([b"/v1/sessions/a%2Fb/managed-process/p%ZZ/ws?x=1", token, b"inst-1", b"w", b"01", b""]))
    put("relay", b"\n".join([b"/v1/sessions/s/managed-process/p/ws", token, b"inst-1", "é".encode() * 300, b"9223372036854775807", b""]))
    put("relay", b"\n".join([b"/v1/sessions//managed-process/ws", token, b"", b"", b"", b""]))
    put("relay", b"/v1/sessions/" + b"a/" * 5000 + b"ws")


def main() -> None:
    codec_seeds()
    envelope_seeds()
    hostile_seeds()
    admission_seeds()
    init_seeds()
    zip_seeds()
    relay_seeds()
    for folder in sorted(CORPUS.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} inputs")


if __name__ == "__main__":
    main()
