#!/usr/bin/env bash
# Soak: a release bridge (home automation on, the default) under a steady paced load for MINUTES minutes (60), its RSS
# sampled every minute. Benchmarks/LoadGen plays one hub with ACCESSORIES accessories (1,000) sharing a playing
# source, so every placement report is answered, changes the state and sends a command; RATE reports/s (1,000).
# Prints the samples, LoadGen's summary (nothing may be lost) and the drift of RSS from the end of the first 10% of
# the run to the end: the memory target is about this staying flat, not about a figure.
# Usage: make soak [MINUTES=60 RATE=1000 ACCESSORIES=1000]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${MINUTES:-60}
rate=${RATE:-1000}
accessories=${ACCESSORIES:-1000}
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
loadgen_bin=${LOADGEN:-.build-e2e/loadgen}
. scripts/lib/bench.sh
require_built soak soak "$bridge_bin" "$loadgen_bin"
. scripts/lib/broker.sh
work=$(mktemp -d)
bridge=
broker_pid=
load=
trap 'kill $load $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT

start_broker 18920 "$work" "$work/broker.log"
"$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id soak-bridge --log-level warning \
    2>"$work/bridge.log" &
bridge=$!
"$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories "$accessories" --rate "$rate" \
    --seconds $((minutes * 60)) --drain 10 --server-pid "$bridge" --broker-pid "$broker_pid" >"$work/load.log" 2>&1 &
load=$!
samples=()
for minute in $(seq "$minutes"); do
    sleep 60
    kill -0 "$bridge" 2>/dev/null || { echo "soak: the bridge died" >&2; cat "$work/bridge.log" >&2; exit 1; }
    samples+=("$(rss_kb "$bridge")")
    printf 'minute %3d: RSS %6d kB\n' "$minute" "${samples[-1]}"
done
wait "$load" || { cat "$work/load.log"; exit 1; }
load=
cat "$work/load.log"
settled=${samples[$(( ${#samples[@]} / 10 ))]}
last=${samples[-1]}
max=$(printf '%s\n' "${samples[@]}" | sort -n | tail -1)
echo "RSS after ${minutes} min: ${last} kB; after the first 10%: ${settled} kB (drift $((last - settled)) kB); max ${max} kB"
lost=$(grep -o '^lost [0-9]*' "$work/load.log" | grep -o '[0-9]*')
[ "${lost:-1}" -eq 0 ] || { echo "soak: ${lost:-?} reports lost" >&2; exit 1; }
if grep -q 'error' "$work/bridge.log"; then
    echo "soak: the bridge logged errors:" >&2
    grep -m 5 'error' "$work/bridge.log" >&2
    exit 1
fi
