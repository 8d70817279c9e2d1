/*
 * --head-tracking HZ. The hubs' side: each hub's head-tracking handler keeps its accessories' sessions as the SDK tells
 * them, and a streamer thread per hub (each hub is a device of its own), which runs the hub's loop meanwhile, sends
 * every accessory of its hub in session with head tracking on a synthetic IMU report HZ times a second, in the style of
 * Android's head-tracker HID report (a rotation vector, an angular velocity, a discontinuity count: 13 bytes). The
 * devices' side, as hosts: each keeps per accessory the order of the last session news it took (dropping older news)
 * and its current session; it renders the frames of that session only, from that hub only, measuring each one's
 * latency (the hosts and the hubs share this machine's clock), and drops and counts the others.
 * A route change is timed at its new host: from the ROUTE command it takes (while measuring) to the first frame it
 * renders for that accessory; the frames of a session a host has seen end, still arriving, are counted as late.
 * --verify then fails on a frame rendered outside its session, a session active on two hosts at once, and a session
 * left active on a host or a hub for an accessory its hub left off head.
 */
#define _GNU_SOURCE /* ppoll */

#include "hub_sim.h"

#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPORT_SIZE 13
#define PI 3.14159265358979323846

const struct audiohub_spatial_extension SIM_SPATIAL_EXTENSION = {0xaaf, 0xc0f, 0xb05e, 0, 0};

/* A device's view of one accessory's sessions, as their host. */
struct host_session {
    long accessory;
    bool known; /* some news was taken: (epoch, sequence) is the order of the last */
    uint64_t epoch;
    uint64_t sequence;
    bool active; /* the current session is in force */
    uint8_t id[16];
    char hub[AUDIOHUB_ID_MAX + 1]; /* the hub whose frames it takes */
    uint64_t last_frame;           /* the sequence of the last frame rendered */
    bool awaiting_frame;           /* routed here (a ROUTE command while measuring), no frame rendered since */
    uint64_t routed_ns;            /* when that ROUTE came */
};

/* One accessory a streamer sends a frame for this tick. */
struct due {
    long accessory;
    uint8_t discontinuity;
};

/* A hub's streamer thread. */
struct streamer {
    struct sim *sim;
    long hub;
    pthread_t thread;
    struct due *due; /* its own */
};

struct head_tracking {
    /* Guards this, the accessories' ht_* and active_hosts, and the devices' sessions. */
    pthread_mutex_t mutex;
    struct streamer *streamers; /* one per hub */
    long started;               /* how many run */
    bool stop;
    uint64_t sent, refused, failed;
    uint64_t rendered, dropped, missed, outside, malformed, stale, sessions, late, routes;
    uint64_t measured_ns;   /* when the measured phase began (0: not yet) */
    uint64_t last_tick_ns;  /* the streamers' last tick */
    uint64_t sent_measured; /* ht->sent then */
    long two_hosts;
    long left_active; /* -1: not verified */
    char first[300];
    struct latencies frames;      /* hub -> host, per frame rendered */
    struct latencies first_frames; /* a ROUTE command -> its host's first frame of the accessory */
};

/* ---- The hubs' side ---------------------------------------------------------------------------------------- */

static struct accessory *accessory_of(struct sim *sim, const char *id)
{
    long index = accessory_index(sim, id);
    return index >= 0 ? &sim->accessories[index] : NULL;
}

static void on_activate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session)
{
    (void)hub;
    struct sim *sim = userdata;
    struct accessory *a = accessory_of(sim, session->accessory_id);
    if (a != NULL) {
        pthread_mutex_lock(&sim->ht->mutex);
        a->ht_active = true;
        a->ht_on = session->is_head_tracking_active;
        a->ht_discontinuity++; /* a new session: a new reference frame */
        pthread_mutex_unlock(&sim->ht->mutex);
    }
}

static void on_state(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                     bool is_active)
{
    (void)hub;
    struct sim *sim = userdata;
    struct accessory *a = accessory_of(sim, session->accessory_id);
    if (a != NULL) {
        pthread_mutex_lock(&sim->ht->mutex);
        a->ht_on = is_active;
        pthread_mutex_unlock(&sim->ht->mutex);
    }
}

static void on_invalidate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                          enum audiohub_head_tracking_reason reason)
{
    (void)hub;
    (void)reason;
    struct sim *sim = userdata;
    struct accessory *a = accessory_of(sim, session->accessory_id);
    if (a != NULL) {
        pthread_mutex_lock(&sim->ht->mutex);
        a->ht_active = false;
        pthread_mutex_unlock(&sim->ht->mutex);
    }
}

static void put_int16(uint8_t *out, double value, double full_scale)
{
    double scaled = value / full_scale * 32767.0;
    int16_t v = (int16_t)(scaled > 32767 ? 32767 : (scaled < -32767 ? -32767 : scaled));
    out[0] = (uint8_t)((uint16_t)v & 0xff);
    out[1] = (uint8_t)((uint16_t)v >> 8);
}

/* A head-tracker report at `t` seconds: the head turning left and right (0.25 Hz) and nodding (0.4 Hz), as a rotation
 * vector (radians, full scale pi) and an angular velocity (rad/s, full scale 32), little-endian int16s, then the
 * discontinuity count. */
static void imu_report(double t, long accessory, uint8_t discontinuity, uint8_t out[REPORT_SIZE])
{
    const double yaw_w = 2 * PI * 0.25, pitch_w = 2 * PI * 0.4, phase = 0.7 * (double)accessory;
    double yaw = 0.6 * sin(yaw_w * t + phase), pitch = 0.2 * sin(pitch_w * t + phase);
    double yaw_rate = 0.6 * yaw_w * cos(yaw_w * t + phase), pitch_rate = 0.2 * pitch_w * cos(pitch_w * t + phase);
    put_int16(out + 0, pitch, PI);
    put_int16(out + 2, 0, PI);
    put_int16(out + 4, yaw, PI);
    put_int16(out + 6, pitch_rate, 32);
    put_int16(out + 8, 0, 32);
    put_int16(out + 10, yaw_rate, 32);
    out[12] = discontinuity;
}

/* Accessories are not in step: each samples on a clock of its own. So a streamer spreads its accessories' frames over
 * the period, in PHASES ticks of period/PHASES each: accessory i at phase i mod PHASES (its hub's frames all at one
 * instant would be a burst no set of real accessories sends). */
#define PHASES 10

/* Runs `hub`'s loop until `until` (CLOCK_MONOTONIC, ns): waits on its socket, at most until its next deadline, and
 * lets audiohub_loop do what came. */
static void loop_until(struct audiohub *hub, uint64_t until)
{
    for (uint64_t now = now_ns(); now < until; now = now_ns()) {
        uint64_t wait = until - now, limit = (uint64_t)audiohub_next_timeout_ms(hub) * 1000000ULL;
        if (limit < wait) {
            wait = limit;
        }
        struct pollfd socket = {audiohub_socket(hub), (short)(POLLIN | (audiohub_want_write(hub) ? POLLOUT : 0)), 0};
        struct timespec timeout = {(time_t)(wait / 1000000000ULL), (long)(wait % 1000000000ULL)};
        ppoll(&socket, socket.fd >= 0 ? 1 : 0, &timeout, NULL);
        audiohub_loop(hub, 0);
    }
}

/* TCP_CORK on the hub's socket: while on, what is written waits for a full segment; off, it leaves at once. */
static bool cork(struct audiohub *hub, bool on)
{
    int socket = audiohub_socket(hub), value = on;
    return socket >= 0 && setsockopt(socket, IPPROTO_TCP, TCP_CORK, &value, sizeof value) == 0;
}

/* A hub's streamer runs the hub's loop while it streams, as a hub that streams on one thread does (Examples/hub-c's
 * stream.c): a tick's frames are written together right after it, and the thread waits on the socket until the next
 * tick, with no hand-off to a loop thread per frame. What other threads request in the meantime (the scenario, the
 * set-up) goes out at the next tick, a period/PHASES later at most. The hub's own loop thread runs again after. */
static void *stream(void *argument)
{
    struct streamer *self = argument;
    struct sim *sim = self->sim;
    struct head_tracking *ht = sim->ht;
    struct audiohub *hub = sim->hubs[self->hub];
    const uint64_t tick = (uint64_t)(1e9 / sim->opt.head_tracking / PHASES);
    uint64_t started = now_ns();
    uint64_t next = started;
    audiohub_loop_stop(hub, false);
    for (;;) {
        long phase = (long)((next - started) / tick % PHASES);
        pthread_mutex_lock(&ht->mutex);
        ht->last_tick_ns = now_ns();
        bool stop = ht->stop;
        long count = 0;
        for (long i = 0; i < sim->accessory_count && !stop; i++) {
            const struct accessory *a = &sim->accessories[i];
            if (a->hub == self->hub && i % PHASES == phase && a->ht_active && a->ht_on) {
                self->due[count++] = (struct due){i, a->ht_discontinuity};
            }
        }
        pthread_mutex_unlock(&ht->mutex);
        if (stop) {
            break;
        }
        uint64_t sent = 0, refused = 0, failed = 0;
        double t = (double)(now_ns() - started) / 1e9;
        for (long k = 0; k < count; k++) {
            const struct accessory *a = &sim->accessories[self->due[k].accessory];
            uint8_t report[REPORT_SIZE];
            imu_report(t, self->due[k].accessory, self->due[k].discontinuity, report);
            enum audiohub_err rc = audiohub_head_tracking_send(hub, a->id, report, sizeof report);
            /* NOT_ACTIVATED: the session ended (or the host turned it off) since the list was made. */
            sent += rc == AUDIOHUB_ERR_SUCCESS;
            refused += rc == AUDIOHUB_ERR_NOT_ACTIVATED;
            failed += rc != AUDIOHUB_ERR_SUCCESS && rc != AUDIOHUB_ERR_NOT_ACTIVATED;
        }
        pthread_mutex_lock(&ht->mutex);
        ht->sent += sent;
        ht->refused += refused;
        ht->failed += failed;
        pthread_mutex_unlock(&ht->mutex);
        /* The next tick; one that is already past is skipped (its accessories miss a frame) rather than sent late in
         * a burst. */
        next += tick;
        uint64_t now = now_ns();
        if (next < now) {
            next = now + tick - (now - next) % tick;
        }
        /* The tick's frames in one TCP segment rather than one each (they leave together anyway). */
        bool corked = count > 1 && cork(hub, true);
        audiohub_loop(hub, 0);
        if (corked) {
            cork(hub, false);
        }
        loop_until(hub, next);
    }
    audiohub_loop_start(hub);
    return NULL;
}

bool start_head_tracking(struct sim *sim)
{
    struct head_tracking *ht = calloc(1, sizeof *ht);
    if (ht == NULL || (ht->streamers = calloc((size_t)sim->opt.hubs, sizeof *ht->streamers)) == NULL) {
        free(ht);
        fprintf(stderr, "hub-sim: out of memory\n");
        return false;
    }
    pthread_mutex_init(&ht->mutex, NULL);
    ht->left_active = -1;
    sim->ht = ht;
    const struct audiohub_head_tracking_handler handler = {on_activate, on_state, on_invalidate};
    for (long h = 0; h < sim->opt.hubs; h++) {
        enum audiohub_err rc = audiohub_head_tracking_handler_set(sim->hubs[h], &handler, sizeof handler);
        if (rc != AUDIOHUB_ERR_SUCCESS) {
            fprintf(stderr, "hub-sim: head tracking: %s\n", audiohub_strerror(rc));
            return false;
        }
    }
    for (long h = 0; h < sim->opt.hubs; h++) {
        struct streamer *streamer = &ht->streamers[h];
        *streamer = (struct streamer){.sim = sim, .hub = h};
        streamer->due = calloc((size_t)sim->accessory_count, sizeof *streamer->due);
        if (streamer->due == NULL || pthread_create(&streamer->thread, NULL, stream, streamer) != 0) {
            fprintf(stderr, "hub-sim: cannot start the head-tracking streamers\n");
            return false;
        }
        ht->started++;
    }
    return true;
}

/* ---- The devices as hosts ---------------------------------------------------------------------------------- */

void subscribe_hosts(struct sim *sim, struct mosquitto *mosq)
{
    char filter[300];
    snprintf(filter, sizeof filter, "%s/sources/+/headtracking", sim->opt.topic_root);
    mosquitto_subscribe_v5(mosq, NULL, filter, 1, 0, NULL);
    snprintf(filter, sizeof filter, "%s/sources/+/frames/+/+", sim->opt.topic_root);
    mosquitto_subscribe_v5(mosq, NULL, filter, 0, 0, NULL);
}

/* The device of `topic`, {root}/sources/{hex}/{rest}, with `rest`; NULL when it is none of hub-sim's. */
static struct device *device_of(struct sim *sim, const char *topic, const char **rest)
{
    size_t root = strlen(sim->opt.topic_root);
    if (strncmp(topic, sim->opt.topic_root, root) != 0 || strncmp(topic + root, "/sources/", 9) != 0) {
        return NULL;
    }
    const char *hex = topic + root + 9;
    unsigned index = 0;
    if (strlen(hex) < 13 || hex[12] != '/' || sscanf(hex + 8, "%4x", &index) != 1 ||
        index >= (unsigned)sim->opt.devices || strncmp(sim->devices[index].hex, hex, 12) != 0) {
        return NULL;
    }
    *rest = hex + 13;
    return &sim->devices[index];
}

/* The device's entry for `accessory`, made when `create` (NULL when none, or out of memory); the mutex held. */
static struct host_session *host_session(struct device *device, long accessory, bool create)
{
    for (size_t i = 0; i < device->session_count; i++) {
        if (device->sessions[i].accessory == accessory) {
            return &device->sessions[i];
        }
    }
    if (!create) {
        return NULL;
    }
    if (device->session_count == device->session_capacity) {
        size_t capacity = device->session_capacity == 0 ? 4 : device->session_capacity * 2;
        struct host_session *grown = realloc(device->sessions, capacity * sizeof *grown);
        if (grown == NULL) {
            return NULL;
        }
        device->sessions = grown;
        device->session_capacity = capacity;
    }
    struct host_session *entry = &device->sessions[device->session_count++];
    memset(entry, 0, sizeof *entry);
    entry->accessory = accessory;
    return entry;
}

static void note_violation(struct head_tracking *ht, const char *text)
{
    if (ht->first[0] == '\0') {
        snprintf(ht->first, sizeof ht->first, "%s", text);
    }
}

/* Session news for `device`: fenced per accessory, then its session started, changed or ended. */
static void host_news(struct sim *sim, struct device *device, const struct mosquitto_message *message)
{
    struct head_tracking *ht = sim->ht;
    struct wire_head_tracking news;
    bool ok = wire_unpack_head_tracking(message->payload, (size_t)message->payloadlen, &news) &&
              memcmp(news.host, device->address.bytes, 6) == 0;
    long index = ok ? accessory_index(sim, news.accessory_id) : -1;
    pthread_mutex_lock(&ht->mutex);
    struct host_session *entry = index >= 0 ? host_session(device, index, true) : NULL;
    if (!ok) {
        ht->malformed++;
    } else if (entry == NULL) {
        /* Another run's accessory (or out of memory): not this run's business. */
    } else if (entry->known && (news.epoch < entry->epoch ||
                                (news.epoch == entry->epoch && news.sequence <= entry->sequence))) {
        ht->stale++; /* not newer than the last taken: an older owner's, or a redelivery */
    } else {
        struct accessory *a = &sim->accessories[index];
        entry->known = true;
        entry->epoch = news.epoch;
        entry->sequence = news.sequence;
        if (news.event == WIRE_HT_INVALIDATED) {
            if (entry->active) {
                entry->active = false;
                a->active_hosts--;
            }
        } else if (!entry->active || memcmp(entry->id, news.session_id, 16) != 0) {
            /* A session this host did not hold: activated (a change of state of one it never heard of counts too). */
            if (!entry->active && ++a->active_hosts > 1) {
                char text[300];
                snprintf(text, sizeof text, "%s: a session active on %s while another device holds one", a->id,
                         device->hex);
                note_violation(ht, text);
                ht->two_hosts++;
            }
            entry->active = true;
            memcpy(entry->id, news.session_id, 16);
            snprintf(entry->hub, sizeof entry->hub, "%s", news.hub_id);
            entry->last_frame = 0;
            ht->sessions++;
        }
    }
    pthread_mutex_unlock(&ht->mutex);
}

void measure_head_tracking(struct sim *sim)
{
    struct head_tracking *ht = sim->ht;
    if (ht == NULL) {
        return;
    }
    pthread_mutex_lock(&ht->mutex);
    ht->measured_ns = now_ns();
    ht->sent_measured = ht->sent;
    ht->frames.count = 0;
    pthread_mutex_unlock(&ht->mutex);
}

void host_routed(struct sim *sim, struct device *device, const char *accessory_id)
{
    struct head_tracking *ht = sim->ht;
    long index = ht != NULL && sim->measuring ? accessory_index(sim, accessory_id) : -1;
    if (index < 0) {
        return;
    }
    pthread_mutex_lock(&ht->mutex);
    struct host_session *entry = host_session(device, index, true);
    if (entry != NULL) {
        entry->awaiting_frame = true;
        entry->routed_ns = now_ns();
        ht->routes++;
    }
    pthread_mutex_unlock(&ht->mutex);
}

static int64_t wall_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

/* Renders `frame` of accessory `index` on `device` (the mutex held): counted, its gap and latency measured. A frame
 * whose session is not the device's current one for the accessory at this moment is rendered outside its session:
 * never, by construction (it was just matched), which the count proves. */
static void render(struct head_tracking *ht, struct device *device, struct accessory *a, long index,
                   const struct wire_frame *frame, int64_t received_us)
{
    const struct host_session *current = host_session(device, index, false);
    if (current == NULL || !current->active || memcmp(current->id, frame->session_id, 16) != 0 ||
        a->active_hosts < 1) {
        ht->outside++;
        char text[300];
        snprintf(text, sizeof text, "%s: a frame rendered on %s outside its session", a->id, device->hex);
        note_violation(ht, text);
    }
    ht->rendered++;
    struct host_session *entry = host_session(device, index, false);
    if (entry != NULL && frame->sequence > entry->last_frame) {
        ht->missed += frame->sequence - entry->last_frame - 1;
        entry->last_frame = frame->sequence;
    }
    if (entry != NULL && entry->awaiting_frame) {
        entry->awaiting_frame = false;
        record_latency(&ht->first_frames, (double)(now_ns() - entry->routed_ns) / 1e6);
    }
    record_latency(&ht->frames, (double)(received_us - frame->sent_at_unix_us) / 1000.0);
}

/* A frame for `device` on {root}/sources/{hex}/frames/{hub}/{accessory} (`rest`: "{hub}/{accessory}"). */
static void host_frame(struct sim *sim, struct device *device, const char *rest, const struct mosquitto_message *message)
{
    int64_t received = wall_us();
    struct head_tracking *ht = sim->ht;
    struct wire_frame frame;
    bool ok = wire_unpack_frame(message->payload, (size_t)message->payloadlen, &frame);
    const char *slash = strchr(rest, '/');
    char hub[AUDIOHUB_ID_MAX + 1] = "";
    long index = -1;
    if (slash != NULL && (size_t)(slash - rest) < sizeof hub) {
        memcpy(hub, rest, (size_t)(slash - rest));
        hub[slash - rest] = '\0';
        index = accessory_index(sim, slash + 1);
    }
    pthread_mutex_lock(&ht->mutex);
    const struct host_session *entry = index >= 0 ? host_session(device, index, false) : NULL;
    if (!ok) {
        ht->malformed++;
        ht->dropped++;
    } else if (entry != NULL && entry->active && memcmp(entry->id, frame.session_id, 16) == 0 &&
               strcmp(entry->hub, hub) == 0) {
        render(ht, device, &sim->accessories[index], index, &frame, received);
    } else {
        ht->dropped++; /* not this host's current session of the accessory, or not from its hub */
        if (ok && entry != NULL && !entry->active && memcmp(entry->id, frame.session_id, 16) == 0) {
            ht->late++; /* of the session this host saw end: late, and not rendered */
        }
    }
    pthread_mutex_unlock(&ht->mutex);
}

bool host_message(struct sim *sim, const struct mosquitto_message *message)
{
    const char *rest = NULL;
    struct device *device = sim->ht != NULL ? device_of(sim, message->topic, &rest) : NULL;
    if (device == NULL) {
        return false;
    }
    if (strcmp(rest, "headtracking") == 0) {
        host_news(sim, device, message);
        return true;
    }
    if (strncmp(rest, "frames/", 7) == 0) {
        host_frame(sim, device, rest + 7, message);
        return true;
    }
    return false;
}

/* ---- --verify, the summary ----------------------------------------------------------------------------------- */

long verify_head_tracking(struct sim *sim)
{
    struct head_tracking *ht = sim->ht;
    bool *off = calloc((size_t)sim->accessory_count, sizeof *off);
    if (off == NULL) {
        return 1;
    }
    pthread_mutex_lock(&sim->mutex);
    for (long i = 0; i < sim->accessory_count; i++) {
        enum audiohub_placement placement = sim->accessories[i].expected.placement;
        off[i] = placement == AUDIOHUB_PLACEMENT_OFF_HEAD || placement == AUDIOHUB_PLACEMENT_NONE;
    }
    pthread_mutex_unlock(&sim->mutex);
    /* The last news may still be on its way to the hubs (the fence covered the devices' connection only). */
    long left = 0;
    char text[300] = "";
    for (uint64_t deadline = now_ns() + 10000000000ULL;;) {
        left = 0;
        text[0] = '\0';
        for (long i = 0; i < sim->accessory_count; i++) {
            if (!off[i]) {
                continue;
            }
            struct accessory *a = &sim->accessories[i];
            struct audiohub_head_tracking_session session;
            pthread_mutex_lock(&ht->mutex);
            int hosts = a->active_hosts;
            pthread_mutex_unlock(&ht->mutex);
            bool on_hub = audiohub_head_tracking_get(sim->hubs[a->hub], a->id, &session, sizeof session) ==
                          AUDIOHUB_ERR_SUCCESS;
            if (hosts > 0 || on_hub) {
                if (left++ == 0) {
                    snprintf(text, sizeof text, "%s: taken off, its session still active on %s", a->id,
                             hosts > 0 ? "a device" : "its hub");
                }
            }
        }
        if (left == 0 || now_ns() >= deadline) {
            break;
        }
        sleep_ms(200);
    }
    free(off);
    pthread_mutex_lock(&ht->mutex);
    ht->left_active = left;
    if (left > 0) {
        note_violation(ht, text);
    }
    long violations = ht->two_hosts + (long)ht->outside + left;
    pthread_mutex_unlock(&ht->mutex);
    return violations;
}

/* Stops the streamer threads; whether any was running. */
static bool stop_streamers(struct head_tracking *ht)
{
    pthread_mutex_lock(&ht->mutex);
    ht->stop = true;
    pthread_mutex_unlock(&ht->mutex);
    bool any = ht->started > 0;
    for (; ht->started > 0; ht->started--) {
        pthread_join(ht->streamers[ht->started - 1].thread, NULL);
    }
    return any;
}

void stop_head_tracking(struct sim *sim, struct ht_summary *out)
{
    struct head_tracking *ht = sim->ht;
    if (ht == NULL) {
        return;
    }
    if (stop_streamers(ht)) {
        sleep_ms(300); /* the last frames on their way (each expires after a second anyway) */
    }
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&ht->mutex);
    out->hz = sim->opt.head_tracking;
    out->sent = ht->sent;
    out->refused = ht->refused + ht->failed;
    out->rendered = ht->rendered;
    out->dropped = ht->dropped;
    out->missed = ht->missed;
    out->outside = ht->outside;
    out->malformed = ht->malformed;
    out->sessions = ht->sessions;
    out->late = ht->late;
    for (long i = 0; i < sim->accessory_count; i++) {
        out->streaming += sim->accessories[i].ht_active && sim->accessories[i].ht_on;
    }
    double measured_s = ht->measured_ns > 0 && ht->last_tick_ns > ht->measured_ns
                            ? (double)(ht->last_tick_ns - ht->measured_ns) / 1e9 : 0;
    out->per_second = measured_s > 0 ? (double)(ht->sent - ht->sent_measured) / measured_s : 0;
    const struct latencies *frames = &ht->frames, *first = &ht->first_frames;
    sort_latencies(frames->values, frames->count);
    out->p50 = quantile(frames->values, frames->count, 0.50);
    out->p99 = quantile(frames->values, frames->count, 0.99);
    out->max = frames->count > 0 ? frames->values[frames->count - 1] : 0;
    sort_latencies(first->values, first->count);
    out->routes = ht->routes;
    out->routes_rendered = first->count;
    out->route_p50 = quantile(first->values, first->count, 0.50);
    out->route_p99 = quantile(first->values, first->count, 0.99);
    out->route_max = first->count > 0 ? first->values[first->count - 1] : 0;
    out->two_hosts = ht->two_hosts;
    out->left_active = ht->left_active;
    snprintf(out->first, sizeof out->first, "%s", ht->first);
    pthread_mutex_unlock(&ht->mutex);
}

void free_head_tracking(struct sim *sim)
{
    struct head_tracking *ht = sim->ht;
    if (ht == NULL) {
        return;
    }
    stop_streamers(ht);
    for (long i = 0; sim->devices != NULL && i < sim->opt.devices; i++) {
        free(sim->devices[i].sessions);
        sim->devices[i].sessions = NULL;
    }
    for (long h = 0; ht->streamers != NULL && h < sim->opt.hubs; h++) {
        free(ht->streamers[h].due);
    }
    free(ht->streamers);
    free(ht->frames.values);
    free(ht->first_frames.values);
    pthread_mutex_destroy(&ht->mutex);
    free(ht);
    sim->ht = NULL;
}
