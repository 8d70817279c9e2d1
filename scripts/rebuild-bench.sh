#!/usr/bin/env bash
# Rebuild benchmark: pairs, registers and connects N accessories (default 100,000) through a broker and a release
# bridge (Benchmarks/LoadGen does the hub's part), restarts the bridge three times, and prints how long reading the
# retained states and rebuilding took, and the bridge's memory after each.
# Usage: make bench-rebuild [ACCESSORIES=100000]   (builds what it needs into .build-e2e, then runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
accessories=${1:-100000}
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
loadgen_bin=${LOADGEN:-.build-e2e/loadgen}
. scripts/lib/bench.sh
require_built rebuild-bench bench-rebuild "$bridge_bin" "$loadgen_bin"

. scripts/lib/broker.sh
work=$(mktemp -d)
bridge=
broker_pid=
trap 'kill $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT
start_broker 18900 "$work" "$work/broker.log"

"$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id bench-bridge --log-level warning 2>"$work/bridge-1.log" &
bridge=$!
echo "creating $accessories accessories…"
"$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories "$accessories" --seconds 0 --reports 1 --settle 0 \
    --setup-timeout 3600 >"$work/load.log" 2>&1 || { cat "$work/load.log"; exit 1; }
head -1 "$work/load.log"
kill -TERM "$bridge"; wait "$bridge" || true

for round in 1 2 3; do
    "$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id bench-bridge --log-level info \
        2>"$work/restart-$round.log" &
    bridge=$!
    for _ in $(seq 6000); do
        grep -q 'rebuilt from the retained states' "$work/restart-$round.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -o 'accessories=[0-9]* .*rebuild_ms=[0-9]*' "$work/restart-$round.log" \
        || { cat "$work/restart-$round.log"; exit 1; }
    sleep 1
    echo "  bridge memory after the rebuild: $(grep -E 'VmRSS|VmHWM' /proc/$bridge/status | tr -s ' \t' ' ' | tr '\n' ' ')"
    kill -TERM "$bridge"; wait "$bridge" || true
done
