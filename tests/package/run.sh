#!/usr/bin/env bash
# The Debian package (make deb; app/cmake/package.cmake), cheaply, from the build: built
# with CPack, unpacked with dpkg-deb -x into a temporary root (nothing is installed on
# this machine), its control data and layout checked, its unit verified by
# systemd-analyze, and the unpacked boxd started with the shipped config (adjusted to a
# temporary data folder) under a fake NOTIFY_SOCKET: READY=1 arrives, and the unpacked
# boxctl runs an exec through it. Usage: tests/package/run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../cli/checks.sh"

(cd "$build" && cpack -G DEB > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$build"/package/boxrt_*_amd64.deb | head -1)
check "the package is built" test -f "$deb"
dpkg-deb -I "$deb" > "$work/info"
check "it depends on bubblewrap and CAF's libraries" grep -Eq '^ Depends: .*bubblewrap.*' "$work/info"
check "its shared libraries come from dpkg-shlibdeps" grep -Eq '^ Depends: .*libcaf' "$work/info"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$work" ./conffiles ./postinst ./prerm ./postrm
check "/etc/boxrt/boxd.json is a conffile" grep -qx /etc/boxrt/boxd.json "$work/conffiles"
root=$work/root
dpkg-deb -x "$deb" "$root"
for f in usr/bin/boxd usr/bin/boxctl usr/libexec/boxrt/boxrt-init usr/libexec/boxrt/boxrt-watchdog \
         usr/libexec/boxrt/nsjail/nsjail/bin/nsjail lib/systemd/system/boxd.service etc/boxrt/boxd.json \
         usr/share/doc/boxrt/README.md; do
  check "it holds /$f" test -e "$root/$f"
done
check "no headers or static libraries" bash -c '! find "$0" -name "*.a" -o -name "*.hpp" | grep -q .' "$root"
check "the packaged nsjail runs (its vendored libraries found)" \
  bash -c '"$0/usr/libexec/boxrt/nsjail/nsjail/bin/nsjail" --help 2>&1 | grep -qi usage' "$root"

# The unit as shipped, verified against the unpacked tree.
unit=$root/lib/systemd/system/boxd.service
check "the unit is Type=notify with Restart=on-failure" \
  bash -c 'grep -qx "Type=notify" "$0" && grep -qx "Restart=on-failure" "$0"' "$unit"
for forbidden in PrivateDevices DevicePolicy ProtectKernelTunables ProtectControlGroups ProtectSystem \
                 RestrictNamespaces PrivateUsers SystemCallFilter CapabilityBoundingSet; do
  check "the unit does not set $forbidden" bash -c '! grep -q "^$1=" "$0"' "$unit" "$forbidden"
done
if command -v systemd-analyze > /dev/null; then
  set +e
  # As shipped, but for its ExecStart, which names the unpacked boxd (systemd-analyze
  # checks that the programs exist; --root wants a whole system in the tree).
  sed "s|^ExecStart=/usr/bin/boxd|ExecStart=$root/usr/bin/boxd|" "$unit" > "$work/boxd.service"
  systemd-analyze verify "$work/boxd.service" > "$work/verify" 2>&1
  verify_rc=$?
  set -e
  check "systemd-analyze verify passes" test "$verify_rc" -eq 0
  [ "$verify_rc" -eq 0 ] || cat "$work/verify"
else
  echo "FAIL systemd-analyze is not installed (scripts/bootstrap installs systemd)"
  failures=$((failures + 1))
fi

# The unpacked boxd with the shipped config, moved to a temporary data folder.
python3 - "$root/etc/boxrt/boxd.json" "$work/boxd.json" "$work/data" "$root" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["server"]["listen"] = "127.0.0.1:0"
cfg["box"]["local"]["host_root"] = sys.argv[3] + "/box"
cfg["box"]["local"]["nsjail_path"] = sys.argv[4] + cfg["box"]["local"]["nsjail_path"]
json.dump(cfg, open(sys.argv[2], "w"))
PY
# A fake notify socket: the first datagram boxd sends, within 60 s. It says "bound" on a
# FIFO once boxd may send.
mkfifo "$work/bound"
exec 3<> "$work/bound"
python3 - "$work/notify" "$work/notified" "$work/bound" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[3], "w") as f:
    f.write("bound\n")
s.settimeout(60)
try:
    data = s.recv(4096)
except socket.timeout:
    data = b"TIMEOUT"
open(sys.argv[2], "wb").write(data)
PY
listener=$!
bound=
read -r -t 30 bound <&3 || true
[ "$bound" = bound ] || { echo "FAIL the fake notify socket did not start"; exit 1; }
coproc packaged { NOTIFY_SOCKET=$work/notify exec "$root/usr/bin/boxd" --config "$work/boxd.json" 2> "$work/boxd.log"; }
pid=$packaged_PID
line=
read -r -t 60 line <&"${packaged[0]}" || true
check "the unpacked boxd listens" test -n "$line"
wait "$listener" || true
check "it told the notify socket it is ready" grep -q '^READY=1' "$work/notified"
check "with its address as the status" grep -q 'STATUS=listening on ws://127.0.0.1:' "$work/notified"
url=${line##* }
if [ -n "$url" ]; then
  out=$("$root/usr/bin/boxctl" --url "$url" exec --no-stream -- echo packaged 2>&1 || true)
  check "the unpacked boxctl runs an exec through it" test "$out" = "packaged"
  [ "$out" = "packaged" ] || { echo "$out"; tail -20 "$work/boxd.log"; }
  version=$("$root/usr/bin/boxctl" --version)
  check "the packaged boxctl names its version" grep -q '^boxctl boxrt [0-9]' <<< "$version"
fi

finish package "$(basename "$deb"), $(du -h "$deb" | cut -f1)"
