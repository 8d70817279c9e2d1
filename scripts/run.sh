#!/usr/bin/env bash
# `make run`: starts mosquitto from deploy/mosquitto/dev.conf on loopback (port 1883, or the next free one), then
# the bridge in the foreground. Ctrl-C stops the bridge (gracefully: it publishes its offline status) and the broker.
set -euo pipefail
cd "$(dirname "$0")/.."

port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=1883
while ! port_is_free "$port"; do
    port=$((port + 1))
    [ "$port" -le 1983 ] || { echo "no free port from 1883 to 1983" >&2; exit 1; }
done

work=$(mktemp -d)
sed "s/^listener 1883 /listener $port /" deploy/mosquitto/dev.conf > "$work/mosquitto.conf"
mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
"$mosquitto" -c "$work/mosquitto.conf" &
broker_pid=$!
cleanup() {
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 50); do
    port_is_free "$port" || break
    sleep 0.1
done
port_is_free "$port" && { echo "mosquitto did not start on port $port" >&2; exit 1; }

echo "broker:  mqtt://127.0.0.1:$port   (mosquitto_sub -p $port -t 'audio/#' -v)"
echo "bridge:  accessory-bridge --broker mqtt://127.0.0.1:$port $*"
echo "stop:    Ctrl-C"
# Not exec: the trap must stop the broker once the bridge has shut down.
.build/debug/accessory-bridge --broker "mqtt://127.0.0.1:$port" "$@" &
bridge_pid=$!
trap 'kill -INT "$bridge_pid" 2>/dev/null || true' INT TERM
wait "$bridge_pid" || true
wait "$bridge_pid" 2>/dev/null || true
