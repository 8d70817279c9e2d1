#!/usr/bin/env bash
# The C hub SDK as a firmware author gets it (run by `make test`):
#
#   BRIDGE=path/to/accessory-bridge scripts/hub-install-check.sh
#
# `make install PREFIX=<a clean temporary directory>`, then Examples/hub-c, copied elsewhere, built by its own
# Makefile with `PKG_CONFIG_PATH=<prefix>/lib/pkgconfig` (the shared library), hub.c once more against the static one,
# and docs/hub-sdk.md's C (Tests/CAudioHubGuide/guide.c). Both hubs run against mosquitto and the bridge: each line on
# stdin must come back as a result. Then stream.c, whose source is a playing device made of a retained JSON
# SourceState (media, head tracking on): put on, it must be activated and stream frames; taken off, invalidated.
set -euo pipefail
cd "$(dirname "$0")/.."
BRIDGE=${BRIDGE:-.build/debug/accessory-bridge}
[ -x "$BRIDGE" ] || { echo "hub-install-check: $BRIDGE is not built (swift build)" >&2; exit 1; }

. scripts/lib/broker.sh
work=$(mktemp -d)
bridge_pid=
broker_pid=
trap 'kill $bridge_pid $broker_pid 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT

prefix="$work/prefix"
make -s install PREFIX="$prefix" >/dev/null
for file in include/audiohub.h lib/libaudiohub.a lib/libaudiohub.so lib/libaudiohub.so.0 lib/pkgconfig/audiohub.pc; do
    [ -e "$prefix/$file" ] || { echo "hub-install-check: $file was not installed" >&2; exit 1; }
done
[ ! -e "$prefix/include/audiohub_internal.h" ] || { echo "hub-install-check: an internal header was installed" >&2; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs audiohub)
case "$flags" in *"-I$prefix/include"*"-L$prefix/lib"*"-laudiohub"*) ;; *)
    echo "hub-install-check: pkg-config says '$flags'" >&2; exit 1;;
esac

# The example, from a directory of its own, as a firmware project would have it.
cp -r Examples/hub-c "$work/hub-c"
rm -f "$work/hub-c/hub"
make -s -C "$work/hub-c" >/dev/null
# Read whole first: with pipefail, `ldd | grep -q` fails whenever grep stops reading before ldd has written all.
libraries=$(ldd "$work/hub-c/hub")
grep -q "$prefix/lib/libaudiohub.so.0" <<<"$libraries" || { echo "hub-install-check: not linked to $prefix" >&2; exit 1; }
${CC:-cc} -std=c99 -Wall -Wextra -Werror $(pkg-config --cflags audiohub) -o "$work/hub-static" "$work/hub-c/hub.c" \
    "$prefix/lib/libaudiohub.a" $(pkg-config --static --libs-only-l libmosquitto libprotobuf-c) -pthread
if grep -q libaudiohub <<<"$(ldd "$work/hub-static" 2>&1 || true)"; then echo "hub-install-check: the static hub is not static" >&2; exit 1; fi
# docs/hub-sdk.md's C (Tests/CAudioHubGuide/guide.c holds its blocks): built against the installed SDK, every name
# linked, never run.
${CC:-cc} -std=c99 -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared -Wl,--no-undefined \
    $(pkg-config --cflags audiohub) -o "$work/guide.so" Tests/CAudioHubGuide/guide.c $(pkg-config --libs audiohub)

start_broker 18980 "$work" "$work/broker.log"
"$BRIDGE" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id install-bridge >"$work/bridge.log" 2>&1 &
bridge_pid=$!
wait_for_bridge "$work/bridge.log"

for hub in hub-c/hub hub-static; do
    output=$(printf 'inEar\nsources 12:34:56:78:9A:BC\nsources 12:34\noffHead\n' |
        timeout 30 "$work/$hub" "mqtt://127.0.0.1:$port" "install-$(basename $hub)" "installed-$(basename $hub)")
    expected="pair none register none placement none sources none placement none"
    got=$(echo "$output" | grep ' #' | sed 's/ #[0-9]*:/:/' | tr -d ':' | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" != "$expected" ] || ! echo "$output" | grep -q "^sources 12:34: invalid Bluetooth address"; then
        echo "hub-install-check: $hub printed:" >&2
        echo "$output" >&2
        exit 1
    fi
done
mosquitto_pub -p "$port" -r -q 1 -t audio/sources/123456789abc/state \
    -m '{"sequence": "1", "activity": "ACTIVITY_MEDIA", "headTracking": "HEAD_TRACKING_ON"}'
output=$( (printf 'onHead\n'; sleep 3; printf 'offHead\n'; sleep 1) |
    timeout 30 "$work/hub-c/stream" "mqtt://127.0.0.1:$port" install-stream installed-stream 12:34:56:78:9A:BC 100)
if ! grep -q '^activate: host 12:34:56:78:9A:BC, head tracking on' <<<"$output" ||
    ! grep -Eq '^invalidate: reason 3, [1-9][0-9]* frames sent' <<<"$output"; then
    echo "hub-install-check: stream printed:" >&2
    echo "$output" >&2
    exit 1
fi
echo "hub-install-check: installed into a clean prefix; Examples/hub-c built with pkg-config (shared) and static, and the guide's C; both hubs ran against the bridge; stream: $(grep '^invalidate' <<<"$output")"
