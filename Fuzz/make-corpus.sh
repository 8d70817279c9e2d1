#!/usr/bin/env bash
# Writes the seed corpus of pipeline-fuzzer into DIR (default .build-fuzz/seeds): every golden vector of
# Tests/AccessoryWireTests/Vectors wrapped in the harness's input format (Fuzz/PipelineFuzzer/FuzzInput.swift), a
# few handcrafted JSON conversations, and the reproducers in Fuzz/crashes. Generated, never committed; `make fuzz`
# runs it.
set -euo pipefail
export LC_ALL=C

cd "$(dirname "$0")/.."
vectors=Tests/AccessoryWireTests/Vectors
out=${1:-.build-fuzz/seeds}
rm -rf "$out"
mkdir -p "$out"

# Bytes of the format, written with printf escapes.
byte() { printf "\\x$(printf %02x "$1")"; }
# slice: a 2-byte little-endian length, then the bytes of a file (or of stdin).
slice_file() { local n; n=$(wc -c <"$1"); byte $((n & 255)); byte $((n >> 8)); cat "$1"; }
slice_text() { local n=${#1}; byte $((n & 255)); byte $((n >> 8)); printf '%s' "$1"; }

# Header bits: 1 the fixed set-up first, 2 JSON as the bridge's default format, 4 a restore block follows.
SETUP=1 JSON_DEFAULT=2 RESTORE=4
# Ops: telemetry 0 | hub << 3 | accessory << 4 (acc-7f3a is accessory 0, headphones 1, earbuds 2); hub status
# 3 | hub << 3; source state 4 | source << 3 (123456789abc is source 0); time 5; any topic 6; clock back 7.
TELEMETRY=0 HUB_STATUS=3 SOURCE_STATE=4 TIME=5 ANY_TOPIC=6
# Content bytes: content type index (0 none, 1 JSON, 2 protobuf, 6 text/plain), 8 adds a response topic.
NONE=0 JSON=1 PROTOBUF=2 BOGUS=6 REPLY=8

telemetry_vector() { byte $TELEMETRY; byte "$1"; slice_file "$vectors/$2.binpb"; }
json_telemetry() { byte $((TELEMETRY | $1 << 4)); byte "$2"; slice_text "$3"; }
time_step() { byte $TIME; byte "$1"; }

# Every vector, alone, as telemetry of acc-7f3a (the accessory it names), with and without the set-up, in each
# content type the bridge must read it in, and on the topic it belongs to.
for file in "$vectors"/*.binpb; do
    name=$(basename "$file" .binpb)
    for header in 0 $SETUP $((SETUP | JSON_DEFAULT)); do
        for content in $NONE $PROTOBUF $((PROTOBUF | REPLY)); do
            { byte $header; telemetry_vector $content "$name"; } >"$out/$name-telemetry-$header-$content"
        done
    done
    case $name in
        hub_status) op=$HUB_STATUS topic= ;;
        source_state) op=$SOURCE_STATE topic= ;;
        request_result) op=$ANY_TOPIC topic=hubs/hub-1/accessories/acc-7f3a/result ;;
        accessory_state) op=$ANY_TOPIC topic=accessories/acc-7f3a/state ;;
        switch_command) op=$ANY_TOPIC topic=sources/123456789abc/commands ;;
        bridge_status) op=$ANY_TOPIC topic=bridge/status ;;
        rebirth_request) op=$ANY_TOPIC topic=hubs/hub-1/rebirth ;;
        *) continue ;;
    esac
    for header in 0 $SETUP; do
        if [ "$op" = $ANY_TOPIC ]; then
            { byte $header; byte $op; byte $PROTOBUF; slice_text "$topic"; slice_file "$file"; } >"$out/$name-own-$header"
        else
            { byte $header; byte $op; byte $PROTOBUF; slice_file "$file"; } >"$out/$name-own-$header"
        fi
    done
done

# Restored from the retained accessory and source states, then the telemetry vectors in order.
{
    byte $RESTORE; byte 2
    byte 0; byte $PROTOBUF; slice_file "$vectors/accessory_state.binpb"
    byte 1; byte $PROTOBUF; slice_file "$vectors/source_state.binpb"
    for name in telemetry_placement telemetry_sources telemetry_update telemetry_unpaired; do
        telemetry_vector $PROTOBUF $name
    done
} >"$out/restore-then-telemetry"

# Restored in JSON: acc-7f3a registered, worn and routed from 123456789abc, headphones claiming the same source (the
# bridge must not route it twice), the source's own state; then acc-7f3a taken off and put back on.
{
    byte $RESTORE; byte 3
    byte 0; byte $JSON; slice_text '{"accessoryId": "acc-7f3a", "hubId": "hub-1", "registration": "REGISTRATION_REGISTERED", "name": "R", "hardwareCapabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"], "configuration": {"deviceCapabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"], "devicePlacement": "PLACEMENT_IN_EAR", "primaryAudioSourceDeviceIdentifier": "EjRWeJq8", "secondaryAudioSourceDeviceIdentifier": "3vABI0Vn"}, "routedSource": "EjRWeJq8", "lastSequence": "10", "updatedAtUnixMs": "1763789990000"}'
    byte 2; byte $JSON; slice_text '{"accessoryId": "headphones", "hubId": "hub-2", "registration": "REGISTRATION_REGISTERED", "hardwareCapabilities": ["CAPABILITY_AUDIO_SWITCHING"], "configuration": {"deviceCapabilities": ["CAPABILITY_AUDIO_SWITCHING"], "primaryAudioSourceDeviceIdentifier": "EjRWeJq8"}, "routedSource": "EjRWeJq8", "lastSequence": "4", "updatedAtUnixMs": "1763789990000"}'
    byte 1; byte $JSON; slice_text '{"sequence": "3", "activity": "ACTIVITY_MEDIA", "routedAccessoryId": "acc-7f3a"}'
    json_telemetry 0 $NONE '{"sequence": "11", "placement": {"placement": "PLACEMENT_OFF_HEAD"}}'
    time_step 30
    json_telemetry 0 $NONE '{"sequence": "12", "placement": {"placement": "PLACEMENT_ON_HEAD"}}'
    byte $((TELEMETRY | 1 << 3 | 1 << 4)); byte $NONE; slice_text '{"sequence": "5", "unpaired": {}}'
} >"$out/restore-json-routed"

# The whole life of acc-7f3a from the vectors, with time passing and a hub going offline and back.
{
    byte $SETUP
    for name in telemetry_paired telemetry_register telemetry_update telemetry_sources telemetry_placement; do
        telemetry_vector $PROTOBUF $name
    done
    time_step 140
    byte $HUB_STATUS; byte $PROTOBUF; slice_file "$vectors/hub_status.binpb"
    byte $SOURCE_STATE; byte $PROTOBUF; slice_file "$vectors/source_state.binpb"
    byte $HUB_STATUS; byte $JSON; slice_text '{"online": false}'
    time_step 200
    telemetry_vector $PROTOBUF telemetry_unpaired
} >"$out/vectors-life"

# Handcrafted JSON: headphones (set up) put on, taken off, put back within the resume window; earbuds paired and
# registered from scratch; a call on another source; unknown fields and a misspelt enum; a bogus content type.
{
    byte $SETUP
    json_telemetry 1 $NONE '{"sequence": "4", "requestId": "on", "placement": {"placement": "PLACEMENT_ON_HEAD"}}'
    json_telemetry 1 $((JSON | REPLY)) '{"sequence": "5", "placement": {"placement": "PLACEMENT_OFF_HEAD"}}'
    time_step 50
    json_telemetry 1 $JSON '{"sequence": "6", "placement": {"placement": "PLACEMENT_IN_EAR"}}'
    json_telemetry 1 $JSON '{"sequence": "6", "placement": {"placement": "PLACEMENT_IN_EAR"}}'
} >"$out/json-put-on-take-off"
{
    byte $JSON_DEFAULT
    json_telemetry 2 $NONE '{"sequence": "1", "requestId": "pair-1", "paired": {"name": "Buds", "model": "B-1", "hardwareCapabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"]}}'
    json_telemetry 2 $NONE '{"sequence": "2", "requestId": "reg-1", "register": {"capabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"]}}'
    json_telemetry 2 $JSON '{"sequence": "3", "update": {"deviceCapabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"], "devicePlacement": "PLACEMENT_IN_EAR", "primaryAudioSourceDeviceIdentifier": "EjRWeJq8", "secondaryAudioSourceDeviceIdentifier": "3vABI0Vn"}}'
    byte $((SOURCE_STATE | 1 << 3)); byte $JSON; slice_text '{"sequence": "1", "activity": "ACTIVITY_CALL"}'
    byte $SOURCE_STATE; byte $NONE; slice_text '{"activity": "ACTIVITY_MEDIA", "routedAccessoryId": "earbuds"}'
    json_telemetry 2 $NONE '{"sequence": "4", "sources": {"primary": "3vABI0Vn"}}'
    time_step 180
    json_telemetry 2 $NONE '{"sequence": "9", "unpaired": {}}'
} >"$out/json-earbuds"
{
    byte $SETUP
    json_telemetry 1 $NONE '{"sequence": "4", "placement": {"placement": "PLACEMENT_OVER_THE_EAR"}, "fromTheFuture": {"a": [1, 2]}}'
    json_telemetry 1 $NONE '{"sequence": "5", "placement": {"placement": "PLACEMENT_ONHEAD"}, "fromTheFuture": 1}'
    json_telemetry 1 $BOGUS '{"sequence": "6", "unpaired": {}}'
    json_telemetry 1 $NONE '  {"sequence": 7, "requestId": "\u00e9\ud83c\udfa7", "unpaired": {}}'
    byte $((ANY_TOPIC | 8)); byte $NONE; slice_text 'audio/hubs/hub-1/accessories/new-one/telemetry'
    slice_text '{"paired": {"name": "New", "hardwareCapabilities": ["CAPABILITY_AUDIO_SWITCHING"]}}'
} >"$out/json-edges"

# Every reproducer of a bug found so far, so that each run checks it stays fixed.
for file in Fuzz/crashes/*; do
    [ "$(basename "$file")" = README.md ] || cp "$file" "$out/crash-$(basename "$file")"
done

echo "make-corpus: $(ls "$out" | wc -l) seeds in $out"
