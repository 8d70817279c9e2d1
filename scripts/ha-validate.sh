#!/usr/bin/env bash
# Validates MQTT discovery against a REAL Home Assistant, headless, on this machine: what HA makes of the retained
# `homeassistant/...` configs and the state topics a broker holds (devices, entities, their states, HA's warnings).
#
#   make ha-validate BROKER=127.0.0.1:1883 WAIT=30      # or: scripts/ha-validate.sh [HOST[:PORT]] [options]
#
# Start the broker (and the bridge, or your own mosquitto_pub's) first; this script only connects HA to it.
#   1. Installs Home Assistant (HA_VERSION, default 2025.4.4: pip offers nothing newer on Python 3.13.0, later
#      releases need 3.13.2+) into a venv .build-ha/venv with pyenv's Python 3.13 (or PYTHON=/path/to/python3.13),
#      constrained by HA's own package_constraints.txt (read from its wheel), plus the requirements of the
#      integrations hass always sets up (frontend, backup, mqtt, ...), so that hass installs nothing when it starts.
#      Only once: later runs reuse it (delete .build-ha/venv to reinstall). The first install took 140 s here with an
#      empty pip cache (100 s with a warm one; 2 cores, a few wheels built from source) and takes 0.8 GB of disk.
#   2. Writes a fresh config dir .build-ha/config: a small configuration.yaml (no default_config; http on loopback on
#      HA_PORT or the next free port from 18123, api, logger), the MQTT config entry pre-seeded in
#      .storage/core.config_entries (broker, port, discovery on, prefix DISCOVERY_PREFIX; the storage and entry
#      versions read from the installed HA), onboarding marked done, and a user `validator` (hass --script auth).
#   3. Starts `hass -c .build-ha/config` in the background (about 10 s to MQTT here) and waits until its HTTP API
#      answers and its MQTT client is connected (its birth message `online` on <prefix>/status, seen with
#      mosquitto_sub, or its log line), then WAIT seconds (default 20) for discovery.
#   4. Logs in through HA's own auth flow (login_flow, then /auth/token: an admin's access token in .build-ha/token
#      while HA runs), saves /api/states, runs the optional --exec command (env: HA_URL, HA_TOKEN, HA_CONFIG), saves
#      the states again, and with --screenshot takes a PNG of each MQTT device's page.
#   5. Stops HA with SIGTERM (HA writes .storage lazily; a graceful stop flushes it), then reads
#      .storage/core.device_registry and core.entity_registry (platform mqtt), joins the states, and prints a summary
#      with every WARNING/ERROR line of HA's log; the same as JSON in .build-ha/result.json. HA's log:
#      .build-ha/config/home-assistant.log.
#
# Options (each also as an environment variable):
#   HOST[:PORT] | BROKER=HOST:PORT | BROKER_HOST, BROKER_PORT   the broker HA connects to (127.0.0.1:1883)
#   --wait N | WAIT=N                seconds to wait for discovery after HA's MQTT client is up (20)
#   --exec CMD | HA_EXEC=CMD         bash command run while HA is up, after the wait; e.g. switch something off
#                                    through HA, as a person would, and watch what HA publishes:
#       --exec 'mosquitto_sub -C 1 -W 10 -v -t "audio/accessories/+/controls" & sleep 0.5;
#               curl -s -H "Authorization: Bearer $HA_TOKEN" -H "Content-Type: application/json" \
#               -d "{\"entity_id\": \"switch.studio_pro_automatic_switching\"}" $HA_URL/api/services/switch/turn_off; wait'
#   --screenshot | SCREENSHOT=1      PNGs of the MQTT devices' pages in .build-ha/screenshots/<device name>.png:
#                                    headless Chromium driven over the DevTools protocol, logged in with the token
#                                    above; needs Debian's `chromium` (apt-get install chromium: 155 MB download,
#                                    30 s), skipped with a note when it is missing. SCREENSHOT_WAIT: seconds per page (8)
#   MQTT_USERNAME, MQTT_PASSWORD     broker credentials for HA's MQTT client (none)
#   DISCOVERY_PREFIX                 HA's discovery prefix (homeassistant)
#   HA_VERSION, PYTHON, HA_PORT      see above; HA_DEBUG=1 logs homeassistant.components.mqtt at debug level (every
#                                    discovery payload as HA parsed it, in HA's log)
#   START_TIMEOUT                    seconds to wait for HA's API and MQTT client (300)
# Not part of `make test`: a manual validation (the install is large). Exits non-zero when HA did not start or its
# MQTT client did not connect; what HA made of the discovery is for a person to read (and for scripts: result.json).
#
# Seen with HA 2025.4.4 (device-based discovery, `homeassistant/device/<id>/config`):
#   - `dev`, `o` (origin, with `name`) and a `unique_id` in every component that has more than `p` are required: one
#     missing drops the whole device payload (a WARNING in HA's log); <id> is one topic level of [a-zA-Z0-9_-].
#   - Shared options inherited by the components: availability*, state_topic, command_topic, payload_(not_)available.
#     NOT `qos`: a device-level "qos": 1 left every subscription at QoS 0; put qos in each component.
#   - `object_id` sets the entity id; `default_entity_id` (its replacement from 2025.10) is dropped silently here.
#   - enum sensor: a value outside `options` is logged (WARNING) and the previous state is kept; JSON null through
#     `{{ value_json.x }}` renders "None", which the sensor shows as unknown. select: a value outside `options` is
#     an ERROR in the log, previous state kept. The frontend shows enum values verbatim (on_head).
#   - An empty retained config removes the device and all its entities.
#   - event: an event type not in `event_types` is a WARNING for every such event; a payload its value_template renders
#     empty is ignored (a DEBUG line), which is how two event entities share one topic.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/broker.sh    # port_is_free

broker=${BROKER:-}
wait_seconds=${WAIT:-20}
exec_cmd=${HA_EXEC:-}
screenshot=${SCREENSHOT:-}
while [ $# -gt 0 ]; do
    case $1 in
        --wait) wait_seconds=$2; shift 2 ;;
        --exec) exec_cmd=$2; shift 2 ;;
        --screenshot) screenshot=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "ha-validate: unknown option $1 (--help)" >&2; exit 2 ;;
        *) broker=$1; shift ;;
    esac
done
if [ -n "$broker" ]; then
    broker_host=${broker%:*}
    [ "$broker_host" = "$broker" ] && broker_port=1883 || broker_port=${broker##*:}
else
    broker_host=${BROKER_HOST:-127.0.0.1}
    broker_port=${BROKER_PORT:-1883}
fi
wait_seconds=${wait_seconds:-20}
prefix=${DISCOVERY_PREFIX:-homeassistant}
ha_version=${HA_VERSION:-2025.4.4}
start_timeout=${START_TIMEOUT:-300}
root=$PWD/.build-ha
venv=$root/venv
config=$root/config
mkdir -p "$root"

# ---- 1. Home Assistant in a venv, once ------------------------------------------------------------------------------
find_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    local pyenv_root candidate
    pyenv_root=${PYENV_ROOT:-$(command -v pyenv >/dev/null && pyenv root || echo "$HOME/.pyenv")}
    candidate=$(ls -d "$pyenv_root"/versions/3.13.* 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$candidate" ] && command -v pyenv >/dev/null; then
        echo "ha-validate: installing Python 3.13 with pyenv" >&2
        pyenv install -s 3.13 >&2
        candidate=$(ls -d "$pyenv_root"/versions/3.13.* 2>/dev/null | sort -V | tail -1 || true)
    fi
    if [ -n "$candidate" ]; then echo "$candidate/bin/python"; return; fi
    command -v python3.13 || { echo "ha-validate: no Python 3.13 (install pyenv's, or set PYTHON)" >&2; return 1; }
}

marker=$venv/.homeassistant-$ha_version
if [ ! -f "$marker" ]; then
    python=$(find_python)
    echo "ha-validate: installing homeassistant==$ha_version into $venv with $python (2 to 3 minutes)"
    started=$SECONDS
    rm -rf "$venv" "$root/dist"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
    # HA pins its dependencies' versions in package_constraints.txt inside its wheel; without it pip takes the newest
    # of everything it does not pin itself. Fetch the wheel alone first to read them.
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$root/dist" "homeassistant==$ha_version"
    "$venv/bin/python" - "$root/dist" <<'PY'
import pathlib, sys, zipfile
dist = pathlib.Path(sys.argv[1])
wheel = next(dist.glob("homeassistant-*.whl"))
text = zipfile.ZipFile(wheel).read("homeassistant/package_constraints.txt").decode()
# pip cannot use a constraint with an extra or a URL: keep plain ones
lines = [l for l in text.splitlines() if l and not l.startswith("#") and "[" not in l.split("=")[0] and "@" not in l]
(dist / "constraints.txt").write_text("\n".join(lines) + "\n")
PY
    "$venv/bin/pip" install -q --disable-pip-version-check -c "$root/dist/constraints.txt" "$root"/dist/homeassistant-*.whl
    # The requirements of what hass always sets up (bootstrap's core, default and frontend integrations, and mqtt,
    # api, http, auth), with their dependencies: otherwise hass pip-installs them on its first start.
    mapfile -t requirements < <("$venv/bin/python" - <<'PY'
import json, pathlib
import homeassistant.bootstrap as b
components = pathlib.Path(b.__file__).parent / "components"
todo = [*b.CORE_INTEGRATIONS, *(b.LOGGING_AND_HTTP_DEPS_INTEGRATIONS - {"sentry"}), *b.FRONTEND_INTEGRATIONS,
        *b.DEFAULT_INTEGRATIONS, "mqtt", "api", "http", "auth"]
seen, requirements = set(), set()
while todo:
    domain = todo.pop()
    if domain in seen:
        continue
    seen.add(domain)
    manifest = json.loads((components / domain / "manifest.json").read_text())
    requirements.update(manifest.get("requirements", []))
    todo += manifest.get("dependencies", [])
print("\n".join(sorted(requirements)))
PY
)
    "$venv/bin/pip" install -q --disable-pip-version-check -c "$root/dist/constraints.txt" "${requirements[@]}"
    rm -rf "$root/dist"
    touch "$marker"
    echo "ha-validate: installed in $((SECONDS - started)) s, $(du -sh "$venv" | cut -f1) in $venv"
fi

# ---- the helper (Python, run with the venv's interpreter) -----------------------------------------------------------
tool=$root/ha_tool.py
cat > "$tool" <<'PY'
"""ha-validate's helper: seed a config dir, log in, fetch over REST, summarize. Run by scripts/ha-validate.sh."""
import datetime, json, pathlib, sys, urllib.parse, urllib.request


def seed(config, host, port, prefix, username, password):
    """The .storage files a fresh HA needs to run MQTT discovery headless."""
    from homeassistant import config_entries
    from homeassistant.components.mqtt import const as mqtt_const
    from homeassistant.components.onboarding import STORAGE_KEY as ONBOARDING_KEY, STORAGE_VERSION as ONBOARDING_VERSION
    from homeassistant.components.onboarding.const import STEPS
    from homeassistant.util.ulid import ulid_now

    storage = pathlib.Path(config) / ".storage"
    storage.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC).isoformat()
    data = {"broker": host, "port": int(port)}
    if username:
        data["username"] = username
        data["password"] = password
    entry = {
        "created_at": now,
        "data": data,
        "discovery_keys": {},
        "disabled_by": None,
        "domain": "mqtt",
        "entry_id": ulid_now(),
        "minor_version": mqtt_const.CONFIG_ENTRY_MINOR_VERSION,
        "modified_at": now,
        "options": {"discovery": True, "discovery_prefix": prefix},
        "pref_disable_new_entities": False,
        "pref_disable_polling": False,
        "source": "user",
        "subentries": [],
        "title": host,
        "unique_id": None,
        "version": mqtt_const.CONFIG_ENTRY_VERSION,
    }
    files = {
        config_entries.STORAGE_KEY: {
            "version": config_entries.STORAGE_VERSION,
            "minor_version": config_entries.STORAGE_VERSION_MINOR,
            "key": config_entries.STORAGE_KEY,
            "data": {"entries": [entry]},
        },
        ONBOARDING_KEY: {"version": ONBOARDING_VERSION, "minor_version": 1, "key": ONBOARDING_KEY,
                         "data": {"done": list(STEPS)}},
    }
    for key, content in files.items():
        (storage / key).write_text(json.dumps(content, indent=2) + "\n")


def request(url, data=None, token=None, form=False):
    headers = {}
    body = None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if data is not None:
        if form:
            body = urllib.parse.urlencode(data).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        else:
            body = json.dumps(data).encode()
            headers["Content-Type"] = "application/json"
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as response:
        return json.load(response)


def login(base, username, password, out):
    """HA's own login flow (what the frontend does): an authorization code, then tokens."""
    client_id = base + "/"
    flow = request(base + "/auth/login_flow", {"client_id": client_id, "handler": ["homeassistant", None],
                                                 "redirect_uri": base + "/?auth_callback=1"})
    step = request(f"{base}/auth/login_flow/{flow['flow_id']}",
                   {"client_id": client_id, "username": username, "password": password})
    if step.get("type") != "create_entry":
        sys.exit(f"ha-validate: login failed: {step}")
    tokens = request(base + "/auth/token", {"grant_type": "authorization_code", "code": step["result"],
                                            "client_id": client_id}, form=True)
    tokens["client_id"] = client_id
    pathlib.Path(out).write_text(json.dumps(tokens))


def up(url):
    """Exit 0 when url answers 200 (/auth/providers needs no token: a 401 from /api/ would log a failed login)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            sys.exit(0 if response.status == 200 else 1)
    except OSError:
        sys.exit(1)


def fetch(base, token_file, path, out):
    token = json.loads(pathlib.Path(token_file).read_text())["access_token"]
    pathlib.Path(out).write_text(json.dumps(request(base + path, token=token), indent=2))


def load(path, default=None):
    p = pathlib.Path(path)
    return json.loads(p.read_text()) if p.exists() else default


def summarize(config, root, broker):
    from homeassistant.const import __version__
    storage = pathlib.Path(config) / ".storage"
    root = pathlib.Path(root)
    entries = load(storage / "core.config_entries")["data"]["entries"]
    mqtt_ids = {e["entry_id"] for e in entries if e["domain"] == "mqtt"}
    entry_states = {e["entry_id"]: e.get("state") for e in load(root / "config_entries.json", [])}
    devices = [d for d in load(storage / "core.device_registry", {"data": {"devices": []}})["data"]["devices"]
               if mqtt_ids & set(d["config_entries"])]
    all_devices = {d["id"]: d for d in load(storage / "core.device_registry", {"data": {"devices": []}})["data"]["devices"]}
    registry = [e for e in load(storage / "core.entity_registry", {"data": {"entities": []}})["data"]["entities"]
                if e["platform"] == "mqtt"]
    states = {s["entity_id"]: s for s in load(root / "states.json", [])}
    after = {s["entity_id"]: s for s in load(root / "states_after_exec.json", [])}
    log_lines = []
    log_file = pathlib.Path(config) / "home-assistant.log"
    if log_file.exists():
        for line in log_file.read_text(errors="replace").splitlines():
            if " WARNING " in line or " ERROR " in line or " CRITICAL " in line:
                log_lines.append(line)

    def entity(e):
        s = states.get(e["entity_id"], {})
        item = {
            "entity_id": e["entity_id"], "unique_id": e["unique_id"], "original_name": e.get("original_name"),
            "device_class": e.get("original_device_class"), "entity_category": e.get("entity_category"),
            "icon": e.get("original_icon"), "capabilities": e.get("capabilities"),
            "disabled_by": e.get("disabled_by"), "state": s.get("state"), "attributes": s.get("attributes", {}),
        }
        if e["entity_id"] in after:
            a = after[e["entity_id"]]
            item["state_after_exec"] = a["state"]
            item["attributes_after_exec"] = a.get("attributes", {})
        return item

    result = {
        "homeassistant": __version__,
        "broker": broker,
        "mqtt_config_entries": [
            {k: e[k] for k in ("entry_id", "version", "minor_version", "data", "options")}
            | {"state": entry_states.get(e["entry_id"])}
            for e in entries if e["domain"] == "mqtt"],
        "devices": [],
        "entities_without_device": [entity(e) for e in registry if not e.get("device_id")],
        "log_warnings": log_lines,
    }
    for d in devices:
        via = all_devices.get(d.get("via_device_id") or "")
        result["devices"].append({
            "id": d["id"], "name": d.get("name"), "name_by_user": d.get("name_by_user"),
            "manufacturer": d.get("manufacturer"), "model": d.get("model"), "model_id": d.get("model_id"),
            "sw_version": d.get("sw_version"), "hw_version": d.get("hw_version"),
            "serial_number": d.get("serial_number"), "configuration_url": d.get("configuration_url"),
            "identifiers": d.get("identifiers"), "connections": d.get("connections"),
            "via_device": via and via.get("name"), "via_device_id": d.get("via_device_id"),
            "entities": [entity(e) for e in registry if e.get("device_id") == d["id"]],
        })
    (root / "result.json").write_text(json.dumps(result, indent=2) + "\n")

    def short(value):
        text = value if isinstance(value, str) else json.dumps(value)
        return text if len(text) <= 90 else text[:87] + "..."

    print(f"Home Assistant {__version__}, broker {broker}")
    for e in result["mqtt_config_entries"]:
        print(f"  MQTT config entry {e['entry_id']} v{e['version']}.{e['minor_version']} state={e['state']} "
              f"data={e['data']} options={e['options']}")
    print(f"{len(result['devices'])} MQTT device(s), {len(registry)} MQTT entit{'y' if len(registry) == 1 else 'ies'}")
    for d in result["devices"]:
        print(f"\nDEVICE {d['name']!r}  model={d['model']!r} manufacturer={d['manufacturer']!r} "
              f"sw={d['sw_version']!r} via={d['via_device']!r}")
        print(f"  identifiers={d['identifiers']} id={d['id']}")
        for e in d["entities"]:
            extra = []
            for key in ("device_class", "entity_category", "disabled_by"):
                if e[key]:
                    extra.append(f"{key}={e[key]}")
            print(f"  {e['entity_id']:<48} {str(e['state']):<22} {' '.join(extra)}")
            print(f"      name={e['original_name']!r} unique_id={e['unique_id']!r}")
            attributes = {k: v for k, v in e["attributes"].items() if k != "friendly_name"}
            if attributes:
                print(f"      attributes: {short(attributes)}")
            if "state_after_exec" in e:
                changed = {k: v for k, v in e["attributes_after_exec"].items()
                           if k != "friendly_name" and attributes.get(k) != v}
                if e["state_after_exec"] != e["state"] or changed:
                    print(f"      after --exec: {e['state_after_exec']}" + (f"  {short(changed)}" if changed else ""))
    for e in result["entities_without_device"]:
        print(f"\n(no device) {e['entity_id']} {e['state']}")
    print(f"\n{len(log_lines)} warning/error line(s) in home-assistant.log" + (":" if log_lines else ""))
    for line in log_lines:
        print("  " + short(line) if len(line) > 400 else "  " + line)
    print(f"\nJSON: {root / 'result.json'}")


def screenshots(base, root, chromium, wait):
    """A PNG of each MQTT device's page: headless Chromium driven over the DevTools protocol, logged in by putting
    the tokens from login() where HA's frontend keeps them (localStorage hassTokens)."""
    import asyncio, base64, shutil, socket, subprocess, tempfile, time
    import aiohttp

    root = pathlib.Path(root)
    tokens = json.loads((root / "token").read_text())
    body = ("{% set ns = namespace(ids=[], d=[]) %}{% for e in integration_entities('mqtt') %}"
            "{% set d = device_id(e) %}{% if d and d not in ns.ids %}{% set ns.ids = ns.ids + [d] %}"
            "{% set ns.d = ns.d + [[d, device_attr(d, 'name')]] %}{% endif %}{% endfor %}{{ ns.d | tojson }}")
    req = urllib.request.Request(base + "/api/template", json.dumps({"template": body}).encode(),
                                 {"Authorization": f"Bearer {tokens['access_token']}",
                                  "Content-Type": "application/json"})
    devices = json.loads(urllib.request.urlopen(req, timeout=30).read())
    stored = {"hassUrl": base, "clientId": tokens["client_id"], "expires": int(time.time() * 1000) + 1_500_000,
              "access_token": tokens["access_token"], "refresh_token": tokens["refresh_token"],
              "expires_in": tokens["expires_in"], "token_type": "Bearer"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = tempfile.mkdtemp(prefix="ha-validate-chromium-")
    browser = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def run():
        async with aiohttp.ClientSession() as session:
            for _ in range(100):
                try:
                    async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
                        pages = [p for p in await r.json() if p["type"] == "page"]
                        if pages:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
            async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 1 << 30))

                async def cdp(method, **params):
                    n = next(ids)
                    await ws.send_json({"id": n, "method": method, "params": params})
                    async for msg in ws:
                        data = json.loads(msg.data)
                        if data.get("id") == n:
                            if "error" in data:
                                raise RuntimeError(f"{method}: {data['error']}")
                            return data.get("result", {})

                await cdp("Emulation.setDeviceMetricsOverride", width=1400, height=1200, deviceScaleFactor=1,
                          mobile=False)
                await cdp("Page.navigate", url=base + "/auth/providers")  # same origin, no app: set the tokens
                await asyncio.sleep(1)
                await cdp("Runtime.evaluate", expression=f"localStorage.setItem('hassTokens', "
                                                         f"{json.dumps(json.dumps(stored))})")
                for device_id, name in devices:
                    await cdp("Page.navigate", url=f"{base}/config/devices/device/{device_id}")
                    await asyncio.sleep(float(wait))
                    shot = await cdp("Page.captureScreenshot", format="png")
                    slug = "".join(c if c.isalnum() else "_" for c in (name or device_id).lower())
                    out = root / "screenshots" / f"{slug}.png"
                    out.write_bytes(base64.b64decode(shot["data"]))
                    print(f"ha-validate: screenshot {out}")

    try:
        asyncio.run(asyncio.wait_for(run(), 60 + len(devices) * (float(wait) + 10)))
    finally:
        browser.terminate()
        browser.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"seed": seed, "up": up, "login": login, "fetch": fetch, "summarize": summarize, "screenshots": screenshots}[command](*args)
PY
py() { "$venv/bin/python" "$tool" "$@"; }

# ---- 2. a fresh config dir ------------------------------------------------------------------------------------------
ha_port=${HA_PORT:-18123}
while ! port_is_free "$ha_port"; do ha_port=$((ha_port + 1)); done
base=http://127.0.0.1:$ha_port
rm -rf "$config" "$root/screenshots" "$root"/states*.json "$root/config_entries.json" "$root/result.json" "$root/token"
mkdir -p "$config"
mqtt_log_level=info
[ "${HA_DEBUG:-}" = 1 ] && mqtt_log_level=debug
cat > "$config/configuration.yaml" <<YAML
# Written by scripts/ha-validate.sh: no default_config, only what MQTT discovery and the REST API need (hass also
# sets up its always-on integrations: frontend, automation, person, ...). MQTT itself comes from the config entry
# in .storage/core.config_entries.
homeassistant:
  name: ha-validate
  latitude: 52.52
  longitude: 13.40
  elevation: 34
  unit_system: metric
  time_zone: UTC
  country: DE
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: $ha_port
api:
logger:
  default: warning
  logs:
    homeassistant.components.mqtt: $mqtt_log_level
YAML
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
py seed "$config" "$broker_host" "$broker_port" "$prefix" "${MQTT_USERNAME:-}" "${MQTT_PASSWORD:-}"
"$venv/bin/hass" --script auth -c "$config" add validator "$password" >/dev/null

# ---- 3. start hass, wait for its HTTP API and its MQTT birth message ------------------------------------------------
sub_args=(-h "$broker_host" -p "$broker_port")
[ -n "${MQTT_USERNAME:-}" ] && sub_args+=(-u "$MQTT_USERNAME" -P "${MQTT_PASSWORD:-}")
hass_pid=
birth_pid=
cleanup() {
    [ -n "$birth_pid" ] && kill "$birth_pid" 2>/dev/null || true
    if [ -n "$hass_pid" ] && kill -0 "$hass_pid" 2>/dev/null; then
        kill -TERM "$hass_pid" 2>/dev/null || true
        for _ in $(seq 600); do kill -0 "$hass_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$hass_pid" 2>/dev/null || true
    fi
    rm -f "$root/token"
}
trap cleanup EXIT

# HA's birth message is not retained: subscribe before it starts. Its log line is the fallback for a broker whose ACL
# does not let HA's user read <prefix>/status.
mosquitto_sub "${sub_args[@]}" -C 1 -W "$start_timeout" -t "$prefix/status" > "$root/birth" 2>&1 &
birth_pid=$!
sleep 0.3
kill -0 "$birth_pid" 2>/dev/null || { echo "ha-validate: cannot subscribe to $broker_host:$broker_port:"; cat "$root/birth"; exit 1; } >&2
echo "ha-validate: starting Home Assistant $ha_version on $base, MQTT broker $broker_host:$broker_port"
started=$SECONDS
"$venv/bin/hass" -c "$config" > "$config/hass.out" 2>&1 &
hass_pid=$!
alive_or_fail() {
    kill -0 "$hass_pid" 2>/dev/null || { echo "ha-validate: hass exited:" >&2; tail -30 "$config/hass.out" >&2; exit 1; }
    [ $((SECONDS - started)) -lt "$start_timeout" ] || { echo "ha-validate: $1 in $start_timeout s:" >&2
        grep -i 'mqtt\|error' "$config/home-assistant.log" | tail -20 >&2 || true; exit 1; }
}
until py up "$base/auth/providers"; do alive_or_fail "HA's HTTP API did not answer"; sleep 1; done
echo "ha-validate: HTTP API up after $((SECONDS - started)) s"
until [ "$(cat "$root/birth")" = online ] ||
      grep -q 'birth message sent' "$config/home-assistant.log" 2>/dev/null; do
    alive_or_fail "HA's MQTT client did not connect (no 'online' on $prefix/status)"
    sleep 0.5
done
kill "$birth_pid" 2>/dev/null || true
birth_pid=
echo "ha-validate: MQTT connected after $((SECONDS - started)) s (HA's birth message on $prefix/status);" \
     "waiting $wait_seconds s for discovery"
sleep "$wait_seconds"

# ---- 4. REST: states, --exec, states again, screenshots -------------------------------------------------------------
py login "$base" validator "$password" "$root/token"
py fetch "$base" "$root/token" /api/states "$root/states.json"
py fetch "$base" "$root/token" /api/config/config_entries/entry "$root/config_entries.json" || true
if [ -n "$exec_cmd" ]; then
    echo "ha-validate: --exec $exec_cmd"
    HA_URL=$base HA_TOKEN=$("$venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["access_token"])' "$root/token") \
        HA_CONFIG=$config bash -c "$exec_cmd" || echo "ha-validate: --exec exited with $?" >&2
    sleep 2
    py fetch "$base" "$root/token" /api/states "$root/states_after_exec.json"
fi
if [ -n "$screenshot" ]; then
    chromium_bin=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$chromium_bin" ]; then
        echo "ha-validate: --screenshot skipped: no chromium (apt-get install chromium)" >&2
    else
        mkdir -p "$root/screenshots"
        py screenshots "$base" "$root" "$chromium_bin" "${SCREENSHOT_WAIT:-8}" || echo "ha-validate: screenshots failed" >&2
    fi
fi

# ---- 5. stop HA (flushes .storage), summarize -----------------------------------------------------------------------
kill -TERM "$hass_pid"
for _ in $(seq 600); do kill -0 "$hass_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$hass_pid" 2>/dev/null; then
    echo "ha-validate: hass did not stop in 60 s; killing it (.storage may be incomplete)" >&2
    kill -KILL "$hass_pid"
fi
wait "$hass_pid" 2>/dev/null || true
hass_pid=
echo "ha-validate: Home Assistant stopped"
echo
py summarize "$config" "$root" "$broker_host:$broker_port"
