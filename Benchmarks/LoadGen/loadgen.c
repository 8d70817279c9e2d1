/*
 * loadgen: one hub with many accessories, for scripts/bench-e2e.sh. Measures the bridge (or the relay) end to end
 * through a broker: reports out, results back, latency and throughput.
 *
 * 1. Connects (MQTT 5, clean start), subscribes at QoS 1 to R/hubs/{hub}/accessories/+/result.
 * 2. Ready check: publishes an unsequenced Unpaired for the accessory "probe" every 200 ms until any result for it
 *    comes back, so that the run starts only once the other side is subscribed and answering.
 * 3. Set-up (not timed): for each accessory, sequenced telemetry starting at 1 (a Paired restarts the count, so a
 *    second run on the same accessories works): Paired (audio switching and placement), Register (both), Sources
 *    (primary --source, 12:34:56:78:9A:BC by default); then a retained SourceState {ACTIVITY_MEDIA} on
 *    R/sources/{source}/state. Several loadgens on one cluster give each hub a device of its own (--source): one
 *    device listed by every hub would be shared by every slot, and arbitrated through etcd at each put-on.
 *    With --own-sources, each accessory lists a source of its own instead (02:00:00:00:00:00 plus its index), whose
 *    state is never published: a fleet of idle phones, for the memory benchmark.
 *    Waits for every set-up result, lets the other side settle (--settle seconds: acknowledging a burst of
 *    thousands of messages keeps libmosquitto busy for a while), and checks that it answers the probe again.
 * 4. Measured: placement reports, ON_HEAD and OFF_HEAD alternately per accessory, at most one outstanding per
 *    accessory (an accessory's next report leaves only once the result of its previous one arrived). --rate 0
 *    floods (every answered accessory is sent again at once); --rate N paces N reports/s over the idle accessories.
 *    Stops sending after --seconds or --reports, then waits up to --drain seconds for the outstanding results:
 *    those still missing are lost.
 * Results are matched to reports by (accessory, sequence); latency is publish -> result on the monotonic clock.
 *
 * One thread: this program drives libmosquitto's loop itself (mosquitto_loop) and publishes between iterations.
 *
 * Usage: loadgen [--broker mqtt://127.0.0.1:1883] [--topic-root audio] [--hub load-hub] [--accessories 1000]
 *                [--rate 0] [--seconds 10] [--reports N] [--drain 5] [--settle 1] [--client-id ID] [--json]
 *                [--own-sources | --source 123456789abc] [--server-pid PID] [--broker-pid PID] [--source-root R]
 * --source-root: where the playing devices' topics are when they are not under --topic-root (a cluster's slot's root
 * is R/slots/{slot}, its devices' R). --ready-file PATH: created when the measured phase starts, so that a script
 * running several loadgens can measure one window inside all their phases. --accessory-prefix P: accessory ids are
 * "P-{index}" ("acc-{index}" by default), so that several loadgens can share one bridge.
 * With --server-pid / --broker-pid, the CPU time (utime + stime from /proc/PID/stat) those processes used during the
 * measured phase is reported per result.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "audioaccessory/v1/source.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"
#include "audioaccessory/v1/telemetry.pb-c.h"

#include "../../Sources/CAudioHub/src/url.h"

/* Set-up requests unanswered at most at once. */
#define SETUP_WINDOW 3000

#define MAX_TOPIC 256
#define MAX_PREFIX 200 /* R/hubs/{hub}/accessories/: leaves room for an accessory id and a last level */
#define MAX_PAYLOAD 256
#define PROBE_ID "probe"
#define NS_PER_S 1000000000ULL

static const Audioaccessory__V1__Capability all_capabilities[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT,
};

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
    uint64_t *latencies_ns;
    size_t latency_capacity;
    uint64_t last_result_ns;
};

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * NS_PER_S + (uint64_t)now.tv_nsec;
}

static uint64_t seconds_ns(double seconds)
{
    return (uint64_t)(seconds * 1e9);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loadgen [--broker mqtt://HOST:PORT] [--topic-root R] [--hub ID] [--accessories A]\n"
            "               [--rate N (0: flood)] [--seconds S] [--reports N] [--drain S] [--settle S]\n"
            "               [--setup-timeout S] [--client-id ID] [--json] [--own-sources | --source HEX12]\n"
            "               [--server-pid PID]\n"
            "               [--broker-pid PID] [--source-root R]\n"
            "               [--ready-file PATH] [--accessory-prefix P]\n");
}

static bool parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        return false;
    }
    *out = value;
    return true;
}

static bool parse_double(const char *text, double min, double *out)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= min) || isinf(value)) {
        return false;
    }
    *out = value;
    return true;
}

/* An id of the contract: 1-64 characters of A-Z a-z 0-9 _ - */
static bool valid_id(const char *id)
{
    size_t length = strlen(id);
    return length >= 1 && length <= 64 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == length;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .broker = "mqtt://127.0.0.1:1883", .topic_root = "audio", .hub = "load-hub", .accessories = 1000,
        .accessory_prefix = "acc",
        .rate = 0, .seconds = 10, .reports = 0, .drain = 5, .settle = 1, .ready_timeout = 30, .setup_timeout = 60,
        .source = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}, .source_hex = "123456789abc",
    };
    snprintf(opt->client_id, sizeof opt->client_id, "loadgen-%ld", (long)getpid());
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "--json") == 0) {
            opt->json = true;
            continue;
        }
        if (strcmp(arg, "--own-sources") == 0) {
            opt->own_sources = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "loadgen: %s needs a value\n", arg);
            return -1;
        }
        const char *value = argv[++i];
        long number;
        bool ok = true;
        if (strcmp(arg, "--source") == 0) {
            unsigned byte[6];
            ok = strlen(value) == 12 && sscanf(value, "%2x%2x%2x%2x%2x%2x", &byte[0], &byte[1], &byte[2], &byte[3],
                                               &byte[4], &byte[5]) == 6;
            for (int b = 0; ok && b < 6; b++) {
                opt->source[b] = (uint8_t)byte[b];
            }
            if (ok) {
                snprintf(opt->source_hex, sizeof opt->source_hex, "%02x%02x%02x%02x%02x%02x", byte[0], byte[1],
                         byte[2], byte[3], byte[4], byte[5]);
            }
        } else if (strcmp(arg, "--broker") == 0) {
            opt->broker = value;
        } else if (strcmp(arg, "--topic-root") == 0) {
            opt->topic_root = value;
        } else if (strcmp(arg, "--source-root") == 0) {
            opt->source_root = value;
        } else if (strcmp(arg, "--ready-file") == 0) {
            opt->ready_file = value;
        } else if (strcmp(arg, "--accessory-prefix") == 0) {
            opt->accessory_prefix = value;
            ok = value[0] != '\0' && strpbrk(value, "+#") == NULL;
        } else if (strcmp(arg, "--hub") == 0) {
            opt->hub = value;
            ok = valid_id(value);
        } else if (strcmp(arg, "--client-id") == 0) {
            ok = strlen(value) > 0 && strlen(value) < sizeof opt->client_id;
            if (ok) {
                strcpy(opt->client_id, value);
            }
        } else if (strcmp(arg, "--accessories") == 0) {
            ok = parse_long(value, 1, 1000000, &opt->accessories);
        } else if (strcmp(arg, "--rate") == 0) {
            ok = parse_double(value, 0, &opt->rate);
        } else if (strcmp(arg, "--seconds") == 0) {
            ok = parse_double(value, 0, &opt->seconds);
        } else if (strcmp(arg, "--reports") == 0) {
            ok = parse_long(value, 0, LONG_MAX, &number);
            opt->reports = (uint64_t)number;
        } else if (strcmp(arg, "--drain") == 0) {
            ok = parse_double(value, 0, &opt->drain);
        } else if (strcmp(arg, "--settle") == 0) {
            ok = parse_double(value, 0, &opt->settle);
        } else if (strcmp(arg, "--setup-timeout") == 0) {
            ok = parse_double(value, 1, &opt->setup_timeout);
        } else if (strcmp(arg, "--server-pid") == 0) {
            ok = parse_long(value, 1, INT_MAX, &opt->server_pid);
        } else if (strcmp(arg, "--broker-pid") == 0) {
            ok = parse_long(value, 1, INT_MAX, &opt->broker_pid);
        } else {
            fprintf(stderr, "loadgen: unknown option %s\n", arg);
            usage(stderr);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "loadgen: invalid value for %s: '%s'\n", arg, value);
            return -1;
        }
    }
    bool tls = false;
    if (ah_parse_url(opt->broker, &opt->host, &opt->port, &tls) != AUDIOHUB_ERR_SUCCESS || tls) {
        fprintf(stderr, "loadgen: invalid value for --broker: '%s'\n", opt->broker);
        return -1;
    }
    if (opt->seconds == 0 && opt->reports == 0) {
        fprintf(stderr, "loadgen: --seconds 0 needs --reports\n");
        return -1;
    }
    return 0;
}

/* utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15); -1 when unreadable. */
static long long cpu_ticks(long pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return -1;
    }
    char *read = fgets(line, sizeof line, file);
    fclose(file);
    char *fields = read != NULL ? strrchr(line, ')') : NULL;
    unsigned long long utime, stime;
    /* After "pid (comm)": state, then fields 4-13, then utime and stime. */
    if (fields == NULL ||
        sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) {
        return -1;
    }
    return (long long)(utime + stime);
}

static uint64_t process_cpu_ns(void)
{
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    return (uint64_t)cpu.tv_sec * NS_PER_S + (uint64_t)cpu.tv_nsec;
}

static const char *accessory_topic(const struct loadgen *lg, size_t index)
{
    return lg->topics + index * MAX_TOPIC;
}

static int publish_message(struct loadgen *lg, const char *topic, const ProtobufCMessage *message, bool retain)
{
    uint8_t payload[MAX_PAYLOAD];
    size_t size = protobuf_c_message_get_packed_size(message);
    if (size > sizeof payload) {
        fprintf(stderr, "loadgen: %s: message of %zu bytes too large\n", topic, size);
        return -1;
    }
    protobuf_c_message_pack(message, payload);
    int rc = mosquitto_publish_v5(lg->mosq, NULL, topic, (int)size, payload, 1, retain, lg->content_type);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: publish on %s: %s\n", topic, mosquitto_strerror(rc));
        return -1;
    }
    return 0;
}

static int publish_telemetry(struct loadgen *lg, const char *topic, Audioaccessory__V1__AccessoryTelemetry *telemetry)
{
    char request_id[24];
    snprintf(request_id, sizeof request_id, "%" PRIu64, ++lg->request_number);
    telemetry->request_id = request_id;
    return publish_message(lg, topic, &telemetry->base, false);
}

/* The next placement report of an idle accessory. */
static int send_report(struct loadgen *lg, uint32_t index)
{
    struct accessory *accessory = &lg->accessories[index];
    Audioaccessory__V1__PlacementReport placement = AUDIOACCESSORY__V1__PLACEMENT_REPORT__INIT;
    placement.placement = accessory->next_off ? AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OFF_HEAD
                                              : AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_ON_HEAD;
    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = accessory->sequence + 1;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT;
    telemetry.placement = &placement;
    accessory->sent_at_ns = now_ns();
    if (publish_telemetry(lg, accessory_topic(lg, index), &telemetry) != 0) {
        return -1;
    }
    accessory->sequence++;
    accessory->outstanding = accessory->sequence;
    accessory->next_off = !accessory->next_off;
    lg->sent++;
    lg->outstanding++;
    return 0;
}

static void push_idle(struct loadgen *lg, uint32_t index)
{
    lg->idle[(lg->idle_head + lg->idle_count) % (size_t)lg->opt.accessories] = index;
    lg->idle_count++;
}

static uint32_t pop_idle(struct loadgen *lg)
{
    uint32_t index = lg->idle[lg->idle_head];
    lg->idle_head = (lg->idle_head + 1) % (size_t)lg->opt.accessories;
    lg->idle_count--;
    return index;
}

static void record_failure(struct loadgen *lg, const char *accessory, const Audioaccessory__V1__RequestResult *result)
{
    if (lg->first_failure[0] == '\0') {
        snprintf(lg->first_failure, sizeof lg->first_failure, "%s sequence %" PRIu64 ": error %d: %s", accessory,
                 result->sequence, (int)result->error, result->message);
    }
}

/* Accessory index from "{result prefix}{accessory prefix}-{index}/result"; -1 for the probe, -2 for anything else. */
static long result_index(const struct loadgen *lg, const char *topic)
{
    if (strncmp(topic, lg->result_prefix, lg->result_prefix_len) != 0) {
        return -2;
    }
    const char *id = topic + lg->result_prefix_len;
    if (strcmp(id, PROBE_ID "/result") == 0) {
        return -1;
    }
    size_t prefix = strlen(lg->opt.accessory_prefix);
    if (strncmp(id, lg->opt.accessory_prefix, prefix) != 0 || id[prefix] != '-') {
        return -2;
    }
    char *end;
    long index = strtol(id + prefix + 1, &end, 10);
    if (end == id + prefix + 1 || strcmp(end, "/result") != 0 || index < 0 || index >= lg->opt.accessories) {
        return -2;
    }
    return index;
}

static void on_result(struct loadgen *lg, long index, const Audioaccessory__V1__RequestResult *result)
{
    uint64_t arrived = now_ns();
    struct accessory *accessory = &lg->accessories[index];
    bool success = result->error == AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_NONE;
    uint64_t sequence = result->sequence;
    if (lg->phase == PHASE_SETUP && sequence >= 1 && sequence <= 3) {
        if (accessory->setup_answered & (1u << sequence)) {
            lg->duplicated++;
            return;
        }
        accessory->setup_answered |= (uint8_t)(1u << sequence);
        lg->setup_pending--;
        if (!success) {
            lg->setup_failed++;
            record_failure(lg, accessory_topic(lg, (size_t)index), result);
        }
        return;
    }
    if (accessory->outstanding != 0 && sequence == accessory->outstanding) {
        if (lg->results == lg->latency_capacity) {
            size_t capacity = lg->latency_capacity ? lg->latency_capacity * 2 : 65536;
            uint64_t *grown = realloc(lg->latencies_ns, capacity * sizeof *grown);
            if (grown == NULL) {
                fprintf(stderr, "loadgen: out of memory for latencies\n");
                lg->failed_fatally = true;
                return;
            }
            lg->latencies_ns = grown;
            lg->latency_capacity = capacity;
        }
        lg->latencies_ns[lg->results++] = arrived - accessory->sent_at_ns;
        lg->last_result_ns = arrived;
        accessory->answered = sequence;
        accessory->outstanding = 0;
        lg->outstanding--;
        if (!success) {
            lg->failed++;
            record_failure(lg, accessory_topic(lg, (size_t)index), result);
        }
        push_idle(lg, (uint32_t)index);
    } else if (sequence <= accessory->answered) {
        lg->duplicated++;
    } else {
        lg->unexpected++;
    }
}

static void on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *msg,
                       const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct loadgen *lg = userdata;
    long index = result_index(lg, msg->topic);
    if (index == -2) {
        lg->unexpected++;
        return;
    }
    if (index == -1) {
        lg->probe_answered = true;
        return;
    }
    Audioaccessory__V1__RequestResult *result =
        audioaccessory__v1__request_result__unpack(NULL, (size_t)msg->payloadlen, msg->payload);
    if (result == NULL) {
        fprintf(stderr, "loadgen: %s: not a RequestResult (%d bytes)\n", msg->topic, msg->payloadlen);
        lg->unexpected++;
        return;
    }
    on_result(lg, index, result);
    audioaccessory__v1__request_result__free_unpacked(result, NULL);
}

static void on_connect(struct mosquitto *mosq, void *userdata, int reason_code, int flags,
                       const mosquitto_property *properties)
{
    (void)flags;
    (void)properties;
    struct loadgen *lg = userdata;
    if (reason_code != 0) {
        fprintf(stderr, "loadgen: connection refused: %s\n", mosquitto_reason_string(reason_code));
        lg->failed_fatally = true;
        return;
    }
    lg->connected = true;
    char filter[MAX_TOPIC];
    snprintf(filter, sizeof filter, "%s+/result", lg->result_prefix);
    int rc = mosquitto_subscribe_v5(mosq, NULL, filter, 1, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: subscribe %s: %s\n", filter, mosquitto_strerror(rc));
        lg->failed_fatally = true;
    }
}

static void on_subscribe(struct mosquitto *mosq, void *userdata, int mid, int count, const int *granted,
                         const mosquitto_property *properties)
{
    (void)mosq;
    (void)mid;
    (void)properties;
    struct loadgen *lg = userdata;
    if (count != 1 || granted[0] != 1) {
        fprintf(stderr, "loadgen: result subscription refused (%d)\n", count > 0 ? granted[0] : -1);
        lg->failed_fatally = true;
        return;
    }
    lg->subscribed = true;
}

static void on_disconnect(struct mosquitto *mosq, void *userdata, int reason_code,
                          const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct loadgen *lg = userdata;
    if (reason_code != 0) {
        fprintf(stderr, "loadgen: lost the broker: %s\n", mosquitto_strerror(reason_code));
        lg->failed_fatally = true;
    }
    lg->connected = false;
}

/* One iteration of libmosquitto's loop, waiting up to timeout_ms for the socket. */
static int pump(struct loadgen *lg, int timeout_ms)
{
    int rc = mosquitto_loop(lg->mosq, timeout_ms, 1);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: network loop: %s\n",
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        return -1;
    }
    return lg->failed_fatally ? -1 : 0;
}

static int wait_connected(struct loadgen *lg)
{
    uint64_t deadline = now_ns() + 10 * NS_PER_S;
    while (!lg->subscribed) {
        if (now_ns() > deadline) {
            fprintf(stderr, "loadgen: no CONNACK and SUBACK within 10 s\n");
            return -1;
        }
        if (pump(lg, 100) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Unpaired, unsequenced, for "probe", every 200 ms until a result for it arrives. */
static int wait_ready(struct loadgen *lg)
{
    char topic[MAX_TOPIC];
    snprintf(topic, sizeof topic, "%s" PROBE_ID "/telemetry", lg->result_prefix);
    Audioaccessory__V1__Unpaired unpaired = AUDIOACCESSORY__V1__UNPAIRED__INIT;
    uint64_t deadline = now_ns() + seconds_ns(lg->opt.ready_timeout);
    uint64_t next_probe = 0;
    lg->phase = PHASE_PROBING;
    lg->probe_answered = false;
    while (!lg->probe_answered) {
        uint64_t now = now_ns();
        if (now > deadline) {
            fprintf(stderr, "loadgen: nothing answered on %s within %.0f s\n", topic, lg->opt.ready_timeout);
            return -1;
        }
        if (now >= next_probe) {
            Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
            telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UNPAIRED;
            telemetry.unpaired = &unpaired;
            if (publish_telemetry(lg, topic, &telemetry) != 0) {
                return -1;
            }
            next_probe = now + NS_PER_S / 5;
        }
        if (pump(lg, 50) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Paired, Register and Sources for every accessory, then the source's retained state; waits for every result. */
static int set_up(struct loadgen *lg)
{
    Audioaccessory__V1__Paired paired = AUDIOACCESSORY__V1__PAIRED__INIT;
    paired.name = "Load";
    paired.model = "LG-1";
    paired.n_hardware_capabilities = 2;
    paired.hardware_capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    Audioaccessory__V1__Register register_ = AUDIOACCESSORY__V1__REGISTER__INIT;
    register_.n_capabilities = 2;
    register_.capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    Audioaccessory__V1__SourcesReport sources = AUDIOACCESSORY__V1__SOURCES_REPORT__INIT;
    uint8_t own_address[sizeof lg->opt.source] = {0x02};
    sources.primary = (ProtobufCBinaryData){
        .len = sizeof lg->opt.source,
        .data = lg->opt.own_sources ? own_address : lg->opt.source,
    };

    lg->phase = PHASE_SETUP;
    lg->setup_pending = 3 * (uint64_t)lg->opt.accessories;
    for (long i = 0; i < lg->opt.accessories; i++) {
        struct accessory *accessory = &lg->accessories[i];
        /* At most SETUP_WINDOW set-up requests unanswered, like a hub that waits for its answers: a burst of 300,000
         * is more than a bridge queues for a slow broker, and answers it refuses are not sent again here. */
        uint64_t sent = 3 * (uint64_t)i;
        while (sent - (3 * (uint64_t)lg->opt.accessories - lg->setup_pending) > SETUP_WINDOW) {
            if (pump(lg, 10) != 0) {
                return -1;
            }
        }
        for (int byte = 5; byte >= 2; byte--) {
            own_address[byte] = (uint8_t)((unsigned long)i >> (8 * (5 - byte)));
        }
        for (uint64_t sequence = 1; sequence <= 3; sequence++) {
            Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
            telemetry.sequence = sequence;
            switch (sequence) {
            case 1:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PAIRED;
                telemetry.paired = &paired;
                break;
            case 2:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_REGISTER;
                telemetry.register_ = &register_;
                break;
            default:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_SOURCES;
                telemetry.sources = &sources;
                break;
            }
            if (publish_telemetry(lg, accessory_topic(lg, (size_t)i), &telemetry) != 0) {
                return -1;
            }
        }
        accessory->sequence = 3;
        accessory->answered = 3;
        /* Keep the socket moving: read results while the set-up goes out. */
        if (i % 256 == 255 && pump(lg, 0) != 0) {
            return -1;
        }
    }
    char topic[MAX_TOPIC];
    snprintf(topic, sizeof topic, "%s/sources/%s/state",
             lg->opt.source_root != NULL ? lg->opt.source_root : lg->opt.topic_root, lg->opt.source_hex);
    Audioaccessory__V1__SourceState source = AUDIOACCESSORY__V1__SOURCE_STATE__INIT;
    source.activity = AUDIOACCESSORY__V1__ACTIVITY__ACTIVITY_MEDIA;
    if (!lg->opt.own_sources && publish_message(lg, topic, &source.base, true) != 0) {
        return -1;
    }
    uint64_t deadline = now_ns() + seconds_ns(lg->opt.setup_timeout);
    while (lg->setup_pending > 0) {
        if (now_ns() > deadline) {
            fprintf(stderr, "loadgen: %" PRIu64 " set-up results missing after %.0f s\n", lg->setup_pending,
                    lg->opt.setup_timeout);
            return -1;
        }
        if (pump(lg, 100) != 0) {
            return -1;
        }
    }
    if (lg->setup_failed > 0) {
        fprintf(stderr, "loadgen: %" PRIu64 " set-up requests failed; first: %s\n", lg->setup_failed,
                lg->first_failure);
        return -1;
    }
    uint64_t settled = now_ns() + seconds_ns(lg->opt.settle);
    while (now_ns() < settled) {
        if (pump(lg, 10) != 0) {
            return -1;
        }
    }
    return wait_ready(lg);
}

struct measurement {
    uint64_t started_ns;
    uint64_t ended_ns;
    long long server_ticks;
    long long broker_ticks;
    uint64_t loadgen_cpu_ns;
};

/* The measured phase: placement reports until --seconds or --reports, then the drain. */
static int measure(struct loadgen *lg, struct measurement *m)
{
    const struct options *opt = &lg->opt;
    lg->phase = PHASE_MEASURING;
    for (uint32_t i = 0; i < (uint32_t)opt->accessories; i++) {
        push_idle(lg, i);
    }
    if (opt->ready_file != NULL) {
        FILE *ready = fopen(opt->ready_file, "w");
        if (ready != NULL) {
            fclose(ready);
        }
    }
    long long server_start = opt->server_pid ? cpu_ticks(opt->server_pid) : -1;
    long long broker_start = opt->broker_pid ? cpu_ticks(opt->broker_pid) : -1;
    uint64_t cpu_start = process_cpu_ns();
    uint64_t start = now_ns();
    uint64_t stop = opt->seconds > 0 ? start + seconds_ns(opt->seconds) : UINT64_MAX;
    uint64_t interval_ns = opt->rate > 0 ? (uint64_t)(1e9 / opt->rate) : 0;
    uint64_t next_due = start;
    bool sending = true;
    uint64_t drain_deadline = 0;
    lg->last_result_ns = start;

    for (;;) {
        uint64_t now = now_ns();
        if (sending && (now >= stop || (opt->reports > 0 && lg->sent >= opt->reports))) {
            sending = false;
            drain_deadline = now + seconds_ns(opt->drain);
        }
        if (!sending && (lg->outstanding == 0 || now >= drain_deadline)) {
            break;
        }
        int timeout_ms = 100;
        if (sending) {
            while (lg->idle_count > 0 && (interval_ns == 0 || next_due <= now) &&
                   (opt->reports == 0 || lg->sent < opt->reports)) {
                if (send_report(lg, pop_idle(lg)) != 0) {
                    return -1;
                }
                next_due += interval_ns;
            }
            uint64_t until = stop - now;
            if (interval_ns > 0 && lg->idle_count > 0 && next_due > now && next_due - now < until) {
                until = next_due - now;
            }
            if (until < 100 * 1000000ULL) {
                timeout_ms = (int)((until + 999999) / 1000000);
            }
        }
        if (pump(lg, timeout_ms) != 0) {
            return -1;
        }
    }
    m->started_ns = start;
    m->ended_ns = lg->last_result_ns;
    m->loadgen_cpu_ns = process_cpu_ns() - cpu_start;
    long long server_end = opt->server_pid ? cpu_ticks(opt->server_pid) : -1;
    long long broker_end = opt->broker_pid ? cpu_ticks(opt->broker_pid) : -1;
    m->server_ticks = server_start >= 0 && server_end >= 0 ? server_end - server_start : -1;
    m->broker_ticks = broker_start >= 0 && broker_end >= 0 ? broker_end - broker_start : -1;
    if (opt->server_pid && m->server_ticks < 0) {
        fprintf(stderr, "loadgen: cannot read /proc/%ld/stat\n", opt->server_pid);
    }
    return 0;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile, in milliseconds; NAN without results. */
static double percentile_ms(const uint64_t *sorted, size_t count, double p)
{
    if (count == 0) {
        return NAN;
    }
    size_t rank = (size_t)ceil(p / 100.0 * (double)count);
    if (rank < 1) {
        rank = 1;
    }
    return (double)sorted[rank - 1] / 1e6;
}

/* CPU microseconds per result from clock ticks; negative when unknown. */
static double cpu_us_per_result(long long ticks, uint64_t results)
{
    if (ticks < 0 || results == 0) {
        return -1;
    }
    return (double)ticks * 1e6 / (double)sysconf(_SC_CLK_TCK) / (double)results;
}

static void print_number(const char *key, double value, bool last)
{
    if (isnan(value) || value < 0) {
        printf("\"%s\":null%s", key, last ? "" : ",");
    } else {
        printf("\"%s\":%.3f%s", key, value, last ? "" : ",");
    }
}

static void report(const struct loadgen *lg, const struct measurement *m, double setup_s)
{
    qsort(lg->latencies_ns, lg->results, sizeof *lg->latencies_ns, compare_u64);
    double p50 = percentile_ms(lg->latencies_ns, lg->results, 50);
    double p90 = percentile_ms(lg->latencies_ns, lg->results, 90);
    double p99 = percentile_ms(lg->latencies_ns, lg->results, 99);
    double max = percentile_ms(lg->latencies_ns, lg->results, 100);
    double duration = (double)(m->ended_ns - m->started_ns) / 1e9;
    double throughput = duration > 0 ? (double)lg->results / duration : 0;
    double server_us = cpu_us_per_result(m->server_ticks, lg->results);
    double broker_us = cpu_us_per_result(m->broker_ticks, lg->results);
    double loadgen_us = lg->results ? (double)m->loadgen_cpu_ns / 1e3 / (double)lg->results : -1;
    const struct options *opt = &lg->opt;
    if (opt->json) {
        printf("{\"rate\":%.1f,\"accessories\":%ld,\"sent\":%" PRIu64 ",\"results\":%" PRIu64 ",\"lost\":%" PRIu64
               ",\"duplicated\":%" PRIu64 ",\"unexpected\":%" PRIu64 ",\"failed\":%" PRIu64 ",",
               opt->rate, opt->accessories, lg->sent, lg->results, lg->outstanding, lg->duplicated,
               lg->unexpected, lg->failed);
        print_number("p50_ms", p50, false);
        print_number("p90_ms", p90, false);
        print_number("p99_ms", p99, false);
        print_number("max_ms", max, false);
        print_number("throughput", throughput, false);
        print_number("duration_s", duration, false);
        print_number("setup_s", setup_s, false);
        print_number("server_cpu_us", server_us, false);
        print_number("broker_cpu_us", broker_us, false);
        print_number("loadgen_cpu_us", loadgen_us, true);
        printf("}\n");
    } else {
        printf("%s, %ld accessories: %" PRIu64 " sent, %" PRIu64 " results in %.2f s (set-up %.2f s)\n",
               opt->rate > 0 ? "paced" : "flood", opt->accessories, lg->sent, lg->results, duration, setup_s);
        printf("lost %" PRIu64 ", duplicated %" PRIu64 ", unexpected %" PRIu64 ", failed %" PRIu64 "\n",
               lg->outstanding, lg->duplicated, lg->unexpected, lg->failed);
        printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", p50, p90, p99, max);
        printf("throughput: %.0f results/s\n", throughput);
        if (server_us >= 0) {
            printf("server CPU: %.2f us/result\n", server_us);
        }
        if (broker_us >= 0) {
            printf("broker CPU: %.2f us/result\n", broker_us);
        }
        printf("loadgen CPU: %.2f us/result\n", loadgen_us);
    }
    if (lg->first_failure[0] != '\0') {
        fprintf(stderr, "loadgen: %" PRIu64 " results were errors; first: %s\n", lg->failed, lg->first_failure);
    }
    fflush(stdout);
}

/* mosquitto_new and its options; NULL (after a message) on failure. */
static struct mosquitto *make_client(struct loadgen *lg)
{
    struct mosquitto *mosq = mosquitto_new(lg->opt.client_id, true, lg);
    if (mosq == NULL) {
        fprintf(stderr, "loadgen: mosquitto_new: %s\n", strerror(errno));
        return NULL;
    }
    const struct {
        enum mosq_opt_t option;
        int value;
        const char *name;
    } options[] = {
        {MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5, "MOSQ_OPT_PROTOCOL_VERSION"},
        {MOSQ_OPT_TCP_NODELAY, 1, "MOSQ_OPT_TCP_NODELAY"},
        /* At most one report per accessory in flight, 3 per accessory during the set-up: never the limit. */
        {MOSQ_OPT_SEND_MAXIMUM, 65535, "MOSQ_OPT_SEND_MAXIMUM"},
        /* The results must not wait for this client's acknowledgements. */
        {MOSQ_OPT_RECEIVE_MAXIMUM, 65535, "MOSQ_OPT_RECEIVE_MAXIMUM"},
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        int rc = mosquitto_int_option(mosq, options[i].option, options[i].value);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "loadgen: %s: %s\n", options[i].name, mosquitto_strerror(rc));
            mosquitto_destroy(mosq);
            return NULL;
        }
    }
    mosquitto_connect_v5_callback_set(mosq, on_connect);
    mosquitto_subscribe_v5_callback_set(mosq, on_subscribe);
    mosquitto_message_v5_callback_set(mosq, on_message);
    mosquitto_disconnect_v5_callback_set(mosq, on_disconnect);
    return mosq;
}

/* The accessories, their topics and the idle ring. */
static int allocate(struct loadgen *lg)
{
    size_t count = (size_t)lg->opt.accessories;
    lg->accessories = calloc(count, sizeof *lg->accessories);
    lg->topics = malloc(count * MAX_TOPIC);
    lg->idle = malloc(count * sizeof *lg->idle);
    if (lg->accessories == NULL || lg->topics == NULL || lg->idle == NULL) {
        fprintf(stderr, "loadgen: out of memory for %zu accessories\n", count);
        return -1;
    }
    int length = snprintf(lg->result_prefix, sizeof lg->result_prefix, "%s/hubs/%s/accessories/",
                          lg->opt.topic_root, lg->opt.hub);
    if (length < 0 || length >= MAX_PREFIX) {
        fprintf(stderr, "loadgen: topic root too long\n");
        return -1;
    }
    lg->result_prefix_len = (size_t)length;
    for (size_t i = 0; i < count; i++) {
        snprintf(lg->topics + i * MAX_TOPIC, MAX_TOPIC, "%s%s-%zu/telemetry", lg->result_prefix,
                 lg->opt.accessory_prefix, i);
    }
    return 0;
}

static int run(struct loadgen *lg)
{
    if (allocate(lg) != 0) {
        return 1;
    }
    lg->mosq = make_client(lg);
    if (lg->mosq == NULL) {
        return 1;
    }
    int rc = mosquitto_connect_bind_v5(lg->mosq, lg->opt.host, lg->opt.port, 30, NULL, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: connect to %s:%d: %s\n", lg->opt.host, lg->opt.port,
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        return 1;
    }
    if (wait_connected(lg) != 0 || wait_ready(lg) != 0) {
        return 1;
    }
    uint64_t setup_start = now_ns();
    if (set_up(lg) != 0) {
        return 1;
    }
    double setup_s = (double)(now_ns() - setup_start) / 1e9;
    struct measurement m;
    if (measure(lg, &m) != 0) {
        return 1;
    }
    report(lg, &m, setup_s);
    rc = mosquitto_disconnect_v5(lg->mosq, MQTT_RC_NORMAL_DISCONNECTION, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: disconnect: %s\n", mosquitto_strerror(rc));
    }
    /* Let the DISCONNECT and the last acknowledgements leave. */
    for (int i = 0; i < 10 && mosquitto_loop(lg->mosq, 10, 1) == MOSQ_ERR_SUCCESS; i++) {
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct loadgen lg = {0};
    if (parse_options(argc, argv, &lg.opt) != 0) {
        return 2;
    }
    int rc = mosquitto_lib_init();
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: mosquitto_lib_init: %s\n", mosquitto_strerror(rc));
        return 1;
    }
    rc = mosquitto_property_add_string(&lg.content_type, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    int status = 1;
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: content type property: %s\n", mosquitto_strerror(rc));
    } else {
        status = run(&lg);
    }
    mosquitto_destroy(lg.mosq);
    mosquitto_property_free_all(&lg.content_type);
    free(lg.accessories);
    free(lg.topics);
    free(lg.idle);
    free(lg.latencies_ns);
    free(lg.opt.host);
    mosquitto_lib_cleanup();
    return status;
}
