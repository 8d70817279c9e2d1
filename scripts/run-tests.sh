#!/usr/bin/env bash
# One run of the whole suite, as `make test` and `make test-stress` run it (the build is done before):
#
#   scripts/run-tests.sh [swift test options...]
#
# The C hub SDK's checks (scripts/hub-install-check.sh, scripts/hub-leak-check.sh), then `swift test`, then the
# cluster's end-to-end suite on its own (it keeps both cores busy for about a minute). Every process
# the run starts carries AUDIO_TEST_RUN=<a marker of this run> in its environment; once the run is over, any process
# that still carries it was left behind by a test: the run fails and names it (then kills it). A run that has not
# ended after TEST_TIMEOUT (20m) fails rather than holding the machine.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/leftovers.sh

SWIFT=${SWIFT:-swift}
TEST_TIMEOUT=${TEST_TIMEOUT:-20m}
AUDIO_TEST_RUN="$$-$(date +%s%N)"
export AUDIO_TEST_RUN
bridge="$($SWIFT build --show-bin-path)/accessory-bridge"

status=0
scripts/hub-install-check.sh || status=$?
[ "$status" -ne 0 ] || BRIDGE="$bridge" scripts/hub-leak-check.sh || status=$?
if [ "$status" -eq 0 ]; then
    timeout "$TEST_TIMEOUT" "$SWIFT" test --skip-build --skip ClusterIntegrationTests "$@" || status=$?
    [ "$status" -ne 124 ] || echo "run-tests: the tests did not end within $TEST_TIMEOUT" >&2
fi
if [ "$status" -eq 0 ]; then
    timeout "$TEST_TIMEOUT" "$SWIFT" test --skip-build --filter ClusterIntegrationTests || status=$?
    [ "$status" -ne 124 ] || echo "run-tests: the cluster's tests did not end within $TEST_TIMEOUT" >&2
fi

left=$(env -u AUDIO_TEST_RUN bash -c '. scripts/lib/leftovers.sh; leftover_pids "$1"' leftovers "$AUDIO_TEST_RUN")
if [ -n "$left" ]; then
    echo "run-tests: $(echo "$left" | wc -l) process(es) outlived the tests that started them:" >&2
    ps -o pid=,etime=,args= -p "$(echo $left | tr ' ' ',')" >&2 || true
    kill -KILL $left 2>/dev/null || true
    [ "$status" -ne 0 ] || status=1
fi
exit "$status"
