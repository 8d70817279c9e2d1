#!/usr/bin/env bash
# Checks the deploy files with no container engine and no running systemd (`make check-deploy`):
#
#   BRIDGE=path/to/accessory-bridge scripts/check-deploy.sh
#
#   1. systemd-analyze verify on deploy/systemd/accessory-bridge.service, alone and with its credentials drop-in, and
#      on the cluster member's template (as accessory-bridge@bridge-1), in a temporary root that holds this machine's
#      system units and a stub /usr/local/bin/accessory-bridge (verify wants ExecStart= to exist). Any message fails:
#      verify warns about unknown keys and bad values, yet exits 0.
#   2. systemd-analyze security --offline on both units: fails above an overall exposure of THRESHOLD tenths (default
#      20: 2.0 on systemd's scale of 0 to 10, where 1.2 is what each has).
#   3. deploy/systemd/accessory-bridge.env.example names each option of `$BRIDGE --help`, and nothing else.
#   4. deploy/container: compose.yaml is YAML with the three services, the files it mounts and builds from exist, the
#      bridge is given the compose broker and an HTTP address; cluster.compose.yaml has mosquitto, etcd and three
#      bridges, each given the broker, etcd, the cluster's name and slots, and its member name; the Containerfile has a
#      build and a runtime stage and a non-root user (`make check-container` runs them).
#   5. deploy/container/mosquitto.conf: a real mosquitto starts with it (listener and data directory moved to a
#      temporary place), keeps a retained message, and writes its database on a clean stop.
set -euo pipefail
cd "$(dirname "$0")/.."
BRIDGE=${BRIDGE:-.build/debug/accessory-bridge}
THRESHOLD=${THRESHOLD:-20}
fail() {
    echo "check-deploy: $*" >&2
    exit 1
}
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing: apt-get install systemd"
[ -x "$BRIDGE" ] || fail "$BRIDGE is not built (swift build --product accessory-bridge, or BRIDGE=...)"

work=$(mktemp -d)
broker_pid=
trap 'kill $broker_pid 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT

# 1. verify --------------------------------------------------------------------------------------------------------
root=$work/root
units=/usr/lib/systemd/system
[ -d "$units" ] || units=/lib/systemd/system
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/usr/local/bin"
cp -r "$units" "$root/usr/lib/systemd/"
printf '#!/bin/sh\nexit 0\n' > "$root/usr/local/bin/accessory-bridge"
chmod 755 "$root/usr/local/bin/accessory-bridge"
cp deploy/systemd/accessory-bridge.service "$root/etc/systemd/system/"
cp deploy/systemd/accessory-bridge@.service "$root/etc/systemd/system/"
# verify WHAT UNIT: `systemd-analyze verify` of UNIT, clean.
verify() {
    local output
    output=$(systemd-analyze verify --root="$root" "$2" 2>&1) \
        || fail "systemd-analyze verify ($1) failed: $output"
    [ -z "$output" ] || fail "systemd-analyze verify ($1) is not clean:
$output"
    echo "systemd-analyze verify ($1): clean"
}
verify "the unit" accessory-bridge.service
mkdir -p "$root/etc/systemd/system/accessory-bridge.service.d"
cp deploy/systemd/accessory-bridge-credentials.conf "$root/etc/systemd/system/accessory-bridge.service.d/credentials.conf"
verify "with accessory-bridge-credentials.conf" accessory-bridge.service
verify "the cluster member's template, as accessory-bridge@bridge-1" accessory-bridge@bridge-1.service

# 2. security ------------------------------------------------------------------------------------------------------
for unit in accessory-bridge.service accessory-bridge@bridge-1.service; do
    security=$(systemd-analyze security --offline=true --root="$root" --threshold="$THRESHOLD" "$unit" 2>&1) \
        || fail "systemd-analyze security: $unit's exposure above $THRESHOLD tenths:
$(printf '%s\n' "$security" | grep -E '^✗|Overall')"
    printf '%s\n' "$security" | grep 'Overall exposure' | sed 's/^→ /systemd-analyze security: /'
done

# 3. the environment file ------------------------------------------------------------------------------------------
# Each option of --help as its variable: --topic-root is AUDIO_BRIDGE_TOPIC_ROOT, --no-http is AUDIO_BRIDGE_HTTP.
"$BRIDGE" --help > "$work/help" 2>&1 || fail "$BRIDGE --help failed: $(cat "$work/help")"
sed -nE 's/^  (-[a-z], )?--([a-z0-9-]+).*/\2/p' "$work/help" | grep -vxE 'help|version' | sed 's/^no-//' \
    | tr 'a-z-' 'A-Z_' | sed 's/^/AUDIO_BRIDGE_/' | sort -u > "$work/options"
[ "$(wc -l < "$work/options")" -gt 10 ] || fail "could not read the options of $BRIDGE --help"
sed -nE 's/^#?(AUDIO_BRIDGE_[A-Z0-9_]+)=.*/\1/p' deploy/systemd/accessory-bridge.env.example | sort > "$work/keys"
duplicates=$(uniq -d "$work/keys")
[ -z "$duplicates" ] || fail "accessory-bridge.env.example names these twice: $duplicates"
missing=$(comm -23 "$work/options" "$work/keys" | tr "\n" " ")
unknown=$(comm -13 "$work/options" "$work/keys" | tr "\n" " ")
[ -z "${missing// /}" ] || fail "accessory-bridge.env.example lacks options of accessory-bridge --help: $missing"
[ -z "${unknown// /}" ] || fail "accessory-bridge.env.example names what accessory-bridge --help does not know: $unknown"
echo "accessory-bridge.env.example: the $(wc -l < "$work/keys") options of accessory-bridge --help"

# 4. compose.yaml and the Containerfile ----------------------------------------------------------------------------
python=
for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import yaml' 2>/dev/null; then
        python=$candidate
        break
    fi
done
[ -n "$python" ] || fail "no python3 with PyYAML: apt-get install python3-yaml"
"$python" - deploy/container <<'PYTHON' || fail "deploy/container is not as it should be"
import os, re, sys, yaml

directory = sys.argv[1]
problems = []
with open(os.path.join(directory, "compose.yaml")) as file:
    compose = yaml.safe_load(file)
services = compose.get("services", {})
if sorted(services) != ["bridge", "homeassistant", "mosquitto"]:
    problems.append(f"services are {sorted(services)}")
named = set(compose.get("volumes") or {})
for name, service in services.items():
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            if not os.path.exists(os.path.join(directory, source)):
                problems.append(f"{name} mounts {source}, which does not exist")
        elif source not in named:
            problems.append(f"{name} mounts volume {source}, which volumes: does not declare")
    for port in service.get("ports", []):
        if not re.fullmatch(r"(\d+\.\d+\.\d+\.\d+:)?\d+:\d+", str(port)):
            problems.append(f"{name}: port {port!r} is not host:container")
bridge = services.get("bridge", {})
build = bridge.get("build", {})
context = os.path.join(directory, build.get("context", "."))
containerfile = os.path.join(context, build.get("dockerfile", "Dockerfile"))
if not os.path.isfile(containerfile):
    problems.append(f"the bridge builds from {containerfile}, which does not exist")
command = " ".join(bridge.get("command", []))
for wanted in ("--broker mqtt://mosquitto:1883", "--http-host 0.0.0.0"):
    if wanted not in command:
        problems.append(f"the bridge's command lacks {wanted}: {command}")
if "mosquitto" not in bridge.get("depends_on", []):
    problems.append("the bridge does not depend on mosquitto")
if not services.get("mosquitto", {}).get("image", "").startswith("eclipse-mosquitto:2"):
    problems.append("mosquitto is not eclipse-mosquitto:2.x")
if "home-assistant" not in services.get("homeassistant", {}).get("image", ""):
    problems.append("homeassistant is not Home Assistant's image")

# The cluster's: mosquitto, etcd, three bridges given the broker, etcd, a name, the slots and a member name each.
with open(os.path.join(directory, "cluster.compose.yaml")) as file:
    cluster = yaml.safe_load(file)
members = cluster.get("services", {})
if sorted(members) != ["bridge-1", "bridge-2", "bridge-3", "etcd", "mosquitto"]:
    problems.append(f"cluster.compose.yaml's services are {sorted(members)}")
for name in ("bridge-1", "bridge-2", "bridge-3"):
    member = members.get(name, {})
    environment = member.get("environment", {})
    for key in ("AUDIO_BRIDGE_BROKER", "AUDIO_BRIDGE_CLUSTER", "AUDIO_BRIDGE_CLUSTER_NAME", "AUDIO_BRIDGE_SLOTS"):
        if key not in environment:
            problems.append(f"cluster.compose.yaml: {name} lacks {key}")
    if f"--member {name}" not in " ".join(member.get("command", [])):
        problems.append(f"cluster.compose.yaml: {name} is not given its member name")
    if not os.path.isfile(os.path.join(directory, member.get("build", {}).get("context", "."),
                                       member.get("build", {}).get("dockerfile", "Dockerfile"))):
        problems.append(f"cluster.compose.yaml: {name} builds from a Containerfile that does not exist")

with open(os.path.join(directory, "Containerfile")) as file:
    lines = [line.strip() for line in file if line.strip() and not line.lstrip().startswith("#")]
stages = [line for line in lines if line.startswith("FROM ")]
users = [line.split()[1] for line in lines if line.startswith("USER ")]
if len(stages) < 2:
    problems.append(f"the Containerfile has {len(stages)} stage(s), not a build and a runtime")
if not users or users[-1].split(":")[0] in ("root", "0"):
    problems.append("the Containerfile's image runs as root")
if "EXPOSE 9464" not in lines:
    problems.append("the Containerfile does not expose 9464")
if not any(line.startswith("ENTRYPOINT") and "accessory-bridge" in line for line in lines):
    problems.append("the Containerfile's entry point is not the bridge")
for problem in problems:
    print(f"check-deploy: {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"compose.yaml: services {', '.join(sorted(services))}; cluster.compose.yaml: {', '.join(sorted(members))}; "
      f"Containerfile: {len(stages)} stages, user {users[-1]}")
PYTHON

# 5. the compose broker's configuration ----------------------------------------------------------------------------
. scripts/lib/broker.sh
port=18830
while ! port_is_free "$port"; do port=$((port + 1)); done
data=$work/mosquitto-data
mkdir -p "$data"
chmod 711 "$work"  # mosquitto started as root runs as the user mosquitto
chmod 777 "$data"
grep -q '^listener 1883 0.0.0.0$' deploy/container/mosquitto.conf || fail "mosquitto.conf: no 'listener 1883 0.0.0.0'"
sed -e "s|^listener 1883 0.0.0.0$|listener $port 127.0.0.1|" -e "s|^persistence_location .*|persistence_location $data/|" \
    deploy/container/mosquitto.conf > "$work/mosquitto.conf"
mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
"$mosquitto" -c "$work/mosquitto.conf" 2> "$work/mosquitto.log" &
broker_pid=$!
for _ in $(seq 50); do
    port_is_free "$port" || break
    kill -0 "$broker_pid" 2>/dev/null || fail "mosquitto refused deploy/container/mosquitto.conf: $(cat "$work/mosquitto.log")"
    sleep 0.1
done
mosquitto_pub -p "$port" -V mqttv5 -q 1 -r -t check/retained -m kept
[ "$(mosquitto_sub -p "$port" -V mqttv5 -t check/retained -C 1 -W 5)" = kept ] \
    || fail "mosquitto with deploy/container/mosquitto.conf did not keep a retained message"
kill -TERM "$broker_pid"
wait "$broker_pid" || true
broker_pid=
[ -s "$data/mosquitto.db" ] || fail "mosquitto wrote no database to its persistence_location: $(cat "$work/mosquitto.log")"
echo "deploy/container/mosquitto.conf: mosquitto $("$mosquitto" -h | sed -n 's/^mosquitto version //p') starts," \
    "keeps a retained message, saves to its data directory"
echo 'check-deploy: all good (the containers are built and run by make check-container)'
