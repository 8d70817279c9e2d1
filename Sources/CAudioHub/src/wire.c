/*
 * The SDK's half of the wire contract: ids, addresses, error texts, and the protobuf-c messages it packs
 * (AccessoryTelemetry, HubStatus, HeadTrackingFrame) and unpacks (RequestResult, AccessoryState, RebirthRequest,
 * HeadTrackingSession, BridgeLayout: the one it also reads as JSON).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>
#include <protobuf-c/protobuf-c.h>

#include "audioaccessory/v1/headtracking.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"
#include "audioaccessory/v1/status.pb-c.h"
#include "audioaccessory/v1/telemetry.pb-c.h"
#include "audioaccessory/v1/types.pb-c.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------------------------ */
/* Texts                                                                                                         */
/* ------------------------------------------------------------------------------------------------------------ */

const char *audiohub_strerror(enum audiohub_err err)
{
    switch (err) {
    case AUDIOHUB_ERR_SUCCESS: return "success";
    case AUDIOHUB_ERR_INVAL: return "invalid argument";
    case AUDIOHUB_ERR_NOMEM: return "out of memory";
    case AUDIOHUB_ERR_HUB_ID: return "invalid hub id: 1-64 characters of A-Z a-z 0-9 _ -, not 12 lowercase hex digits";
    case AUDIOHUB_ERR_ACCESSORY_ID: return "invalid accessory id: 1-64 characters of A-Z a-z 0-9 _ -";
    case AUDIOHUB_ERR_ADDRESS:
        return "invalid Bluetooth address: 6 bytes (AA:BB:CC:DD:EE:FF) or none; no secondary without a primary, "
               "no primary equal to the secondary";
    case AUDIOHUB_ERR_CAPABILITIES: return "invalid capabilities: bits outside AUDIOHUB_CAP_ALL, or none";
    case AUDIOHUB_ERR_TEXT: return "name or model longer than 256 bytes";
    case AUDIOHUB_ERR_QUEUE_FULL: return "the hub's request queue is full";
    case AUDIOHUB_ERR_URL: return "invalid broker URL: mqtt://host[:port] or mqtts://host[:port]";
    case AUDIOHUB_ERR_TLS: return "TLS set-up failed (mqtts:// needs a CA file; cert and key go together)";
    case AUDIOHUB_ERR_STATE: return "not possible in the hub's current state";
    case AUDIOHUB_ERR_NO_CONN: return "not connected";
    case AUDIOHUB_ERR_MOSQUITTO: return "libmosquitto failed (see audiohub_last_mosquitto_error)";
    case AUDIOHUB_ERR_ERRNO: return "system call failed (see errno)";
    case AUDIOHUB_ERR_NOT_FOUND: return "accessory not known to the hub";
    case AUDIOHUB_ERR_CANCELLED: return "cancelled: the hub was destroyed before the result arrived";
    case AUDIOHUB_ERR_TIMEOUT: return "timed out: no result after the maximum number of attempts";
    case AUDIOHUB_ERR_INVALID_DATA_SIZE:
        return "invalid data size: a head-tracking frame is 1 to 70 bytes (AudioAccessoryError.invalidDataSize)";
    case AUDIOHUB_ERR_NOT_ACTIVATED:
        return "not activated: no head-tracking session is active for the accessory, or head tracking is off on its "
               "host (AudioAccessoryError.notActivated)";
    }
    return "unknown error";
}

const char *audiohub_kit_error_name(enum audiohub_kit_error error)
{
    switch (error) {
    case AUDIOHUB_KIT_UNSPECIFIED: return "unspecified";
    case AUDIOHUB_KIT_NONE: return "none";
    case AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE: return "accessoryNotCapable";
    case AUDIOHUB_KIT_INVALID_REQUEST: return "invalidRequest";
    case AUDIOHUB_KIT_INVALIDATED: return "invalidated";
    case AUDIOHUB_KIT_UNKNOWN: return "unknown";
    }
    return "unspecified";
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Ids, addresses, clocks                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

bool ah_valid_id(const char *id)
{
    if (id == NULL) {
        return false;
    }
    size_t length = 0;
    for (const char *c = id; *c != '\0'; c++, length++) {
        bool ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                  *c == '-';
        if (!ok || length >= AUDIOHUB_ID_MAX) {
            return false;
        }
    }
    return length >= 1;
}

enum audiohub_err ah_check_address(const struct audiohub_address *address)
{
    if (address == NULL || address->length == 0 || address->length == AUDIOHUB_ADDRESS_SIZE) {
        return AUDIOHUB_ERR_SUCCESS;
    }
    return AUDIOHUB_ERR_ADDRESS;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

enum audiohub_err audiohub_address_parse(const char *text, struct audiohub_address *out)
{
    if (text == NULL || out == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    size_t length = strlen(text);
    bool separated = length == 17;
    if (!separated && length != 12) {
        return AUDIOHUB_ERR_ADDRESS;
    }
    char separator = separated ? text[2] : '\0';
    if (separated && separator != ':' && separator != '-') {
        return AUDIOHUB_ERR_ADDRESS;
    }
    struct audiohub_address address = {AUDIOHUB_ADDRESS_SIZE, {0}};
    for (size_t i = 0; i < AUDIOHUB_ADDRESS_SIZE; i++) {
        const char *pair = text + (separated ? i * 3 : i * 2);
        int high = hex_value(pair[0]);
        int low = hex_value(pair[1]);
        if (high < 0 || low < 0 || (separated && i < AUDIOHUB_ADDRESS_SIZE - 1 && pair[2] != separator)) {
            return AUDIOHUB_ERR_ADDRESS;
        }
        address.bytes[i] = (uint8_t)(high * 16 + low);
    }
    *out = address;
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_address_format(const struct audiohub_address *address, char out[18])
{
    if (address == NULL || out == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (ah_check_address(address) != AUDIOHUB_ERR_SUCCESS) {
        return AUDIOHUB_ERR_ADDRESS;
    }
    out[0] = '\0';
    if (address->length == AUDIOHUB_ADDRESS_SIZE) {
        const uint8_t *b = address->bytes;
        snprintf(out, 18, "%02X:%02X:%02X:%02X:%02X:%02X", b[0], b[1], b[2], b[3], b[4], b[5]);
    }
    return AUDIOHUB_ERR_SUCCESS;
}

int64_t ah_wall_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int64_t ah_monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Packing                                                                                                       */
/* ------------------------------------------------------------------------------------------------------------ */

/* AUDIOHUB_CAP_ALL is written as a number: it must be every capability bit. */
typedef char ah_capabilities_all_check[AUDIOHUB_CAP_ALL == (AUDIOHUB_CAP_AUDIO_SWITCHING | AUDIOHUB_CAP_PLACEMENT |
                                                            AUDIOHUB_CAP_AUDIO_SPATIALIZATION |
                                                            AUDIOHUB_CAP_HEAD_TRACKING)
                                           ? 1
                                           : -1];

size_t audiohub_internal_capability_values(unsigned capabilities, int *out)
{
    size_t count = 0;
    if (capabilities & AUDIOHUB_CAP_AUDIO_SWITCHING) {
        out[count++] = AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING;
    }
    if (capabilities & AUDIOHUB_CAP_PLACEMENT) {
        out[count++] = AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT;
    }
    if (capabilities & AUDIOHUB_CAP_AUDIO_SPATIALIZATION) {
        out[count++] = AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SPATIALIZATION;
    }
    if (capabilities & AUDIOHUB_CAP_HEAD_TRACKING) {
        out[count++] = AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_HEAD_TRACKING;
    }
    return count;
}

/* The generated structs hold non-const pointers; protobuf-c only reads through them when packing. */
static char *text(const char *value)
{
    return (char *)(value != NULL ? value : "");
}

static ProtobufCBinaryData binary(const struct audiohub_address *address)
{
    ProtobufCBinaryData data = {address->length, (uint8_t *)address->bytes};
    if (address->length == 0) {
        data.data = NULL;
    }
    return data;
}

size_t audiohub_internal_pack_telemetry(const struct audiohub_internal_telemetry *telemetry, uint8_t *out,
                                        size_t capacity)
{
    if (telemetry == NULL || out == NULL || telemetry->capabilities_count > AUDIOHUB_INTERNAL_MAX_CAPABILITIES) {
        return 0;
    }
    Audioaccessory__V1__Capability capabilities[AUDIOHUB_INTERNAL_MAX_CAPABILITIES];
    for (size_t i = 0; i < telemetry->capabilities_count; i++) {
        capabilities[i] = (Audioaccessory__V1__Capability)telemetry->capabilities[i];
    }

    Audioaccessory__V1__AccessoryTelemetry message = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    message.sequence = telemetry->sequence;
    message.request_id = text(telemetry->request_id);
    message.accessory_id = text(telemetry->accessory_id);

    Audioaccessory__V1__Paired paired = AUDIOACCESSORY__V1__PAIRED__INIT;
    Audioaccessory__V1__Unpaired unpaired = AUDIOACCESSORY__V1__UNPAIRED__INIT;
    Audioaccessory__V1__Register register_ = AUDIOACCESSORY__V1__REGISTER__INIT;
    Audioaccessory__V1__Configuration update = AUDIOACCESSORY__V1__CONFIGURATION__INIT;
    Audioaccessory__V1__PlacementReport placement = AUDIOACCESSORY__V1__PLACEMENT_REPORT__INIT;
    Audioaccessory__V1__SourcesReport sources = AUDIOACCESSORY__V1__SOURCES_REPORT__INIT;
    Audioaccessory__V1__AudioComponentDescription spatial = AUDIOACCESSORY__V1__AUDIO_COMPONENT_DESCRIPTION__INIT;
    spatial.component_type = telemetry->spatial_extension[0];
    spatial.component_sub_type = telemetry->spatial_extension[1];
    spatial.component_manufacturer = telemetry->spatial_extension[2];
    spatial.component_flags = telemetry->spatial_extension[3];
    spatial.component_flags_mask = telemetry->spatial_extension[4];
    Audioaccessory__V1__AudioComponentDescription *spatial_extension =
        telemetry->has_spatial_extension ? &spatial : NULL;

    switch (telemetry->operation) {
    case AUDIOHUB_OP_PAIR:
        paired.name = text(telemetry->name);
        paired.model = text(telemetry->model);
        paired.n_hardware_capabilities = telemetry->capabilities_count;
        paired.hardware_capabilities = capabilities;
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PAIRED;
        message.paired = &paired;
        break;
    case AUDIOHUB_OP_UNPAIR:
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UNPAIRED;
        message.unpaired = &unpaired;
        break;
    case AUDIOHUB_OP_REGISTER:
        register_.n_capabilities = telemetry->capabilities_count;
        register_.capabilities = capabilities;
        register_.spatial_extension_description = spatial_extension;
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_REGISTER;
        message.register_ = &register_;
        break;
    case AUDIOHUB_OP_UPDATE:
        update.n_device_capabilities = telemetry->capabilities_count;
        update.device_capabilities = capabilities;
        update.device_placement = (Audioaccessory__V1__Placement)telemetry->placement;
        update.primary_audio_source_device_identifier = binary(&telemetry->primary);
        update.secondary_audio_source_device_identifier = binary(&telemetry->secondary);
        update.spatial_extension_description = spatial_extension;
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UPDATE;
        message.update = &update;
        break;
    case AUDIOHUB_OP_PLACEMENT:
        placement.placement = (Audioaccessory__V1__Placement)telemetry->placement;
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT;
        message.placement = &placement;
        break;
    case AUDIOHUB_OP_SOURCES:
        sources.primary = binary(&telemetry->primary);
        sources.secondary = binary(&telemetry->secondary);
        message.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_SOURCES;
        message.sources = &sources;
        break;
    default:
        return 0;
    }
    if (audioaccessory__v1__accessory_telemetry__get_packed_size(&message) > capacity) {
        return 0;
    }
    return audioaccessory__v1__accessory_telemetry__pack(&message, out);
}

size_t ah_pack_hub_status(bool online, int64_t since_unix_ms, uint8_t *out, size_t capacity)
{
    Audioaccessory__V1__HubStatus status = AUDIOACCESSORY__V1__HUB_STATUS__INIT;
    status.online = online;
    status.since_unix_ms = since_unix_ms;
    if (audioaccessory__v1__hub_status__get_packed_size(&status) > capacity) {
        return 0;
    }
    return audioaccessory__v1__hub_status__pack(&status, out);
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Unpacking                                                                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

static unsigned capability_bits(size_t count, const Audioaccessory__V1__Capability *values)
{
    unsigned bits = 0;
    for (size_t i = 0; i < count; i++) {
        /* Capability n is bit n-1; one of a newer schema has no bit here: ignored. */
        if (values[i] >= AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING &&
            values[i] <= AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_HEAD_TRACKING) {
            bits |= 1u << (values[i] - 1);
        }
    }
    return bits;
}

/* An address of the wire: 6 bytes, or none (anything else the bridge would never send is read as none). */
static struct audiohub_address address_view(ProtobufCBinaryData data)
{
    struct audiohub_address address = {0, {0}};
    if (data.len == AUDIOHUB_ADDRESS_SIZE && data.data != NULL) {
        address.length = AUDIOHUB_ADDRESS_SIZE;
        memcpy(address.bytes, data.data, AUDIOHUB_ADDRESS_SIZE);
    }
    return address;
}

static enum audiohub_kit_error kit_error(Audioaccessory__V1__ErrorCode code)
{
    switch (code) {
    case AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_NONE: return AUDIOHUB_KIT_NONE;
    case AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_ACCESSORY_NOT_CAPABLE: return AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE;
    case AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_INVALID_REQUEST: return AUDIOHUB_KIT_INVALID_REQUEST;
    case AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_INVALIDATED: return AUDIOHUB_KIT_INVALIDATED;
    case AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_UNKNOWN: return AUDIOHUB_KIT_UNKNOWN;
    default: return AUDIOHUB_KIT_UNSPECIFIED;
    }
}

static void state_view(const Audioaccessory__V1__AccessoryState *state, struct audiohub_state *view)
{
    memset(view, 0, sizeof *view);
    view->accessory_id = state->accessory_id;
    view->hub_id = state->hub_id;
    switch (state->registration) {
    case AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_PAIRED:
    case AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_REGISTERED:
    case AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_INVALIDATED:
    case AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_UNPAIRED:
        view->registration = (enum audiohub_registration)state->registration;
        break;
    default:
        view->registration = AUDIOHUB_REGISTRATION_UNSPECIFIED;
    }
    view->name = state->name;
    view->model = state->model;
    view->hardware_capabilities = capability_bits(state->n_hardware_capabilities, state->hardware_capabilities);
    if (state->configuration != NULL) {
        const Audioaccessory__V1__Configuration *configuration = state->configuration;
        view->configuration.capabilities =
            capability_bits(configuration->n_device_capabilities, configuration->device_capabilities);
        Audioaccessory__V1__Placement placement = configuration->device_placement;
        view->configuration.placement = (placement >= AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_IN_EAR &&
                                         placement <= AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OFF_HEAD)
                                            ? (enum audiohub_placement)placement
                                            : AUDIOHUB_PLACEMENT_NONE;
        view->configuration.primary = address_view(configuration->primary_audio_source_device_identifier);
        view->configuration.secondary = address_view(configuration->secondary_audio_source_device_identifier);
        const Audioaccessory__V1__AudioComponentDescription *spatial = configuration->spatial_extension_description;
        if (spatial != NULL) {
            view->has_spatial_extension = true;
            view->spatial_extension = (struct audiohub_spatial_extension){
                spatial->component_type, spatial->component_sub_type, spatial->component_manufacturer,
                spatial->component_flags, spatial->component_flags_mask};
        }
    }
    view->routed_source = address_view(state->routed_source);
    view->last_sequence = state->last_sequence;
    view->updated_at_unix_ms = state->updated_at_unix_ms;
    view->stale = state->stale != 0;
    view->diagnostics_count = state->n_diagnostics;
    view->diagnostics = (const char *const *)state->diagnostics;
    view->last_error = kit_error(state->last_error);
    view->last_error_message = state->last_error_message;
    view->epoch = state->epoch;
}

enum audiohub_err ah_decode_result(const uint8_t *data, size_t length, struct ah_decoded_result *out)
{
    memset(out, 0, sizeof *out);
    Audioaccessory__V1__RequestResult *result = audioaccessory__v1__request_result__unpack(NULL, length, data);
    if (result == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    out->unpacked = result;
    out->view.accessory_id = "";
    out->view.status = AUDIOHUB_ERR_SUCCESS;
    out->view.error = kit_error(result->error);
    out->view.message = result->message;
    out->view.duplicate = result->duplicate != 0;
    out->view.sequence = result->sequence;
    out->view.request_id = result->request_id;
    out->view.epoch = result->epoch;
    if (result->state != NULL) {
        state_view(result->state, &out->state);
        out->view.state = &out->state;
    }
    return AUDIOHUB_ERR_SUCCESS;
}

void ah_decoded_result_free(struct ah_decoded_result *result)
{
    if (result->unpacked != NULL) {
        audioaccessory__v1__request_result__free_unpacked(result->unpacked, NULL);
        result->unpacked = NULL;
    }
}

enum audiohub_err ah_decode_rebirth(const uint8_t *data, size_t length, char *accessory_id, uint64_t *last_sequence,
                                    uint64_t *received_sequence)
{
    Audioaccessory__V1__RebirthRequest *rebirth = audioaccessory__v1__rebirth_request__unpack(NULL, length, data);
    if (rebirth == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_INVAL;
    if (ah_valid_id(rebirth->accessory_id)) {
        strcpy(accessory_id, rebirth->accessory_id);
        *last_sequence = rebirth->last_sequence;
        *received_sequence = rebirth->received_sequence;
        rc = AUDIOHUB_ERR_SUCCESS;
    }
    audioaccessory__v1__rebirth_request__free_unpacked(rebirth, NULL);
    return rc;
}

enum audiohub_err ah_decode_head_tracking(const uint8_t *data, size_t length, struct ah_head_tracking_news *out)
{
    memset(out, 0, sizeof *out);
    Audioaccessory__V1__HeadTrackingSession *news =
        audioaccessory__v1__head_tracking_session__unpack(NULL, length, data);
    if (news == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    bool ok = (news->accessory_id[0] == '\0' || ah_valid_id(news->accessory_id)) &&
              (news->hub_id[0] == '\0' || ah_valid_id(news->hub_id)) &&
              news->session_id.len == AUDIOHUB_SESSION_ID_SIZE && news->host.len == AUDIOHUB_ADDRESS_SIZE &&
              strlen(news->restoration_id) <= AUDIOHUB_RESTORATION_ID_MAX &&
              news->event >= AUDIOACCESSORY__V1__HEAD_TRACKING_EVENT__HEAD_TRACKING_EVENT_ACTIVATED &&
              news->event <= AUDIOACCESSORY__V1__HEAD_TRACKING_EVENT__HEAD_TRACKING_EVENT_INVALIDATED;
    if (ok) {
        out->event = (enum ah_head_tracking_event)news->event;
        out->reason = news->reason >= AUDIOACCESSORY__V1__HEAD_TRACKING_REASON__HEAD_TRACKING_REASON_ROUTED &&
                              news->reason <= AUDIOACCESSORY__V1__HEAD_TRACKING_REASON__HEAD_TRACKING_REASON_SHUTDOWN
                          ? (enum audiohub_head_tracking_reason)news->reason
                          : AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED;
        strcpy(out->hub_id, news->hub_id);
        struct audiohub_head_tracking_session *view = &out->session;
        strcpy(view->accessory_id, news->accessory_id);
        memcpy(view->session_id, news->session_id.data, AUDIOHUB_SESSION_ID_SIZE);
        view->host.length = AUDIOHUB_ADDRESS_SIZE;
        memcpy(view->host.bytes, news->host.data, AUDIOHUB_ADDRESS_SIZE);
        view->is_head_tracking_active = news->head_tracking_active != 0;
        strcpy(view->restoration_id, news->restoration_id);
        view->epoch = news->epoch;
        view->sequence = news->sequence;
    }
    audioaccessory__v1__head_tracking_session__free_unpacked(news, NULL);
    return ok ? AUDIOHUB_ERR_SUCCESS : AUDIOHUB_ERR_INVAL;
}

size_t ah_pack_frame(const uint8_t session_id[AUDIOHUB_SESSION_ID_SIZE], uint64_t sequence, int64_t sent_at_unix_us,
                     const void *data, size_t length, uint8_t *out)
{
    Audioaccessory__V1__HeadTrackingFrame frame = AUDIOACCESSORY__V1__HEAD_TRACKING_FRAME__INIT;
    frame.session_id.len = AUDIOHUB_SESSION_ID_SIZE;
    frame.session_id.data = (uint8_t *)session_id;
    frame.sequence = sequence;
    frame.sent_at_unix_us = sent_at_unix_us;
    frame.data.len = length;
    frame.data.data = (uint8_t *)data;
    /* At most 2 + 16, 11, 11 and 2 + 70 bytes: within AH_FRAME_PAYLOAD_MAX. */
    return audioaccessory__v1__head_tracking_frame__pack(&frame, out);
}

enum audiohub_err audiohub_internal_decode_result(const uint8_t *data, size_t length, void *context,
                                                  void (*deliver)(void *context, const struct audiohub_result *result))
{
    if ((data == NULL && length > 0) || deliver == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    struct ah_decoded_result decoded;
    enum audiohub_err rc = ah_decode_result(data, length, &decoded);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    deliver(context, &decoded.view);
    ah_decoded_result_free(&decoded);
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_internal_decode_state(const uint8_t *data, size_t length, void *context,
                                                 void (*deliver)(void *context, const struct audiohub_state *state))
{
    if ((data == NULL && length > 0) || deliver == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    Audioaccessory__V1__AccessoryState *state = audioaccessory__v1__accessory_state__unpack(NULL, length, data);
    if (state == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    struct audiohub_state view;
    state_view(state, &view);
    deliver(context, &view);
    audioaccessory__v1__accessory_state__free_unpacked(state, NULL);
    return AUDIOHUB_ERR_SUCCESS;
}

bool ah_payload_is_json(const struct mosquitto_message *message, const mosquitto_property *properties)
{
    char *type = NULL;
    if (mosquitto_property_read_string(properties, MQTT_PROP_CONTENT_TYPE, &type, false) != NULL) {
        bool json = strcmp(type, "application/json") == 0;
        free(type);
        return json;
    }
    const char *bytes = message->payload;
    for (int i = 0; i < message->payloadlen; i++) {
        if (bytes[i] != ' ' && bytes[i] != '\t' && bytes[i] != '\r' && bytes[i] != '\n') {
            return bytes[i] == '{';
        }
    }
    return false;
}

#define LAYOUT_SLOTS_MAX 4096
#define LAYOUT_JSON_MAX 256

/* The slots of a BridgeLayout as proto3's JSON mapping writes it ({"slots": 12, "version": "0.1.0"}, the field left
 * out for 0): a number, or a string of digits, as the mapping reads a uint32. -1 for what is not an object, or a
 * "slots" that is not such a number. */
static long layout_from_json(const uint8_t *data, size_t length)
{
    char text[LAYOUT_JSON_MAX + 1];
    if (length > LAYOUT_JSON_MAX) {
        return -1;
    }
    memcpy(text, data, length);
    text[length] = '\0';
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (*p != '{' || strchr(p, '}') == NULL) {
        return -1;
    }
    const char *key = strstr(p, "\"slots\"");
    if (key == NULL) {
        return 0;
    }
    p = key + 7;
    while (isspace((unsigned char)*p)) p++;
    if (*p++ != ':') {
        return -1;
    }
    while (isspace((unsigned char)*p)) p++;
    bool quoted = *p == '"';
    p += quoted;
    if (!isdigit((unsigned char)*p)) {
        return -1;
    }
    char *end = NULL;
    long slots = strtol(p, &end, 10);
    if (quoted && *end != '"') {
        return -1;
    }
    return slots <= LAYOUT_SLOTS_MAX ? slots : -1;
}

long ah_decode_layout(const uint8_t *data, size_t length, bool json)
{
    if (json) {
        return layout_from_json(data, length);
    }
    Audioaccessory__V1__BridgeLayout *layout = audioaccessory__v1__bridge_layout__unpack(NULL, length, data);
    if (layout == NULL) {
        return -1;
    }
    long slots = layout->slots <= LAYOUT_SLOTS_MAX ? (long)layout->slots : -1;
    audioaccessory__v1__bridge_layout__free_unpacked(layout, NULL);
    return slots;
}
