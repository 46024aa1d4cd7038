#!/usr/bin/env bash
# LangBot's own host code (BoxService, EntitlementResolver and its admission controller,
# the native exec tool, from the langbot package on PyPI) against a live boxd: Cloud mode
# on real nsjail and standard mode on bwrap. Two host generations, each in its own
# virtual environment under the build folder, created on first use:
#   run.sh BUILD_DIR [4.10]   LangBot 4.10.11 with SDK 0.5.8 (the runtime's skill actions)
#   run.sh BUILD_DIR 4.11     LangBot 4.11.2 with SDK 0.7.16 (the host's own skill store,
#                             read-only content-addressed mounts, the Runner's Box binding)
# Needs root, as CI runs; skipped elsewhere. Extra arguments go to pytest instead of the
# whole folder (e.g. a file, or -k NAME).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
generation=${2:-4.10}
case "$generation" in
  4.10) venv=host ;;
  4.11) venv=host411 ;;
  *) echo "run.sh: unknown LangBot generation '$generation' (4.10 or 4.11)" >&2; exit 2 ;;
esac
shift $(( $# > 2 ? 2 : $# ))
python=$("$here/../../../scripts/conformance-venv" "$build" "$venv")
export BOXD="$build/boxd"
cd "$here"
if [ $# -eq 0 ]; then set -- "$here"; fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
