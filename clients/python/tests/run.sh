#!/usr/bin/env bash
# The Python SDK's suite (clients/python/tests) against BUILD_DIR's boxd, in its
# environment under the build folder (created on first use). Extra arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
shift $(( $# > 0 ? 1 : 0 ))
python=$("$here/../../scripts/sdk-venv" "$build")
export BOXD="$build/boxd"
export BOXRT_NSJAIL="$build/nsjail"
cd "$here"
exec "$python" -m pytest -q -p no:cacheprovider "$@"
