/*
 * audiohub: the hub side of AudioAccessoryBridge, for C firmware.
 *
 * A hub reports what its audio accessories do -- pairing, registration, placement, the Bluetooth sources they are
 * connected to -- to the bridge, over MQTT 5 through a mosquitto broker. This library does everything the wire
 * contract asks of a hub (docs/wire-contract.md, and its "For hub authors"):
 *
 * - the topics and the protobuf messages, with MQTT 5 request/response: every request carries a response topic of
 *   this connection and its request id as correlation data, and the bridge's RequestResult comes back there;
 * - a sequence per accessory, increasing by one per request (a persist/restore hook, and a birth rule for hubs that
 *   cannot persist: see audiohub_sequence_callbacks_set);
 * - exactly one completion per request: it is sent again, with the same sequence and request id, until its result
 *   arrives; one request per accessory is in flight, the others wait behind it in a bounded queue;
 * - a cached view of each accessory, from which the bridge's rebirth requests are answered automatically;
 * - a retained HubStatus (online on each connection, offline by the MQTT will), and reconnection with backoff;
 * - head tracking (iOS 27's AudioAccessoryHeadTracking): the sessions the bridge decides, fenced, told to a handler,
 *   and the IMU frames the hub sends to each session's host (see "Head tracking" below).
 *
 * It follows libmosquitto's habits: an opaque handle, a `void *userdata` given to every callback, no globals, an
 * error enum returned by every call (audiohub_strerror), and a choice between the caller's event loop
 * (audiohub_loop, audiohub_socket) and a thread of its own (audiohub_loop_start).
 *
 * A hub in a few lines (Examples/hub-c has the whole program):
 *
 *     audiohub_lib_init();
 *     struct audiohub *hub;
 *     audiohub_new("hub-1", NULL, &hub);
 *     audiohub_connect(hub, "mqtt://127.0.0.1:1883", NULL, NULL);
 *     audiohub_loop_start(hub);
 *     audiohub_pair(hub, "headphones", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, done, NULL);
 *     audiohub_register(hub, "headphones", AUDIOHUB_CAP_ALL, done, NULL);
 *     audiohub_placement(hub, "headphones", AUDIOHUB_PLACEMENT_ON_HEAD, done, NULL);
 *
 * Threads. Unless a function says otherwise it may be called from any thread, also from inside the library's
 * callbacks; the handle holds one mutex. Callbacks run on the thread that runs the loop (the caller's, in
 * audiohub_loop, or the library's own after audiohub_loop_start), never while that mutex is held.
 *
 * Link with `pkg-config --cflags --libs audiohub` (libmosquitto and libprotobuf-c, nothing else).
 */
#ifndef AUDIOHUB_H
#define AUDIOHUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AUDIOHUB_EXPORT __attribute__((visibility("default")))
#else
#define AUDIOHUB_EXPORT
#endif

#define AUDIOHUB_VERSION_MAJOR 0
#define AUDIOHUB_VERSION_MINOR 4
#define AUDIOHUB_VERSION_REVISION 0

/* The longest hub or accessory id: 1 to 64 characters of A-Z a-z 0-9 _ - */
#define AUDIOHUB_ID_MAX 64
/* The longest name or model, in bytes of UTF-8 (the bridge refuses longer ones). */
#define AUDIOHUB_TEXT_MAX 256
/* A Bluetooth address is 6 bytes, most significant first. */
#define AUDIOHUB_ADDRESS_SIZE 6
/* A head-tracking session's id is 16 bytes. */
#define AUDIOHUB_SESSION_ID_SIZE 16
/* A head-tracking frame is 1 to 70 bytes (AudioAccessoryHeadTracking.Session.sendDataToAudioExtension). */
#define AUDIOHUB_FRAME_MAX 70
/* The longest restoration id a session may carry, in bytes (the SDK ignores news with a longer one). */
#define AUDIOHUB_RESTORATION_ID_MAX 255

/* ------------------------------------------------------------------------------------------------------------ */
/* Errors                                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

/* What a call of this library returns; also the `status` of a completion (struct audiohub_result). */
enum audiohub_err {
    AUDIOHUB_ERR_SUCCESS = 0,
    /* An argument is NULL or out of range (an option's value, a placement, a timeout). */
    AUDIOHUB_ERR_INVAL = 1,
    AUDIOHUB_ERR_NOMEM = 2,
    /* The hub id is not 1-64 characters of A-Z a-z 0-9 _ - */
    AUDIOHUB_ERR_HUB_ID = 3,
    /* The accessory id is not 1-64 characters of A-Z a-z 0-9 _ - */
    AUDIOHUB_ERR_ACCESSORY_ID = 4,
    /* A Bluetooth address is neither absent (length 0) nor 6 bytes, or its text is not AA:BB:CC:DD:EE:FF; or the
     * sources are impossible (a secondary without a primary, primary equal to secondary). */
    AUDIOHUB_ERR_ADDRESS = 5,
    /* Capability bits outside AUDIOHUB_CAP_ALL, or none where at least one is needed (register). */
    AUDIOHUB_ERR_CAPABILITIES = 6,
    /* A name or model longer than AUDIOHUB_TEXT_MAX bytes. */
    AUDIOHUB_ERR_TEXT = 7,
    /* The hub's queue holds AUDIOHUB_OPT_QUEUE_LIMIT requests already: nothing was queued, no callback will come. */
    AUDIOHUB_ERR_QUEUE_FULL = 8,
    /* The broker URL is not mqtt://host[:port] or mqtts://host[:port]. */
    AUDIOHUB_ERR_URL = 9,
    /* TLS could not be set up (mqtts:// without a CA file, unreadable files). */
    AUDIOHUB_ERR_TLS = 10,
    /* The call does not fit the handle's state: connect twice, a loop thread already running, a setting changed
     * after connecting. */
    AUDIOHUB_ERR_STATE = 11,
    /* Not connected (audiohub_loop while no connection was asked for). */
    AUDIOHUB_ERR_NO_CONN = 12,
    /* libmosquitto refused a call; audiohub_last_mosquitto_error() tells which and why. */
    AUDIOHUB_ERR_MOSQUITTO = 13,
    /* A system call failed; errno tells why. */
    AUDIOHUB_ERR_ERRNO = 14,
    /* The accessory is not in the hub's cache (audiohub_accessory_get). */
    AUDIOHUB_ERR_NOT_FOUND = 15,
    /* Completion status: the hub was destroyed before the request's result arrived. */
    AUDIOHUB_ERR_CANCELLED = 16,
    /* Completion status: AUDIOHUB_OPT_MAX_ATTEMPTS sends went unanswered. */
    AUDIOHUB_ERR_TIMEOUT = 17,
    /* A head-tracking frame of 0 or more than AUDIOHUB_FRAME_MAX bytes (AudioAccessoryError.invalidDataSize). */
    AUDIOHUB_ERR_INVALID_DATA_SIZE = 18,
    /* No head-tracking session is active for the accessory, or head tracking is off on its host
     * (AudioAccessoryError.notActivated). */
    AUDIOHUB_ERR_NOT_ACTIVATED = 19,
};

/* A short English description of `err` ("unknown error" for a value outside the enum). Thread-safe. */
AUDIOHUB_EXPORT const char *audiohub_strerror(enum audiohub_err err);

/* ------------------------------------------------------------------------------------------------------------ */
/* The AudioAccessoryKit model                                                                                   */
/* ------------------------------------------------------------------------------------------------------------ */

/* AccessoryControlDevice.Capabilities, as bits: capability n of the wire is bit n-1. */
#define AUDIOHUB_CAP_AUDIO_SWITCHING (1u << 0)
#define AUDIOHUB_CAP_PLACEMENT (1u << 1)
/* iOS 27: the accessory supports audio spatialization; its configuration may name its spatial rendering extension
 * (struct audiohub_spatial_extension). */
#define AUDIOHUB_CAP_AUDIO_SPATIALIZATION (1u << 2)
/* iOS 27: the accessory supports head tracking for audio spatialization: while it is worn and routed to a playing
 * device, the bridge runs a head-tracking session with that device (see "Head tracking"). */
#define AUDIOHUB_CAP_HEAD_TRACKING (1u << 3)
/* The four above, as one number (Swift imports a macro of one operation at most). */
#define AUDIOHUB_CAP_ALL 0xfu

/* AccessoryControlDevice.Placement; NONE is nil (no placement). Values as on the wire. */
enum audiohub_placement {
    AUDIOHUB_PLACEMENT_NONE = 0,
    AUDIOHUB_PLACEMENT_IN_EAR = 1,
    AUDIOHUB_PLACEMENT_ON_HEAD = 2,
    AUDIOHUB_PLACEMENT_OVER_THE_EAR = 3,
    AUDIOHUB_PLACEMENT_OFF_HEAD = 4,
};

/* Where an accessory stands in AudioAccessoryKit's lifecycle (AccessoryState.registration). */
enum audiohub_registration {
    AUDIOHUB_REGISTRATION_UNSPECIFIED = 0,
    AUDIOHUB_REGISTRATION_PAIRED = 1,
    AUDIOHUB_REGISTRATION_REGISTERED = 2,
    AUDIOHUB_REGISTRATION_INVALIDATED = 3,
    AUDIOHUB_REGISTRATION_UNPAIRED = 4,
};

/* The outcome the bridge gives a request: AccessoryControlDevice.Error, or NONE. Values as on the wire. */
enum audiohub_kit_error {
    /* Only in a duplicate's result for a sequence older than the last one processed: the bridge no longer keeps
     * what became of it (the SDK's one request in flight per accessory makes this all but impossible). */
    AUDIOHUB_KIT_UNSPECIFIED = 0,
    AUDIOHUB_KIT_NONE = 1,
    AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE = 2,
    AUDIOHUB_KIT_INVALID_REQUEST = 3,
    AUDIOHUB_KIT_INVALIDATED = 4,
    AUDIOHUB_KIT_UNKNOWN = 5,
};

/* AudioAccessoryKit's name of `error` ("none", "accessoryNotCapable", "invalidRequest", "invalidated", "unknown",
 * "unspecified"). Thread-safe. */
AUDIOHUB_EXPORT const char *audiohub_kit_error_name(enum audiohub_kit_error error);

/* A Bluetooth address: `length` 0 means none, 6 an address; any other length is refused (AUDIOHUB_ERR_ADDRESS). */
struct audiohub_address {
    size_t length;
    uint8_t bytes[AUDIOHUB_ADDRESS_SIZE];
};

/* Reads "12:34:56:78:9A:BC" (or "-" separators, or 12 hex digits; either case) into `out`.
 * AUDIOHUB_ERR_ADDRESS for anything else. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_address_parse(const char *text, struct audiohub_address *out);

/* Writes "12:34:56:78:9A:BC" (or "" for no address) into `out`, which holds 18 bytes. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_address_format(const struct audiohub_address *address, char out[18]);

/* AudioToolbox's AudioComponentDescription, naming the accessory's spatial audio rendering extension
 * (AccessoryControlDevice.Configuration.spatialExtensionDescription, iOS 27); only with
 * AUDIOHUB_CAP_AUDIO_SPATIALIZATION registered (the bridge answers accessoryNotCapable otherwise). Apple's example:
 * {0xaaf, 0xc0f, 0xb05e, 0, 0}. The calls that take one take its size too (pass sizeof *extension). */
struct audiohub_spatial_extension {
    uint32_t component_type;
    uint32_t component_sub_type;
    uint32_t component_manufacturer;
    uint32_t component_flags;
    uint32_t component_flags_mask;
};

/* AccessoryControlDevice.Configuration. Its spatial extension travels beside it (audiohub_update_spatial), so that
 * this struct, which the others embed, keeps its size. */
struct audiohub_configuration {
    unsigned capabilities; /* AUDIOHUB_CAP_* bits */
    enum audiohub_placement placement;
    struct audiohub_address primary;
    struct audiohub_address secondary; /* never without a primary */
};

/* The bridge's view of an accessory (AccessoryState; AccessoryControlDevice.current(for:)). The pointers point into
 * the message being delivered: valid only during the callback that receives them. */
struct audiohub_state {
    const char *accessory_id;
    const char *hub_id; /* the hub it is paired with */
    enum audiohub_registration registration;
    const char *name;
    const char *model;
    unsigned hardware_capabilities; /* AUDIOHUB_CAP_* bits */
    struct audiohub_configuration configuration;
    struct audiohub_address routed_source; /* the source playing on it, or none */
    uint64_t last_sequence;
    int64_t updated_at_unix_ms;
    bool stale; /* its hub is offline */
    size_t diagnostics_count;
    const char *const *diagnostics;
    enum audiohub_kit_error last_error; /* outcome of the request numbered last_sequence */
    const char *last_error_message;
    uint64_t epoch; /* the ownership epoch of the bridge that published it (0: a single bridge) */
    /* Since 0.3 (the library gives this struct, so it grows at its end): the configuration's spatial extension. */
    bool has_spatial_extension;
    struct audiohub_spatial_extension spatial_extension;
};

/* ------------------------------------------------------------------------------------------------------------ */
/* The handle                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

struct audiohub;

/* Initialises libmosquitto (mosquitto_lib_init). Call it once, before any other function of this library, while
 * no other thread uses libmosquitto. NOT thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_lib_init(void);

/* Releases what audiohub_lib_init took, once every handle is destroyed. NOT thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_lib_cleanup(void);

/* Makes a hub: `hub_id` is its id in the topics and its MQTT client id (1-64 of A-Z a-z 0-9 _ -; it must not be 12
 * lowercase hex digits, which name playing devices). `userdata` is given to every callback. Nothing is sent until
 * audiohub_connect. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_new(const char *hub_id, void *userdata, struct audiohub **out);

/* Stops the loop thread (if any) at once, closes the connection without a goodbye (the broker then publishes the
 * offline will; call audiohub_disconnect first for a graceful stop), completes every request still queued with
 * status AUDIOHUB_ERR_CANCELLED (their callbacks run inside this call, on this thread), and frees everything (the
 * head-tracking sessions in force end without a call of the handler).
 * NULL does nothing. Call it from no callback of this hub, and from one thread while no other uses the hub. */
AUDIOHUB_EXPORT void audiohub_destroy(struct audiohub *hub);

/* Settings, before audiohub_connect (AUDIOHUB_ERR_STATE after). */
enum audiohub_option {
    /* How long to wait for a request's result before sending it again, in ms (default 2000, 1 or more); each
     * further attempt waits twice as long as the one before, up to AUDIOHUB_OPT_TIMEOUT_MAX_MS. */
    AUDIOHUB_OPT_TIMEOUT_MS = 1,
    /* The longest wait between two sends of a request, in ms (default 30000). */
    AUDIOHUB_OPT_TIMEOUT_MAX_MS = 2,
    /* Sends of one request before it completes with AUDIOHUB_ERR_TIMEOUT; 0 (the default) sends until a result
     * arrives, which is what makes nothing lost end to end. */
    AUDIOHUB_OPT_MAX_ATTEMPTS = 3,
    /* The most requests the hub holds, in flight or waiting, over all its accessories (default 1024); a request
     * beyond it is refused with AUDIOHUB_ERR_QUEUE_FULL. The requests that answer a rebirth do not count. */
    AUDIOHUB_OPT_QUEUE_LIMIT = 4,
    /* The first and the longest wait before reconnecting, in ms (defaults 250 and 30000); the wait doubles after
     * each failed attempt and starts again from the first once a connection is up. */
    AUDIOHUB_OPT_RECONNECT_MIN_MS = 5,
    AUDIOHUB_OPT_RECONNECT_MAX_MS = 6,
    /* MQTT keepalive in seconds (default 30, 5 or more). */
    AUDIOHUB_OPT_KEEPALIVE_S = 7,
    /* The number of slots of the cluster of bridges the hub talks to (1-4096; 0, the default: a single bridge). In a
     * cluster, the hub's topics live under its slot's root, "{topic root}/slots/{audiohub_slot(hub id, slots)}".
     * AUDIOHUB_SLOTS_FROM_BRIDGE: the hub reads the count from the bridge's layout, and follows it. */
    AUDIOHUB_OPT_SLOTS = 8,
};

/* AUDIOHUB_OPT_SLOTS's value for a hub that is not told the slot count (since 0.4): it reads it from the bridge's
 * retained layout, "{topic root}/bridge/layout" (a single bridge's says 0; a cluster's, its count). Before it has one,
 * each connection is made without a will and subscribes to the layout alone: no status and no request goes out, and
 * requests wait in the queue. With the layout the hub connects again under its slot's root, and from then on every
 * connection subscribes to the layout too. When a new layout changes the hub's root (another slot, or a cluster's
 * after a single bridge's), the hub moves: it says offline where it was, connects under its new root, and sends every
 * paired accessory again from its cache (as for a rebirth) ahead of its requests, which go out anew; each
 * head-tracking session in force ends (the handler's invalidate, reason AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED),
 * as the new root's bridge starts its own. A new count that leaves the hub in its slot changes nothing else.
 * audiohub_slots says which count is in use. */
#define AUDIOHUB_SLOTS_FROM_BRIDGE (-1L)

/* The slot count the hub's topics follow now: AUDIOHUB_OPT_SLOTS's, or with AUDIOHUB_SLOTS_FROM_BRIDGE the bridge's
 * layout's (0: a single bridge), or -1 while the hub has not read it yet (and for NULL). Thread-safe. Since 0.4. */
AUDIOHUB_EXPORT long audiohub_slots(struct audiohub *hub);

/* Sets an option (see enum audiohub_option). AUDIOHUB_ERR_INVAL for an unknown option or a value out of range.
 * Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_int_option(struct audiohub *hub, enum audiohub_option option, long value);

/* The slot of hub `hub_id` in a cluster of `slots` slots (1-4096): FNV-1a-64 of its routing domain's bytes (the id up
 * to its first "--", or all of it: "home-17--kitchen" is in "home-17"), mod `slots`; -1 for a NULL id or a count out
 * of range. The hubs of a domain share a slot. The bridge computes the same (docs/scale-out.md). */
AUDIOHUB_EXPORT long audiohub_slot(const char *hub_id, long slots);

/* The first topic levels (default "audio"): 1-200 bytes, no '+', '#' or NUL, not starting or ending with '/'.
 * Thread-safe; before audiohub_connect. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_topic_root_set(struct audiohub *hub, const char *topic_root);

/* TLS for mqtts:// URLs: `ca_file` (PEM, required) signs the broker's certificate; `cert_file` and `key_file`
 * (PEM, both or neither) are the client's. The files are read when connecting. Thread-safe; before
 * audiohub_connect. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_tls_set(struct audiohub *hub, const char *ca_file, const char *cert_file,
                                                   const char *key_file);

/* ------------------------------------------------------------------------------------------------------------ */
/* Sequences                                                                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

/* Returns true and sets `*last_sequence` to the last sequence this hub used for `accessory_id` (in an earlier run),
 * or false when it does not know. */
typedef bool (*audiohub_sequence_load_cb)(struct audiohub *hub, void *userdata, const char *accessory_id,
                                          uint64_t *last_sequence);
/* `sequence` is about to be sent for the first time for `accessory_id`: store it before returning. */
typedef void (*audiohub_sequence_save_cb)(struct audiohub *hub, void *userdata, const char *accessory_id,
                                          uint64_t sequence);

/* The persist/restore hook of the sequences. Each accessory's requests are numbered 1 apart; the first number this
 * process uses for an accessory is:
 *   - the loaded one + 1, when `load` knows it (persisting every Nth and loading it + N is fine: a jump ahead only
 *     makes the bridge ask for a rebirth, which is answered; a number that goes back would make the bridge take
 *     the new requests for repeats of old ones);
 *   - otherwise (no hook, or `load` returns false) the birth rule: the wall clock in milliseconds since 1970. It
 *     stays above what an earlier run of the hub sent as long as the clock does not go back and the earlier run
 *     sent fewer than 1,000 requests per second for that accessory on average. The first request after a restart
 *     then jumps ahead (unless it is a pair, which restarts the count): the bridge asks for a rebirth, answered
 *     from the cache (see audiohub_accessory_get).
 * If the count is behind the bridge's anyway (the bridge answers a first send as a duplicate of a sequence older
 * than its last), the SDK continues from the bridge's last sequence + 1 and sends the request again.
 * Both callbacks run with the hub's mutex held: they must not call this library. Either may be NULL.
 * Thread-safe; before the first request. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_sequence_callbacks_set(struct audiohub *hub, audiohub_sequence_load_cb load,
                                                                  audiohub_sequence_save_cb save);

/* ------------------------------------------------------------------------------------------------------------ */
/* Connection                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/* Connects to `url` -- mqtt://host[:port] (1883) or mqtts://host[:port] (8883; set TLS first) -- with an optional
 * `username` and `password` (NULL for none), MQTT 5, clean start. Returns once the attempt is under way: the
 * connection is made by the loop, which keeps reconnecting with backoff (AUDIOHUB_OPT_RECONNECT_*) until
 * audiohub_disconnect. On each connection the hub subscribes to its response, rebirth and headtracking topics,
 * publishes its retained HubStatus (online), and sends again every request still in flight; the MQTT will publishes
 * the retained HubStatus offline when the connection is lost. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_connect(struct audiohub *hub, const char *url, const char *username,
                                                   const char *password);

/* Graceful stop: publishes the retained HubStatus offline and, once the broker acknowledged it (at most 2 s
 * later), closes the connection (no will) and stops reconnecting. The loop finishes sending (keep calling audiohub_loop until it returns AUDIOHUB_ERR_NO_CONN, or
 * call audiohub_loop_stop). Requests stay queued; a new audiohub_connect sends them. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_disconnect(struct audiohub *hub);

/* Whether the hub is connected and subscribed (requests go out). Thread-safe. */
AUDIOHUB_EXPORT bool audiohub_is_connected(struct audiohub *hub);

/* The last error libmosquitto returned to this hub (a MOSQ_ERR_* value, 0 for none) and its text, for when a call
 * returned AUDIOHUB_ERR_MOSQUITTO or a connection failed. `text` may be NULL. Thread-safe. */
AUDIOHUB_EXPORT int audiohub_last_mosquitto_error(struct audiohub *hub, const char **text);

/* Called when the hub is connected and subscribed (`rc` 0), or when the broker refused the connection (`rc` the
 * MQTT 5 reason code, e.g. 135 not authorized; the hub retries after the backoff). */
typedef void (*audiohub_connect_cb)(struct audiohub *hub, void *userdata, int rc);
/* Called when a connection ends (`rc` 0 after audiohub_disconnect, else the libmosquitto error). */
typedef void (*audiohub_disconnect_cb)(struct audiohub *hub, void *userdata, int rc);

/* Sets (or, with NULL, clears) the connection callbacks. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_connection_callbacks_set(struct audiohub *hub, audiohub_connect_cb on_connect,
                                                                    audiohub_disconnect_cb on_disconnect);

/* ------------------------------------------------------------------------------------------------------------ */
/* Loops                                                                                                         */
/* ------------------------------------------------------------------------------------------------------------ */

/* Runs the network once: waits up to `timeout_ms` (0: does not wait) for the socket, reads and writes, connects and
 * reconnects, and sends again the requests whose result is late; callbacks run inside. Returns
 * AUDIOHUB_ERR_NO_CONN once no connection is wanted (before audiohub_connect, after audiohub_disconnect has
 * finished), AUDIOHUB_ERR_SUCCESS otherwise: a lost connection is reconnected by later calls, not reported. Call it
 * from one thread, and not while audiohub_loop_start's thread runs. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_loop(struct audiohub *hub, int timeout_ms);

/* The socket to watch in the caller's own poll/select loop (-1 while not connected): call audiohub_loop(hub, 0)
 * when it is readable, when audiohub_want_write says so and it is writable, and at least every
 * audiohub_next_timeout_ms. Thread-safe. */
AUDIOHUB_EXPORT int audiohub_socket(struct audiohub *hub);

/* Whether the hub has bytes to write. Requests made from another thread than the loop's are written by the next
 * audiohub_loop: wake your loop after making them. Thread-safe. */
AUDIOHUB_EXPORT bool audiohub_want_write(struct audiohub *hub);

/* Milliseconds until the hub has something to do (a late request, a reconnection, a keepalive), at most 1000.
 * Thread-safe. */
AUDIOHUB_EXPORT int audiohub_next_timeout_ms(struct audiohub *hub);

/* Runs audiohub_loop in a thread of the library's own until audiohub_loop_stop or audiohub_destroy.
 * AUDIOHUB_ERR_STATE when that thread already runs. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_loop_start(struct audiohub *hub);

/* Stops the thread of audiohub_loop_start and waits for it to end: with `force` false it first lets a graceful
 * audiohub_disconnect finish (up to 2 s). Call it from no callback of this hub. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_loop_stop(struct audiohub *hub, bool force);

/* ------------------------------------------------------------------------------------------------------------ */
/* Requests                                                                                                      */
/* ------------------------------------------------------------------------------------------------------------ */

/* The AudioAccessoryKit operation a request carries (AccessoryTelemetry's event). */
enum audiohub_operation {
    AUDIOHUB_OP_PAIR = 1,
    AUDIOHUB_OP_UNPAIR = 2,
    AUDIOHUB_OP_REGISTER = 3,
    AUDIOHUB_OP_UPDATE = 4,
    AUDIOHUB_OP_PLACEMENT = 5,
    AUDIOHUB_OP_SOURCES = 6,
};

/* What became of a request, given to its completion callback. The pointers are valid during the callback only. */
struct audiohub_result {
    enum audiohub_operation operation;
    const char *accessory_id;
    /* SUCCESS: the bridge answered (see `error`); CANCELLED or TIMEOUT: no answer came (`error` is UNSPECIFIED). */
    enum audiohub_err status;
    enum audiohub_kit_error error;
    const char *message;  /* the bridge's reason ("" when none) */
    bool duplicate;       /* the bridge had processed this sequence before: `error` repeats the original outcome */
    const struct audiohub_state *state; /* the accessory afterwards; NULL when the bridge sent none */
    uint64_t sequence;
    const char *request_id;
    unsigned attempts;    /* how many times it was sent (1: once) */
    void *context;        /* as given with the request */
    /* The ownership epoch of the bridge that answered (0: a single bridge; in a cluster, larger for every new owner of
     * the hub's slot). A result whose epoch is below the last one seen for the accessory is dropped as a stray: an
     * older owner, cut off since, sent it. */
    uint64_t epoch;
};

/* A request's completion: called exactly once per request that was accepted (returned AUDIOHUB_ERR_SUCCESS). */
typedef void (*audiohub_completion_cb)(struct audiohub *hub, void *userdata, const struct audiohub_result *result);

/*
 * The requests. Each checks its input, then queues the request behind the accessory's earlier ones and returns:
 * AUDIOHUB_ERR_SUCCESS (then `callback`, which may be NULL, runs exactly once, with `context`), or an error and
 * nothing is queued: AUDIOHUB_ERR_ACCESSORY_ID, AUDIOHUB_ERR_CAPABILITIES, AUDIOHUB_ERR_ADDRESS, AUDIOHUB_ERR_TEXT,
 * AUDIOHUB_ERR_INVAL (a placement outside the enum), AUDIOHUB_ERR_QUEUE_FULL, AUDIOHUB_ERR_NOMEM.
 * Requests may be made before connecting: they go out once connected. All are thread-safe.
 *
 * The cache (audiohub_accessory_get) changes when a request succeeds; rebirth requests are answered from it.
 */

/* AccessorySetupKit pairing finished: `name` and `model` (UTF-8, up to 256 bytes, NULL for "") and what the
 * hardware can do. The accessory's birth: it restarts the bridge's count of its sequences. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_pair(struct audiohub *hub, const char *accessory_id, const char *name,
                                               const char *model, unsigned hardware_capabilities,
                                               audiohub_completion_cb callback, void *context);

/* The accessory was removed: its registration ends and its configuration is cleared. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_unpair(struct audiohub *hub, const char *accessory_id,
                                                 audiohub_completion_cb callback, void *context);

/* AccessoryControlDevice.register(accessory, capabilities): at least one capability. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_register(struct audiohub *hub, const char *accessory_id,
                                                   unsigned capabilities, audiohub_completion_cb callback,
                                                   void *context);

/* AccessoryControlDevice.update(_:) with a full configuration, without a spatial extension (a full update replaces
 * the configuration: one registered before is cleared; see audiohub_update_spatial). */
AUDIOHUB_EXPORT enum audiohub_err audiohub_update(struct audiohub *hub, const char *accessory_id,
                                                 const struct audiohub_configuration *configuration,
                                                 audiohub_completion_cb callback, void *context);

/* iOS 27's register(accessory, configuration): audiohub_register with the accessory's spatial rendering extension,
 * `extension` of `extension_size` bytes (pass sizeof *extension; AUDIOHUB_ERR_INVAL below
 * AUDIOHUB_SPATIAL_EXTENSION_MIN_SIZE). NULL: none, as audiohub_register. The bridge answers accessoryNotCapable when
 * `capabilities` lacks AUDIOHUB_CAP_AUDIO_SPATIALIZATION. The cache keeps it for rebirths. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_register_spatial(struct audiohub *hub, const char *accessory_id,
                                                           unsigned capabilities,
                                                           const struct audiohub_spatial_extension *extension,
                                                           size_t extension_size, audiohub_completion_cb callback,
                                                           void *context);

/* audiohub_update with the configuration's spatial extension (NULL: none, as audiohub_update). */
AUDIOHUB_EXPORT enum audiohub_err audiohub_update_spatial(struct audiohub *hub, const char *accessory_id,
                                                         const struct audiohub_configuration *configuration,
                                                         const struct audiohub_spatial_extension *extension,
                                                         size_t extension_size, audiohub_completion_cb callback,
                                                         void *context);

/* The size of struct audiohub_spatial_extension in 0.3, where it came: no caller has a smaller one. */
#define AUDIOHUB_SPATIAL_EXTENSION_MIN_SIZE (5 * sizeof(uint32_t))

/* An update of the placement alone (NONE clears it). */
AUDIOHUB_EXPORT enum audiohub_err audiohub_placement(struct audiohub *hub, const char *accessory_id,
                                                    enum audiohub_placement placement,
                                                    audiohub_completion_cb callback, void *context);

/* An update of the audio sources alone: NULL or length 0 for none. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_sources(struct audiohub *hub, const char *accessory_id,
                                                  const struct audiohub_address *primary,
                                                  const struct audiohub_address *secondary,
                                                  audiohub_completion_cb callback, void *context);

/* ------------------------------------------------------------------------------------------------------------ */
/* The cache, rebirths, counters                                                                                 */
/* ------------------------------------------------------------------------------------------------------------ */

/* The hub's view of one accessory: what its successful requests set (after a restart, until it pairs again, what
 * the bridge's first result about it said). It only grows, at its end (see audiohub_accessory_get). */
struct audiohub_accessory {
    char accessory_id[AUDIOHUB_ID_MAX + 1];
    bool paired;
    bool registered;
    char name[AUDIOHUB_TEXT_MAX + 1];
    char model[AUDIOHUB_TEXT_MAX + 1];
    unsigned hardware_capabilities;
    /* capabilities: the registered ones */
    struct audiohub_configuration configuration;
    /* The last sequence sent for it (0: none yet in this process). */
    uint64_t last_sequence;
    /* Requests in flight or waiting, those answering a rebirth included. */
    size_t queued;
    /* Since 0.3: the spatial extension registered or last updated (cleared by a full update without one). */
    bool has_spatial_extension;
    struct audiohub_spatial_extension spatial_extension;
};

/* Copies the hub's view of `accessory_id` into `out`, of `size` bytes: pass sizeof *out. The struct only grows, at
 * its end, so a firmware built against an older audiohub.h gets the fields it knows, and one built against a newer
 * one than the library gets the library's and zeros after them. AUDIOHUB_ERR_NOT_FOUND when the hub knows nothing
 * of it; AUDIOHUB_ERR_INVAL when `size` is below AUDIOHUB_ACCESSORY_MIN_SIZE. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_accessory_get(struct audiohub *hub, const char *accessory_id,
                                                        struct audiohub_accessory *out, size_t size);

/* The bridge asked for a rebirth of `accessory_id` (it saw `received_sequence` after `last_sequence`). `answered`
 * is true when the hub queued paired, register and update from its cache; false when it knows too little of the
 * accessory (never paired in this process and no result about it yet): the firmware must pair, register and
 * update it itself. */
typedef void (*audiohub_rebirth_cb)(struct audiohub *hub, void *userdata, const char *accessory_id,
                                    uint64_t last_sequence, uint64_t received_sequence, bool answered);

/* Sets (or clears) the rebirth callback; rebirths are answered with or without it. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_rebirth_callback_set(struct audiohub *hub, audiohub_rebirth_cb on_rebirth);

/* Counters since audiohub_new. It only grows, at its end (see audiohub_stats_get). */
struct audiohub_stats {
    uint64_t requests;       /* requests accepted (the caller's) */
    uint64_t completed;      /* completions delivered */
    uint64_t publishes;      /* telemetry PUBLISHes handed to libmosquitto, resends included */
    uint64_t resends;        /* of those, sends again of a request in flight (timeouts and reconnections) */
    uint64_t results;        /* RequestResults received */
    uint64_t duplicates;     /* of those, marked duplicate */
    uint64_t stray_results;  /* of those, for no request in flight (a second answer to a resent request) */
    uint64_t resyncs;        /* sequences moved past the bridge's (see audiohub_sequence_callbacks_set) */
    uint64_t rebirths;       /* rebirth requests received */
    uint64_t rebirth_requests; /* requests queued to answer them */
    uint64_t connections;    /* connections established */
    uint64_t queued;         /* requests held now, in flight or waiting */
    /* Since 0.3: head tracking. */
    uint64_t head_tracking_news;      /* session news taken (activated, state changed, invalidated) */
    uint64_t head_tracking_stale;     /* news dropped as not newer than the last taken for its accessory */
    uint64_t head_tracking_malformed; /* news dropped as unreadable (not protobuf, a field out of range, JSON) */
    uint64_t frames_sent;             /* frames handed to libmosquitto */
    /* Since 0.4: the bridge's layout (AUDIOHUB_SLOTS_FROM_BRIDGE). */
    uint64_t layout_moves;     /* layouts taken: the first, and each change of the count (a move when its root changed) */
    uint64_t layout_malformed; /* layouts dropped as unreadable (a count out of range, not protobuf or JSON) */
};

/* Copies the counters into `out`, of `size` bytes: pass sizeof *out (as for audiohub_accessory_get). AUDIOHUB_ERR_INVAL
 * when `size` is below AUDIOHUB_STATS_MIN_SIZE. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_stats_get(struct audiohub *hub, struct audiohub_stats *out, size_t size);

/* The sizes of the two structs in version 0.2, the first whose calls take a size (each then ended with `queued`):
 * no caller has a smaller one. */
#define AUDIOHUB_ACCESSORY_MIN_SIZE (offsetof(struct audiohub_accessory, queued) + sizeof(size_t))
#define AUDIOHUB_STATS_MIN_SIZE (offsetof(struct audiohub_stats, queued) + sizeof(uint64_t))

/* ------------------------------------------------------------------------------------------------------------ */
/* Head tracking (iOS 27: AudioAccessoryHeadTracking)                                                           */
/* ------------------------------------------------------------------------------------------------------------ */

/*
 * The bridge decides head-tracking sessions (its routing rule 13): an accessory registered with
 * AUDIOHUB_CAP_HEAD_TRACKING that takes part in routing, is worn and is routed to a playing device has a session with
 * that device, the host. The hub hears of it on its accessory's headtracking topic (subscribed on every connection):
 * activated, the person's Head Tracking setting on the host changed, invalidated. Each piece of news carries its
 * order, (epoch, sequence); the hub keeps the last per accessory and drops news that is not newer (an older owner's).
 * An activation replaces the session the accessory had; an invalidation ends it. The SDK tells a handler (shaped like
 * AudioAccessoryHeadTracking.Handler), keeps one session per accessory (audiohub_head_tracking_get), and sends the
 * accessory's IMU frames to the host (audiohub_head_tracking_send) while the session is active and head tracking is on
 * there: MQTT QoS 0, not retained, expiring after 1 s, on R/sources/{host}/frames/{hub}/{accessory}, numbered per
 * session from 1 and stamped with the hub's wall clock in microseconds. The host renders only its current session's.
 */

/* Why a session was activated, changed or invalidated (HeadTrackingReason; values as on the wire). */
enum audiohub_head_tracking_reason {
    /* Invalidated by the hub itself: a newer activation replaced the session before its invalidation came. */
    AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED = 0,
    AUDIOHUB_HEAD_TRACKING_REASON_ROUTED = 1,             /* activated: worn and routed to the host */
    AUDIOHUB_HEAD_TRACKING_REASON_ROUTE_MOVED = 2,        /* the route moved to another device, whose session follows */
    AUDIOHUB_HEAD_TRACKING_REASON_TAKEN_OFF = 3,
    AUDIOHUB_HEAD_TRACKING_REASON_UNROUTED = 4,           /* the route ended (paused, released) */
    AUDIOHUB_HEAD_TRACKING_REASON_REGISTRATION_ENDED = 5, /* unpaired, re-paired, registered without head tracking */
    AUDIOHUB_HEAD_TRACKING_REASON_INELIGIBLE = 6,         /* the hub offline past its grace, automatic switching off */
    AUDIOHUB_HEAD_TRACKING_REASON_SWITCH_CHANGED = 7,     /* state changed: the person's setting on the host */
    AUDIOHUB_HEAD_TRACKING_REASON_SHUTDOWN = 8,           /* the bridge shut down */
};

/* AudioAccessoryHeadTracking.Session, as the hub knows it. Given to the handler (valid during the callback) and
 * copied by audiohub_head_tracking_get. It only grows, at its end. */
struct audiohub_head_tracking_session {
    char accessory_id[AUDIOHUB_ID_MAX + 1];
    uint8_t session_id[AUDIOHUB_SESSION_ID_SIZE]; /* every frame of the session carries it */
    struct audiohub_address host;                 /* the playing device whose renderer takes the frames */
    bool is_head_tracking_active;                 /* the person's Head Tracking setting on the host */
    char restoration_id[AUDIOHUB_RESTORATION_ID_MAX + 1]; /* stable for the accessory; "" when the host gave none */
    uint64_t epoch;    /* the order of the last news taken about it */
    uint64_t sequence;
    uint64_t frames_sent; /* the sequence of its last frame (0: none yet) */
};

/* The size of struct audiohub_head_tracking_session in 0.3, where it came. */
#define AUDIOHUB_HEAD_TRACKING_SESSION_MIN_SIZE                                                                       \
    (offsetof(struct audiohub_head_tracking_session, frames_sent) + sizeof(uint64_t))

/* AudioAccessoryHeadTracking.Handler. Each member may be NULL. They run on the loop's thread, never while the hub's
 * mutex is held: they may call this library (audiohub_head_tracking_send, requests), but should not block the loop. */
struct audiohub_head_tracking_handler {
    /* activate(for:): a session is established with its host. Start sampling the IMU when
     * session->is_head_tracking_active. */
    void (*activate)(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session);
    /* headTrackingStateDidChange(isActive:): the person turned head tracking on or off on the host: start or stop
     * sampling. `session` shows the new setting. */
    void (*state_did_change)(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                             bool is_active);
    /* invalidate(): the session ended; nothing more may be sent in it. `session` is as it was. */
    void (*invalidate)(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                       enum audiohub_head_tracking_reason reason);
};

/* The size of struct audiohub_head_tracking_handler in 0.3, where it came. */
#define AUDIOHUB_HEAD_TRACKING_HANDLER_MIN_SIZE                                                                       \
    (offsetof(struct audiohub_head_tracking_handler, invalidate) + sizeof(void (*)(void)))

/* Sets the head-tracking handler: `handler` of `size` bytes (pass sizeof *handler; members a newer library knows and
 * the caller's header does not are taken as NULL), copied; NULL clears it. Sessions are kept and frames may be sent
 * with or without a handler. AUDIOHUB_ERR_INVAL when `size` is below AUDIOHUB_HEAD_TRACKING_HANDLER_MIN_SIZE.
 * Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_head_tracking_handler_set(struct audiohub *hub,
                                                                    const struct audiohub_head_tracking_handler *handler,
                                                                    size_t size);

/* Copies the session in force for `accessory_id` into `out`, of `size` bytes (pass sizeof *out; as
 * audiohub_accessory_get). AUDIOHUB_ERR_NOT_ACTIVATED when it has none (never activated, or invalidated since);
 * AUDIOHUB_ERR_INVAL when `size` is below AUDIOHUB_HEAD_TRACKING_SESSION_MIN_SIZE. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_head_tracking_get(struct audiohub *hub, const char *accessory_id,
                                                            struct audiohub_head_tracking_session *out, size_t size);

/* sendDataToAudioExtension(_:): sends one frame of IMU data, `length` bytes at `data` (copied), to the host of
 * `accessory_id`'s session, numbered with the session's next sequence and stamped with CLOCK_REALTIME. Checked before
 * anything is sent: AUDIOHUB_ERR_INVALID_DATA_SIZE for a length of 0 or above AUDIOHUB_FRAME_MAX;
 * AUDIOHUB_ERR_NOT_ACTIVATED when the accessory has no session or head tracking is off on its host;
 * AUDIOHUB_ERR_ACCESSORY_ID, AUDIOHUB_ERR_INVAL (NULL data). Then AUDIOHUB_ERR_NO_CONN while not connected (the frame
 * is dropped: a late frame is worthless), AUDIOHUB_ERR_MOSQUITTO or AUDIOHUB_ERR_NOMEM when libmosquitto refused it;
 * a frame not sent takes no sequence. Never blocks on the network: the loop writes it. Thread-safe. */
AUDIOHUB_EXPORT enum audiohub_err audiohub_head_tracking_send(struct audiohub *hub, const char *accessory_id,
                                                             const void *data, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* AUDIOHUB_H */
