"""boxd started with a `cluster` block (docs/cluster.md): a bad block prints its error class
and text, exits non-zero and never listens; a valid one is refused the same way while this
build has no cluster mode, so a lone boxd never runs where a cluster was asked for."""

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


def test_a_valid_cluster_block_is_refused_while_cluster_mode_is_not_built():
    work = tempfile.mkdtemp(prefix="boxd-cluster-config-")
    code, out, err = start(block(work))
    assert code != 0
    assert "listening" not in out
    assert "BoxValidationError: cluster mode (node n1) is not available" in err
