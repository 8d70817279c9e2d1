/*
 * audiohub_internal.h: the SDK's wire encoding and decoding, exposed for the cross-language tests
 * (Tests/HubSDKTests, through the CAudioHubInternal test target, whose include/ links to this file). NOT part of the
 * API: a private header of the SDK's sources, never installed, and it may change at any time.
 *
 * Every function here is reentrant: it keeps no state. They are not exported from the shared library.
 */
#ifndef AUDIOHUB_INTERNAL_H
#define AUDIOHUB_INTERNAL_H

#include "audiohub.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most capability values one telemetry carries (the schema has four capabilities). */
#define AUDIOHUB_INTERNAL_MAX_CAPABILITIES 4

/* One AccessoryTelemetry as the SDK sends it. */
struct audiohub_internal_telemetry {
    uint64_t sequence;
    const char *request_id;   /* NULL for "" */
    const char *accessory_id; /* NULL for "" */
    enum audiohub_operation operation;
    const char *name;  /* pair; NULL for "" */
    const char *model; /* pair; NULL for "" */
    /* pair: hardware capabilities; register: capabilities; update: the configuration's capabilities. Wire values
     * (1 audio switching, 2 placement, 3 audio spatialization, 4 head tracking), written in this order. */
    int capabilities[AUDIOHUB_INTERNAL_MAX_CAPABILITIES];
    size_t capabilities_count;
    enum audiohub_placement placement;   /* update, placement */
    struct audiohub_address primary;     /* update, sources */
    struct audiohub_address secondary;   /* update, sources */
    /* register, update: the spatial rendering extension (iOS 27), when has_spatial_extension. */
    int has_spatial_extension;
    uint32_t spatial_extension[5]; /* type, subtype, manufacturer, flags, flags mask */
};

/* The wire values of the AUDIOHUB_CAP_* bits `capabilities`, ascending, into `out` (room for
 * AUDIOHUB_INTERNAL_MAX_CAPABILITIES); returns how many. This is the order the SDK's requests use. */
size_t audiohub_internal_capability_values(unsigned capabilities, int *out);

/* Packs `telemetry` as the SDK does (protobuf-c) into `out`; returns the length, or 0 when it needs more than
 * `capacity` bytes or `telemetry` is malformed (an operation outside the enum, too many capabilities). */
size_t audiohub_internal_pack_telemetry(const struct audiohub_internal_telemetry *telemetry,
                                                        uint8_t *out, size_t capacity);

/* Decodes a RequestResult as the SDK does when one arrives, and calls `deliver` with the view a completion
 * callback would get (operation 0, accessory_id "", attempts 0, status AUDIOHUB_ERR_SUCCESS, context NULL).
 * AUDIOHUB_ERR_INVAL when the bytes are not a RequestResult (deliver is not called). */
enum audiohub_err audiohub_internal_decode_result(
    const uint8_t *data, size_t length, void *context,
    void (*deliver)(void *context, const struct audiohub_result *result));

/* Decodes an AccessoryState (such as the retained one) and calls `deliver` with its view. */
enum audiohub_err audiohub_internal_decode_state(
    const uint8_t *data, size_t length, void *context,
    void (*deliver)(void *context, const struct audiohub_state *state));

#ifdef __cplusplus
}
#endif

#endif /* AUDIOHUB_INTERNAL_H */
