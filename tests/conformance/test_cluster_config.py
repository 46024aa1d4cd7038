"""boxd started with a bad `cluster` block (docs/cluster.md) prints its error class and
text, exits non-zero and never listens. The cluster itself is tested in tests/cluster."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile


def start(cluster: dict) -> tuple[int, str, str]:
    work = tempfile.mkdtemp(prefix="boxd-cluster-config-")
    config = {"server": {"listen": "127.0.0.1:0", "transfer_dir": os.path.join(work, "t")},
              "box": {"backend": "scripted", "local": {"host_root": os.path.join(work, "box")}},
              "cluster": cluster}
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    r = subprocess.run([os.environ["BOXD"], "--config", path], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def block(work: str, **extra) -> dict:
    files = {}
    for name in ("cert", "key", "ca"):
        files[name] = os.path.join(work, name + ".pem")
        with open(files[name], "w") as f:
            f.write("pem")
    return {"node_id": "n1", "listen": "127.0.0.1:7101",
            "etcd": {"endpoints": ["http://127.0.0.1:2379"], "prefix": "/boxrt/c1"},
            "tls": {"certificate": files["cert"], "key": files["key"], "ca_file": files["ca"]},
            "uid_range": [1879048192, 1879113727], **extra}


def test_a_cluster_block_without_tls_is_refused_before_listening():
    work = tempfile.mkdtemp(prefix="boxd-cluster-config-")
    cluster = block(work)
    del cluster["tls"]
    code, out, err = start(cluster)
    assert code != 0
    assert "listening" not in out
    assert "BoxValidationError: " in err and "cluster.tls is required" in err


def test_files_that_are_not_certificates_are_refused_before_listening():
    work = tempfile.mkdtemp(prefix="boxd-cluster-config-")
    code, out, err = start(block(work))
    assert code != 0
    assert "listening" not in out
    assert "BoxValidationError: " in err and "cluster.tls.certificate" in err
    assert "is not a PEM certificate chain" in err
