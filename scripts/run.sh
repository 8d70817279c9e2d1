#!/usr/bin/env bash
# `make run`: starts mosquitto from deploy/mosquitto/dev.conf on loopback (port 1883, or the next free one), then
# the bridge in the foreground. Ctrl-C stops the bridge (gracefully: it publishes its offline status) and the broker.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/broker.sh
work=$(mktemp -d)
broker_pid=
cleanup() {
    [ -z "$broker_pid" ] || kill "$broker_pid" 2>/dev/null || true
    [ -z "$broker_pid" ] || wait "$broker_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
start_broker 1883 "$work"

echo "broker:  mqtt://127.0.0.1:$port   (mosquitto_sub -p $port -t 'audio/#' -v)"
echo "bridge:  accessory-bridge --broker mqtt://127.0.0.1:$port $*"
echo "stop:    Ctrl-C"
# Not exec: the trap must stop the broker once the bridge has shut down.
.build/debug/accessory-bridge --broker "mqtt://127.0.0.1:$port" "$@" &
bridge_pid=$!
trap 'kill -INT "$bridge_pid" 2>/dev/null || true' INT TERM
wait "$bridge_pid" || true
wait "$bridge_pid" 2>/dev/null || true
