#!/usr/bin/env bash
# `make run-cluster`: a cluster of bridges on one machine, for people to try it (docs/cluster.md):
# mosquitto from deploy/mosquitto/dev.conf (port 1883 or the next free one), a single-node etcd (port 2379 or the next
# free pair), and three bridges (members b1, b2, b3; /metrics and /health on ports 9464-9466) sharing SLOTS (12)
# slots. The logs (bridges, broker, etcd) go to .build/run-cluster/. Ctrl-C stops the bridges (gracefully), etcd and
# the broker.
# More bridge options in ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
slots=${SLOTS:-12}

. scripts/lib/broker.sh
. scripts/lib/etcd.sh
work=$(mktemp -d)
logs=.build/run-cluster
mkdir -p "$logs"
broker_pid=
etcd_pid=
bridges=()
cleanup() {
    for pid in "${bridges[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${bridges[@]}"; do wait "$pid" 2>/dev/null || true; done
    kill "$etcd_pid" "$broker_pid" 2>/dev/null || true
    wait "$etcd_pid" "$broker_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start_broker 1883 "$work" "$logs/mosquitto.log"
start_etcd 2379 "$work" "$logs/etcd.log"

for member in 1 2 3; do
    .build/debug/accessory-bridge --broker "mqtt://127.0.0.1:$port" --cluster "$etcd_url" --cluster-name demo \
        --slots "$slots" --member "b$member" --http-port $((9463 + member)) "$@" >"$logs/b$member.log" 2>&1 &
    bridges+=($!)
done

cat <<TEXT
broker:  mqtt://127.0.0.1:$port      etcd: $etcd_url      $slots slots, cluster "demo"
bridges: b1 b2 b3 (logs in $logs/; /health/ready on ports 9464, 9465, 9466)
try:     .build/debug/accessoryctl slot home-1--kitchen --slots $slots
         .build/debug/accessoryctl pair --slots $slots --broker mqtt://127.0.0.1:$port --hub home-1--kitchen buds
         .build/debug/accessoryctl watch --slots $slots --broker mqtt://127.0.0.1:$port
         kill -9 <a bridge's pid> and watch its slots move (grep 'serving a slot' $logs/*.log)
         pids: ${bridges[*]}
stop:    Ctrl-C
TEXT
wait "${bridges[@]}" || true
