/*
 * What leakcheck's parts share (leakcheck.c: the requests, the restarts, the loops; head_tracking.c: head tracking).
 */
#ifndef LEAKCHECK_H
#define LEAKCHECK_H

#include <audiohub.h>

#include <pthread.h>
#include <stdint.h>

/* Every completion, counted by outcome. */
struct tally {
    pthread_mutex_t mutex;
    pthread_cond_t changed;
    uint64_t accepted;
    uint64_t completed;
    uint64_t by_error[6];
    uint64_t cancelled;
    uint64_t timed_out;
    uint64_t unexpected;
    char first_unexpected[256];
};

/* What a request expects (its context): the kit error, or -1 for "any answer". */
struct expectation {
    int error;
};

extern const struct expectation EXPECT_NONE;
extern const struct expectation EXPECT_INVALID;
extern const struct expectation EXPECT_NOT_CAPABLE;
extern const struct expectation EXPECT_INVALIDATED;
extern const struct expectation EXPECT_ANY;

/* Says what failed and exits 1. */
void fail(const char *what);
/* Fails unless `rc` is AUDIOHUB_ERR_SUCCESS. */
void check(enum audiohub_err rc, const char *what);
void sleep_ms(long ms);
/* The completion of every request (userdata: the tally; context: its expectation). */
void completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result);
/* Counts a request the SDK accepted (fails when it refused it). */
void accepted(struct tally *tally, enum audiohub_err rc, const char *what);
/* A hub whose userdata is `tally`; connected to `broker` unless NULL, with a loop thread when `thread`. */
struct audiohub *make_hub(const char *id, struct tally *tally, const char *broker, bool thread);
/* Waits until nothing is queued and every accepted request completed. */
void wait_idle(struct audiohub *hub, struct tally *tally);

/* 4. Head tracking against `broker` (mqtt://`host`:`port`, where the bridge runs): see head_tracking.c. Fails (exits)
 * on anything unexpected. */
void check_head_tracking(const char *broker, const char *host, int port);

#endif
