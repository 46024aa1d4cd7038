#!/usr/bin/env bash
# Conformance suite: LangBot's own Python client (langbot-plugin) against a live boxd over
# a real WebSocket, for both SDK generations, each in its environment under the build
# folder (created on first use):
#   run.sh BUILD_DIR [0.7.12]  the client of langbot-plugin 0.7.12 (requirements.txt)
#   run.sh BUILD_DIR 0.7.16    the client of langbot-plugin 0.7.16 (0.7.13+ protocol), in
#                              the environment of LangBot 4.11.2's host suite
# Extra arguments go to pytest instead of the whole folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
sdk=${2:-0.7.12}
case "$sdk" in
  0.7.12) venv="" ;;
  0.7.16) venv=host411 ;;
  *) echo "run.sh: unknown langbot-plugin generation '$sdk' (0.7.12 or 0.7.16)" >&2; exit 2 ;;
esac
shift $(( $# > 2 ? 2 : $# ))
python=$("$here/../../scripts/conformance-venv" "$build" $venv)
export BOXD="$build/boxd"
export LANGBOT_PLUGIN_FILE_STORAGE_DIR="$build/conformance-files-$sdk"
cd "$here"
if [ $# -eq 0 ]; then set -- "$here"; fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
