/*
 * leakcheck: the SDK's every path, many times, against a real broker and bridge, for AddressSanitizer and
 * LeakSanitizer (scripts/hub-leak-check.sh builds it with -fsanitize=address,undefined and runs it; `make test`
 * runs the script). Any leak, overflow or use after free fails the run; so does a request that does not complete
 * exactly once, or an outcome other than the one the contract gives.
 *
 *     leakcheck mqtt://127.0.0.1:PORT [requests (10000)]
 *
 * 1. `requests` requests from one hub with its own loop thread, 64 in flight at most, over 40 accessories: placement,
 *    sources and full updates that succeed; requests that fail with invalidRequest, accessoryNotCapable and
 *    invalidated; re-pairing and unpairing; local refusals; a graceful disconnect and reconnect halfway.
 * 2. A restarted hub whose restored count is behind the bridge's (resync), then one ahead of it (a rebirth, answered
 *    from the cache the bridge's first result filled: with the configuration alone, as the bridge has the pairing).
 * 3. A hub in the caller's loop (audiohub_loop), a hub whose requests time out, a hub destroyed with requests queued.
 * 4. Head tracking (head_tracking.c): a playing device that hosts the session, the handler's three calls, frames, the
 *    send errors, spatial extensions, and news the hub must drop (malformed, JSON, stale).
 */
#define _POSIX_C_SOURCE 200809L

#include "leakcheck.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ACCESSORIES 40
#define WINDOW 64

const struct expectation EXPECT_NONE = {AUDIOHUB_KIT_NONE};
const struct expectation EXPECT_INVALID = {AUDIOHUB_KIT_INVALID_REQUEST};
const struct expectation EXPECT_NOT_CAPABLE = {AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE};
const struct expectation EXPECT_INVALIDATED = {AUDIOHUB_KIT_INVALIDATED};
const struct expectation EXPECT_ANY = {-1};

void fail(const char *what)
{
    fprintf(stderr, "leakcheck: %s\n", what);
    exit(1);
}

void check(enum audiohub_err rc, const char *what)
{
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        fprintf(stderr, "leakcheck: %s: %s\n", what, audiohub_strerror(rc));
        exit(1);
    }
}

void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

void completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    struct tally *tally = userdata;
    const struct expectation *expected = result->context;
    pthread_mutex_lock(&tally->mutex);
    tally->completed++;
    if (result->status == AUDIOHUB_ERR_CANCELLED) {
        tally->cancelled++;
    } else if (result->status == AUDIOHUB_ERR_TIMEOUT) {
        tally->timed_out++;
    } else if (result->error >= 0 && result->error <= 5) {
        tally->by_error[result->error]++;
    }
    bool ok = expected->error == -1 || (result->status == AUDIOHUB_ERR_SUCCESS && (int)result->error == expected->error);
    if (!ok && tally->unexpected++ == 0) {
        snprintf(tally->first_unexpected, sizeof tally->first_unexpected, "%s #%" PRIu64 ": %s %s (%s), expected %d",
                 result->accessory_id, result->sequence, audiohub_strerror(result->status),
                 audiohub_kit_error_name(result->error), result->message, expected->error);
    }
    pthread_cond_broadcast(&tally->changed);
    pthread_mutex_unlock(&tally->mutex);
}

/* Counts a request the SDK accepted. */
void accepted(struct tally *tally, enum audiohub_err rc, const char *what)
{
    check(rc, what);
    pthread_mutex_lock(&tally->mutex);
    tally->accepted++;
    pthread_mutex_unlock(&tally->mutex);
}

static void wait_window(struct tally *tally, uint64_t window)
{
    pthread_mutex_lock(&tally->mutex);
    while (tally->accepted - tally->completed > window) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 60;
        if (pthread_cond_timedwait(&tally->changed, &tally->mutex, &deadline) != 0) {
            pthread_mutex_unlock(&tally->mutex);
            fail("no completion for 60 s");
        }
    }
    pthread_mutex_unlock(&tally->mutex);
}

struct audiohub *make_hub(const char *id, struct tally *tally, const char *broker, bool thread)
{
    struct audiohub *hub;
    check(audiohub_new(id, tally, &hub), "audiohub_new");
    check(audiohub_int_option(hub, AUDIOHUB_OPT_TIMEOUT_MS, 2000), "timeout");
    check(audiohub_int_option(hub, AUDIOHUB_OPT_RECONNECT_MIN_MS, 50), "reconnect");
    if (broker != NULL) {
        check(audiohub_connect(hub, broker, NULL, NULL), "connect");
        if (thread) {
            check(audiohub_loop_start(hub), "loop_start");
        }
    }
    return hub;
}

static void accessory_id(char *out, size_t size, int index)
{
    snprintf(out, size, "leak-%d", index);
}

/* Rebirth and resync: a restored count, from the load hook. */
static uint64_t restore_offset_target;
static bool load_sequence(struct audiohub *hub, void *userdata, const char *accessory, uint64_t *last)
{
    (void)hub;
    (void)userdata;
    if (strcmp(accessory, "leak-reborn") != 0) {
        return false;
    }
    *last = restore_offset_target;
    return true;
}

static void save_sequence(struct audiohub *hub, void *userdata, const char *accessory, uint64_t sequence)
{
    (void)hub;
    (void)userdata;
    (void)accessory;
    (void)sequence;
}

static uint64_t last_sequence_of(struct audiohub *hub, const char *accessory)
{
    struct audiohub_accessory view;
    check(audiohub_accessory_get(hub, accessory, &view, sizeof view), "accessory_get");
    return view.last_sequence;
}

void wait_idle(struct audiohub *hub, struct tally *tally)
{
    for (int i = 0; i < 6000; i++) {
        struct audiohub_stats stats;
        audiohub_stats_get(hub, &stats, sizeof stats);
        pthread_mutex_lock(&tally->mutex);
        bool done = stats.queued == 0 && tally->completed == tally->accepted;
        pthread_mutex_unlock(&tally->mutex);
        if (done) {
            return;
        }
        sleep_ms(10);
    }
    fail("the hub did not become idle");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: leakcheck mqtt://HOST:PORT [requests]\n");
        return 2;
    }
    const char *broker = argv[1];
    long requests = argc > 2 ? strtol(argv[2], NULL, 10) : 10000;
    struct tally tally = {.accepted = 0};
    pthread_mutex_init(&tally.mutex, NULL);
    pthread_cond_init(&tally.changed, NULL);
    check(audiohub_lib_init(), "lib_init");

    /* 1. The main run. */
    struct audiohub *hub = make_hub("leak-hub", &tally, broker, true);
    char id[32];
    for (int i = 0; i < ACCESSORIES; i++) {
        accessory_id(id, sizeof id, i);
        unsigned hardware = i == 0 ? AUDIOHUB_CAP_AUDIO_SWITCHING : AUDIOHUB_CAP_ALL;
        accepted(&tally, audiohub_pair(hub, id, "Leak Pro", "LP-1", hardware, completed, (void *)&EXPECT_NONE), "pair");
        accepted(&tally, audiohub_register(hub, id, hardware, completed, (void *)&EXPECT_NONE), "register");
    }
    struct audiohub_address a = {6, {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}};
    struct audiohub_address b = {6, {0xde, 0xf0, 0x01, 0x23, 0x45, 0x67}};
    struct audiohub_address five = {5, {1, 2, 3, 4, 5}};
    long made = 0;
    for (long n = 0; made < requests; n++) {
        wait_window(&tally, WINDOW);
        int index = 1 + (int)(n % (ACCESSORIES - 1));
        accessory_id(id, sizeof id, index);
        switch (n % 10) {
        case 0:
        case 1:
        case 2:
            accepted(&tally, audiohub_placement(hub, id, n % 2 ? AUDIOHUB_PLACEMENT_ON_HEAD : AUDIOHUB_PLACEMENT_OFF_HEAD,
                                                completed, (void *)&EXPECT_NONE), "placement");
            break;
        case 3:
            accepted(&tally, audiohub_sources(hub, id, n % 4 ? &a : &b, n % 4 ? &b : NULL, completed,
                                              (void *)&EXPECT_NONE), "sources");
            break;
        case 4: {
            struct audiohub_configuration configuration = {AUDIOHUB_CAP_ALL, AUDIOHUB_PLACEMENT_IN_EAR, a, b};
            accepted(&tally, audiohub_update(hub, id, &configuration, completed, (void *)&EXPECT_NONE), "update");
            break;
        }
        case 5:
            /* invalidRequest: never paired. */
            accepted(&tally, audiohub_placement(hub, "leak-never", AUDIOHUB_PLACEMENT_ON_HEAD, completed,
                                                (void *)&EXPECT_INVALID), "never paired");
            break;
        case 6:
            /* accessoryNotCapable: leak-0 has no placement hardware. */
            accepted(&tally, audiohub_register(hub, "leak-0", AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_NOT_CAPABLE),
                     "not capable");
            break;
        case 7:
            /* Re-paired: invalidated until registered again. */
            accepted(&tally, audiohub_pair(hub, id, "Leak Pro", "LP-1", AUDIOHUB_CAP_ALL, completed,
                                           (void *)&EXPECT_NONE), "re-pair");
            accepted(&tally, audiohub_placement(hub, id, AUDIOHUB_PLACEMENT_ON_HEAD, completed,
                                                (void *)&EXPECT_INVALIDATED), "invalidated");
            accepted(&tally, audiohub_register(hub, id, AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_NONE), "register");
            made += 2;
            break;
        case 8:
            if (n % 50 == 8) {
                accepted(&tally, audiohub_unpair(hub, id, completed, (void *)&EXPECT_NONE), "unpair");
                accepted(&tally, audiohub_pair(hub, id, "Leak Pro", "LP-1", AUDIOHUB_CAP_ALL, completed,
                                               (void *)&EXPECT_NONE), "pair");
                accepted(&tally, audiohub_register(hub, id, AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_NONE),
                         "register");
                made += 2;
            } else {
                accepted(&tally, audiohub_placement(hub, id, AUDIOHUB_PLACEMENT_NONE, completed, (void *)&EXPECT_NONE),
                         "placement none");
            }
            break;
        default:
            /* Refused locally: nothing is queued, no callback comes. */
            if (audiohub_sources(hub, id, &five, NULL, completed, (void *)&EXPECT_ANY) != AUDIOHUB_ERR_ADDRESS ||
                audiohub_placement(hub, "bad id!", AUDIOHUB_PLACEMENT_ON_HEAD, completed, (void *)&EXPECT_ANY) !=
                    AUDIOHUB_ERR_ACCESSORY_ID ||
                audiohub_register(hub, id, 0x40, completed, (void *)&EXPECT_ANY) != AUDIOHUB_ERR_CAPABILITIES) {
                fail("bad input was not refused");
            }
            accepted(&tally, audiohub_placement(hub, id, AUDIOHUB_PLACEMENT_OVER_THE_EAR, completed,
                                                (void *)&EXPECT_NONE), "placement");
            break;
        }
        made++;
        if (made == requests / 2) {
            /* A graceful goodbye and a new connection, with requests queued meanwhile. */
            check(audiohub_disconnect(hub), "disconnect");
            check(audiohub_loop_stop(hub, false), "loop_stop");
            accepted(&tally, audiohub_placement(hub, id, AUDIOHUB_PLACEMENT_ON_HEAD, completed, (void *)&EXPECT_NONE),
                     "placement while away");
            made++;
            check(audiohub_connect(hub, broker, NULL, NULL), "reconnect");
            check(audiohub_loop_start(hub), "loop_start again");
        }
    }
    wait_idle(hub, &tally);
    struct audiohub_stats stats;
    audiohub_stats_get(hub, &stats, sizeof stats);
    printf("leakcheck: %" PRIu64 " requests, %" PRIu64 " completed (none %" PRIu64 ", invalidRequest %" PRIu64
           ", accessoryNotCapable %" PRIu64 ", invalidated %" PRIu64 "), %" PRIu64 " resends, %" PRIu64
           " connections\n",
           stats.requests, stats.completed, tally.by_error[1], tally.by_error[3], tally.by_error[2], tally.by_error[4],
           stats.resends, stats.connections);
    if (stats.connections != 2 || tally.by_error[2] == 0 || tally.by_error[3] == 0 || tally.by_error[4] == 0) {
        fail("the run did not take every path");
    }
    /* The rebirth and resync accessory, before the restart. */
    accepted(&tally, audiohub_pair(hub, "leak-reborn", "Reborn", "R-1", AUDIOHUB_CAP_ALL, completed,
                                   (void *)&EXPECT_NONE), "pair");
    accepted(&tally, audiohub_register(hub, "leak-reborn", AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_NONE),
             "register");
    accepted(&tally, audiohub_sources(hub, "leak-reborn", &a, NULL, completed, (void *)&EXPECT_NONE), "sources");
    wait_idle(hub, &tally);
    uint64_t last = last_sequence_of(hub, "leak-reborn");
    audiohub_disconnect(hub);
    audiohub_loop_stop(hub, false);
    audiohub_destroy(hub);

    /* 2. Restarted behind the bridge's count (resync), then ahead of it (rebirth). */
    restore_offset_target = last - 2;
    hub = make_hub("leak-hub", &tally, NULL, false);
    check(audiohub_sequence_callbacks_set(hub, load_sequence, save_sequence), "sequence hooks");
    check(audiohub_connect(hub, broker, NULL, NULL), "connect");
    check(audiohub_loop_start(hub), "loop_start");
    accepted(&tally, audiohub_placement(hub, "leak-reborn", AUDIOHUB_PLACEMENT_ON_HEAD, completed, (void *)&EXPECT_NONE),
             "resync");
    wait_idle(hub, &tally);
    audiohub_stats_get(hub, &stats, sizeof stats);
    last = last_sequence_of(hub, "leak-reborn");
    audiohub_destroy(hub); /* without a goodbye: the will */
    if (stats.resyncs != 1) {
        fail("no resync");
    }
    restore_offset_target = last + 5;
    hub = make_hub("leak-hub", &tally, NULL, false);
    check(audiohub_sequence_callbacks_set(hub, load_sequence, save_sequence), "sequence hooks");
    check(audiohub_connect(hub, broker, NULL, NULL), "connect");
    check(audiohub_loop_start(hub), "loop_start");
    accepted(&tally, audiohub_placement(hub, "leak-reborn", AUDIOHUB_PLACEMENT_IN_EAR, completed, (void *)&EXPECT_NONE),
             "gap");
    /* Up to 60 s, as wait_window: under AddressSanitizer on a busy machine, seconds. */
    for (int i = 0; i < 6000; i++) {
        audiohub_stats_get(hub, &stats, sizeof stats);
        if (stats.rebirth_requests == 1 && stats.queued == 0) {
            break;
        }
        sleep_ms(10);
    }
    if (stats.rebirths != 1 || stats.rebirth_requests != 1 || stats.queued != 0) {
        fail("the rebirth was not answered");
    }
    audiohub_disconnect(hub);
    audiohub_loop_stop(hub, false);
    audiohub_destroy(hub);

    /* 3. The caller's loop. */
    hub = make_hub("leak-caller", &tally, broker, false);
    for (int i = 0; i < 100; i++) {
        accepted(&tally, audiohub_placement(hub, "leak-1", AUDIOHUB_PLACEMENT_ON_HEAD, completed, (void *)&EXPECT_INVALID),
                 "caller loop");
    }
    for (int i = 0; i < 3000; i++) {
        audiohub_loop(hub, 10);
        audiohub_stats_get(hub, &stats, sizeof stats);
        if (stats.queued == 0) {
            break;
        }
    }
    if (stats.completed != 100) {
        fail("the caller's loop did not complete its requests");
    }
    audiohub_disconnect(hub);
    while (audiohub_loop(hub, 10) != AUDIOHUB_ERR_NO_CONN) {
    }
    audiohub_destroy(hub);

    /* Requests that time out (no bridge under this topic root), and requests cancelled by destroy. */
    hub = make_hub("leak-timeout", &tally, NULL, false);
    check(audiohub_topic_root_set(hub, "nobridge"), "topic root");
    check(audiohub_int_option(hub, AUDIOHUB_OPT_TIMEOUT_MS, 20), "timeout");
    check(audiohub_int_option(hub, AUDIOHUB_OPT_MAX_ATTEMPTS, 2), "attempts");
    check(audiohub_connect(hub, broker, NULL, NULL), "connect");
    check(audiohub_loop_start(hub), "loop_start");
    for (int i = 0; i < 20; i++) {
        accepted(&tally, audiohub_unpair(hub, i % 2 ? "t1" : "t2", completed, (void *)&EXPECT_ANY), "timeout");
    }
    wait_idle(hub, &tally);
    audiohub_destroy(hub);
    hub = make_hub("leak-cancel", &tally, NULL, false);
    for (int i = 0; i < 50; i++) {
        accepted(&tally, audiohub_pair(hub, "c", "Name", "Model", AUDIOHUB_CAP_ALL, completed, (void *)&EXPECT_ANY),
                 "cancel");
    }
    audiohub_destroy(hub);

    /* 4. Head tracking. */
    char host[64];
    int port = 0;
    if (sscanf(broker, "mqtt://%63[^:]:%d", host, &port) != 2) {
        fail("the broker must be mqtt://HOST:PORT");
    }
    check_head_tracking(broker, host, port);

    pthread_mutex_lock(&tally.mutex);
    printf("leakcheck: %" PRIu64 " accepted, %" PRIu64 " completed, %" PRIu64 " timed out, %" PRIu64
           " cancelled, %" PRIu64 " unexpected outcomes\n",
           tally.accepted, tally.completed, tally.timed_out, tally.cancelled, tally.unexpected);
    bool ok = tally.accepted == tally.completed && tally.unexpected == 0 && tally.timed_out == 20 &&
              tally.cancelled == 50 && tally.accepted >= (uint64_t)requests;
    if (tally.unexpected > 0) {
        fprintf(stderr, "leakcheck: first unexpected outcome: %s\n", tally.first_unexpected);
    }
    pthread_mutex_unlock(&tally.mutex);
    pthread_mutex_destroy(&tally.mutex);
    pthread_cond_destroy(&tally.changed);
    audiohub_lib_cleanup();
    return ok ? 0 : 1;
}
