# Sourced by the scripts: starts mosquitto from deploy/mosquitto/dev.conf on loopback.
#
# start_broker FIRST_PORT WORK_DIR [LOG_FILE]
#   Takes FIRST_PORT or the next free port up to FIRST_PORT+100, writes the config into WORK_DIR, starts mosquitto
#   (its log to LOG_FILE, else the terminal) and returns once it listens. Sets `port` and `broker_pid`.

port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_broker() {
    local first=$1 work=$2 log=${3:-/dev/stderr}
    port=$first
    while ! port_is_free "$port"; do
        port=$((port + 1))
        [ "$port" -le $((first + 100)) ] || { echo "no free port from $first to $((first + 100))" >&2; return 1; }
    done
    sed "s/^listener 1883 /listener $port /" deploy/mosquitto/dev.conf > "$work/mosquitto.conf"
    # In a session of its own: a Ctrl-C in the terminal reaches the bridge, which stops first; the caller stops the
    # broker after it (the bridge says offline and disconnects while the broker is still there).
    setsid "$(command -v mosquitto || echo /usr/sbin/mosquitto)" -c "$work/mosquitto.conf" 2>"$log" &
    broker_pid=$!
    for _ in $(seq 50); do
        port_is_free "$port" || return 0
        sleep 0.1
    done
    echo "mosquitto did not start on port $port" >&2
    return 1
}

# wait_for_bridge LOG_FILE [SECONDS (60)]
#   Returns once the bridge writing LOG_FILE says it is connected (after its subscriptions were sent); fails, saying
#   so with the log's end, when it has not after SECONDS.
wait_for_bridge() {
    local log=$1 seconds=${2:-60}
    for _ in $(seq $((seconds * 10))); do
        grep -q "connected to the broker" "$log" && return 0
        sleep 0.1
    done
    echo "the bridge did not connect within $seconds s; its log ends:" >&2
    tail -20 "$log" >&2
    return 1
}
