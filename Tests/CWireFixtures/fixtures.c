/*
 * The C half of the cross-language golden vector tests: see include/CWireFixtures.h.
 *
 * Part 1 builds each wire sample the way a C hub would, with the protoc-c generated structs and
 * their generated pack functions. Its values are written here by hand, independently of the Swift
 * samples (Tests/AccessoryWireTests/WireSamples.swift), and must stay equal to them.
 *
 * Part 2 renders any message protobuf-c unpacked as canonical proto3 JSON by walking its
 * ProtobufCMessageDescriptor, so that Swift can check protobuf-c read every field as Swift wrote it.
 */
#include "CWireFixtures.h"

#include <protobuf-c/protobuf-c.h>

#include "audioaccessory/v1/controls.pb-c.h"
#include "audioaccessory/v1/headtracking.pb-c.h"
#include "audioaccessory/v1/source.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"
#include "audioaccessory/v1/status.pb-c.h"
#include "audioaccessory/v1/telemetry.pb-c.h"
#include "audioaccessory/v1/types.pb-c.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------ */
/* Part 1: the samples, built with the generated C API                                              */
/* ------------------------------------------------------------------------------------------------ */

/* Bluetooth addresses, most significant byte first. */
static const uint8_t ADDRESS_A[6] = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC};
static const uint8_t ADDRESS_B[6] = {0xDE, 0xF0, 0x01, 0x23, 0x45, 0x67};
static const uint8_t ADDRESS_C[6] = {0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6};

static const Audioaccessory__V1__Capability SWITCHING_THEN_PLACEMENT[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT,
};
static const Audioaccessory__V1__Capability PLACEMENT_THEN_SWITCHING[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING,
};

static const Audioaccessory__V1__Capability HEAD_TRACKING_THEN_SPATIALIZATION[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_HEAD_TRACKING,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SPATIALIZATION,
};

/* A head-tracking session's id, 16 bytes. */
static const uint8_t SESSION_ID[16] = {
    0x0F, 0x3C, 0x9A, 0x11, 0x80, 0x00, 0x7E, 0xFF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF,
};
/* 13 bytes of IMU data. */
static const uint8_t FRAME_DATA[13] = {
    0x00, 0x7F, 0x80, 0xFF, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0, 0x01,
};

static const char *const DIAGNOSTICS[2] = {
    "hub clock is 3 s ahead of the bridge",
    "secondary source without a primary \xe2\x80\x94 ignored", /* U+2014 EM DASH */
};

/* The generated structs hold non-const pointers; protobuf-c only reads through them when packing. */
#define BINARY(address) ((ProtobufCBinaryData){sizeof(address), (uint8_t *)(address)})
#define CAPABILITIES(array) ((Audioaccessory__V1__Capability *)(array))

/* Packs `message` with the generated functions of `prefix` unless it does not fit. */
#define PACK_CHECKED(prefix, message)                          \
    do {                                                       \
        size_t needed = prefix##__get_packed_size(message);    \
        if (needed > capacity) return 0;                       \
        return prefix##__pack(message, out);                   \
    } while (0)

static const char ACCESSORY_ID[] = "acc-7f3a";

/* Apple's example of a spatial rendering extension, with flags and a full mask. */
static void fill_spatial_extension(Audioaccessory__V1__AudioComponentDescription *description) {
    description->component_type = 0xaaf;
    description->component_sub_type = 0xc0f;
    description->component_manufacturer = 0xb05e;
    description->component_flags = 1;
    description->component_flags_mask = UINT32_MAX;
}

/* `description` is the storage of the nested spatial extension. */
static void fill_configuration(Audioaccessory__V1__Configuration *configuration,
                               Audioaccessory__V1__AudioComponentDescription *description) {
    configuration->n_device_capabilities = 2;
    configuration->device_capabilities = CAPABILITIES(SWITCHING_THEN_PLACEMENT);
    configuration->device_placement = AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OVER_THE_EAR;
    configuration->primary_audio_source_device_identifier = BINARY(ADDRESS_A);
    configuration->secondary_audio_source_device_identifier = BINARY(ADDRESS_B);
    fill_spatial_extension(description);
    configuration->spatial_extension_description = description;
}

static void fill_head_tracking_session(Audioaccessory__V1__HeadTrackingSession *session) {
    session->accessory_id = (char *)ACCESSORY_ID;
    session->session_id = BINARY(SESSION_ID);
    session->event = AUDIOACCESSORY__V1__HEAD_TRACKING_EVENT__HEAD_TRACKING_EVENT_STATE_CHANGED;
    session->host = BINARY(ADDRESS_C);
    session->head_tracking_active = 1;
    session->restoration_id = "aab:acc-7f3a";
    session->epoch = UINT64_C(4242);
    session->sequence = UINT64_MAX;
    session->reason = AUDIOACCESSORY__V1__HEAD_TRACKING_REASON__HEAD_TRACKING_REASON_SWITCH_CHANGED;
    session->issued_at_unix_ms = INT64_C(1763790000123);
    session->hub_id = "hub-k\xc3\xbc" "che"; /* "hub-küche" */
}

/* What an accessory state nests, with storage of its own. */
struct state_storage {
    Audioaccessory__V1__Configuration configuration;
    Audioaccessory__V1__AudioComponentDescription description;
    Audioaccessory__V1__HeadTrackingSession session;
};

static void fill_accessory_state(Audioaccessory__V1__AccessoryState *state, struct state_storage *storage) {
    Audioaccessory__V1__Configuration *configuration = &storage->configuration;
    fill_configuration(configuration, &storage->description);
    configuration->device_placement = AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_ON_HEAD;

    state->accessory_id = (char *)ACCESSORY_ID;
    state->hub_id = "hub-k\xc3\xbc" "che"; /* "hub-küche" */
    state->registration = AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_REGISTERED;
    state->name = "Kopfh\xc3\xb6rer Pro"; /* "Kopfhörer Pro" */
    state->model = "AAB-200";
    state->n_hardware_capabilities = 2;
    state->hardware_capabilities = CAPABILITIES(SWITCHING_THEN_PLACEMENT);
    state->configuration = configuration;
    state->routed_source = BINARY(ADDRESS_A);
    state->last_sequence = UINT64_MAX;
    state->updated_at_unix_ms = INT64_C(1763790000123);
    state->stale = 1;
    state->n_diagnostics = 2;
    state->diagnostics = (char **)DIAGNOSTICS;
    state->last_error = AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_ACCESSORY_NOT_CAPABLE;
    state->last_error_message = "placement .onHead needs the .placement capability";
    state->automatic_switching_off = 1;
    state->pinned_source = BINARY(ADDRESS_B);
    state->epoch = UINT64_C(4242);
    fill_head_tracking_session(&storage->session);
    state->head_tracking = &storage->session;
}

static struct state_storage state_storage(void) {
    return (struct state_storage){
        .configuration = AUDIOACCESSORY__V1__CONFIGURATION__INIT,
        .description = AUDIOACCESSORY__V1__AUDIO_COMPONENT_DESCRIPTION__INIT,
        .session = AUDIOACCESSORY__V1__HEAD_TRACKING_SESSION__INIT,
    };
}

static size_t pack_telemetry(Audioaccessory__V1__AccessoryTelemetry *telemetry, uint8_t *out,
                             size_t capacity) {
    PACK_CHECKED(audioaccessory__v1__accessory_telemetry, telemetry);
}

static size_t pack_telemetry_paired(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__Paired paired = AUDIOACCESSORY__V1__PAIRED__INIT;
    /* Quote, backslash, tab, Latin-1 and an emoji outside the BMP: "Léa's \"Studio\" \\ Kopfhörer\t🎧" */
    paired.name = "L\xc3\xa9" "a's \"Studio\" \\ Kopfh\xc3\xb6rer\t\xf0\x9f\x8e\xa7";
    paired.model = "AAB-200";
    paired.n_hardware_capabilities = 2;
    paired.hardware_capabilities = CAPABILITIES(SWITCHING_THEN_PLACEMENT);

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = UINT64_MAX;
    telemetry.request_id = "req-0001";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PAIRED;
    telemetry.paired = &paired;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_telemetry_unpaired(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__Unpaired unpaired = AUDIOACCESSORY__V1__UNPAIRED__INIT;

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = 42;
    telemetry.request_id = "req-0002";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UNPAIRED;
    telemetry.unpaired = &unpaired;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_telemetry_register(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__Register register_ = AUDIOACCESSORY__V1__REGISTER__INIT;
    register_.n_capabilities = 2;
    register_.capabilities = CAPABILITIES(HEAD_TRACKING_THEN_SPATIALIZATION);
    Audioaccessory__V1__AudioComponentDescription description = AUDIOACCESSORY__V1__AUDIO_COMPONENT_DESCRIPTION__INIT;
    fill_spatial_extension(&description);
    register_.spatial_extension_description = &description;

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = 43;
    telemetry.request_id = "req-0003";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_REGISTER;
    telemetry.register_ = &register_;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_telemetry_update(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__Configuration update = AUDIOACCESSORY__V1__CONFIGURATION__INIT;
    Audioaccessory__V1__AudioComponentDescription description = AUDIOACCESSORY__V1__AUDIO_COMPONENT_DESCRIPTION__INIT;
    fill_configuration(&update, &description);

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = 44;
    telemetry.request_id = "req-0004";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UPDATE;
    telemetry.update = &update;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_telemetry_placement(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__PlacementReport placement = AUDIOACCESSORY__V1__PLACEMENT_REPORT__INIT;
    placement.placement = AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OFF_HEAD;

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = 45;
    telemetry.request_id = "req-0005";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT;
    telemetry.placement = &placement;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_telemetry_sources(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__SourcesReport sources = AUDIOACCESSORY__V1__SOURCES_REPORT__INIT;
    sources.primary = BINARY(ADDRESS_B);
    sources.secondary = BINARY(ADDRESS_C);

    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = 46;
    telemetry.request_id = "req-0006";
    telemetry.accessory_id = (char *)ACCESSORY_ID;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_SOURCES;
    telemetry.sources = &sources;
    return pack_telemetry(&telemetry, out, capacity);
}

static size_t pack_configuration(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__Configuration configuration = AUDIOACCESSORY__V1__CONFIGURATION__INIT;
    configuration.n_device_capabilities = 2;
    configuration.device_capabilities = CAPABILITIES(PLACEMENT_THEN_SWITCHING);
    configuration.device_placement = AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_IN_EAR;
    configuration.primary_audio_source_device_identifier = BINARY(ADDRESS_B);
    configuration.secondary_audio_source_device_identifier = BINARY(ADDRESS_C);
    Audioaccessory__V1__AudioComponentDescription description = AUDIOACCESSORY__V1__AUDIO_COMPONENT_DESCRIPTION__INIT;
    fill_spatial_extension(&description);
    configuration.spatial_extension_description = &description;
    PACK_CHECKED(audioaccessory__v1__configuration, &configuration);
}

static size_t pack_request_result(uint8_t *out, size_t capacity) {
    struct state_storage storage = state_storage();
    Audioaccessory__V1__AccessoryState state = AUDIOACCESSORY__V1__ACCESSORY_STATE__INIT;
    fill_accessory_state(&state, &storage);

    Audioaccessory__V1__RequestResult result = AUDIOACCESSORY__V1__REQUEST_RESULT__INIT;
    result.request_id = "req-0004";
    result.sequence = UINT64_C(9223372036854775808); /* 2^63: the top bit of a uint64 */
    result.error = AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_INVALIDATED;
    result.message = "Registrierung ung\xc3\xbcltig: erneut registrieren"; /* "ungültig" */
    result.state = &state;
    result.duplicate = 1;
    result.epoch = UINT64_C(4242);
    PACK_CHECKED(audioaccessory__v1__request_result, &result);
}

static size_t pack_accessory_state(uint8_t *out, size_t capacity) {
    struct state_storage storage = state_storage();
    Audioaccessory__V1__AccessoryState state = AUDIOACCESSORY__V1__ACCESSORY_STATE__INIT;
    fill_accessory_state(&state, &storage);
    PACK_CHECKED(audioaccessory__v1__accessory_state, &state);
}

static size_t pack_source_state(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__SourceState state = AUDIOACCESSORY__V1__SOURCE_STATE__INIT;
    state.sequence = 7;
    state.activity = AUDIOACCESSORY__V1__ACTIVITY__ACTIVITY_MEDIA;
    state.routed_accessory_id = (char *)ACCESSORY_ID;
    state.last_command_sequence = UINT64_C(1763790000123004);
    state.last_command_epoch = UINT64_C(4242);
    state.head_tracking = AUDIOACCESSORY__V1__HEAD_TRACKING__HEAD_TRACKING_ON;
    PACK_CHECKED(audioaccessory__v1__source_state, &state);
}

static size_t pack_head_tracking_session(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__HeadTrackingSession session = AUDIOACCESSORY__V1__HEAD_TRACKING_SESSION__INIT;
    fill_head_tracking_session(&session);
    PACK_CHECKED(audioaccessory__v1__head_tracking_session, &session);
}

static size_t pack_head_tracking_frame(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__HeadTrackingFrame frame = AUDIOACCESSORY__V1__HEAD_TRACKING_FRAME__INIT;
    frame.session_id = BINARY(SESSION_ID);
    frame.sequence = UINT64_C(9223372036854775808);
    frame.sent_at_unix_us = INT64_C(-62135596800000000);
    frame.data = BINARY(FRAME_DATA);
    PACK_CHECKED(audioaccessory__v1__head_tracking_frame, &frame);
}

static size_t pack_switch_command(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__SwitchCommand command = AUDIOACCESSORY__V1__SWITCH_COMMAND__INIT;
    command.command_id = "cmd-9c1e";
    command.sequence = 8;
    command.accessory_id = (char *)ACCESSORY_ID;
    command.action = AUDIOACCESSORY__V1__ACTION__ACTION_ROUTE_TO_ACCESSORY;
    command.reason = AUDIOACCESSORY__V1__REASON__REASON_INTERRUPTION_ENDED;
    command.issued_at_unix_ms = INT64_C(1763790000123);
    command.epoch = UINT64_C(4243);
    PACK_CHECKED(audioaccessory__v1__switch_command, &command);
}

static size_t pack_hub_status(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__HubStatus status = AUDIOACCESSORY__V1__HUB_STATUS__INIT;
    status.online = 1;
    status.since_unix_ms = INT64_C(-62135596800000); /* 0001-01-01T00:00:00Z: a 10-byte varint */
    PACK_CHECKED(audioaccessory__v1__hub_status, &status);
}

static size_t pack_bridge_status(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__BridgeStatus status = AUDIOACCESSORY__V1__BRIDGE_STATUS__INIT;
    status.online = 1;
    status.version = "1.4.0-beta.2";
    status.since_unix_ms = INT64_C(1763790000123);
    PACK_CHECKED(audioaccessory__v1__bridge_status, &status);
}

static size_t pack_bridge_layout(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__BridgeLayout layout = AUDIOACCESSORY__V1__BRIDGE_LAYOUT__INIT;
    layout.slots = 4096;
    layout.version = "1.4.0-beta.2";
    PACK_CHECKED(audioaccessory__v1__bridge_layout, &layout);
}

static size_t pack_rebirth_request(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__RebirthRequest request = AUDIOACCESSORY__V1__REBIRTH_REQUEST__INIT;
    request.accessory_id = (char *)ACCESSORY_ID;
    request.last_sequence = 41;
    request.received_sequence = UINT64_C(9223372036854775808);
    request.reason = "sequence 43 follows 41: 1 message missing \u2014 send everything again";
    PACK_CHECKED(audioaccessory__v1__rebirth_request, &request);
}

static size_t pack_accessory_controls(uint8_t *out, size_t capacity) {
    Audioaccessory__V1__AccessoryControls controls = AUDIOACCESSORY__V1__ACCESSORY_CONTROLS__INIT;
    controls.switching = AUDIOACCESSORY__V1__SWITCHING__SWITCHING_OFF;
    controls.pinned_source = "DE:F0:01:23:45:67";
    controls.request_id = "ha-0001";
    PACK_CHECKED(audioaccessory__v1__accessory_controls, &controls);
}

static const struct {
    const char *name;
    size_t (*pack)(uint8_t *out, size_t capacity);
} SAMPLES[] = {
    {"telemetry_paired", pack_telemetry_paired},
    {"telemetry_unpaired", pack_telemetry_unpaired},
    {"telemetry_register", pack_telemetry_register},
    {"telemetry_update", pack_telemetry_update},
    {"telemetry_placement", pack_telemetry_placement},
    {"telemetry_sources", pack_telemetry_sources},
    {"configuration", pack_configuration},
    {"request_result", pack_request_result},
    {"accessory_state", pack_accessory_state},
    {"source_state", pack_source_state},
    {"switch_command", pack_switch_command},
    {"hub_status", pack_hub_status},
    {"bridge_status", pack_bridge_status},
    {"bridge_layout", pack_bridge_layout},
    {"rebirth_request", pack_rebirth_request},
    {"accessory_controls", pack_accessory_controls},
    {"head_tracking_session", pack_head_tracking_session},
    {"head_tracking_frame", pack_head_tracking_frame},
};

size_t cwf_pack_sample(const char *name, uint8_t *out, size_t capacity) {
    if (name == NULL || (out == NULL && capacity > 0)) return 0;
    for (size_t i = 0; i < sizeof(SAMPLES) / sizeof(SAMPLES[0]); i++) {
        if (strcmp(SAMPLES[i].name, name) == 0) return SAMPLES[i].pack(out, capacity);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Part 2: protobuf-c's view of any message, as canonical proto3 JSON                               */
/* ------------------------------------------------------------------------------------------------ */

static const ProtobufCMessageDescriptor *const DESCRIPTORS[] = {
    &audioaccessory__v1__configuration__descriptor,
    &audioaccessory__v1__accessory_telemetry__descriptor,
    &audioaccessory__v1__paired__descriptor,
    &audioaccessory__v1__unpaired__descriptor,
    &audioaccessory__v1__register__descriptor,
    &audioaccessory__v1__placement_report__descriptor,
    &audioaccessory__v1__sources_report__descriptor,
    &audioaccessory__v1__request_result__descriptor,
    &audioaccessory__v1__accessory_state__descriptor,
    &audioaccessory__v1__source_state__descriptor,
    &audioaccessory__v1__switch_command__descriptor,
    &audioaccessory__v1__hub_status__descriptor,
    &audioaccessory__v1__bridge_status__descriptor,
    &audioaccessory__v1__bridge_layout__descriptor,
    &audioaccessory__v1__rebirth_request__descriptor,
    &audioaccessory__v1__accessory_controls__descriptor,
    &audioaccessory__v1__audio_component_description__descriptor,
    &audioaccessory__v1__head_tracking_session__descriptor,
    &audioaccessory__v1__head_tracking_frame__descriptor,
};
#define DESCRIPTOR_COUNT (sizeof(DESCRIPTORS) / sizeof(DESCRIPTORS[0]))

/* The same names as DESCRIPTORS[i]->name, as a plain array for cwf_message_names. */
static const char *const MESSAGE_NAMES[] = {
    "audioaccessory.v1.Configuration",
    "audioaccessory.v1.AccessoryTelemetry",
    "audioaccessory.v1.Paired",
    "audioaccessory.v1.Unpaired",
    "audioaccessory.v1.Register",
    "audioaccessory.v1.PlacementReport",
    "audioaccessory.v1.SourcesReport",
    "audioaccessory.v1.RequestResult",
    "audioaccessory.v1.AccessoryState",
    "audioaccessory.v1.SourceState",
    "audioaccessory.v1.SwitchCommand",
    "audioaccessory.v1.HubStatus",
    "audioaccessory.v1.BridgeStatus",
    "audioaccessory.v1.BridgeLayout",
    "audioaccessory.v1.RebirthRequest",
    "audioaccessory.v1.AccessoryControls",
    "audioaccessory.v1.AudioComponentDescription",
    "audioaccessory.v1.HeadTrackingSession",
    "audioaccessory.v1.HeadTrackingFrame",
};
_Static_assert(sizeof(MESSAGE_NAMES) / sizeof(MESSAGE_NAMES[0]) == DESCRIPTOR_COUNT,
               "one name per descriptor");

const char *const *cwf_message_names(size_t *count) {
    if (count != NULL) *count = DESCRIPTOR_COUNT;
    return MESSAGE_NAMES;
}

/* A growable output string; `failed` sticks after the first allocation failure. */
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
    bool failed;
} Json;

static void json_append(Json *json, const char *bytes, size_t count) {
    if (json->failed) return;
    if (json->length + count + 1 > json->capacity) {
        size_t capacity = json->capacity == 0 ? 256 : json->capacity;
        while (json->length + count + 1 > capacity) capacity *= 2;
        char *grown = realloc(json->data, capacity);
        if (grown == NULL) {
            json->failed = true;
            return;
        }
        json->data = grown;
        json->capacity = capacity;
    }
    memcpy(json->data + json->length, bytes, count);
    json->length += count;
    json->data[json->length] = '\0';
}

static void json_puts(Json *json, const char *text) { json_append(json, text, strlen(text)); }

static void json_putc(Json *json, char c) { json_append(json, &c, 1); }

static void json_printf(Json *json, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void json_printf(Json *json, const char *format, ...) {
    char scratch[64];
    va_list arguments;
    va_start(arguments, format);
    int count = vsnprintf(scratch, sizeof(scratch), format, arguments);
    va_end(arguments);
    if (count < 0 || (size_t)count >= sizeof(scratch)) {
        json->failed = true;
        return;
    }
    json_append(json, scratch, (size_t)count);
}

/* A JSON string literal; bytes from 0x80 up (UTF-8) are copied as they are. */
static void json_string(Json *json, const char *text) {
    json_putc(json, '"');
    for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p != '\0'; p++) {
        switch (*p) {
        case '"': json_puts(json, "\\\""); break;
        case '\\': json_puts(json, "\\\\"); break;
        case '\b': json_puts(json, "\\b"); break;
        case '\f': json_puts(json, "\\f"); break;
        case '\n': json_puts(json, "\\n"); break;
        case '\r': json_puts(json, "\\r"); break;
        case '\t': json_puts(json, "\\t"); break;
        default:
            if (*p < 0x20) {
                json_printf(json, "\\u%04x", (unsigned)*p);
            } else {
                json_putc(json, (char)*p);
            }
        }
    }
    json_putc(json, '"');
}

/* Standard base64 (RFC 4648 section 4) with padding, as a JSON string. */
static void json_base64(Json *json, const ProtobufCBinaryData *bytes) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    json_putc(json, '"');
    size_t i = 0;
    for (; i + 3 <= bytes->len; i += 3) {
        uint32_t group = (uint32_t)bytes->data[i] << 16 | (uint32_t)bytes->data[i + 1] << 8 |
                         bytes->data[i + 2];
        char quad[4] = {alphabet[group >> 18], alphabet[(group >> 12) & 63],
                        alphabet[(group >> 6) & 63], alphabet[group & 63]};
        json_append(json, quad, 4);
    }
    size_t rest = bytes->len - i;
    if (rest > 0) {
        uint32_t group = (uint32_t)bytes->data[i] << 16;
        if (rest == 2) group |= (uint32_t)bytes->data[i + 1] << 8;
        char quad[4] = {alphabet[group >> 18], alphabet[(group >> 12) & 63],
                        rest == 2 ? alphabet[(group >> 6) & 63] : '=', '='};
        json_append(json, quad, 4);
    }
    json_putc(json, '"');
}

/* The proto3 json_name: the field name with each "_x" turned into "X". */
static void json_key(Json *json, const char *field_name) {
    json_putc(json, '"');
    bool capitalize = false;
    for (const char *p = field_name; *p != '\0'; p++) {
        if (*p == '_') {
            capitalize = true;
        } else if (capitalize && *p >= 'a' && *p <= 'z') {
            json_putc(json, (char)(*p - 'a' + 'A'));
            capitalize = false;
        } else {
            json_putc(json, *p);
            capitalize = false;
        }
    }
    json_puts(json, "\":");
}

static void json_floating(Json *json, double value, int digits) {
    if (isnan(value)) {
        json_puts(json, "\"NaN\"");
    } else if (isinf(value)) {
        json_puts(json, value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    } else {
        json_printf(json, "%.*g", digits, value);
    }
}

/* The size of one element of a repeated field of this type in the C struct's array. */
static size_t element_size(ProtobufCType type) {
    switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return sizeof(int32_t);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return sizeof(int64_t);
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* Whether a proto3 field without a label holds its default value (and is therefore not written). */
static bool is_default(const ProtobufCFieldDescriptor *field, const void *member) {
    switch (field->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return *(const uint32_t *)member == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return *(const uint64_t *)member == 0;
    case PROTOBUF_C_TYPE_FLOAT: {
        float value = *(const float *)member;
        return value == 0 && !signbit(value);
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
        double value = *(const double *)member;
        return value == 0 && !signbit(value);
    }
    case PROTOBUF_C_TYPE_BOOL: return *(const protobuf_c_boolean *)member == 0;
    case PROTOBUF_C_TYPE_ENUM: return *(const int *)member == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *text = *(const char *const *)member;
        return text == NULL || text[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)member)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const ProtobufCMessage *const *)member == NULL;
    }
    return true;
}

/* Whether a field is written: its presence rule depends on its label (and oneof membership). */
static bool is_present(const ProtobufCMessage *message, const ProtobufCFieldDescriptor *field) {
    const char *base = (const char *)message;
    const void *member = base + field->offset;
    if (field->label == PROTOBUF_C_LABEL_REPEATED) {
        return *(const size_t *)(base + field->quantifier_offset) > 0;
    }
    if (field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        /* The oneof's case enum holds the number of the member that is set. */
        return *(const uint32_t *)(base + field->quantifier_offset) == field->id;
    }
    switch (field->label) {
    case PROTOBUF_C_LABEL_REQUIRED:
        return true;
    case PROTOBUF_C_LABEL_OPTIONAL:
        /* Pointers say it themselves; every other type has a has_ flag. */
        if (field->type == PROTOBUF_C_TYPE_STRING || field->type == PROTOBUF_C_TYPE_MESSAGE) {
            return *(const void *const *)member != NULL;
        }
        return *(const protobuf_c_boolean *)(base + field->quantifier_offset) != 0;
    case PROTOBUF_C_LABEL_NONE:
    case PROTOBUF_C_LABEL_REPEATED:
        break;
    }
    return !is_default(field, member);
}

static void json_message(Json *json, const ProtobufCMessage *message);

/* One value of `field`, read from `value` (the member, or one element of a repeated member). */
static void json_value(Json *json, const ProtobufCFieldDescriptor *field, const void *value) {
    switch (field->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        json_printf(json, "%" PRId32, *(const int32_t *)value);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        json_printf(json, "%" PRIu32, *(const uint32_t *)value);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        json_printf(json, "\"%" PRId64 "\"", *(const int64_t *)value);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        json_printf(json, "\"%" PRIu64 "\"", *(const uint64_t *)value);
        break;
    case PROTOBUF_C_TYPE_FLOAT: json_floating(json, *(const float *)value, 9); break;
    case PROTOBUF_C_TYPE_DOUBLE: json_floating(json, *(const double *)value, 17); break;
    case PROTOBUF_C_TYPE_BOOL:
        json_puts(json, *(const protobuf_c_boolean *)value ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int number = *(const int *)value;
        const ProtobufCEnumValue *named = protobuf_c_enum_descriptor_get_value(
            (const ProtobufCEnumDescriptor *)field->descriptor, number);
        if (named != NULL) {
            json_string(json, named->name);
        } else {
            json_printf(json, "%d", number);
        }
        break;
    }
    case PROTOBUF_C_TYPE_STRING: json_string(json, *(const char *const *)value); break;
    case PROTOBUF_C_TYPE_BYTES: json_base64(json, (const ProtobufCBinaryData *)value); break;
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *nested = *(const ProtobufCMessage *const *)value;
        if (nested != NULL) {
            json_message(json, nested);
        } else {
            json_puts(json, "null");
        }
        break;
    }
    }
}

static void json_message(Json *json, const ProtobufCMessage *message) {
    const ProtobufCMessageDescriptor *descriptor = message->descriptor;
    const char *base = (const char *)message;
    bool first = true;
    json_putc(json, '{');
    /* protoc-c lists the fields in field number order. */
    for (unsigned i = 0; i < descriptor->n_fields; i++) {
        const ProtobufCFieldDescriptor *field = &descriptor->fields[i];
        if (!is_present(message, field)) continue;
        if (!first) json_putc(json, ',');
        first = false;
        json_key(json, field->name);
        const void *member = base + field->offset;
        if (field->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t count = *(const size_t *)(base + field->quantifier_offset);
            const char *elements = *(const char *const *)member;
            size_t size = element_size(field->type);
            json_putc(json, '[');
            for (size_t j = 0; j < count; j++) {
                if (j > 0) json_putc(json, ',');
                json_value(json, field, elements + j * size);
            }
            json_putc(json, ']');
        } else {
            json_value(json, field, member);
        }
    }
    json_putc(json, '}');
}

char *cwf_describe_json(const char *message_full_name, const uint8_t *data, size_t length) {
    if (message_full_name == NULL || (data == NULL && length > 0)) return NULL;
    const ProtobufCMessageDescriptor *descriptor = NULL;
    for (size_t i = 0; i < DESCRIPTOR_COUNT; i++) {
        if (strcmp(DESCRIPTORS[i]->name, message_full_name) == 0) {
            descriptor = DESCRIPTORS[i];
            break;
        }
    }
    if (descriptor == NULL) return NULL;

    static const uint8_t nothing[1] = {0};
    ProtobufCMessage *message =
        protobuf_c_message_unpack(descriptor, NULL, length, data != NULL ? data : nothing);
    if (message == NULL) return NULL;

    Json json = {NULL, 0, 0, false};
    json_message(&json, message);
    protobuf_c_message_free_unpacked(message, NULL);
    if (json.failed) {
        free(json.data);
        return NULL;
    }
    return json.data;
}

void cwf_free(char *json) { free(json); }
