/*
 * hub-sim's own protobuf-c code: what the playing devices send and receive (as hosts of head-tracking sessions too),
 * and the retained accessory states it verifies (read independently of the SDK's decoder).
 */
#ifndef HUB_SIM_WIRE_H
#define HUB_SIM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Activity and Action, as on the wire. */
enum { WIRE_ACTIVITY_IDLE = 1, WIRE_ACTIVITY_MEDIA = 2, WIRE_ACTIVITY_CALL = 3 };
enum { WIRE_ACTION_ROUTE = 1, WIRE_ACTION_PAUSE = 2, WIRE_ACTION_RESUME = 3, WIRE_ACTION_RELEASE = 4 };
/* Reason, as on the wire (the ones hub-sim holds against the changes that justify them). */
enum { WIRE_REASON_PUT_ON = 2, WIRE_REASON_TAKEN_OFF = 3, WIRE_REASON_SOURCE_DISCONNECTED = 5 };

struct wire_command {
    uint64_t epoch; /* the issuing owner's epoch (0: a single bridge) */
    uint64_t sequence;
    int action;
    int reason;
    char accessory_id[65];
};

struct wire_state {
    char accessory_id[65];
    char hub_id[65];
    int registration;
    unsigned hardware_capabilities; /* AUDIOHUB_CAP_* bits */
    unsigned capabilities;          /* the configuration's */
    int placement;
    uint8_t primary[6];   /* zeros when none */
    uint8_t secondary[6]; /* zeros when none */
    uint8_t routed[6];    /* the source routed to it; zeros when none */
    uint64_t last_sequence;
    int last_error;
    bool stale;
    uint64_t epoch;
    bool has_spatial_extension;
    uint32_t spatial_extension[5]; /* type, subtype, manufacturer, flags, flags mask */
};

/* HeadTrackingEvent, as on the wire. */
enum { WIRE_HT_ACTIVATED = 1, WIRE_HT_STATE_CHANGED = 2, WIRE_HT_INVALIDATED = 3 };
/* HeadTracking (a device's setting), as on the wire. */
enum { WIRE_HEAD_TRACKING_UNSPECIFIED = 0, WIRE_HEAD_TRACKING_ON = 1, WIRE_HEAD_TRACKING_OFF = 2 };

/* A HeadTrackingSession, as a host reads it. */
struct wire_head_tracking {
    char accessory_id[65];
    char hub_id[65];
    uint8_t session_id[16];
    int event;
    uint8_t host[6];
    bool active; /* the host's Head Tracking setting */
    uint64_t epoch;
    uint64_t sequence;
    int reason;
};

/* A HeadTrackingFrame, as a host reads it (its data only measured). */
struct wire_frame {
    uint8_t session_id[16];
    uint64_t sequence;
    int64_t sent_at_unix_us;
    size_t length;
};

/* A SourceState, packed into `out`; returns its length (0 if it does not fit). `last_command_epoch` and
 * `last_command_sequence`: the last SwitchCommand the device applied, so that the bridge can tell a report written
 * before its latest command. */
size_t wire_pack_source_state(uint64_t sequence, int activity, const char *routed_accessory_id,
                              uint64_t last_command_epoch, uint64_t last_command_sequence, int head_tracking,
                              uint8_t *out, size_t capacity);

/* Unpacks a SwitchCommand; false for bytes that are not one. */
bool wire_unpack_command(const void *data, size_t length, struct wire_command *out);

/* Unpacks an AccessoryState; false for bytes that are not one (or ids too long). */
bool wire_unpack_state(const void *data, size_t length, struct wire_state *out);

/* Unpacks a HeadTrackingSession; false for bytes that are not one, ids too long, a session id not 16 bytes, a host not
 * 6 bytes or an event outside the enum. */
bool wire_unpack_head_tracking(const void *data, size_t length, struct wire_head_tracking *out);

/* Unpacks a HeadTrackingFrame; false for bytes that are not one, a session id not 16 bytes, or data not 1-70 bytes. */
bool wire_unpack_frame(const void *data, size_t length, struct wire_frame *out);

#endif
