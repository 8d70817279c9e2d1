/*
 * leakcheck, part 4: head tracking against the real bridge. A playing device of the test's own (libmosquitto, as a
 * real one would: it retains its SourceState with the Head Tracking setting, applies the bridge's commands and hosts
 * the session) and one hub:
 *   - the send errors, checked before anything is published (invalid data size for 0 and 71 bytes, not activated),
 *     and the other refusals (sizes, ids);
 *   - a spatial extension registered (and refused without audio spatialization), kept in the cache;
 *   - worn and routed with the host's setting on: activate; frames rendered by the host in order;
 *   - news the hub must drop: unreadable bytes, JSON, a field out of range, another hub's, an older order;
 *   - the host's setting off then on: state_did_change twice; taken off: invalidate (taken off);
 *   - put on again, then the hub destroyed with its session in force (freed by audiohub_destroy).
 */
#define _POSIX_C_SOURCE 200809L

#include "leakcheck.h"

#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <protobuf-c/protobuf-c.h>

#include "audioaccessory/v1/headtracking.pb-c.h"
#include "audioaccessory/v1/source.pb-c.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HUB "leak-ht-hub"
#define ACCESSORY "leak-ht"
#define HOST_HEX "1ea400000001"
#define NEWS_TOPIC "audio/hubs/" HUB "/accessories/" ACCESSORY "/headtracking"
#define FRAMES 300

static const struct audiohub_address HOST = {6, {0x1e, 0xa4, 0x00, 0x00, 0x00, 0x01}};
static const struct audiohub_spatial_extension APPLE = {0xaaf, 0xc0f, 0xb05e, 0, 0};

/* What the handler and the device saw. Its tally first: the hub's userdata is both. */
struct observed {
    struct tally tally;
    pthread_mutex_t mutex;
    int activations, state_changes, invalidations;
    bool is_active;
    enum audiohub_head_tracking_reason reason;
    struct audiohub_head_tracking_session session;
    /* The device: its route and last command, its current session as its own news say, the frames it rendered. */
    char routed[AUDIOHUB_ID_MAX + 1];
    uint64_t command_epoch, command_sequence, report_sequence;
    int head_tracking; /* HEAD_TRACKING_ON / _OFF */
    uint64_t news_epoch, news_sequence;
    uint8_t host_session[AUDIOHUB_SESSION_ID_SIZE];
    bool host_active;
    uint64_t rendered, other_session, out_of_order, last_frame;
    int64_t max_latency_us;
};

static int64_t wall_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static void on_activate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session)
{
    (void)hub;
    struct observed *o = userdata;
    pthread_mutex_lock(&o->mutex);
    o->activations++;
    o->session = *session;
    o->is_active = session->is_head_tracking_active;
    pthread_mutex_unlock(&o->mutex);
}

static void on_state(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                     bool is_active)
{
    (void)hub;
    struct observed *o = userdata;
    pthread_mutex_lock(&o->mutex);
    o->state_changes++;
    o->is_active = is_active;
    if (memcmp(session->session_id, o->session.session_id, AUDIOHUB_SESSION_ID_SIZE) != 0 ||
        is_active != session->is_head_tracking_active) {
        fail("state_did_change: not the session activated, or not its setting");
    }
    pthread_mutex_unlock(&o->mutex);
}

static void on_invalidate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                          enum audiohub_head_tracking_reason reason)
{
    (void)hub;
    struct observed *o = userdata;
    pthread_mutex_lock(&o->mutex);
    o->invalidations++;
    o->reason = reason;
    if (memcmp(session->session_id, o->session.session_id, AUDIOHUB_SESSION_ID_SIZE) != 0) {
        fail("invalidate: not the session activated");
    }
    pthread_mutex_unlock(&o->mutex);
}

/* The device's retained SourceState: media, its route, its last command, its Head Tracking setting (mutex held). */
static void report(struct mosquitto *device, struct observed *o)
{
    Audioaccessory__V1__SourceState state = AUDIOACCESSORY__V1__SOURCE_STATE__INIT;
    state.sequence = ++o->report_sequence;
    state.activity = AUDIOACCESSORY__V1__ACTIVITY__ACTIVITY_MEDIA;
    state.routed_accessory_id = o->routed;
    state.last_command_epoch = o->command_epoch;
    state.last_command_sequence = o->command_sequence;
    state.head_tracking = (Audioaccessory__V1__HeadTracking)o->head_tracking;
    uint8_t payload[256];
    size_t length = audioaccessory__v1__source_state__pack(&state, payload);
    mosquitto_property *properties = NULL;
    mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    mosquitto_publish_v5(device, NULL, "audio/sources/" HOST_HEX "/state", (int)length, payload, 1, true, properties);
    mosquitto_property_free_all(&properties);
}

static void device_command(struct mosquitto *device, struct observed *o, const struct mosquitto_message *message)
{
    Audioaccessory__V1__SwitchCommand *command =
        audioaccessory__v1__switch_command__unpack(NULL, (size_t)message->payloadlen, message->payload);
    if (command == NULL) {
        return;
    }
    if (command->epoch > o->command_epoch ||
        (command->epoch == o->command_epoch && command->sequence > o->command_sequence)) {
        o->command_epoch = command->epoch;
        o->command_sequence = command->sequence;
        if (command->action == AUDIOACCESSORY__V1__ACTION__ACTION_ROUTE_TO_ACCESSORY) {
            snprintf(o->routed, sizeof o->routed, "%s", command->accessory_id);
        } else if (command->action != AUDIOACCESSORY__V1__ACTION__ACTION_RESUME) {
            o->routed[0] = '\0';
        }
        report(device, o);
    }
    audioaccessory__v1__switch_command__free_unpacked(command, NULL);
}

/* The host's side: its session news (fenced), and the frames it renders (its current session's only). */
static void on_device_message(struct mosquitto *device, void *userdata, const struct mosquitto_message *message,
                              const mosquitto_property *properties)
{
    (void)properties;
    struct observed *o = userdata;
    const char *topic = message->topic;
    pthread_mutex_lock(&o->mutex);
    if (strcmp(topic, "audio/sources/" HOST_HEX "/commands") == 0) {
        device_command(device, o, message);
    } else if (strcmp(topic, "audio/sources/" HOST_HEX "/headtracking") == 0) {
        Audioaccessory__V1__HeadTrackingSession *news =
            audioaccessory__v1__head_tracking_session__unpack(NULL, (size_t)message->payloadlen, message->payload);
        if (news != NULL && news->session_id.len == AUDIOHUB_SESSION_ID_SIZE &&
            (news->epoch > o->news_epoch || (news->epoch == o->news_epoch && news->sequence > o->news_sequence))) {
            o->news_epoch = news->epoch;
            o->news_sequence = news->sequence;
            bool ended = news->event == AUDIOACCESSORY__V1__HEAD_TRACKING_EVENT__HEAD_TRACKING_EVENT_INVALIDATED;
            if (!ended && memcmp(o->host_session, news->session_id.data, AUDIOHUB_SESSION_ID_SIZE) != 0) {
                o->last_frame = 0;
            }
            memcpy(o->host_session, news->session_id.data, AUDIOHUB_SESSION_ID_SIZE);
            o->host_active = !ended;
        }
        audioaccessory__v1__head_tracking_session__free_unpacked(news, NULL);
    } else if (strcmp(topic, "audio/sources/" HOST_HEX "/frames/" HUB "/" ACCESSORY) == 0) {
        Audioaccessory__V1__HeadTrackingFrame *frame =
            audioaccessory__v1__head_tracking_frame__unpack(NULL, (size_t)message->payloadlen, message->payload);
        if (frame != NULL && o->host_active && frame->session_id.len == AUDIOHUB_SESSION_ID_SIZE &&
            memcmp(frame->session_id.data, o->host_session, AUDIOHUB_SESSION_ID_SIZE) == 0 && frame->data.len >= 1 &&
            frame->data.len <= AUDIOHUB_FRAME_MAX) {
            o->rendered++;
            o->out_of_order += frame->sequence <= o->last_frame;
            o->last_frame = frame->sequence;
            int64_t latency = wall_us() - frame->sent_at_unix_us;
            o->max_latency_us = latency > o->max_latency_us ? latency : o->max_latency_us;
        } else {
            o->other_session++;
        }
        audioaccessory__v1__head_tracking_frame__free_unpacked(frame, NULL);
    }
    pthread_mutex_unlock(&o->mutex);
}

/* Waits up to 60 s (ASan on a busy machine) until `done` says so. */
static void wait_for(struct observed *o, bool (*done)(struct observed *, struct audiohub *), struct audiohub *hub,
                     const char *what)
{
    for (int i = 0; i < 6000; i++) {
        pthread_mutex_lock(&o->mutex);
        bool ok = done(o, hub);
        pthread_mutex_unlock(&o->mutex);
        if (ok) {
            return;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "leakcheck: head tracking: no %s within 60 s\n", what);
    exit(1);
}

static struct audiohub_stats stats_of(struct audiohub *hub)
{
    struct audiohub_stats stats;
    audiohub_stats_get(hub, &stats, sizeof stats);
    return stats;
}

static bool activated_once(struct observed *o, struct audiohub *hub) { (void)hub; return o->activations == 1; }
static bool activated_twice(struct observed *o, struct audiohub *hub) { (void)hub; return o->activations == 2; }
static bool all_rendered(struct observed *o, struct audiohub *hub) { (void)hub; return o->rendered >= FRAMES; }
static bool turned_off(struct observed *o, struct audiohub *hub) { (void)hub; return o->state_changes == 1; }
static bool turned_on(struct observed *o, struct audiohub *hub) { (void)hub; return o->state_changes == 2; }
static bool ended(struct observed *o, struct audiohub *hub) { (void)hub; return o->invalidations == 1; }
static bool dropped(struct observed *o, struct audiohub *hub)
{
    (void)o;
    struct audiohub_stats stats = stats_of(hub);
    return stats.head_tracking_malformed == 4 && stats.head_tracking_stale == 1;
}

/* A HeadTrackingSession the bridge would never send, published on the hub's topic. */
static void forge(struct mosquitto *device, size_t id_length, uint64_t sequence, const char *hub_id)
{
    uint8_t id[AUDIOHUB_SESSION_ID_SIZE] = {1};
    Audioaccessory__V1__HeadTrackingSession news = AUDIOACCESSORY__V1__HEAD_TRACKING_SESSION__INIT;
    news.accessory_id = ACCESSORY;
    news.session_id = (ProtobufCBinaryData){id_length, id};
    news.event = AUDIOACCESSORY__V1__HEAD_TRACKING_EVENT__HEAD_TRACKING_EVENT_INVALIDATED;
    news.host = (ProtobufCBinaryData){6, (uint8_t *)HOST.bytes};
    news.sequence = sequence;
    news.hub_id = (char *)hub_id;
    uint8_t payload[256];
    size_t length = audioaccessory__v1__head_tracking_session__pack(&news, payload);
    mosquitto_publish_v5(device, NULL, NEWS_TOPIC, (int)length, payload, 1, false, NULL);
}

static void expect(enum audiohub_err got, enum audiohub_err wanted, const char *what)
{
    if (got != wanted) {
        fprintf(stderr, "leakcheck: head tracking: %s: %s, expected %s\n", what, audiohub_strerror(got),
                audiohub_strerror(wanted));
        exit(1);
    }
}

void check_head_tracking(const char *broker, const char *host, int port)
{
    struct observed o;
    memset(&o, 0, sizeof o);
    pthread_mutex_init(&o.tally.mutex, NULL);
    pthread_cond_init(&o.tally.changed, NULL);
    pthread_mutex_init(&o.mutex, NULL);
    o.head_tracking = AUDIOACCESSORY__V1__HEAD_TRACKING__HEAD_TRACKING_ON;
    o.report_sequence = (uint64_t)time(NULL) * 1000;
    uint8_t frame[71] = {0};
    struct audiohub_head_tracking_session session;

    struct audiohub *hub;
    check(audiohub_new(HUB, &o, &hub), "audiohub_new");
    const struct audiohub_head_tracking_handler handler = {on_activate, on_state, on_invalidate};
    expect(audiohub_head_tracking_handler_set(hub, &handler, 8), AUDIOHUB_ERR_INVAL, "a handler too small");
    check(audiohub_head_tracking_handler_set(hub, NULL, 0), "clearing the handler");
    check(audiohub_head_tracking_handler_set(hub, &handler, sizeof handler), "handler");
    /* Refused before anything is published: nothing is connected yet. */
    expect(audiohub_head_tracking_send(hub, ACCESSORY, frame, 0), AUDIOHUB_ERR_INVALID_DATA_SIZE, "0 bytes");
    expect(audiohub_head_tracking_send(hub, ACCESSORY, frame, 71), AUDIOHUB_ERR_INVALID_DATA_SIZE, "71 bytes");
    expect(audiohub_head_tracking_send(hub, ACCESSORY, frame, 13), AUDIOHUB_ERR_NOT_ACTIVATED, "before a session");
    expect(audiohub_head_tracking_send(hub, "bad id!", frame, 13), AUDIOHUB_ERR_ACCESSORY_ID, "a bad id");
    expect(audiohub_head_tracking_send(hub, ACCESSORY, NULL, 13), AUDIOHUB_ERR_INVAL, "no data");
    expect(audiohub_head_tracking_get(hub, ACCESSORY, &session, sizeof session), AUDIOHUB_ERR_NOT_ACTIVATED, "get");
    expect(audiohub_head_tracking_get(hub, ACCESSORY, &session, 8), AUDIOHUB_ERR_INVAL, "get, too small");
    expect(audiohub_register_spatial(hub, ACCESSORY, AUDIOHUB_CAP_ALL, &APPLE, 4, completed, (void *)&EXPECT_ANY),
           AUDIOHUB_ERR_INVAL, "an extension too small");
    if (strstr(audiohub_strerror(AUDIOHUB_ERR_INVALID_DATA_SIZE), "invalidDataSize") == NULL ||
        strstr(audiohub_strerror(AUDIOHUB_ERR_NOT_ACTIVATED), "notActivated") == NULL) {
        fail("head tracking: the errors' texts");
    }

    /* The playing device: retained media with head tracking on, then the hub. */
    struct mosquitto *device = mosquitto_new("leak-ht-device", true, &o);
    if (device == NULL) {
        fail("mosquitto_new");
    }
    mosquitto_int_option(device, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_message_v5_callback_set(device, on_device_message);
    if (mosquitto_connect(device, host, port, 30) != MOSQ_ERR_SUCCESS ||
        mosquitto_subscribe(device, NULL, "audio/sources/" HOST_HEX "/#", 1) != MOSQ_ERR_SUCCESS ||
        mosquitto_loop_start(device) != MOSQ_ERR_SUCCESS) {
        fail("head tracking: the device cannot connect");
    }
    pthread_mutex_lock(&o.mutex);
    report(device, &o);
    pthread_mutex_unlock(&o.mutex);

    check(audiohub_int_option(hub, AUDIOHUB_OPT_RECONNECT_MIN_MS, 50), "reconnect");
    check(audiohub_connect(hub, broker, NULL, NULL), "connect");
    check(audiohub_loop_start(hub), "loop_start");
    struct tally *tally = &o.tally;
    accepted(tally, audiohub_pair(hub, ACCESSORY, "Tracker", "T-1", AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_NONE),
             "pair");
    accepted(tally, audiohub_register_spatial(hub, ACCESSORY, AUDIOHUB_CAP_ALL, &APPLE, sizeof APPLE, completed,
                                              (void *)&EXPECT_NONE), "register with an extension");
    /* An extension without audio spatialization: accessoryNotCapable, which changes nothing. */
    accepted(tally, audiohub_register_spatial(hub, ACCESSORY, AUDIOHUB_CAP_ALL & ~AUDIOHUB_CAP_AUDIO_SPATIALIZATION,
                                              &APPLE, sizeof APPLE, completed, (void *)&EXPECT_NOT_CAPABLE),
             "register an extension without spatialization");
    struct audiohub_configuration worn = {AUDIOHUB_CAP_ALL, AUDIOHUB_PLACEMENT_ON_HEAD, HOST, {0, {0}}};
    accepted(tally, audiohub_update_spatial(hub, ACCESSORY, &worn, &APPLE, sizeof APPLE, completed,
                                            (void *)&EXPECT_NONE), "worn, with its host as source");
    wait_idle(hub, tally);
    struct audiohub_accessory cached;
    check(audiohub_accessory_get(hub, ACCESSORY, &cached, sizeof cached), "accessory_get");
    if (!cached.has_spatial_extension || cached.spatial_extension.component_type != 0xaaf ||
        cached.spatial_extension.component_manufacturer != 0xb05e) {
        fail("head tracking: the cache lost the spatial extension");
    }

    /* Worn and routed, the host's setting on: activate, then frames the host renders in order. */
    wait_for(&o, activated_once, hub, "activation");
    check(audiohub_head_tracking_get(hub, ACCESSORY, &session, sizeof session), "get");
    if (memcmp(session.session_id, o.session.session_id, AUDIOHUB_SESSION_ID_SIZE) != 0 || !session.is_head_tracking_active ||
        memcmp(session.host.bytes, HOST.bytes, 6) != 0 || session.restoration_id[0] == '\0' ||
        strcmp(session.accessory_id, ACCESSORY) != 0) {
        fail("head tracking: the session is not the one activated, with its host and setting");
    }
    for (int i = 0; i < FRAMES; i++) {
        frame[0] = (uint8_t)i;
        check(audiohub_head_tracking_send(hub, ACCESSORY, frame, 13), "send");
        sleep_ms(1);
    }
    wait_for(&o, all_rendered, hub, "frames rendered");

    /* News the hub must drop: unreadable, JSON, a session id of 3 bytes, another hub's, an older order. */
    mosquitto_publish_v5(device, NULL, NEWS_TOPIC, 3, "\xff\xff\xff", 1, false, NULL);
    mosquitto_property *json = NULL;
    mosquitto_property_add_string(&json, MQTT_PROP_CONTENT_TYPE, "application/json");
    mosquitto_publish_v5(device, NULL, NEWS_TOPIC, 2, "{}", 1, false, json);
    mosquitto_property_free_all(&json);
    forge(device, 3, UINT64_MAX, HUB);
    forge(device, AUDIOHUB_SESSION_ID_SIZE, UINT64_MAX, "someone-else");
    forge(device, AUDIOHUB_SESSION_ID_SIZE, 1, HUB);
    wait_for(&o, dropped, hub, "drop of 4 malformed and 1 stale news");
    check(audiohub_head_tracking_get(hub, ACCESSORY, &session, sizeof session), "get after the bad news");

    /* The person turns head tracking off, then on, on the host. */
    pthread_mutex_lock(&o.mutex);
    o.head_tracking = AUDIOACCESSORY__V1__HEAD_TRACKING__HEAD_TRACKING_OFF;
    report(device, &o);
    pthread_mutex_unlock(&o.mutex);
    wait_for(&o, turned_off, hub, "state change to off");
    expect(audiohub_head_tracking_send(hub, ACCESSORY, frame, 13), AUDIOHUB_ERR_NOT_ACTIVATED, "while off");
    check(audiohub_head_tracking_get(hub, ACCESSORY, &session, sizeof session), "get while off");
    if (session.is_head_tracking_active || o.is_active) {
        fail("head tracking: still active after the host turned it off");
    }
    pthread_mutex_lock(&o.mutex);
    o.head_tracking = AUDIOACCESSORY__V1__HEAD_TRACKING__HEAD_TRACKING_ON;
    report(device, &o);
    pthread_mutex_unlock(&o.mutex);
    wait_for(&o, turned_on, hub, "state change to on");
    check(audiohub_head_tracking_send(hub, ACCESSORY, frame, AUDIOHUB_FRAME_MAX), "send 70 bytes");

    /* Taken off: invalidated. */
    accepted(tally, audiohub_placement(hub, ACCESSORY, AUDIOHUB_PLACEMENT_OFF_HEAD, completed, (void *)&EXPECT_NONE),
             "taken off");
    wait_for(&o, ended, hub, "invalidation");
    if (o.reason != AUDIOHUB_HEAD_TRACKING_REASON_TAKEN_OFF) {
        fail("head tracking: invalidated, but not as taken off");
    }
    expect(audiohub_head_tracking_send(hub, ACCESSORY, frame, 13), AUDIOHUB_ERR_NOT_ACTIVATED, "after take-off");
    expect(audiohub_head_tracking_get(hub, ACCESSORY, &session, sizeof session), AUDIOHUB_ERR_NOT_ACTIVATED,
           "get after take-off");

    /* Put on again: a new session, which audiohub_destroy frees. */
    accepted(tally, audiohub_placement(hub, ACCESSORY, AUDIOHUB_PLACEMENT_IN_EAR, completed, (void *)&EXPECT_NONE),
             "put on again");
    wait_for(&o, activated_twice, hub, "second activation");
    wait_idle(hub, tally);
    struct audiohub_stats stats = stats_of(hub);
    audiohub_destroy(hub);
    mosquitto_disconnect(device);
    mosquitto_loop_stop(device, false);
    mosquitto_destroy(device);

    printf("leakcheck: head tracking: %" PRIu64 " frames sent, %" PRIu64 " rendered by the host (%" PRIu64
           " out of order, %" PRIu64 " of another session), max latency %.2f ms; %" PRIu64 " news, %" PRIu64
           " malformed, %" PRIu64 " stale; %d activations, %d state changes, %d invalidations\n",
           stats.frames_sent, o.rendered, o.out_of_order, o.other_session, (double)o.max_latency_us / 1000.0,
           stats.head_tracking_news, stats.head_tracking_malformed, stats.head_tracking_stale, o.activations,
           o.state_changes, o.invalidations);
    if (stats.frames_sent != FRAMES + 1 || o.out_of_order != 0 || o.other_session != 0 ||
        o.tally.accepted != o.tally.completed || o.tally.unexpected != 0) {
        if (o.tally.unexpected != 0) {
            fprintf(stderr, "leakcheck: head tracking: %s\n", o.tally.first_unexpected);
        }
        fail("head tracking: frames or requests went wrong");
    }
    pthread_mutex_destroy(&o.mutex);
    pthread_mutex_destroy(&o.tally.mutex);
    pthread_cond_destroy(&o.tally.changed);
}
