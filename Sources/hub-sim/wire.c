/* See wire.h. */
#define _POSIX_C_SOURCE 200809L

#include "wire.h"

#include <audiohub.h>
#include <protobuf-c/protobuf-c.h>
#include <string.h>

#include "audioaccessory/v1/headtracking.pb-c.h"
#include "audioaccessory/v1/source.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"

size_t wire_pack_source_state(uint64_t sequence, int activity, const char *routed_accessory_id,
                              uint64_t last_command_epoch, uint64_t last_command_sequence, int head_tracking,
                              uint8_t *out, size_t capacity)
{
    Audioaccessory__V1__SourceState state = AUDIOACCESSORY__V1__SOURCE_STATE__INIT;
    state.sequence = sequence;
    state.activity = (Audioaccessory__V1__Activity)activity;
    state.routed_accessory_id = (char *)routed_accessory_id;
    state.last_command_sequence = last_command_sequence;
    state.last_command_epoch = last_command_epoch;
    state.head_tracking = (Audioaccessory__V1__HeadTracking)head_tracking;
    if (audioaccessory__v1__source_state__get_packed_size(&state) > capacity) {
        return 0;
    }
    return audioaccessory__v1__source_state__pack(&state, out);
}

bool wire_unpack_command(const void *data, size_t length, struct wire_command *out)
{
    Audioaccessory__V1__SwitchCommand *command = audioaccessory__v1__switch_command__unpack(NULL, length, data);
    if (command == NULL) {
        return false;
    }
    bool ok = strlen(command->accessory_id) < sizeof out->accessory_id;
    if (ok) {
        out->epoch = command->epoch;
        out->sequence = command->sequence;
        out->action = (int)command->action;
        out->reason = (int)command->reason;
        strcpy(out->accessory_id, command->accessory_id);
    }
    audioaccessory__v1__switch_command__free_unpacked(command, NULL);
    return ok;
}

static unsigned bits(size_t count, const Audioaccessory__V1__Capability *values)
{
    unsigned result = 0;
    for (size_t i = 0; i < count; i++) {
        /* Capability n is bit n-1. */
        if (values[i] >= AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING &&
            values[i] <= AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_HEAD_TRACKING) {
            result |= 1u << (values[i] - 1);
        }
    }
    return result;
}

static void address(ProtobufCBinaryData data, uint8_t out[6])
{
    memset(out, 0, 6);
    if (data.len == 6) {
        memcpy(out, data.data, 6);
    }
}

bool wire_unpack_state(const void *data, size_t length, struct wire_state *out)
{
    Audioaccessory__V1__AccessoryState *state = audioaccessory__v1__accessory_state__unpack(NULL, length, data);
    if (state == NULL) {
        return false;
    }
    bool ok = strlen(state->accessory_id) < sizeof out->accessory_id && strlen(state->hub_id) < sizeof out->hub_id;
    if (ok) {
        memset(out, 0, sizeof *out);
        strcpy(out->accessory_id, state->accessory_id);
        strcpy(out->hub_id, state->hub_id);
        out->registration = (int)state->registration;
        out->hardware_capabilities = bits(state->n_hardware_capabilities, state->hardware_capabilities);
        if (state->configuration != NULL) {
            out->capabilities = bits(state->configuration->n_device_capabilities,
                                     state->configuration->device_capabilities);
            out->placement = (int)state->configuration->device_placement;
            address(state->configuration->primary_audio_source_device_identifier, out->primary);
            address(state->configuration->secondary_audio_source_device_identifier, out->secondary);
            const Audioaccessory__V1__AudioComponentDescription *spatial =
                state->configuration->spatial_extension_description;
            if (spatial != NULL) {
                out->has_spatial_extension = true;
                out->spatial_extension[0] = spatial->component_type;
                out->spatial_extension[1] = spatial->component_sub_type;
                out->spatial_extension[2] = spatial->component_manufacturer;
                out->spatial_extension[3] = spatial->component_flags;
                out->spatial_extension[4] = spatial->component_flags_mask;
            }
        }
        address(state->routed_source, out->routed);
        out->last_sequence = state->last_sequence;
        out->last_error = (int)state->last_error;
        out->stale = state->stale != 0;
        out->epoch = state->epoch;
    }
    audioaccessory__v1__accessory_state__free_unpacked(state, NULL);
    return ok;
}

bool wire_unpack_head_tracking(const void *data, size_t length, struct wire_head_tracking *out)
{
    Audioaccessory__V1__HeadTrackingSession *news = audioaccessory__v1__head_tracking_session__unpack(NULL, length, data);
    if (news == NULL) {
        return false;
    }
    bool ok = strlen(news->accessory_id) < sizeof out->accessory_id && strlen(news->hub_id) < sizeof out->hub_id &&
              news->session_id.len == sizeof out->session_id && news->host.len == sizeof out->host &&
              (int)news->event >= WIRE_HT_ACTIVATED && (int)news->event <= WIRE_HT_INVALIDATED;
    if (ok) {
        memset(out, 0, sizeof *out);
        strcpy(out->accessory_id, news->accessory_id);
        strcpy(out->hub_id, news->hub_id);
        memcpy(out->session_id, news->session_id.data, sizeof out->session_id);
        out->event = (int)news->event;
        memcpy(out->host, news->host.data, sizeof out->host);
        out->active = news->head_tracking_active != 0;
        out->epoch = news->epoch;
        out->sequence = news->sequence;
        out->reason = (int)news->reason;
    }
    audioaccessory__v1__head_tracking_session__free_unpacked(news, NULL);
    return ok;
}

bool wire_unpack_frame(const void *data, size_t length, struct wire_frame *out)
{
    Audioaccessory__V1__HeadTrackingFrame *frame = audioaccessory__v1__head_tracking_frame__unpack(NULL, length, data);
    if (frame == NULL) {
        return false;
    }
    bool ok = frame->session_id.len == sizeof out->session_id && frame->data.len >= 1 && frame->data.len <= 70;
    if (ok) {
        memcpy(out->session_id, frame->session_id.data, sizeof out->session_id);
        out->sequence = frame->sequence;
        out->sent_at_unix_us = frame->sent_at_unix_us;
        out->length = frame->data.len;
    }
    audioaccessory__v1__head_tracking_frame__free_unpacked(frame, NULL);
    return ok;
}
