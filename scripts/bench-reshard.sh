#!/usr/bin/env bash
# A reshard of a running cluster (docs/scale-out.md, "Changing the slot count"), release members on one mosquitto and
# a single-node etcd: two members of FROM slots (64) serve hub-sim's HUBS (64) hubs x ACCESSORIES (10) accessories,
# which follow the bridge's layout (--slots bridge) at RATE (200) requests/s for SECONDS (40) s; AT (15) s in,
# `accessory-bridge reshard --slots TO` (128). Prints the reshard's summary and its own time; the gap (from the
# first slot stopped for the reshard to the last slot serving again, from the members' logs: when the members had
# left, when they joined again); and hub-sim's summary (lost, errors, p99 and max, commands beyond their change).
#
# Usage: make bench-reshard [FROM=64] [TO=128] [HUBS=64] [ACCESSORIES=10] [RATE=200] [SECONDS=40] [AT=15]
#   (builds a release bridge into .build-e2e first, and hub-sim), or this script with BRIDGE and HUB_SIM.
set -euo pipefail
cd "$(dirname "$0")/.."

from=${FROM:-64}
to=${TO:-128}
hubs=${HUBS:-64}
accessories=${ACCESSORIES:-10}
rate=${RATE:-200}
run_seconds=${SECONDS_RUN:-40}
at=${AT:-15}
bridge_bin=${BRIDGE:-.build-e2e/release/accessory-bridge}
hub_sim=${HUB_SIM:-$(make -s hub-sim)}
. scripts/lib/bench.sh
require_built bench-reshard bench-reshard "$bridge_bin" "$hub_sim"

. scripts/lib/broker.sh
. scripts/lib/etcd.sh
work=$(mktemp -d)
broker_pid=
etcd_pid=
pids=()
trap 'kill -9 ${pids[*]:-} 2>/dev/null || true; kill $broker_pid $etcd_pid 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/conf/deploy/mosquitto"
cp deploy/mosquitto/dev.conf "$work/conf/deploy/mosquitto/dev.conf"
(cd "$work/conf" && start_broker 19940 "$work" "$work/broker.log" && echo "$port $broker_pid" >"$work/broker")
read -r port broker_pid <"$work/broker"
start_etcd 24940 "$work"
log() { echo "bench-reshard: $*" >&2; }

common=(--broker "mqtt://127.0.0.1:$port" --cluster "$etcd_url" --cluster-name reshard --no-home-automation)
for member in m1 m2; do
    "$bridge_bin" "${common[@]}" --slots "$from" --member "$member" --http-port 0 --log-format json \
        >>"$work/member-$member.log" 2>&1 &
    pids+=($!)
    disown $!
done
for _ in $(seq 600); do
    [ "$(python3 scripts/lib/cluster_log.py owners "$work"/member-*.log | wc -l)" -ge "$from" ] && break
    sleep 0.1
done
log "2 members of $from slots on mosquitto 127.0.0.1:$port and etcd $etcd_url; hub-sim $hubs x $accessories" \
    "accessories at $rate requests/s for $run_seconds s; reshard to $to at $at s"
"$hub_sim" --broker "mqtt://127.0.0.1:$port" --slots bridge --hubs "$hubs" --accessories "$accessories" \
    --rate "$rate" --seconds "$run_seconds" --drain 60 --scenario placement --json --quiet \
    >"$work/hub-sim.json" 2>"$work/hub-sim.log" &
simulator=$!
pids+=($simulator)
sleep "$at"
started=$(date +%s.%N)
"$bridge_bin" reshard "${common[@]}" --slots "$to" >"$work/reshard.out" 2>&1 || { cat "$work/reshard.out" >&2; exit 1; }
ended=$(date +%s.%N)
wait "$simulator" || true
echo "$(tail -1 "$work/reshard.out"), in $(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.2f", b - a }') s"
python3 - "$work" <<'PY'
import datetime, glob, json, sys

events = []
for name in glob.glob(sys.argv[1] + "/member-*.log"):
    for line in open(name):
        try:
            events.append(json.loads(line))
        except ValueError:
            pass

def at(event):
    return datetime.datetime.fromisoformat(event["time"].replace("Z", "+00:00"))

def times(message, **fields):
    return [at(e) for e in events if e.get("message") == message and all(e.get(k) == v for k, v in fields.items())]

stops = times("stopped a slot", reason="resharding")
start = min(stops)
served = [t for t in times("serving a slot") if t > start]
left = times("waiting for the reshard to end, to join again")
joined = times("the reshard has ended: joining again")
print(f"gap {(max(served) - start).total_seconds():.2f} s: {len(stops)} slots stopped for the reshard, the members had "
      f"left {(max(left) - start).total_seconds():.2f} s after the first stop and joined again from "
      f"{(min(joined) - start).total_seconds():.2f} s; {len(served)} slot starts after it")
PY
tail -1 "$work/hub-sim.json"
