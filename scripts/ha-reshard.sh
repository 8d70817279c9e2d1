#!/usr/bin/env bash
# A reshard against a REAL Home Assistant: what it keeps of the devices and entities it knows, and what it logs.
#
#   make ha-reshard        # or: scripts/ha-reshard.sh [FROM TO]   (12 and 16 by default)
#
# Starts mosquitto (deploy/mosquitto/dev.conf on port 18900 or the next free one), a single-node etcd and two members
# of a cluster of FROM slots with home automation on (the debug build), runs hub-sim's 6 hubs × 2 accessories once,
# then Home Assistant through scripts/ha-validate.sh (installed on first use, see there). While Home Assistant runs:
# a person's names on one accessory's device and its Placement entity, the registries saved
# (scripts/lib/ha_registry.py), `accessory-bridge reshard --slots TO`, 25 s for the members to serve again, the
# registries again. Prints what was kept (every entity and device the same registry entry, the names with them) and
# Home Assistant's warnings and errors; exits 1 when something was not kept. Everything goes to .build-ha/reshard/.
# Not part of `make test`: a manual validation, as ha-validate is.
set -euo pipefail
cd "$(dirname "$0")/.."
from=${1:-12}
to=${2:-16}
. scripts/lib/broker.sh
. scripts/lib/etcd.sh
out=.build-ha/reshard
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
members=()
cleanup() {
    for pid in "${members[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${members[@]}"; do wait "$pid" 2>/dev/null || true; done
    kill "${etcd_pid:-}" "${broker_pid:-}" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
start_broker 18900 "$work" "$out/mosquitto.log"
start_etcd 23900 "$work" "$out/etcd.log"
for member in 1 2; do
    .build/debug/accessory-bridge --broker "mqtt://127.0.0.1:$port" --cluster "$etcd_url" --cluster-name ha-reshard \
        --slots "$from" --member "m$member" --http-port $((19470 + member)) >"$out/m$member.log" 2>&1 &
    members+=($!)
done
for member in 1 2; do
    for _ in $(seq 150); do curl -sf -m 1 "http://127.0.0.1:$((19470 + member))/health/ready" >/dev/null && break; sleep 0.2; done
done
"$(make -s hub-sim)" --broker "mqtt://127.0.0.1:$port" --slots "$from" --hubs 6 --accessories 2 --devices 2 \
    --scenario placement --seconds 3 --quiet >"$out/hub-sim.log" 2>&1
export OUT=$out PORT=$port ETCD=$etcd_url TO=$to
scripts/ha-validate.sh "127.0.0.1:$port" --wait 15 --exec '
    registry() { .build-ha/venv/bin/python scripts/lib/ha_registry.py "$@"; }
    registry customize && sleep 2 && registry snapshot "$OUT/before.json"
    .build/debug/accessory-bridge reshard --broker "mqtt://127.0.0.1:$PORT" --cluster "$ETCD" \
        --cluster-name ha-reshard --slots "$TO" >"$OUT/reshard.log" 2>&1
    tail -1 "$OUT/reshard.log"
    sleep 25
    registry snapshot "$OUT/after.json"' >"$out/ha-validate.log" 2>&1
cp .build-ha/config/home-assistant.log "$out/"
grep '^resharded' "$out/ha-validate.log" || { echo "ha-reshard: the reshard failed: $out/reshard.log" >&2; exit 1; }
echo "Home Assistant's warnings and errors (by message):"
grep -E ' (WARNING|ERROR) ' "$out/home-assistant.log" | sed -E 's/^[0-9-]+ [0-9:.]+ //; s/ for [^ ]+, node_id .*//' \
    | cut -c1-160 | sort | uniq -c | sort -rn || echo "      none"
.build-ha/venv/bin/python scripts/lib/ha_registry.py compare "$out/before.json" "$out/after.json"
