#!/usr/bin/env bash
# Memory benchmark: for each count of accessories (default 100,000 and 1,000,000), a fresh broker and release bridge
# (with BRIDGE_ARGS), that many accessories paired, registered and connected each to an idle source of its own through
# Benchmarks/LoadGen --own-sources, each then placed on a head once, paced at RATE reports/s (default 4,000); the
# bridge's RSS once it is idle; then a restart: how long the rebuild took and the RSS after it once idle again.
# The pace stays below what the bridge sustains, and the run fails if a result is missing: the figure is about idle
# accessories, not about what an overload leaves behind. (At 20,000/s, the pace this script once used, the bridge's
# outbound queue overflowed for the whole run at a million: 999,309 answers were shed, and the overload's freed
# memory counted in the running figure. A flood of a million would leave a million messages in flight in LoadGen's
# libmosquitto, which walks its list of them for every acknowledgement.)
# Prints the slope between the first and last count in bytes per accessory, the figure the target is about (<= 256 B).
# Usage: make bench-memory [COUNTS="100000 1000000"] [MEMORY_RATE=4000] [BRIDGE_ARGS=--no-home-automation]
set -euo pipefail
cd "$(dirname "$0")/.."
counts=(${COUNTS:-100000 1000000})
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
loadgen_bin=${LOADGEN:-.build-e2e/loadgen}
. scripts/lib/bench.sh
require_built memory-bench bench-memory "$bridge_bin" "$loadgen_bin"
. scripts/lib/broker.sh
work=$(mktemp -d)
bridge=
broker_pid=
trap 'kill $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT

declare -A running rebuilt seconds
for count in "${counts[@]}"; do
    start_broker 18910 "$work" "$work/broker-$count.log"
    "$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id mem-bridge --log-level warning \
        ${BRIDGE_ARGS:-} 2>"$work/bridge.log" &
    bridge=$!
    "$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories "$count" --seconds 0 --reports "$count" --rate "${RATE:-4000}" --own-sources \
        --settle 0 --drain 120 --setup-timeout 7200 >"$work/load.log" 2>&1 || { cat "$work/load.log"; exit 1; }
    grep -q '^lost 0,' "$work/load.log" || { cat "$work/load.log"; echo "memory-bench: results were lost: lower MEMORY_RATE" >&2; exit 1; }
    # LoadGen does not wait for every answer: the bridge may still work through what the broker holds for it.
    wait_idle "$bridge"
    # Then two statistics intervals (10 s each): in the first quiet one the bridge gives free heap memory back.
    sleep 21
    running[$count]=$(rss_kb "$bridge")
    kill -TERM "$bridge"; wait "$bridge" || true
    "$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id mem-bridge --log-level info \
        ${BRIDGE_ARGS:-} 2>"$work/restart.log" &
    bridge=$!
    for _ in $(seq 12000); do grep -q 'rebuilt from the retained states' "$work/restart.log" && break; sleep 0.1; done
    wait_idle "$bridge"
    sleep 21
    rebuilt[$count]=$(rss_kb "$bridge")
    seconds[$count]=$(grep -o 'rebuild_ms=[0-9]*' "$work/restart.log" | head -1)
    # Every accessory must come back: a state the broker dropped at the restart would be lost.
    restored=$(grep -o 'accessories=[0-9]*' "$work/restart.log" | head -1)
    [ "$restored" = "accessories=$count" ] || { echo "memory-bench: the restart restored ${restored:-nothing}, not $count" >&2; exit 1; }
    kill -TERM "$bridge"; wait "$bridge" || true
    kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true
    printf '%9d accessories: RSS running %7d kB, after a restart %7d kB (%s)\n' \
        "$count" "${running[$count]}" "${rebuilt[$count]}" "${seconds[$count]}"
done
if [ ${#counts[@]} -ge 2 ]; then
    a=${counts[0]}; b=${counts[-1]}
    echo "slope $a -> $b: running $(( (running[$b] - running[$a]) * 1024 / (b - a) )) B/accessory," \
        "after a restart $(( (rebuilt[$b] - rebuilt[$a]) * 1024 / (b - a) )) B/accessory"
fi
