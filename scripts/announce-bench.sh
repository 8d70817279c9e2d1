#!/usr/bin/env bash
# Announcing to Home Assistant while telemetry flows (issue #27's target: at 1,000,000 accessories, telemetry's p99
# stays <= 50 ms at 2,000 reports/s while Home Assistant's birth message makes the bridge announce every accessory
# again, and the announce completes).
#
# A fresh broker and release bridge (discovery on, the default), ACCESSORIES accessories (1,000,000) paired,
# registered and placed once as bench-memory sets them up (each with an idle source of its own, at SETUP_RATE
# reports/s); then a second LoadGen paces RATE reports/s (2,000) over 1,000 other accessories: first undisturbed for
# 30 s (the baseline), then for WINDOW seconds with `homeassistant/status online` published two seconds into its
# measured phase. Prints each run's p50, p99 and max, and how long the announce took (the bridge's log line
# "announced every accessory to home automation"), which should end inside the window: raise WINDOW if not.
#
# Usage: make bench-announce [ACCESSORIES=1000000] [RATE=2000] [WINDOW=120] [SETUP_RATE=4000]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${ACCESSORIES:-1000000}
rate=${RATE:-2000}
window=${WINDOW:-120}
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
loadgen_bin=${LOADGEN:-.build-e2e/loadgen}
. scripts/lib/bench.sh
require_built announce-bench bench-announce "$bridge_bin" "$loadgen_bin"
. scripts/lib/broker.sh
work=$(mktemp -d)
bridge=
broker_pid=
trap 'kill $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT

start_broker 18930 "$work" "$work/broker.log"
"$bridge_bin" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id announce-bridge --log-level info \
    ${BRIDGE_ARGS:-} 2>"$work/bridge.log" &
bridge=$!
echo "announce-bench: setting up $count accessories (discovery on) at ${SETUP_RATE:-4000} reports/s…"
started=$(date +%s)
"$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories "$count" --seconds 0 --reports "$count" \
    --rate "${SETUP_RATE:-4000}" --own-sources --settle 0 --drain 120 --setup-timeout 7200 >"$work/setup.log" 2>&1 \
    || { cat "$work/setup.log"; exit 1; }
grep -q '^lost 0,' "$work/setup.log" || { cat "$work/setup.log"; echo "announce-bench: set-up results lost" >&2; exit 1; }
wait_idle "$bridge"
echo "announce-bench: set up in $(( $(date +%s) - started )) s; the bridge's RSS $(rss_kb "$bridge") kB"

# paced NAME SECONDS [announce]: RATE reports/s over 1,000 accessories of their own.
paced() {
    local name=$1 seconds=$2 announce=${3:-}
    rm -f "$work/ready"
    "$loadgen_bin" --broker "mqtt://127.0.0.1:$port" --accessories 1000 --accessory-prefix "live-$name" \
        --client-id "lg-$name" --rate "$rate" --seconds "$seconds" --drain 60 --settle 1 \
        --ready-file "$work/ready" --json >"$work/$name.json" 2>"$work/$name.err" &
    local load=$!
    if [ -n "$announce" ]; then
        for _ in $(seq 6000); do [ -e "$work/ready" ] && break; sleep 0.1; done
        sleep 2
        mosquitto_pub -h 127.0.0.1 -p "$port" -t homeassistant/status -m online
    fi
    wait "$load" || { cat "$work/$name.err"; exit 1; }
    jq -r --arg name "$name" \
        '"\($name): \(.results) results, \(.lost) lost, p50 \(.p50_ms) ms, p99 \(.p99_ms) ms, max \(.max_ms) ms"' \
        "$work/$name.json"
}

paced baseline 30
wait_idle "$bridge"
before=$(grep -c 'announced every accessory to home automation' "$work/bridge.log" || true)
paced announcing "$window" announce
line=$(grep 'announced every accessory to home automation' "$work/bridge.log" | tail -n +$((before + 1)) | tail -1 || true)
if [ -z "$line" ]; then
    echo "announce-bench: the announce had not ended when the window did (raise WINDOW)"
else
    echo "announce: $(grep -o 'accessories=[0-9]*' <<<"$line") in $(grep -o 'announce_ms=[0-9]*' <<<"$line") ms" \
        "(the window: $window s)"
fi
echo "the bridge's peak RSS: $(awk '/VmHWM/ {print $2}' "/proc/$bridge/status") kB"
