#!/usr/bin/env bash
# hub-sim end to end under faults, large (HubSimTests does it small in `make test`):
#
#   scripts/hub-chaos.sh [accessories (50)] [rounds (100)]      HUBS=1 RATE=(20 s) SCENARIO=changes BRIDGE=path
#
# Starts mosquitto (deploy/mosquitto/dev.conf with persistence on) and a release bridge, then hub-sim sends `rounds`
# requests per accessory (placement toggles, source changes, full updates; paced at RATE requests/s over all
# accessories, by default so that sending lasts about 20 s) while the bridge is SIGKILLed and restarted at 20% and 75% of the results and the broker is restarted
# at 50%. Passes when every request completed (0 lost, 0 errors), no command went beyond the changes that justify it,
# and every retained accessory state equals what its hub last sent. Prints hub-sim's JSON summary.
set -euo pipefail
cd "$(dirname "$0")/.."

accessories=${1:-50}
rounds=${2:-100}
hubs=${HUBS:-1}
# Paced so that the run lasts about 20 s and every fault meets requests in flight.
rate=${RATE:-$(( (hubs * accessories * rounds + 19) / 20 ))}
scenario=${SCENARIO:-changes}
total=$((hubs * accessories * rounds))

. scripts/lib/broker.sh

if [ -z "${BRIDGE:-}" ]; then
    swift build -c release --product accessory-bridge --scratch-path .build-sdk >&2
    BRIDGE=.build-sdk/release/accessory-bridge
fi
hub_sim=$(make -s hub-sim)

work=$(mktemp -d)
bridge_pid=
sim_pid=
broker_pid=
keep=${KEEP:-}
trap 'kill -9 $bridge_pid $sim_pid 2>/dev/null || true; kill $broker_pid 2>/dev/null && wait $broker_pid 2>/dev/null
      [ -n "$keep" ] || rm -rf "$work"' EXIT

# The broker, with persistence: retained states and the bridge's session survive its restart.
start_persistent_broker() {
    sed -e "s/^listener 1883 /listener $port /" -e "s|^persistence false|persistence true\npersistence_location $work/|" \
        deploy/mosquitto/dev.conf > "$work/mosquitto.conf"
    # As root, mosquitto would switch to the mosquitto user, who cannot write the persistence file here.
    if [ "$(id -u)" = 0 ]; then echo "user root" >> "$work/mosquitto.conf"; fi
    "$(command -v mosquitto || echo /usr/sbin/mosquitto)" -c "$work/mosquitto.conf" 2>>"$work/broker.log" &
    broker_pid=$!
    for _ in $(seq 50); do
        port_is_free "$port" || return 0
        sleep 0.1
    done
    echo "mosquitto did not start on port $port" >&2
    return 1
}
start_broker 18900 "$work" "$work/broker.log"
kill "$broker_pid" && wait "$broker_pid" 2>/dev/null || true
start_persistent_broker

start_bridge() {
    "$BRIDGE" --broker "mqtt://127.0.0.1:$port" --http-port 0 --client-id chaos-bridge >>"$work/bridge.log" 2>&1 &
    bridge_pid=$!
}
kill_bridge() {
    kill -9 "$bridge_pid"
    wait "$bridge_pid" 2>/dev/null || true
    echo "hub-chaos: bridge killed at $(results) results" >&2
}
results() { grep -o 'results [0-9]*' "$work/sim.err" 2>/dev/null | tail -1 | cut -d' ' -f2 || echo 0; }
wait_for() {
    local target=$1
    while [ "$(results)" -lt "$target" ]; do
        kill -0 "$sim_pid" 2>/dev/null || return 0
        sleep 0.2
    done
}

start_bridge
sleep 1
"$hub_sim" --broker "mqtt://127.0.0.1:$port" --hubs "$hubs" --accessories "$accessories" --rounds "$rounds" \
    --rate "$rate" --scenario "$scenario" --verify --json --timeout-ms 500 --timeout-max-ms 2000 --drain 120 \
    --prefix chaos >"$work/sim.json" 2>"$work/sim.err" &
sim_pid=$!

wait_for $((total / 5))
kill_bridge
sleep 0.5
start_bridge

wait_for $((total / 2))
kill "$broker_pid"
wait "$broker_pid" 2>/dev/null || true
echo "hub-chaos: broker restarted at $(results) results" >&2
start_persistent_broker

wait_for $((total * 3 / 4))
kill_bridge
sleep 0.5
start_bridge

status=0
wait "$sim_pid" || status=$?
sim_pid=
tail -3 "$work/sim.err" >&2
cat "$work/sim.json"
sent=$(grep -o '"sent":[0-9]*' "$work/sim.json" | cut -d: -f2)
if [ "$status" -eq 0 ] && [ "$sent" != "$total" ]; then
    echo "hub-chaos: hub-sim sent $sent requests, not $total" >&2
    status=1
fi
if [ "$status" -ne 0 ]; then
    keep=1
    echo "hub-chaos: FAILED (hub-sim exit $status); logs in $work" >&2
    exit 1
fi
echo "hub-chaos: passed: $total requests, bridge killed twice, broker restarted once" >&2
