#!/usr/bin/env bash
# Conformance suite: LangBot's own Python client (langbot-plugin, pinned in
# requirements.txt) against a live boxd over a real WebSocket. Creates its virtual
# environment under the build folder on first use. Usage: run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
venv="$build/conformance-venv"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi
export BOXD="$build/boxd"
export LANGBOT_PLUGIN_FILE_STORAGE_DIR="$build/conformance-files"
cd "$here"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here"
