#!/usr/bin/env bash
# boxrt as a library (docs/embedding.md): installs the build into a temporary prefix,
# builds tests/embed/example against it with find_package(boxrt) (each public header
# compiled alone), and runs it: a CAF application that embeds the runtime, pushes an
# entitlement, runs an exec in a real sandbox and shuts down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
# A sanitized build's libraries need the sanitizer runtime the example is not built with.
if grep -q '^BOXRT_SANITIZE:STRING=.\+' "$build/CMakeCache.txt" || grep -q '^BOXRT_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "embed: not run on a sanitized build"
  exit 77
fi
work=$(mktemp -d /tmp/boxrt-embed.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/lib/cmake/boxrt/boxrtConfig.cmake"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$here/example" -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/example" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
if [ "$(id -u)" -ne 0 ] || ! command -v bwrap > /dev/null; then
  echo "embed: the example's sandbox needs root and bubblewrap; built, not run"
  exit 77
fi
mkdir -p "$work/data"
timeout 300 "$work/example/embed_example" "$work/data" bwrap
# Shut down as boxd's SIGTERM does: no sandbox of this runtime (uids 0x71000000 to
# 0x710000ff, the example's own range) outlives the application.
# (Zombies are dead: they wait for this container's pid 1 to reap them.)
left=$(ps -eo uid=,stat=,pid=,args= | awk '$1 >= 1895825408 && $1 <= 1895825663 && $2 !~ /^Z/')
if [ -n "$left" ]; then
  echo "embed: sandboxes of the embedded runtime outlived the application:"
  echo "$left"
  exit 1
fi
# The installed boxd finds its helpers in ../libexec/boxrt: its bwrap backend is usable.
cat > "$work/boxd.json" <<JSON
{"server": {"listen": "127.0.0.1:0"}, "box": {"backend": "bwrap", "local": {"host_root": "$work/boxd-data"}}}
JSON
coproc boxd { exec "$work/prefix/bin/boxd" --config "$work/boxd.json" 2> "$work/boxd.log"; }
read -r -t 30 line <&"${boxd[0]}" || { cat "$work/boxd.log"; exit 1; }
url=${line##* }
ready=$(python3 -c 'import json, sys, urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1], timeout=10))["backend"])' \
  "${url/ws:/http:}/readyz" || true)
kill -TERM "$boxd_PID"
wait "$boxd_PID" || true
if [ "$ready" != "{'name': 'bwrap', 'available': True}" ] || grep -q "taken from the build folder" "$work/boxd.log"; then
  echo "embed: the installed boxd has no usable bwrap backend: $ready"
  cat "$work/boxd.log"
  exit 1
fi
# The same example as one node of a boxd cluster (real etcd, one boxd node beside it).
BOXRT_EMBED_EXAMPLE="$work/example/embed_example" "$here/../cluster/run.sh" "$build" \
  -k test_an_embedded_application_is_one_node_of_the_cluster
echo "embed: passed"
