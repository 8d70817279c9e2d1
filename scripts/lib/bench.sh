# Sourced by the benchmark scripts.
#
# require_built SCRIPT TARGET BINARY...
#   Exits with a hint to run `make TARGET` unless every BINARY is an executable file.
# rss_kb PID
#   The process's resident memory in kB (VmRSS).
# wait_idle PID [SECONDS]
#   Returns once the process used no CPU time for two seconds in a row (it caught up with what was sent to it), or
#   after SECONDS (default 1800) with a warning.
# middle
#   The median of the numbers on standard input, one per line.
# machine_ticks
#   The machine's CPU time so far from /proc/stat, in ticks: "STEAL TOTAL" (for steal_percent).
# steal_percent BEFORE AFTER
#   The share of the machine's time the hypervisor took (steal) between two machine_ticks: a shared VM's vCPUs stop
#   now and then, and whatever runs then (often the broker) looks as if it ran for the whole pause.
# disturbed_by STEAL MAX
#   Whether the hypervisor took more than MAX% (a steal_percent) during a measurement: never when MAX is empty. The
#   benchmarks measure such a round again (STEAL_MAX, RETRIES).
# relay_home_automation BRIDGE_ARG...
#   Prints --home-automation (for Benchmarks/Relay: the views and events the bridge publishes for home automation)
#   unless the bridge's arguments turn home automation off, so that both sides publish the same messages.

require_built() {
    local script=$1 target=$2 bin
    shift 2
    for bin in "$@"; do
        [ -x "$bin" ] || { echo "$script: $bin is missing: run \`make $target\`" >&2; exit 2; }
    done
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

wait_idle() {
    local pid=$1 limit=${2:-1800} last now quiet=0 waited=0
    last=$(cpu_ticks "$pid")
    while [ "$quiet" -lt 2 ]; do
        sleep 1
        waited=$((waited + 1))
        [ "$waited" -le "$limit" ] || { echo "wait_idle: $pid still busy after $limit s" >&2; return 0; }
        now=$(cpu_ticks "$pid")
        # A tick or two a second is the idle process's own housekeeping.
        if [ $((now - last)) -le 2 ]; then quiet=$((quiet + 1)); else quiet=0; fi
        last=$now
    done
}

middle() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

relay_home_automation() {
    local arg
    for arg in "$@"; do
        [ "$arg" != --no-home-automation ] || return 0
    done
    echo --home-automation
}

machine_ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat; }

steal_percent() {
    local before=($1) after=($2)
    awk -v steal=$((after[0] - before[0])) -v total=$((after[1] - before[1])) \
        'BEGIN { printf "%.1f", (total > 0 ? 100 * steal / total : 0) }'
}

disturbed_by() { [ -n "$2" ] && awk -v s="$1" -v m="$2" 'BEGIN { exit !(s > m) }'; }
