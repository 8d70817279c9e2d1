#!/usr/bin/env bash
# Rebuild benchmark: pairs and registers N accessories (default 100,000) through a broker and a release bridge,
# restarts the bridge, and prints how long it took to read the retained states and rebuild, and its memory.
# Usage: scripts/rebuild-bench.sh [accessories=100000]
set -euo pipefail
cd "$(dirname "$0")/.."
accessories=${1:-100000}

. scripts/lib/bench.sh
bench_setup 18900

"$bin/accessory-bridge" --broker "mqtt://127.0.0.1:$port" --client-id bench-bridge --log-level warning \
    2>"$work/bridge-1.log" &
bridge=$!
sleep 1
echo "creating $accessories accessories…"
"$bin/load-smoke" "mqtt://127.0.0.1:$port" 0 "$accessories" > "$work/load.log" || true
head -1 "$work/load.log"
kill -TERM "$bridge"; wait "$bridge" || true

for round in 1 2 3; do
    "$bin/accessory-bridge" --broker "mqtt://127.0.0.1:$port" --client-id bench-bridge --log-level info \
        2>"$work/restart-$round.log" &
    bridge=$!
    for _ in $(seq 600); do
        grep -q 'rebuilt from the retained states' "$work/restart-$round.log" && break
        sleep 0.1
    done
    grep -o 'accessories=[0-9]* read_ms=[0-9]* rebuild_ms=[0-9]*' "$work/restart-$round.log" \
        || { cat "$work/restart-$round.log"; exit 1; }
    sleep 1
    echo "  bridge memory after the rebuild: $(grep -E 'VmRSS|VmHWM' /proc/$bridge/status | tr -s ' \t' ' ' | tr '\n' ' ')"
    kill -TERM "$bridge"; wait "$bridge" || true
done
