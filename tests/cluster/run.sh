#!/usr/bin/env bash
# The cluster suite (docs/cluster.md): one real etcd (Debian's etcd-server) and boxd nodes
# on loopback, each in its own mount namespace, driven by LangBot's own client from the
# conformance suite's environment (created on first use). Extra arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
shift $(( $# > 1 ? 1 : $# ))
python=$("$here/../../scripts/conformance-venv" "$build")
export BOXD="$build/boxd"
export LANGBOT_PLUGIN_FILE_STORAGE_DIR="$build/cluster-files"
cd "$here"
if [ $# -eq 0 ]; then set -- "$here"; fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
