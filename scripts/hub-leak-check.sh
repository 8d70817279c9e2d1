#!/usr/bin/env bash
# The C hub SDK under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer (run by `make test`):
#
#   BRIDGE=path/to/accessory-bridge scripts/hub-leak-check.sh [requests (10000)]
#
# Builds Tests/CAudioHubChecks/*.c with the SDK's sources and the generated protobuf-c code, all instrumented, starts
# mosquitto (deploy/mosquitto/dev.conf) and the bridge, and runs it: 10,000 requests through every path of the SDK
# (see leakcheck.c), then head tracking with a playing device of its own that hosts the session (head_tracking.c).
# Fails on any leak or memory error, on any request that does not complete exactly once with the outcome the contract
# gives, and on any head-tracking callback, frame or error other than the contract's.
set -euo pipefail
cd "$(dirname "$0")/.."

requests=${1:-10000}
BRIDGE=${BRIDGE:-.build/debug/accessory-bridge}
[ -x "$BRIDGE" ] || { echo "hub-leak-check: $BRIDGE is not built (swift build)" >&2; exit 1; }

. scripts/lib/broker.sh
work=$(mktemp -d)
bridge_pid=
broker_pid=
trap 'kill $bridge_pid $broker_pid 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT

${CC:-cc} -std=c99 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
    -I Sources/CAudioHub/include -I Sources/CAccessoryWire/Generated $(pkg-config --cflags libmosquitto libprotobuf-c) \
    -o "$work/leakcheck" Tests/CAudioHubChecks/*.c Sources/CAudioHub/src/*.c \
    Sources/CAccessoryWire/Generated/audioaccessory/v1/*.pb-c.c $(pkg-config --libs libmosquitto libprotobuf-c) -pthread

start_broker 18950 "$work" "$work/broker.log"
"$BRIDGE" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id leak-bridge >"$work/bridge.log" 2>&1 &
bridge_pid=$!
wait_for_bridge "$work/bridge.log"

start=$(date +%s)
if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$work/leakcheck" "mqtt://127.0.0.1:$port" "$requests"; then
    echo "hub-leak-check: FAILED" >&2
    exit 1
fi
echo "hub-leak-check: $requests requests under ASan, LSan and UBSan in $(( $(date +%s) - start )) s: no leak, no error"
