#!/usr/bin/env bash
# Load smoke: a broker (deploy/mosquitto/dev.conf on a free port), a release bridge, and load-smoke publishing
# telemetry from a separate process. Prints messages/s, lost results and the bridge's peak RSS.
# Usage: scripts/load-smoke.sh [messages=100000] [accessories=1000]
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${1:-100000}
accessories=${2:-1000}

. scripts/lib/bench.sh
bench_setup 18830
"$bin/accessory-bridge" --broker "mqtt://127.0.0.1:$port" --log-level warning 2>"$work/bridge.log" &
bridge=$!
sleep 1

status=0
"$bin/load-smoke" "mqtt://127.0.0.1:$port" "$messages" "$accessories" || status=$?
echo "bridge peak RSS: $(grep VmHWM /proc/$bridge/status | awk '{print $2, $3}')"
echo "bridge warnings and errors: $(wc -l < "$work/bridge.log") lines"
exit $status
