#!/usr/bin/env bash
# Overload benchmark: a fresh broker (deploy/mosquitto/dev.conf) and release bridge (with BRIDGE_ARGS), ACCESSORIES
# (default 100,000) paired, registered and each connected to an idle source of its own through Benchmarks/LoadGen
# --own-sources, then each placed on a head once at RATE reports/s (default 20,000: beyond what the bridge sustains,
# so its outbound queue of 100,000 messages overflows unless it stops reading). Prints LoadGen's summary (how many
# answers were lost), how long the answers took, the bridge's peak RSS, and what the bridge logged about its queue.
# Compare `BRIDGE_ARGS=--no-home-automation` with `BRIDGE_ARGS="--no-home-automation --publishing-session"`.
# Usage: make bench-overload [ACCESSORIES=100000] [OVERLOAD_RATE=20000] [BRIDGE_ARGS=...]
set -euo pipefail
cd "$(dirname "$0")/.."
accessories=${ACCESSORIES:-100000}
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
loadgen_bin=${LOADGEN:-.build-e2e/loadgen}
. scripts/lib/bench.sh
require_built overload-bench bench-overload "$bridge_bin" "$loadgen_bin"
. scripts/lib/broker.sh
work=$(mktemp -d)
bridge=
broker_pid=
trap 'kill $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT

start_broker 18930 "$work" "$work/broker.log"
"$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id overload-bridge --log-level info \
    ${BRIDGE_ARGS:-} 2>"$work/bridge.log" &
bridge=$!
started=$(date +%s)
status=0
"$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories "$accessories" --seconds 0 --reports "$accessories" \
    --rate "${RATE:-20000}" --own-sources --settle 0 --drain 300 --setup-timeout 3600 >"$work/load.log" 2>&1 || status=$?
echo "overload-bench: $accessories accessories, placed once each at ${RATE:-20000} reports/s; bridge ${BRIDGE_ARGS:-(defaults)}"
cat "$work/load.log"
echo "loadgen exit status $status, $(( $(date +%s) - started )) s in all"
wait_idle "$bridge"
echo "bridge peak RSS $(awk '/VmHWM/ {print $2}' "/proc/$bridge/status") kB, now $(rss_kb "$bridge") kB"
echo "bridge log: $(grep -c 'outbound queue is full' "$work/bridge.log" || true) overflow warnings, $(grep -c 'publish failed' "$work/bridge.log" || true) failed publishes;" \
    "broker: $(grep -c 'being dropped' "$work/broker.log" || true) lines on dropped messages"
grep -m 4 -E 'queue|refused' "$work/bridge.log" || true
