# Sourced by the scripts: starts a single-node etcd (Debian's etcd-server) on loopback, as the tests do.
#
# start_etcd FIRST_PORT WORK_DIR [LOG_FILE]
#   Takes FIRST_PORT (clients; the next port for peers) or the next free pair up to FIRST_PORT+100, keeps its data in
#   WORK_DIR/etcd, and returns once it answers /health. Sets `etcd_port`, `etcd_url` and `etcd_pid`.
# restart_etcd
#   Stops it gracefully and starts it again on the same ports and data (leases and revisions survive).

start_etcd() {
    local first=$1
    etcd_work=$2
    etcd_log=${3:-$2/etcd.log}
    etcd_port=$first
    while ! port_is_free "$etcd_port" || ! port_is_free $((etcd_port + 1)); do
        etcd_port=$((etcd_port + 2))
        [ "$etcd_port" -le $((first + 100)) ] || { echo "no free ports from $first to $((first + 100))" >&2; return 1; }
    done
    etcd_url=http://127.0.0.1:$etcd_port
    launch_etcd
}

launch_etcd() {
    local peer=http://127.0.0.1:$((etcd_port + 1))
    # In a session of its own, as the broker (broker.sh): a Ctrl-C reaches the bridges first, which leave the cluster
    # while etcd is still there.
    setsid etcd --name run --data-dir "$etcd_work/etcd" --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "run=$peer" \
        --logger zap --log-outputs stderr 2>>"$etcd_log" &
    etcd_pid=$!
    for _ in $(seq 200); do
        curl -sf -m 1 "$etcd_url/health" >/dev/null 2>&1 && return 0
        kill -0 "$etcd_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "etcd did not start on port $etcd_port; its log ends:" >&2
    tail -20 "$etcd_log" >&2
    return 1
}

restart_etcd() {
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    launch_etcd
}
