#!/usr/bin/env bash
# Conformance suite: LangBot's own Python client (langbot-plugin, pinned in
# requirements.txt) against a live boxd over a real WebSocket. Creates its virtual
# environment under the build folder on first use. Usage: run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
python=$("$here/../../scripts/conformance-venv" "$build")
export BOXD="$build/boxd"
export LANGBOT_PLUGIN_FILE_STORAGE_DIR="$build/conformance-files"
cd "$here"
exec "$python" -m pytest -q -p no:cacheprovider "$here"
