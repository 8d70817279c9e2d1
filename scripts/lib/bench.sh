# Sourced by load-smoke.sh and rebuild-bench.sh: what both measure with.
#
# bench_setup FIRST_PORT
#   Builds accessory-bridge and load-smoke (release), sets `bin` to their folder and `work` to a new temporary folder,
#   arranges for `$bridge`, the broker and `work` to go at exit, and starts a broker from FIRST_PORT (start_broker in
#   broker.sh; its log is $work/broker.log). Sets `port` and `broker_pid`.

. scripts/lib/broker.sh

bench_setup() {
    swift build -c release --product accessory-bridge >&2
    swift build -c release --product load-smoke >&2
    bin=$(swift build -c release --show-bin-path)
    work=$(mktemp -d)
    bridge=
    broker_pid=
    trap 'kill $bridge $broker_pid 2>/dev/null || true; rm -rf "$work"' EXIT
    start_broker "$1" "$work" "$work/broker.log"
}
