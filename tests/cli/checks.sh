# Sourced by the shell suites (tests/cli/boxd_cli.sh, tests/package/run.sh): a work
# folder removed at exit with the process `pid` names (if any) stopped, and `check WHAT
# COMMAND...`, which prints ok or FAIL and counts failures; `finish NAME` exits with them.
work=$(mktemp -d /tmp/boxrt-shell-suite.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
check() {  # check WHAT COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}
finish() {  # finish NAME [DETAIL]
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures check(s) failed"
    exit 1
  fi
  echo "$1: passed${2:+ ($2)}"
}
