#!/usr/bin/env bash
# `make check-container`: the deploy files run, not only written. With podman on this machine kind, where no image can
# be pulled (../shared/reference/containers-and-etcd.md):
#
#   1. a Debian bookworm base image made from Debian's packages (mmdebstrap: libmosquitto1, libprotobuf-c1, mosquitto,
#      etcd-server), imported as localhost/aab-bookworm (once; REBASE=1 makes it again);
#   2. the bridge built on the host as the Containerfile's build stage builds it (release, --static-swift-stdlib),
#      and the Containerfile's runtime stage built on that base with that binary (BINARY_STAGE=prebuilt);
#   3. deploy/container/cluster.compose.yaml started with podman-compose (from PyPI, in a venv under
#      .build-container): mosquitto and etcd from the base image, three bridges, host networking (the sandbox has no
#      bridge network), so it takes ports 1883, 2379, 2380 and 9464-9466 on loopback;
#   4. once every slot is served, bridge-2 killed (podman kill): its slots must be served by the two others within
#      10 s; then everything is taken down.
# Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.build-container
mkdir -p "$work"
export CONTAINERS_CONF=$PWD/$work/containers.conf
# This sandbox refuses crun's cgroup handling and raising RLIMIT_NPROC: runc, cgroupfs, no default ulimits.
printf '[containers]\ndefault_ulimits = []\npids_limit = 0\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n' \
    >"$CONTAINERS_CONF"
fail() { echo "check-container: $*" >&2; exit 1; }
for port in 1883 2379 2380 9464 9465 9466; do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "port $port is taken: stop what uses it first"
done

# 1. The base image.
if [ -n "${REBASE:-}" ] || ! podman image exists localhost/aab-bookworm:latest; then
    echo "check-container: making the base image from Debian's packages…"
    mmdebstrap --variant=minbase --include=libmosquitto1,libprotobuf-c1,ca-certificates,mosquitto,etcd-server \
        bookworm "$work/rootfs.tar" >"$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log"; fail "mmdebstrap failed"; }
    podman import "$work/rootfs.tar" localhost/aab-bookworm:latest >/dev/null
    rm -f "$work/rootfs.tar"
fi

# 2. The binary, and the runtime image.
swift build -c release --static-swift-stdlib --product accessory-bridge --scratch-path "$work/build" >&2
install -D -m 755 "$work/build/release/accessory-bridge" .prebuilt/accessory-bridge

# 3. The compose file.
if [ ! -x "$work/venv/bin/podman-compose" ]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet podman-compose
fi
export NETWORK_MODE=host BINARY_STAGE=prebuilt RUNTIME_IMAGE=localhost/aab-bookworm MOSQUITTO_IMAGE=localhost/aab-bookworm \
    ETCD_IMAGE=localhost/aab-bookworm BROKER=mqtt://127.0.0.1:1883 ETCD=etcd://127.0.0.1:2379 \
    ETCD_ADVERTISE=http://127.0.0.1:2379
compose=("$work/venv/bin/podman-compose" -f deploy/container/cluster.compose.yaml)
down() { "${compose[@]}" down -v >"$work/down.log" 2>&1 || true; }
trap down EXIT
"${compose[@]}" build >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fail "the image did not build"; }
"${compose[@]}" up -d >"$work/up.log" 2>&1 || { tail -30 "$work/up.log"; fail "the cluster did not start"; }

logs() { for n in 1 2 3; do podman logs "audio-accessory-cluster_bridge-${n}_1" >"$work/bridge-$n.log" 2>&1 || true; done; }
owners() { logs; python3 scripts/lib/cluster_log.py owners "$work"/bridge-*.log; }
served=0
for _ in $(seq 120); do
    served=$(owners | wc -l)
    [ "$served" -ge 64 ] && break
    sleep 1
done
[ "$served" -ge 64 ] || { tail -20 "$work"/bridge-*.log; fail "only $served of 64 slots served after 2 minutes"; }
echo "check-container: 64 slots served: $(owners | awk '{print $2}' | sort | uniq -c | tr -s ' ' | paste -sd,)"

# 4. A bridge killed: its slots move.
held=$(owners | awk '$2 == "bridge-2" {print $1}' | paste -sd,)
killed=$(date +%s.%N)
podman kill audio-accessory-cluster_bridge-2_1 >/dev/null
for _ in $(seq 100); do
    logs
    [ "$(python3 scripts/lib/cluster_log.py gaps "$killed" "$held" "$work"/bridge-1.log "$work"/bridge-3.log | wc -l)" -ge \
        "$(tr ',' '\n' <<<"$held" | grep -c .)" ] && break
    sleep 0.1
done
gaps=$(python3 scripts/lib/cluster_log.py gaps "$killed" "$held" "$work"/bridge-1.log "$work"/bridge-3.log)
moved=$(grep -c . <<<"$gaps" || true)
expected=$(tr ',' '\n' <<<"$held" | grep -c .)
[ "$moved" -eq "$expected" ] || fail "bridge-2 held $expected slots; only $moved were served again within 10 s"
echo "check-container: bridge-2 killed; its $expected slots served again by the others within" \
    "$(awk '{print $2}' <<<"$gaps" | sort -n | tail -1) s"
