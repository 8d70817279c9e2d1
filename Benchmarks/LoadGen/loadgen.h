/*
 * What loadgen's units share (main.c says what loadgen does):
 *   main.c     the run: the accessories allocated, then connected, ready, set up, measured, reported; the clock;
 *   options.c  the command line;
 *   client.c   the MQTT client: made, connected and subscribed, driven by pump;
 *   results.c  the results, matched to the reports they answer;
 *   send.c     what loadgen publishes, and the ring of the idle accessories;
 *   setup.c    the ready check and the set-up;
 *   measure.c  the measured phase and the CPU time used meanwhile;
 *   report.c   its figures, as text or JSON.
 * It parses --broker with the SDK's url.c (Sources/CAudioHub/src/url.h), which the Makefile compiles in.
 */
#ifndef LOADGEN_H
#define LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mosquitto.h>

#include "audioaccessory/v1/source.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"
#include "audioaccessory/v1/telemetry.pb-c.h"

#include "../../Sources/CAudioHub/src/url.h"

#define MAX_TOPIC 256
#define MAX_PREFIX 200 /* R/hubs/{hub}/accessories/: leaves room for an accessory id and a last level */
#define PROBE_ID "probe"
#define NS_PER_S 1000000000ULL

struct options {
    const char *broker;
    char *host; /* from broker (url.c) */
    int port;
    const char *topic_root;
    const char *source_root; /* the playing devices' root: the topic root unless --source-root (a cluster's slot) */
    const char *ready_file;  /* --ready-file: created when the measured phase starts (several loadgens, one window) */
    const char *accessory_prefix; /* accessory ids are "{prefix}-{index}" ("acc" unless --accessory-prefix) */
    const char *hub;
    char client_id[64];
    long accessories;
    double rate;
    double seconds;
    uint64_t reports;
    double drain;
    double settle;
    double ready_timeout;
    double setup_timeout;
    double window;        /* --window: the length of the windows whose p99s are reported besides the whole run's */
    const char *trace;    /* --trace: every measured result's send time and latency, one line each, into this file */
    bool json;
    bool own_sources;
    uint8_t source[6];    /* --source: the playing device every accessory lists */
    char source_hex[13];
    long server_pid;
    long broker_pid;
};

struct accessory {
    uint64_t sequence;    /* the last sequence sent */
    uint64_t outstanding; /* the sequence awaiting its result; 0: none */
    uint64_t answered;    /* the highest sequence answered */
    uint64_t sent_at_ns;  /* when `outstanding` was published */
    uint8_t setup_answered; /* bit s: the result of set-up sequence s arrived */
    bool next_off;        /* the next placement report is OFF_HEAD */
};

enum phase { PHASE_CONNECTING, PHASE_PROBING, PHASE_SETUP, PHASE_MEASURING };

/* The program's state, given to libmosquitto as userdata. */
struct loadgen {
    struct options opt;
    struct mosquitto *mosq;
    mosquitto_property *content_type;
    enum phase phase;
    bool connected;
    bool subscribed;
    bool failed_fatally;

    struct accessory *accessories;
    char *topics;          /* the accessories' telemetry topics, MAX_TOPIC bytes each */
    char result_prefix[MAX_PREFIX]; /* R/hubs/{hub}/accessories/ */
    size_t result_prefix_len;
    uint32_t *idle;        /* ring of the accessories without an outstanding report */
    size_t idle_head;
    size_t idle_count;

    bool probe_answered;
    uint64_t setup_pending;
    uint64_t setup_failed;
    uint64_t request_number;

    uint64_t sent;
    uint64_t results;
    uint64_t outstanding;
    uint64_t duplicated;
    uint64_t unexpected;
    uint64_t failed;
    char first_failure[256];
    uint64_t *latencies_ns; /* in the order the results arrived */
    uint64_t *sent_ns;      /* with --trace only: when each of them was published, in the same order */
    size_t sent_capacity;
    size_t latency_capacity;
    uint64_t last_result_ns;
    uint64_t measure_started_ns;
    size_t *window_first;   /* window w's results are latencies_ns[window_first[w]] up to the next window's first */
    size_t windows;
    size_t window_capacity;
};

struct measurement {
    uint64_t started_ns;
    uint64_t ended_ns;
    long long server_ticks;
    long long broker_ticks;
    uint64_t loadgen_cpu_ns;
};

/* ---- main.c ---- */

/* The monotonic clock, in nanoseconds; `seconds` in nanoseconds. */
uint64_t now_ns(void);
uint64_t seconds_ns(double seconds);

/* ---- options.c ---- */

/* Reads the command line into `opt` (--help: the usage, then exit); -1 after saying what is wrong. */
int parse_options(int argc, char **argv, struct options *opt);

/* ---- client.c ---- */

/* mosquitto_new and its options; NULL (after a message) on failure. */
struct mosquitto *make_client(struct loadgen *lg);
/* One iteration of libmosquitto's loop, waiting up to timeout_ms for the socket; -1 when the run must stop. */
int pump(struct loadgen *lg, int timeout_ms);
/* Waits for the CONNACK and the SUBACK (10 s at most); -1 after saying why not. */
int wait_connected(struct loadgen *lg);

/* ---- results.c ---- */

/* libmosquitto's message callback: a result (or the probe's), or something unexpected. */
void on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *msg,
                const mosquitto_property *properties);

/* ---- report.c ---- */

/* With --trace, writes a comment line with the measured phase's start on CLOCK_MONOTONIC, then each measured result
 * as "SENT_MS LATENCY_MS" (sent: since the measured phase began), in the order they arrived. Called before report(),
 * which sorts the latencies. -1 after saying why not. */
int write_trace(const struct loadgen *lg);

/* ---- send.c ---- */

/* The telemetry topic of accessory `index`. */
const char *accessory_topic(const struct loadgen *lg, size_t index);
/* Packs and publishes `message` at QoS 1; -1 after saying why not. */
int publish_message(struct loadgen *lg, const char *topic, const ProtobufCMessage *message, bool retain);
/* Publishes `telemetry` with the next request id; -1 after saying why not. */
int publish_telemetry(struct loadgen *lg, const char *topic, Audioaccessory__V1__AccessoryTelemetry *telemetry);
/* The next placement report of an idle accessory; -1 after saying why not. */
int send_report(struct loadgen *lg, uint32_t index);
/* The ring of the accessories without an outstanding report. */
void push_idle(struct loadgen *lg, uint32_t index);
uint32_t pop_idle(struct loadgen *lg);

/* ---- setup.c ---- */

/* Unpaired, unsequenced, for "probe", every 200 ms until a result for it arrives; -1 after saying why not. */
int wait_ready(struct loadgen *lg);
/* Paired, Register and Sources for every accessory, then the source's retained state; waits for every result. */
int set_up(struct loadgen *lg);

/* ---- measure.c ---- */

/* The measured phase: placement reports until --seconds or --reports, then the drain. */
int measure(struct loadgen *lg, struct measurement *m);

/* ---- report.c ---- */

/* The figures of the measured phase (sorts the latencies), as text or one JSON line. */
void report(const struct loadgen *lg, const struct measurement *m, double setup_s);

#endif /* LOADGEN_H */
