# Sourced by the benchmark scripts.
#
# require_built SCRIPT TARGET BINARY...
#   Exits with a hint to run `make TARGET` unless every BINARY is an executable file.
# rss_kb PID
#   The process's resident memory in kB (VmRSS).

require_built() {
    local script=$1 target=$2 bin
    shift 2
    for bin in "$@"; do
        [ -x "$bin" ] || { echo "$script: $bin is missing: run \`make $target\`" >&2; exit 2; }
    done
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
