/*
 * What the SDK's units share; not installed. The hub (include/audiohub.h) is made of units of one concern each:
 *   hub.c             the handle: audiohub_new, audiohub_destroy, its topics, the library's set-up;
 *   options.c         its options and callbacks (audiohub_int_option ... audiohub_last_mosquitto_error);
 *   connect.c         the connection (enum connection): connecting, the will and the status, libmosquitto's
 *                     callbacks, disconnecting;
 *   loop.c            the loop (audiohub_loop, its thread): attempts, waiting in poll and its wake-up, resending at
 *                     the deadlines;
 *   requests.c        the caller's requests (audiohub_pair ... audiohub_sources), checked, then queued;
 *   queue.c           the accessories and their queues of requests, and completing a request;
 *   send.c            the request at the head of a queue numbered, packed and published;
 *   handle_result.c   a RequestResult: the request it answers;
 *   handle_rebirth.c  a RebirthRequest: the accessory sent again from the cache;
 *   handle_head_tracking.c  a HeadTrackingSession: the news fenced, the accessory's session replaced or ended, the
 *                     handler told;
 *   handle_layout.c   the bridge's layout (AUDIOHUB_SLOTS_FROM_BRIDGE): the slot count taken, and the hub moved to
 *                     its new root;
 *   head_tracking.c   the head-tracking handler, the session query and the frames (audiohub_head_tracking_*);
 *   cache.c           what succeeded, per accessory (audiohub_accessory_get), and the counters (audiohub_stats_get);
 * built on:
 *   wire.c       the messages, packed and unpacked with protobuf-c (and audiohub_internal.h, for the tests);
 *   deadlines.c  the requests in flight by deadline (a binary min-heap of timers);
 *   table.c      the accessories by id (a chained hash table);
 *   url.c        a broker's URL (declared in url.h, which hub-sim, the relay and loadgen share).
 * The containers hold links that the caller embeds as the first member of its own structs (a request's timer, an
 * accessory's entry), and never allocate or free those.
 */
#ifndef AUDIOHUB_PRIVATE_H
#define AUDIOHUB_PRIVATE_H

#include "audiohub.h"
#include "audiohub_internal.h"
#include "url.h"

#include <mosquitto.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An id of the contract: 1-64 characters of A-Z a-z 0-9 _ - */
bool ah_valid_id(const char *id);

/* AUDIOHUB_ERR_SUCCESS when `address` is NULL, empty or 6 bytes, else AUDIOHUB_ERR_ADDRESS. */
enum audiohub_err ah_check_address(const struct audiohub_address *address);

/* Whether a message's payload is JSON (its content type says so, or without one its first byte that is not blank is
 * '{'): the bridge runs with --payload-format json. */
bool ah_payload_is_json(const struct mosquitto_message *message, const mosquitto_property *properties);

/* The slot count of a BridgeLayout (0: a single bridge), protobuf or JSON; -1 when unreadable or out of range. */
long ah_decode_layout(const uint8_t *data, size_t length, bool json);

/* A HubStatus, packed; returns its length (at most 32 bytes), 0 if it does not fit. */
size_t ah_pack_hub_status(bool online, int64_t since_unix_ms, uint8_t *out, size_t capacity);

/* A RequestResult as protobuf-c unpacked it, and its view. `view` points into `unpacked`. */
struct ah_decoded_result {
    void *unpacked; /* Audioaccessory__V1__RequestResult * */
    struct audiohub_result view;
    struct audiohub_state state; /* view.state points here when the result carries a state */
};

/* Unpacks a RequestResult into `out` (free it with ah_decoded_result_free). AUDIOHUB_ERR_INVAL for bytes that are
 * not one, AUDIOHUB_ERR_NOMEM. */
enum audiohub_err ah_decode_result(const uint8_t *data, size_t length, struct ah_decoded_result *out);
void ah_decoded_result_free(struct ah_decoded_result *result);

/* A HeadTrackingSession as the hub takes it (ah_decode_head_tracking): its event, its session's view, and why. */
enum ah_head_tracking_event { AH_HT_ACTIVATED = 1, AH_HT_STATE_CHANGED = 2, AH_HT_INVALIDATED = 3 };
struct ah_head_tracking_news {
    enum ah_head_tracking_event event;
    enum audiohub_head_tracking_reason reason;
    char hub_id[AUDIOHUB_ID_MAX + 1]; /* "" when the bridge named none */
    struct audiohub_head_tracking_session session; /* accessory id "" when the message named none */
};

/* Unpacks a HeadTrackingSession into `out`. AUDIOHUB_ERR_INVAL for bytes that are not one, or fields out of range: an
 * accessory or hub id that is not one, a session id not 16 bytes, a host not 6 bytes, an unknown event, a restoration
 * id over AUDIOHUB_RESTORATION_ID_MAX bytes. An unknown reason is read as UNSPECIFIED. */
enum audiohub_err ah_decode_head_tracking(const uint8_t *data, size_t length, struct ah_head_tracking_news *out);

/* A HeadTrackingFrame, packed into `out` (room for AH_FRAME_PAYLOAD_MAX bytes); returns its length. */
#define AH_FRAME_PAYLOAD_MAX (AUDIOHUB_SESSION_ID_SIZE + AUDIOHUB_FRAME_MAX + 40)
size_t ah_pack_frame(const uint8_t session_id[AUDIOHUB_SESSION_ID_SIZE], uint64_t sequence, int64_t sent_at_unix_us,
                     const void *data, size_t length, uint8_t *out);

/* Unpacks a RebirthRequest: its accessory id (copied into `accessory_id`, which holds AUDIOHUB_ID_MAX + 1 bytes)
 * and sequences. AUDIOHUB_ERR_INVAL for bytes that are not one or an invalid accessory id. */
enum audiohub_err ah_decode_rebirth(const uint8_t *data, size_t length, char *accessory_id, uint64_t *last_sequence,
                                    uint64_t *received_sequence);

/* Milliseconds: since 1970 (wall clock), and on the monotonic clock. */
int64_t ah_wall_ms(void);
int64_t ah_monotonic_ms(void);

/* ---- deadlines.c ---- */

/* A timer's index while it is in no heap. */
#define AH_TIMER_IDLE SIZE_MAX

/* Something due at a time; `index` is its place in a heap, or AH_TIMER_IDLE. */
struct ah_timer {
    int64_t deadline_ms;
    size_t index;
};

/* Timers, earliest first. Zeroed: empty. */
struct ah_deadlines {
    struct ah_timer **items;
    size_t count;
    size_t capacity;
};

/* Adds an idle timer at its deadline_ms; false when out of memory (the timer stays idle). */
bool ah_deadlines_push(struct ah_deadlines *heap, struct ah_timer *timer);
/* Takes a timer out (an idle one: nothing). */
void ah_deadlines_remove(struct ah_deadlines *heap, struct ah_timer *timer);
/* Sets a timer's deadline, adding it when idle; false when it was idle and memory ran out. */
bool ah_deadlines_reschedule(struct ah_deadlines *heap, struct ah_timer *timer, int64_t deadline_ms);
/* The earliest timer, or NULL. */
struct ah_timer *ah_deadlines_first(const struct ah_deadlines *heap);
/* Frees the heap's own memory (not the timers). */
void ah_deadlines_free(struct ah_deadlines *heap);

/* ---- table.c ---- */

/* An entry of a table: its id and the link to the next entry of its bucket. */
struct ah_entry {
    struct ah_entry *next;
    char id[AUDIOHUB_ID_MAX + 1];
};

/* Entries by id. Zeroed: empty. */
struct ah_table {
    struct ah_entry **buckets;
    size_t bucket_count; /* a power of two, or 0 */
    size_t count;
};

/* The entry whose id is `id`, or NULL. */
struct ah_entry *ah_table_find(const struct ah_table *table, const char *id);
/* Makes room for one more entry; false when out of memory. */
bool ah_table_reserve(struct ah_table *table);
/* Adds `entry` (its id set, not in the table; room reserved by ah_table_reserve). */
void ah_table_insert(struct ah_table *table, struct ah_entry *entry);
/* Walks the table: the entry after `entry` (NULL: the first), `bucket` the walk's place; NULL at the end. It reads
 * `entry` before it returns, so the caller may free `entry` once it has the next one. */
struct ah_entry *ah_table_next(const struct ah_table *table, size_t *bucket, struct ah_entry *entry);
/* Frees the table's own memory (not the entries). */
void ah_table_free(struct ah_table *table);

/* ---- the hub's types ---- */

/* Content type of everything the hub publishes. */
#define CONTENT_TYPE "application/protobuf"
#define TOPIC_ROOT_MAX 200
#define TOPIC_MAX (TOPIC_ROOT_MAX + 2 * AUDIOHUB_ID_MAX + 64)
#define REQUEST_ID_MAX (AUDIOHUB_ID_MAX + 24)

enum connection {
    CONN_IDLE,          /* no connection wanted */
    CONN_WAITING,       /* wanted; the next attempt at reconnect_at_ms */
    CONN_CONNECTING,    /* socket and CONNECT under way */
    CONN_LEARNING,      /* AUDIOHUB_SLOTS_FROM_BRIDGE: connected without a will, awaiting the bridge's layout */
    CONN_SUBSCRIBING,   /* CONNACK received, SUBACK awaited */
    CONN_READY,         /* subscribed: requests go out */
    CONN_DISCONNECTING, /* audiohub_disconnect: the goodbye is being written */
    CONN_MOVING,        /* the layout moved the hub: the old connection ends, nothing more goes out on it, and the
                           next connects at once under the new root (handle_layout.c) */
};

struct accessory;

/* An accessory's head-tracking session in force (head_tracking.c): its view, and the topic its frames go to. */
struct ah_session {
    struct audiohub_head_tracking_session view;
    char frame_topic[TOPIC_MAX];
};

/* One request. The head of its accessory's queue is in flight once started (sequence != 0). */
struct request {
    struct ah_timer timer; /* first: the deadline heap's handle (once started: when to send again) */
    struct request *next;
    struct accessory *accessory;
    enum audiohub_operation operation;
    bool rebirth; /* answers a rebirth request: filled from the cache when its turn comes; no callback */
    bool probe;   /* a rebirth's update asked first (handle_rebirth.c); refused, the whole rebirth follows */
    audiohub_completion_cb callback;
    void *context;

    char *name;  /* pair */
    char *model; /* pair */
    unsigned capabilities; /* pair: hardware; register; update: the configuration's */
    enum audiohub_placement placement;
    struct audiohub_address primary;
    struct audiohub_address secondary;
    bool has_spatial_extension; /* register, update */
    struct audiohub_spatial_extension spatial_extension;

    /* Once started: */
    uint64_t sequence;
    char request_id[REQUEST_ID_MAX];
    uint8_t *payload;
    size_t payload_length;
    unsigned attempts;
    unsigned resyncs;
};

struct accessory {
    struct ah_entry entry; /* first: the table's link, and the accessory's id */
    /* The cache: what succeeded. */
    bool paired;
    bool registered;
    uint64_t birth_sequence; /* the sequence of the last pair or register the bridge took (0: its state adopted) */
    char *name;
    char *model;
    unsigned hardware_capabilities;
    struct audiohub_configuration configuration;
    bool has_spatial_extension;
    struct audiohub_spatial_extension spatial_extension;
    /* Head tracking: the order of the last session news taken (ht_known: some was), and the session in force. */
    bool ht_known;
    uint64_t ht_epoch;
    uint64_t ht_sequence;
    struct ah_session *session;
    /* Sequences: the last one used, once known. */
    bool sequence_known;
    uint64_t last_sequence;
    /* The highest epoch of the results about it: those of an older owner are strays. */
    uint64_t epoch;
    /* Requests, oldest first. */
    struct request *head;
    struct request *tail;
    size_t queued;
    size_t rebirth_requests; /* of those, answering a rebirth */
};

struct audiohub {
    pthread_mutex_t mutex;
    struct mosquitto *mosq;
    void *userdata;
    char hub_id[AUDIOHUB_ID_MAX + 1];
    char topic_root[TOPIC_ROOT_MAX + 1];
    long slots;                               /* AUDIOHUB_OPT_SLOTS, or the layout's: 0 for a single bridge */
    bool follow_layout;                       /* AUDIOHUB_SLOTS_FROM_BRIDGE */
    bool layout_known;                        /* follow_layout: `slots` is the layout's */
    char layout_topic[TOPIC_ROOT_MAX + 16];   /* {topic root}/bridge/layout */
    char hub_root[TOPIC_ROOT_MAX + 24];       /* the root of the hub's topics: topic_root, or its slot's */
    char response_topic[TOPIC_MAX];
    char rebirth_topic[TOPIC_MAX];
    char status_topic[TOPIC_MAX];
    char head_tracking_filter[TOPIC_MAX]; /* {hub root}/hubs/{hub}/accessories/+/headtracking */

    /* Options. */
    long timeout_ms;
    long timeout_max_ms;
    long max_attempts;
    long queue_limit;
    long reconnect_min_ms;
    long reconnect_max_ms;
    long keepalive_s;

    /* Connection. */
    char *host;
    int port;
    bool tls;
    char *ca_file;
    char *cert_file;
    char *key_file;
    bool configured;   /* audiohub_connect succeeded once: settings are fixed */
    bool ever_started; /* mosquitto_connect_async ran once: later attempts reconnect */
    enum connection connection;
    int64_t reconnect_at_ms;
    long reconnect_delay_ms;
    int subscribe_mid;
    int last_mosquitto_error;

    /* Callbacks. */
    audiohub_connect_cb on_connect;
    audiohub_disconnect_cb on_disconnect;
    audiohub_rebirth_cb on_rebirth;
    audiohub_sequence_load_cb load_sequence;
    audiohub_sequence_save_cb save_sequence;
    struct audiohub_head_tracking_handler head_tracking;
    /* What every frame carries: its content type and a message expiry of 1 s (libmosquitto copies them). */
    mosquitto_property *frame_properties;

    /* Accessories by id. */
    struct ah_table accessories;
    /* The requests in flight, by deadline. */
    struct ah_deadlines deadlines;

    uint64_t request_number;

    /* audiohub_disconnect: DISCONNECT waits for the acknowledgement of the offline status (libmosquitto 2.0 treats
     * an acknowledgement that arrives after a requested DISCONNECT as a protocol error and drops the connection
     * without sending it, so the broker would publish the will), or for the deadline. */
    bool goodbye_pending;
    int goodbye_mid;
    int64_t goodbye_deadline_ms;
    size_t counted; /* the caller's requests held, for the queue limit */
    struct audiohub_stats stats;

    /* The loop thread. */
    pthread_t thread;
    bool thread_running;
    bool thread_stop;

    /* The loop's wake-up: a pipe (read end, write end) that a thread queueing a packet while the loop waits in poll
     * writes one byte to, once however many it queues before the loop runs (`wake_pending`); `polling`: the loop
     * waits in poll without asking to write. */
    int wake[2];
    bool wake_pending;
    bool polling;
};

/* One mutex guards the handle. libmosquitto's callbacks run inside its loop functions, which audiohub_loop calls
 * without the mutex; they take it, and call the caller's callbacks only after releasing it, so that those may make
 * requests. Whatever the holder queued for libmosquitto (a request, a frame, a status, a DISCONNECT) while the loop
 * waits in poll, unlock wakes the loop to write: once, however many packets are queued before it runs (loop.c). */
void ah_wake_loop(struct audiohub *hub);
static inline void lock(struct audiohub *hub) { pthread_mutex_lock(&hub->mutex); }
static inline void unlock(struct audiohub *hub)
{
    if (hub->polling && !hub->wake_pending && mosquitto_want_write(hub->mosq)) {
        ah_wake_loop(hub);
    }
    pthread_mutex_unlock(&hub->mutex);
}

/* ---- hub.c ---- */

/* Sets *slot to a copy of `text` (NULL: ""), freeing the one before; false when out of memory (*slot unchanged). */
bool ah_replace_text(char **slot, const char *text);
/* Builds the topics again after the root or the slots changed (mutex held). */
void ah_reset_topics(struct audiohub *hub);
/* The root of the hub's topics under `slots` slots (0: a single bridge's, the topic root) into `out`. */
void ah_root_of(const struct audiohub *hub, long slots, char *out, size_t size);

/* ---- connect.c ---- */

/* libmosquitto's callbacks, which audiohub_new sets. */
void ah_on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message,
                   const mosquitto_property *properties);
void ah_on_publish(struct mosquitto *mosq, void *userdata, int mid, int rc, const mosquitto_property *props);
void ah_on_connect(struct mosquitto *mosq, void *userdata, int rc, int flags, const mosquitto_property *props);
void ah_on_subscribe(struct mosquitto *mosq, void *userdata, int mid, int count, const int *granted,
                     const mosquitto_property *props);
void ah_on_disconnect(struct mosquitto *mosq, void *userdata, int rc, const mosquitto_property *props);
/* Sends DISCONNECT now (mutex held). */
void ah_say_goodbye(struct audiohub *hub);
/* Schedules the next connection attempt (mutex held). */
void ah_schedule_reconnect(struct audiohub *hub);
/* Publishes the hub's retained status on its status topic (mutex held); `mid` may be NULL. A libmosquitto code. */
int ah_publish_status(struct audiohub *hub, bool online, int *mid);
/* One connection attempt (mutex held): the will, then an asynchronous connect that the loop completes. */
void ah_start_connection(struct audiohub *hub);

/* ---- queue.c ---- */

/* The accessory `id`, if the hub knows it. */
struct accessory *ah_find_accessory(struct audiohub *hub, const char *id);
/* The accessory `id` (valid), made when new; NULL when out of memory. */
struct accessory *ah_accessory_for(struct audiohub *hub, const char *id);
/* A request for `operation`, in no queue; NULL when out of memory. Freed (NULL: nothing) with what it holds. */
struct request *ah_new_request(enum audiohub_operation operation);
void ah_free_request(struct request *request);
/* Takes `request` (the head of its accessory's queue) out of the queue and the heap. */
void ah_detach_head(struct audiohub *hub, struct request *request);
/* Appends a caller's request to its accessory's queue and starts it when possible. */
void ah_enqueue(struct audiohub *hub, struct accessory *a, struct request *request);
/* Queues a rebirth's `count` requests right after the request in flight (or first, when none is). */
void ah_enqueue_rebirth(struct audiohub *hub, struct accessory *a, struct request *chain[], int count);
/* Calls the completion of `request` (mutex released) and frees it. */
void ah_complete(struct audiohub *hub, struct request *request, const struct audiohub_result *bridge_result,
                 enum audiohub_err status);

/* ---- send.c ---- */

/* Hands the request's PUBLISH to libmosquitto and sets its next deadline. */
void ah_publish_request(struct audiohub *hub, struct request *request);
/* Gives `request` a (new) sequence and request id, and packs it; false when out of memory. */
bool ah_number_request(struct audiohub *hub, struct request *request);
/* Starts the head of `a`'s queue if it is not in flight yet (only while connected). */
void ah_start_head(struct audiohub *hub, struct accessory *a);
/* Sends again every request in flight and starts every waiting one: a new connection. */
void ah_send_everything(struct audiohub *hub);

/* ---- handle_result.c ---- */

/* A message on the response topic (mutex not held). */
void ah_handle_result(struct audiohub *hub, const struct mosquitto_message *message,
                      const mosquitto_property *properties);

/* ---- handle_rebirth.c ---- */

/* A message on the rebirth topic (mutex not held). */
void ah_handle_rebirth(struct audiohub *hub, const struct mosquitto_message *message);
/* Fills the requests of a rebirth from the cache when its pair starts; false when the cache cannot answer. */
bool ah_fill_rebirth(struct request *pair);
/* Fills a rebirth's update asked first from the cache when it starts; false when the accessory is not registered. */
bool ah_fill_probe(struct request *update);
/* Queues a rebirth of `a` (pair, register, update) ahead of its waiting requests; false when out of memory. */
bool ah_queue_rebirth(struct audiohub *hub, struct accessory *a);
/* Queues a rebirth of `a` that asks with its update first, ahead of its waiting requests (the whole rebirth when it
 * is not registered); false when out of memory. */
bool ah_queue_probe(struct audiohub *hub, struct accessory *a);

/* ---- handle_head_tracking.c ---- */

/* Whether `topic` is one of the hub's headtracking topics; its accessory id then goes into `accessory_id`. */
bool ah_is_head_tracking_topic(const struct audiohub *hub, const char *topic, char accessory_id[AUDIOHUB_ID_MAX + 1]);
/* A message on an accessory's headtracking topic (mutex not held). */
void ah_handle_head_tracking(struct audiohub *hub, const struct mosquitto_message *message,
                             const mosquitto_property *properties, const char *accessory_id);

/* ---- handle_layout.c ---- */

/* A message on the layout topic (mutex not held). */
void ah_handle_layout(struct audiohub *hub, const struct mosquitto_message *message,
                      const mosquitto_property *properties);

/* ---- head_tracking.c ---- */

/* The properties of every frame; false when out of memory. */
bool ah_make_frame_properties(struct audiohub *hub);
/* Makes `view` the session in force of `a` (replacing any), with its frames' topic; false when out of memory. */
bool ah_session_start(struct audiohub *hub, struct accessory *a, const struct audiohub_head_tracking_session *view);
/* Ends the session in force of `a`, if any. */
void ah_session_end(struct accessory *a);

/* ---- loop.c ---- */

/* The loop's wake-up pipe: opened by audiohub_new (false, errno set, on failure), closed by audiohub_destroy. */
bool ah_wake_open(struct audiohub *hub);
void ah_wake_close(struct audiohub *hub);

/* ---- cache.c ---- */

/* What a successful request changes in the cache. */
void ah_apply_to_cache(struct accessory *a, const struct request *request);
/* The bridge's view of an accessory the hub does not know as paired (a restarted hub), from a result's state. */
void ah_adopt_state(struct audiohub *hub, struct accessory *a, const struct audiohub_state *state);
/* Copies the library's struct `full` into the caller's `out` of `size` bytes: what both know, zeros after. */
void ah_copy_sized(void *out, size_t size, const void *full, size_t full_size);

#endif /* AUDIOHUB_PRIVATE_H */
