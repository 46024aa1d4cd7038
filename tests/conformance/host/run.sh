#!/usr/bin/env bash
# LangBot's own host code (BoxService, EntitlementResolver and its admission controller,
# from the langbot package on PyPI) in Cloud mode against a live boxd on real nsjail.
# Creates its own virtual environment under the build folder on first use (LangBot 4.10.11
# pins an SDK other than the client suite's). Needs root, as CI runs; skipped elsewhere.
# Usage: run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
python=$("$here/../../../scripts/conformance-venv" "$build" host)
export BOXD="$build/boxd"
cd "$here"
exec "$python" -m pytest -q -p no:cacheprovider "$here"
