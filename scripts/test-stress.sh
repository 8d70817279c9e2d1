#!/usr/bin/env bash
# The whole suite RUNS times while HOGS CPU hogs run (`make test-stress RUNS=30 HOGS=2`; the build is done before):
# a table of runs, then every failing test with the runs it failed in. Each run's output is kept in
# .build-stress/<date>/run-N.log; a failed run also keeps its temporary directory (brokers' configurations and
# logs, the bridges' logs: KEEP_BROKER_FILES=1) in run-N.tmp, so that a flake can be read and reproduced. When
# Swift's cooperative pool in the test process starts nothing for 5 s, the log says so and run-N.tmp gets every
# thread's stack (AUDIO_STALL_DUMP, Tests/TestSupport/StallWatch.swift).
# Each run builds the C SDK's checks from the working tree (as `make test` does): leave the sources alone meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-10}
HOGS=${HOGS:-2}
out=.build-stress/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

# The tests a run's log names as failing: Swift Testing marks each "✘ Test name() failed ..." (or "recorded an
# issue"), and the whole run "✘ Test run with N tests ... failed".
failing_tests() {
    sed -n 's/^✘ Test \([^ ]*\) \(failed\|recorded an issue\).*/\1/p' "$1" | grep -v '^run$' | sort -u
}

hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }
trap 'stop_hogs; exit 130' INT TERM
trap stop_hogs EXIT
for _ in $(seq "$HOGS"); do
    # A busy loop in its own shell: one core's worth of competition for the tests, the brokers and the bridges.
    bash -c 'while :; do :; done' &
    hogs+=($!)
done

echo "test-stress: $RUNS runs with $HOGS CPU hogs; logs in $out"
printf '%-5s %-6s %8s  %s\n' run result seconds "failed tests" | tee "$out/table.txt"
passed=0
for run in $(seq "$RUNS"); do
    log="$out/run-$run.log"
    tmp="$out/run-$run.tmp"
    mkdir -p "$tmp"
    started=$(date +%s)
    TMPDIR="$PWD/$tmp" KEEP_BROKER_FILES=1 AUDIO_STALL_DUMP="$PWD/$tmp" scripts/run-tests.sh --parallel >"$log" 2>&1
    status=$?
    seconds=$(( $(date +%s) - started ))
    failed=$(failing_tests "$log" | tr '\n' ' ')
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        # A stall a passing run survived is still worth a look: its stacks are kept.
        for dump in "$tmp"/stall-*.txt; do [ -e "$dump" ] && mv "$dump" "$out/run-$run-$(basename "$dump")"; done
        rm -rf "$tmp"
        result=pass
    else
        result=FAIL
        [ -n "$failed" ] || failed="(no test named: exit status $status; see $log)"
    fi
    printf '%-5s %-6s %8s  %s\n' "$run" "$result" "$seconds" "$failed" | tee -a "$out/table.txt"
done

echo
echo "test-stress: $passed of $RUNS runs passed with $HOGS CPU hogs" | tee -a "$out/table.txt"
if [ "$passed" -ne "$RUNS" ]; then
    echo "failing tests (runs):" | tee -a "$out/table.txt"
    for run in $(seq "$RUNS"); do
        failing_tests "$out/run-$run.log" | sed "s/\$/\t$run/"
    done | awk -F'\t' '{ runs[$1] = runs[$1] " " $2; count[$1]++ } END { for (t in runs) printf "  %s: %d (runs%s)\n", t, count[t], runs[t] }' \
        | tee -a "$out/table.txt"
    exit 1
fi
