#!/usr/bin/env bash
# boxd's command line through a real shell (docs/configuration.md): --version, --help,
# an unknown argument, --check-config on every example config of the docs and on typos,
# and a refused admission value named in /readyz. Usage: boxd_cli.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
boxd="$build/boxd"
. "$(dirname "$0")/../cli/checks.sh"
run() {  # run: sets rc, out, err
  set +e
  out=$("$@" 2> "$work/err"); rc=$?
  set -e
  err=$(cat "$work/err")
}

run "$boxd" --version
check "--version exits 0" test "$rc" -eq 0
check "--version prints the version line" grep -Eq '^boxrt [0-9]+\.[0-9]+\.[0-9]+ \(git .+, .+\)$' <<< "$out"
run "$boxd" --help
check "--help exits 0 with the usage" test "$rc" -eq 0 -a "${out:0:19}" = "usage: boxd [OPTION"
run "$boxd" --helpme
check "an unknown argument exits 2" test "$rc" -eq 2
check "and points at --help" grep -q 'unknown argument "--helpme" (boxd --help lists the options)' <<< "$err"

# Every example of docs/configuration.md is accepted as written (the cluster one needs its
# certificate files: only that refusal is allowed). The token comes from the environment.
python3 - "$here/../../docs/configuration.md" "$work" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```json\n(.*?)```", text[text.index("## Examples"):], re.S)
assert len(blocks) >= 4, len(blocks)
for i, b in enumerate(blocks):
    open(f"{sys.argv[2]}/example-{i}.json", "w").write(b)
PY
for f in "$work"/example-*.json; do
  run env LANGBOT_BOX_CONTROL_TOKEN=0123456789abcdef0123456789abcdef0123 "$boxd" --check-config "$f"
  if grep -q '"cluster"' "$f"; then
    check "$(basename "$f") (cluster) is refused only for its certificate files" \
      bash -c '[ "$0" -eq 0 ] || grep -q "cannot be read" <<< "$1"' "$rc" "$err"
  else
    check "$(basename "$f") passes --check-config" test "$rc" -eq 0
    check "$(basename "$f") has no ignored key" grep -q '"ignored": \[\]' <<< "$out"
  fi
done

echo '{"server": {"listen": "127.0.0.1:0", "port": 5411}}' > "$work/typo-server.json"
run "$boxd" --check-config "$work/typo-server.json"
check "an unknown server key exits 2" test "$rc" -eq 2
check "and names its path" grep -q 'unknown key server.port' <<< "$err"
echo '{"box": {"bakend": "nsjail", "limits": {"max_sesions": 3}}}' > "$work/typo-box.json"
run "$boxd" --check-config "$work/typo-box.json"
check "an ignored box key is no error" test "$rc" -eq 0
check "it is listed as ignored" grep -q '"box.limits.max_sesions"' <<< "$out"
check "with the default backend in effect" grep -q '"backend": "auto"' <<< "$out"
echo '{"box": {"admission": {"required": true, "memory_mb": 8}}}' > "$work/bad-admission.json"
run "$boxd" --check-config "$work/bad-admission.json"
check "a refused admission value exits 2" test "$rc" -eq 2
check "with the validator's text" grep -q 'box.admission: memory_mb must be at least 32' <<< "$err"

# A refused admission value from LangBot's side (LANGBOT_BOX_CONFIG, as box_init's) starts
# boxd failing closed; the log and /readyz name it.
coproc started {
  LANGBOT_BOX_CONFIG='{"backend": "scripted", "admission": {"required": "yes"}}' \
    exec "$boxd" --listen 127.0.0.1:0 --data-dir "$work/data" 2> "$work/log"
}
pid=$started_PID
line=
read -r -t 30 line <&"${started[0]}" || true
url=${line##* }
check "boxd started" test -n "$line"
ready=$(python3 -c '
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())' "${url/ws:/http:}/readyz")
check "/readyz is 503 and names the key" grep -q '^503 .*"error":"box.admission: required must be a boolean"' <<< "$ready"
check "the log names the data folder" grep -q "data folder $work/data/box" "$work/log"

finish boxd_cli
