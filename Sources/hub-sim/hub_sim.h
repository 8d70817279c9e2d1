/*
 * What hub-sim's units share (main.c says what hub-sim does):
 *   main.c      the run: the accessories, devices and hubs made, the phases, the summary, what is freed; and what
 *               every unit uses (the clock, sleeping, the random numbers, the hubs' names);
 *   options.c   the command line;
 *   devices.c   the playing devices on one MQTT connection, the calls scenario's activity changes, and the fence;
 *   scenario.c  the scenario's requests and what their completions tell;
 *   phases.c    the set-up, a measured phase, waiting for what is outstanding, the stop signals;
 *   verify.c    --verify (the retained states) and the commands against the changes that justify them;
 *   head_tracking.c  --head-tracking: the hubs' sessions and the frames they stream, the devices as hosts (sessions
 *               fenced, frames rendered or dropped, latency), and what --verify checks of them;
 *   report.c    the latencies and counts summarized, the summary (text or JSON), the SVG chart;
 *   wire.c      hub-sim's own protobuf-c code (wire.h).
 * It parses --broker with the SDK's url.c (../CAudioHub/src/url.h), as the SDK's hubs do.
 */
#ifndef HUB_SIM_H
#define HUB_SIM_H

#include <audiohub.h>

#include <mosquitto.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../CAudioHub/src/url.h"
#include "wire.h"

#define MAX_SWEEP 16

struct options {
    const char *broker;
    const char *topic_root;
    const char *prefix;
    const char *ca_file;
    const char *scenario;
    const char *svg;
    long hubs;
    long accessories;
    long devices;
    double rate;
    double seconds;
    long rounds;
    double drain;
    long timeout_ms;
    long timeout_max_ms;
    long slots;      /* 0: a single bridge; AUDIOHUB_SLOTS_FROM_BRIDGE: the hubs read (and follow) the layout */
    long households; /* 0: none (any accessory may list any device) */
    long shared_devices; /* with households: devices every household lists */
    bool json;
    bool verify;
    bool quiet;
    bool trace;
    double sweep[MAX_SWEEP];
    int sweep_count;
    unsigned seed;
    double head_tracking; /* --head-tracking HZ: frames a second per accessory in session (0: off) */
};

/* What the hub last sent (and the bridge accepted) about an accessory: the expected retained state. */
struct expected {
    enum audiohub_placement placement;
    int primary;   /* device index, -1 none */
    int secondary; /* device index, -1 none */
};

/* Commands a change may justify: for each, at most one command of each action per change the hub made. */
enum justified { PUT_ON, TAKEN_OFF, SOURCES_CHANGED, JUSTIFIED_KINDS };

struct accessory {
    char id[AUDIOHUB_ID_MAX + 1];
    int hub;
    struct expected expected;
    /* Changes the bridge accepted (put on, taken off, sources changed), and the commands that cite them, by
     * action (ROUTE, PAUSE, RESUME, RELEASE). */
    uint64_t changes[JUSTIFIED_KINDS];
    uint64_t cited[JUSTIFIED_KINDS][5];
    bool registered;
    long rounds_submitted;
    long outstanding; /* submitted, not completed */
    bool next_off;
    int source_cursor;
    /* Head tracking (head_tracking.c; its mutex). The hub's side, as its handler heard: a session in force, the host's
     * setting, and the reports' discontinuity count (one more per session). The hosts' side: how many devices hold a
     * session of it active now. */
    bool ht_active;
    bool ht_on;
    uint8_t ht_discontinuity;
    int active_hosts;
};

struct host_session;

struct device {
    struct audiohub_address address;
    char hex[13];
    uint64_t last_command_epoch; /* the last applied command's (epoch, sequence): see on_device_message */
    uint64_t last_command_sequence;
    int last_action;
    int last_reason;
    char last_accessory[AUDIOHUB_ID_MAX + 1];
    int activity;       /* ACTIVITY_* wire value */
    int paused_activity;
    char routed[AUDIOHUB_ID_MAX + 1];
    uint64_t report_sequence;
    /* As a host of head-tracking sessions (head_tracking.c; its mutex): an entry per accessory it heard of. */
    struct host_session *sessions;
    size_t session_count;
    size_t session_capacity;
};

/* One request in flight, given to the SDK as its context. */
struct op {
    int accessory;
    uint64_t submitted_ns;
    bool measured;
    enum audiohub_operation operation;
    struct expected effect;
};

/* Latencies in ms, as they come (record_latency). */
struct latencies {
    double *values;
    size_t count;
    size_t capacity;
};

struct phase_stats {
    uint64_t sent;
    uint64_t results;
    uint64_t duplicated;
    uint64_t retried;
    uint64_t errors;
    uint64_t refused;
    uint64_t cancelled;
    struct latencies latencies;
    uint64_t started_ns;
    uint64_t stopped_ns;
    char first_error[256];
};

struct sim {
    struct options opt;
    /* What every accessory's hardware has and what it registers (AUDIOHUB_CAP_* bits). */
    unsigned capabilities;
    pthread_mutex_t mutex;
    struct audiohub **hubs;
    struct accessory *accessories;
    long accessory_count;
    struct device *devices;
    struct mosquitto *device_client;
    char *host; /* the broker, from --broker */
    int port;
    bool tls;

    bool measuring;
    bool stopping; /* no new requests */
    double rate;
    long rounds;
    uint64_t outstanding;
    struct phase_stats stats;
    uint64_t setup_failures;
    char setup_error[256];

    uint64_t commands;
    uint64_t command_redeliveries;
    uint64_t older_epoch_commands; /* commands of an older owner, dropped (counted in command_redeliveries too) */
    uint64_t unreadable_commands;  /* messages on a device's command topic that are not a protobuf SwitchCommand */
    uint64_t fences_answered; /* answers to the devices' fence (see fence_commands) */
    char (*fence_hubs)[AUDIOHUB_ID_MAX + 1]; /* per slot (one without --slots): a hub id of that slot for the fence */
    long slots;        /* the slot count of the fence and --verify: --slots, or the layout the first hub read */
    long fence_count;
    uint64_t repeated_commands;
    uint64_t excess_commands;
    char excess_example[256];
    char repeated_example[256];
    uint64_t source_reports;
    unsigned random_state;
    int stop_signals; /* SIGINT/SIGTERM taken so far (see stop_requested) */
    struct head_tracking *ht; /* --head-tracking: the streamer and the hosts' counts (head_tracking.c); else NULL */
};

/* What --head-tracking measured (summarize_head_tracking). */
struct ht_summary {
    double hz;
    uint64_t sent, refused, rendered, dropped, missed, outside, malformed, sessions;
    uint64_t late;        /* frames of a session their host had seen end (dropped) */
    long streaming;       /* accessories in session with head tracking on, at the end */
    double per_second;    /* frames sent a second while measuring */
    double p50, p99, max; /* ms, from sent_at_unix_us to the host's render, while measuring */
    uint64_t routes, routes_rendered;     /* ROUTE commands while measuring; those followed by a frame at the host */
    double route_p50, route_p99, route_max; /* ms, from a ROUTE command to the host's first frame of the accessory */
    long two_hosts;
    long left_active; /* -1: not verified */
    char first[300];             /* the first violation --verify found */
};

struct summary {
    double offered;
    uint64_t sent, results, lost, duplicated, retried, errors, refused;
    double p50, p90, p99, max, throughput, seconds;
};

/* ---- main.c ---- */

/* The monotonic clock, in nanoseconds; sleeping `ms` milliseconds (through signals). */
uint64_t now_ns(void);
void sleep_ms(long ms);
/* The next number (0-32767) of the run's seeded sequence (mutex held, or before the threads start). */
unsigned next_random(struct sim *sim);
/* Hub h's id: "{prefix}-hub-{h}", or with households "{prefix}-home{k}--hub-{h}". */
void hub_name(const struct sim *sim, long hub, char *out, size_t size);

/* ---- options.c ---- */

/* Reads the command line into `opt` (--help: the usage, then exit); false after saying what is wrong. */
bool parse_options(int argc, char **argv, struct options *opt);

/* ---- devices.c ---- */

/* The device an accessory of `hub` lists at position `n` of its choices. */
int device_choice(const struct sim *sim, long hub, long n);
/* Whether each accessory has two devices of its own (at least two devices per accessory, no households): accessory i
 * lists devices 2i and 2i+1, and a sources change swaps them, so that every accessory can be routed at once. */
bool own_devices(const struct sim *sim);
/* A fence hub per slot (one without --slots); false when out of memory or a slot has none. */
bool make_fence_hubs(struct sim *sim);
/* Connects the devices and publishes each one's first state; false after saying why not. */
bool start_devices(struct sim *sim);
/* The calls scenario: a device changes between media, call and idle. */
void change_activity(struct sim *sim);
/* Waits until no command is still on its way to the devices; false when a fence is not answered. */
bool fence_commands(struct sim *sim);

/* ---- scenario.c ---- */

/* The completion of every request hub-sim makes (audiohub_completion_cb; the mutex not held). */
void completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result);
/* Submits the scenario's next request for accessory `index` (measured or not); the SDK's refusal, if any. */
enum audiohub_err submit_next(struct sim *sim, int index, bool measured);

/* ---- phases.c ---- */

/* SIGINT, SIGTERM (stop) and SIGUSR1 (measure the frames again): blocked in every thread, taken by the phases'
 * loops. */
void stop_signal_set(sigset_t *set);
/* Sets every accessory up (not measured); false after saying why it failed. */
bool setup(struct sim *sim);
/* One measured phase at `rate` (0: flood), then the drain. Returns its summary. */
struct summary run_phase(struct sim *sim, double rate);

/* ---- verify.c ---- */

/* The index of the accessory `id`, or -1 when it is none of hub-sim's. */
long accessory_index(struct sim *sim, const char *id);
/* How many retained states differ from what the hubs last sent (the first in `first`). */
long verify(struct sim *sim, char *first, size_t size);
/* Commands beyond what the hub's changes justify: a change applied twice (mutex held). */
uint64_t count_excess(struct sim *sim);

/* ---- head_tracking.c ---- */

/* The spatial extension every accessory registers with --head-tracking (Apple's example). */
extern const struct audiohub_spatial_extension SIM_SPATIAL_EXTENSION;
/* --head-tracking: sets every hub's handler and starts streaming frames; false after saying why not. */
bool start_head_tracking(struct sim *sim);
/* The devices' subscriptions as hosts: their session news (QoS 1) and frames (QoS 0). */
void subscribe_hosts(struct sim *sim, struct mosquitto *mosq);
/* A device's session news or a frame for it; false for any other topic (sim->mutex not held). */
bool host_message(struct sim *sim, const struct mosquitto_message *message);
/* The measured phase begins: frame latencies and the frame rate count from now (violations count throughout). */
void measure_head_tracking(struct sim *sim);
/* A ROUTE command for `accessory_id` that `device` applied (sim->mutex held): timed to the first frame it renders. */
void host_routed(struct sim *sim, struct device *device, const char *accessory_id);
/* --verify: sessions active on two hosts at once, frames rendered outside their session, and (waiting up to 10 s for
 * the last news) sessions left active, on a host or a hub, for accessories the hubs left off head. */
long verify_head_tracking(struct sim *sim);
/* Stops streaming (before the hubs go), lets what is on its way arrive, and summarizes into `out` (NULL: not). */
void stop_head_tracking(struct sim *sim, struct ht_summary *out);
/* Frees what --head-tracking holds, once no hub and no device can call back (NULL: nothing). */
void free_head_tracking(struct sim *sim);

/* ---- report.c ---- */

/* Adds a latency (ms) to a phase's. */
void record_latency(struct latencies *latencies, double ms);
/* Sorts latencies, ascending; the q-quantile of sorted ones (nearest rank; 0 for none). */
void sort_latencies(double *values, size_t count);
double quantile(const double *sorted, size_t count, double q);
/* A phase's summary (sorts its latencies). */
struct summary summarize(struct phase_stats *stats, uint64_t lost, double offered);
/* What the run could not read, which makes it measure nothing: commands, and head-tracking news and frames (the hosts'
 * and the hubs'). hub-sim reads protobuf, which the bridge sends it (it answers each party in the format it speaks):
 * what it cannot read, something else published on its topics. */
uint64_t count_unreadable(struct sim *sim, const struct ht_summary *ht);
/* The summary, as text or (--json) one JSON line; mismatches -1: not verified; ht NULL without --head-tracking. */
void print_summary(struct sim *sim, const struct summary *s, long mismatches, const char *mismatch_text,
                   const struct ht_summary *ht);
/* Latency (log scale) against offered rate, one line per percentile; false when the file cannot be written. */
bool write_svg(const char *path, const struct summary *points, int count, const struct options *opt);

#endif /* HUB_SIM_H */
