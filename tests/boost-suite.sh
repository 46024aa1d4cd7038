#!/usr/bin/env bash
# Runs one Boost.Test executable for CTest: its whole log as it goes, then, when it fails,
# the failed checks again at the end, where a shortened log (CI keeps its head and tail)
# still shows them.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "---- failures of $(basename "$1") (rc $rc) ----"
  grep -E 'error: in "|fatal error|exception|Test is aborted|signal' "$log" | head -40
fi
exit "$rc"
