/*
 * hub-sim: H hubs x A accessories on the C hub SDK (audiohub.h), with the playing devices they listen to, against
 * a broker and a bridge. It measures what the SDK promises end to end: every request completes exactly once, none
 * is lost, and how long each takes.
 *
 * 1. Each hub is an audiohub handle with its own loop thread (audiohub_loop_start). Set-up (not measured): every
 *    accessory is paired (audio switching and placement), registered with both, given two sources and put on.
 * 2. The playing devices share one MQTT connection (a persistent session): each retains its SourceState, and after
 *    every command it receives reports its route (routed_accessory_id) as a real device would: ROUTE routes it,
 *    PAUSE pauses it (idle, no route), RESUME resumes it, RELEASE ends the route. Redeliveries (a command sequence
 *    not above the last) are ignored; a command equal to the one before it for the same device (same action, same
 *    accessory) is counted as issued twice for one change.
 * 3. Measured: requests from the scenario: `placement` toggles (on head or in ear, then off head), `sources` changes,
 *    `changes` (60% placement, 25% sources, 15% full updates), `calls` (placement toggles while the devices switch
 *    between calls, media and idle on their own) or `mixed` (changes and calls; the default). --rate 0 floods (each accessory sends its
 *    next request as soon as the last one completed); --rate N offers N requests/s over all accessories, queued by
 *    the SDK behind each accessory's request in flight. It stops after --seconds or --rounds requests per
 *    accessory, then waits up to --drain seconds: requests still without a completion are lost.
 * 4. --verify reads every accessory's retained state and compares it with what the hub last sent (registration,
 *    name, hardware capabilities, configuration, last sequence, last error), and checks that no playing device is
 *    routed to two accessories.
 * --slots S talks to a cluster of bridges with S slots (docs/scale-out.md): each hub's topics are under its slot's
 *    root, the devices' fence goes to every slot, and the states are read under every slot.
 * --households K groups the hubs into K households (routing domains: hub h is "{prefix}-home{h mod K}--hub-{h}") and
 *    the devices with them: an accessory lists only its household's devices, which its household's other hubs share.
 *    Without it, every accessory may list any device.
 * --shared-devices N (with --households) keeps the last N devices out of the households: every household's accessories
 *    list them too (one choice in three), so that in a cluster they are listed by accessories of several slots, which
 *    arbitrate them through etcd (docs/scale-out.md, "Shared devices").
 * --svg FILE sweeps offered rates (--sweep R1,R2,... or fractions of a first flood's throughput) and draws latency
 * against offered rate.
 *
 * Live progress goes to stderr each second; the summary to stdout, as text or (--json) one JSON line.
 */
#define _POSIX_C_SOURCE 200809L

#include <audiohub.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    long slots;      /* 0: a single bridge */
    long households; /* 0: none (any accessory may list any device) */
    long shared_devices; /* with households: devices every household lists */
    bool json;
    bool verify;
    bool quiet;
    bool trace;
    double sweep[MAX_SWEEP];
    int sweep_count;
    unsigned seed;
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
};

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
};

/* One request in flight, given to the SDK as its context. */
struct op {
    int accessory;
    uint64_t submitted_ns;
    bool measured;
    enum audiohub_operation operation;
    struct expected effect;
};

struct phase_stats {
    uint64_t sent;
    uint64_t results;
    uint64_t duplicated;
    uint64_t retried;
    uint64_t errors;
    uint64_t refused;
    uint64_t cancelled;
    double *latencies;
    size_t latency_count;
    size_t latency_capacity;
    uint64_t started_ns;
    uint64_t stopped_ns;
    char first_error[256];
};

struct sim {
    struct options opt;
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
    uint64_t fences_answered; /* answers to the devices' fence (see fence_commands) */
    char (*fence_hubs)[AUDIOHUB_ID_MAX + 1]; /* per slot (one without --slots): a hub id of that slot for the fence */
    long fence_count;
    uint64_t repeated_commands;
    uint64_t excess_commands;
    char excess_example[256];
    char repeated_example[256];
    uint64_t source_reports;
    unsigned random_state;
    int stop_signals; /* SIGINT/SIGTERM taken so far (see stop_requested) */
};

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

/* The signals that stop hub-sim. They are blocked in every thread (main blocks them before it starts any) and taken
 * from the main thread's loops with sigtimedwait, so that no handler and no global is needed: the first ends the
 * run early (then hub-sim drains, prints its summary and exits as usual), a second one ends the drain too. */
static void stop_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

/* Whether a stop signal came (counting a new one, if any): never blocks. */
static bool stop_requested(struct sim *sim)
{
    static const struct timespec now = {0, 0};
    sigset_t set;
    stop_signal_set(&set);
    if (sigtimedwait(&set, NULL, &now) > 0) {
        sim->stop_signals++;
        if (!sim->opt.quiet) {
            fprintf(stderr, sim->stop_signals == 1 ? "hub-sim: stopping: draining, then the summary (again to skip "
                                                     "the drain)\n"
                                                   : "hub-sim: stopping now\n");
        }
    }
    return sim->stop_signals > 0;
}

static unsigned next_random(struct sim *sim)
{
    sim->random_state = sim->random_state * 1103515245u + 12345u;
    return (sim->random_state >> 16) & 0x7fff;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Options                                                                                                       */
/* ------------------------------------------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hub-sim [--broker mqtt://127.0.0.1:1883] [--topic-root audio] [--hubs 1] [--accessories 10]\n"
            "               [--rate 0 (flood) | N requests/s] [--seconds 10 | --rounds N] [--drain 60]\n"
            "               [--scenario mixed|placement|sources|calls] [--devices D] [--prefix sim]\n"
            "               [--timeout-ms 1000] [--timeout-max-ms 5000] [--ca-file FILE] [--seed N]\n"
            "               [--slots S (a cluster of bridges with S slots)] [--households K [--shared-devices N]]\n"
            "               [--verify] [--json] [--quiet] [--svg FILE [--sweep R1,R2,...]]\n");
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

static bool parse_sweep(const char *text, struct options *opt)
{
    char copy[512];
    if (strlen(text) >= sizeof copy) {
        return false;
    }
    strcpy(copy, text);
    opt->sweep_count = 0;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        if (opt->sweep_count == MAX_SWEEP || !parse_double(item, 0.001, &opt->sweep[opt->sweep_count])) {
            return false;
        }
        opt->sweep_count++;
    }
    return opt->sweep_count > 0;
}

static bool parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .broker = "mqtt://127.0.0.1:1883", .topic_root = "audio", .prefix = "sim", .scenario = "mixed",
        .hubs = 1, .accessories = 10, .devices = 0, .rate = 0, .seconds = -1, .rounds = 0, .drain = 60,
        .timeout_ms = 1000, .timeout_max_ms = 5000, .seed = 1,
    };
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        bool takes_value = true;
        long number = 0;
        if (strcmp(name, "--json") == 0) {
            opt->json = true;
            takes_value = false;
        } else if (strcmp(name, "--verify") == 0) {
            opt->verify = true;
            takes_value = false;
        } else if (strcmp(name, "--quiet") == 0) {
            opt->quiet = true;
            takes_value = false;
        } else if (strcmp(name, "--trace") == 0) {
            opt->trace = true;
            takes_value = false;
        } else if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (value == NULL) {
            ok = false;
        } else if (strcmp(name, "--broker") == 0) {
            opt->broker = value;
        } else if (strcmp(name, "--topic-root") == 0) {
            opt->topic_root = value;
        } else if (strcmp(name, "--prefix") == 0) {
            opt->prefix = value;
        } else if (strcmp(name, "--ca-file") == 0) {
            opt->ca_file = value;
        } else if (strcmp(name, "--scenario") == 0) {
            opt->scenario = value;
            ok = strcmp(value, "mixed") == 0 || strcmp(value, "changes") == 0 || strcmp(value, "placement") == 0 ||
                 strcmp(value, "sources") == 0 || strcmp(value, "calls") == 0;
        } else if (strcmp(name, "--svg") == 0) {
            opt->svg = value;
        } else if (strcmp(name, "--sweep") == 0) {
            ok = parse_sweep(value, opt);
        } else if (strcmp(name, "--hubs") == 0) {
            /* Each hub's connection and wake-up pair take three descriptors, and libmosquitto's select() stops at
             * FD_SETSIZE (1024). */
            ok = parse_long(value, 1, 250, &opt->hubs);
        } else if (strcmp(name, "--accessories") == 0) {
            ok = parse_long(value, 1, 1000000, &opt->accessories);
        } else if (strcmp(name, "--devices") == 0) {
            ok = parse_long(value, 2, 65536, &opt->devices);
        } else if (strcmp(name, "--rate") == 0) {
            ok = parse_double(value, 0, &opt->rate);
        } else if (strcmp(name, "--seconds") == 0) {
            ok = parse_double(value, 0, &opt->seconds);
        } else if (strcmp(name, "--rounds") == 0) {
            ok = parse_long(value, 0, 100000000, &opt->rounds);
        } else if (strcmp(name, "--drain") == 0) {
            ok = parse_double(value, 0, &opt->drain);
        } else if (strcmp(name, "--timeout-ms") == 0) {
            ok = parse_long(value, 1, 3600000, &opt->timeout_ms);
        } else if (strcmp(name, "--timeout-max-ms") == 0) {
            ok = parse_long(value, 1, 3600000, &opt->timeout_max_ms);
        } else if (strcmp(name, "--slots") == 0) {
            ok = parse_long(value, 0, 4096, &opt->slots);
        } else if (strcmp(name, "--households") == 0) {
            ok = parse_long(value, 0, 65536, &opt->households);
        } else if (strcmp(name, "--shared-devices") == 0) {
            ok = parse_long(value, 0, 65536, &opt->shared_devices);
        } else if (strcmp(name, "--seed") == 0) {
            ok = parse_long(value, 0, 0x7fffffff, &number);
            opt->seed = (unsigned)number;
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "hub-sim: bad option %s%s%s\n", name, value != NULL && takes_value ? " " : "",
                    value != NULL && takes_value ? value : "");
            usage(stderr);
            return false;
        }
        if (takes_value) {
            i++;
        }
    }
    if (opt->devices == 0) {
        long total = opt->hubs * opt->accessories;
        opt->devices = total / 2 < 2 ? 2 : (total / 2 > 65536 ? 65536 : total / 2);
    }
    if (opt->seconds < 0) {
        opt->seconds = opt->rounds > 0 ? 0 : 10; /* --rounds alone: as long as the rounds take */
    }
    if (opt->households > opt->hubs ||
        (opt->households > 0 && opt->devices - opt->shared_devices < 2 * opt->households)) {
        fprintf(stderr, "hub-sim: --households must be at most --hubs, with at least two devices each\n");
        return false;
    }
    if (opt->shared_devices > 0 && opt->households == 0) {
        fprintf(stderr, "hub-sim: --shared-devices needs --households\n");
        return false;
    }
    if (opt->rounds == 0 && opt->seconds <= 0) {
        fprintf(stderr, "hub-sim: give --seconds or --rounds\n");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Statistics                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

static void record_latency(struct phase_stats *stats, double ms)
{
    if (stats->latency_count == stats->latency_capacity) {
        size_t capacity = stats->latency_capacity == 0 ? 4096 : stats->latency_capacity * 2;
        double *grown = realloc(stats->latencies, capacity * sizeof *grown);
        if (grown == NULL) {
            return;
        }
        stats->latencies = grown;
        stats->latency_capacity = capacity;
    }
    stats->latencies[stats->latency_count++] = ms;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted values (nearest rank). */
static double quantile(const double *sorted, size_t count, double q)
{
    if (count == 0) {
        return 0;
    }
    size_t rank = (size_t)ceil(q * (double)count);
    return sorted[rank == 0 ? 0 : rank - 1];
}

struct summary {
    double offered;
    uint64_t sent, results, lost, duplicated, retried, errors, refused;
    double p50, p90, p99, max, throughput, seconds;
};

static struct summary summarize(struct phase_stats *stats, uint64_t lost, double offered)
{
    struct summary s = {0};
    s.offered = offered;
    s.sent = stats->sent;
    s.results = stats->results;
    s.lost = lost;
    s.duplicated = stats->duplicated;
    s.retried = stats->retried;
    s.errors = stats->errors;
    s.refused = stats->refused;
    qsort(stats->latencies, stats->latency_count, sizeof(double), compare_doubles);
    s.p50 = quantile(stats->latencies, stats->latency_count, 0.50);
    s.p90 = quantile(stats->latencies, stats->latency_count, 0.90);
    s.p99 = quantile(stats->latencies, stats->latency_count, 0.99);
    s.max = stats->latency_count > 0 ? stats->latencies[stats->latency_count - 1] : 0;
    s.seconds = (double)(stats->stopped_ns - stats->started_ns) / 1e9;
    s.throughput = s.seconds > 0 ? (double)s.results / s.seconds : 0;
    return s;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* The playing devices                                                                                           */
/* ------------------------------------------------------------------------------------------------------------ */

static long accessory_index(struct sim *sim, const char *id);

/* Hub h's id: "{prefix}-hub-{h}", or with households "{prefix}-home{k}--hub-{h}" (routing domain "{prefix}-home{k}"). */
static void hub_name(const struct sim *sim, long hub, char *out, size_t size)
{
    if (sim->opt.households > 0) {
        snprintf(out, size, "%s-home%ld--hub-%ld", sim->opt.prefix, hub % sim->opt.households, hub);
    } else {
        snprintf(out, size, "%s-hub-%ld", sim->opt.prefix, hub);
    }
}

/* The device an accessory of `hub` lists at position `n` of its choices: any device, or its household's (and, one
 * position in three, one of the devices all households share). */
static int device_choice(const struct sim *sim, long hub, long n)
{
    if (sim->opt.households == 0) {
        return (int)(n % sim->opt.devices);
    }
    long shared = sim->opt.shared_devices;
    long own = sim->opt.devices - shared;
    if (shared > 0 && n % 3 == 2) {
        return (int)(own + (n / 3 + hub) % shared);
    }
    long household = hub % sim->opt.households;
    long count = (own - household + sim->opt.households - 1) / sim->opt.households;
    return (int)(household + sim->opt.households * (n % count));
}

static void publish_source_state(struct sim *sim, struct device *device)
{
    uint8_t payload[128];
    device->report_sequence++;
    size_t length = wire_pack_source_state(device->report_sequence, device->activity, device->routed,
                                           device->last_command_epoch, device->last_command_sequence, payload,
                                           sizeof payload);
    char topic[300];
    snprintf(topic, sizeof topic, "%s/sources/%s/state", sim->opt.topic_root, device->hex);
    mosquitto_property *properties = NULL;
    mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    mosquitto_publish_v5(sim->device_client, NULL, topic, (int)length, payload, 1, true, properties);
    mosquitto_property_free_all(&properties);
    sim->source_reports++;
    if (sim->opt.trace) {
        fprintf(stderr, "trace: %s reports activity %d, routed to \"%s\"\n", device->hex, device->activity,
                device->routed);
    }
}

static struct device *device_for_topic(struct sim *sim, const char *topic)
{
    /* R/sources/{hex}/commands */
    size_t root = strlen(sim->opt.topic_root);
    if (strncmp(topic, sim->opt.topic_root, root) != 0 || strncmp(topic + root, "/sources/", 9) != 0) {
        return NULL;
    }
    const char *hex = topic + root + 9;
    if (strlen(hex) != 12 + 9 || strcmp(hex + 12, "/commands") != 0) {
        return NULL;
    }
    unsigned index = 0;
    if (sscanf(hex + 8, "%4x", &index) != 1 || index >= (unsigned)sim->opt.devices ||
        strncmp(sim->devices[index].hex, hex, 12) != 0) {
        return NULL;
    }
    return &sim->devices[index];
}

/* The devices' fence number `index`: a hub id of its own (of slot `index` in a cluster) and an accessory never paired,
 * so that the bridge (the slot's owner) answers invalidRequest. */
static void fence_topic(struct sim *sim, long index, const char *kind, char *topic, size_t size)
{
    if (sim->opt.slots > 0) {
        snprintf(topic, size, "%s/slots/%ld/hubs/%s/accessories/fence/%s", sim->opt.topic_root, index,
                 sim->fence_hubs[index], kind);
    } else {
        snprintf(topic, size, "%s/hubs/%s/accessories/fence/%s", sim->opt.topic_root, sim->fence_hubs[index], kind);
    }
}

/* A fence hub per slot: "{prefix}-fence-{n}" for the first n that falls in each slot. */
static bool make_fence_hubs(struct sim *sim)
{
    sim->fence_count = sim->opt.slots > 0 ? sim->opt.slots : 1;
    sim->fence_hubs = calloc((size_t)sim->fence_count, sizeof *sim->fence_hubs);
    if (sim->fence_hubs == NULL) {
        return false;
    }
    if (sim->opt.slots == 0) {
        snprintf(sim->fence_hubs[0], sizeof sim->fence_hubs[0], "%s-fence", sim->opt.prefix);
        return true;
    }
    long found = 0;
    for (long n = 0; found < sim->fence_count && n < 1000000; n++) {
        char id[AUDIOHUB_ID_MAX + 1];
        snprintf(id, sizeof id, "%s-fence-%ld", sim->opt.prefix, n);
        long slot = audiohub_slot(id, sim->opt.slots);
        if (sim->fence_hubs[slot][0] == '\0') {
            snprintf(sim->fence_hubs[slot], sizeof sim->fence_hubs[slot], "%s", id);
            found++;
        }
    }
    return found == sim->fence_count;
}

/* Whether `topic` is the result topic of one of the devices' fences. */
static bool is_fence_result(struct sim *sim, const char *topic)
{
    size_t length = strlen(topic);
    static const char suffix[] = "/accessories/fence/result";
    if (length < sizeof suffix || strcmp(topic + length - (sizeof suffix - 1), suffix) != 0) {
        return false;
    }
    for (long i = 0; i < sim->fence_count; i++) {
        char fence[400];
        fence_topic(sim, i, "result", fence, sizeof fence);
        if (strcmp(topic, fence) == 0) {
            return true;
        }
    }
    return false;
}

static void on_device_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message,
                              const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct sim *sim = userdata;
    if (is_fence_result(sim, message->topic)) {
        pthread_mutex_lock(&sim->mutex);
        sim->fences_answered++;
        pthread_mutex_unlock(&sim->mutex);
        return;
    }
    struct wire_command command;
    if (!wire_unpack_command(message->payload, (size_t)message->payloadlen, &command)) {
        return;
    }
    pthread_mutex_lock(&sim->mutex);
    struct device *device = device_for_topic(sim, message->topic);
    if (device != NULL) {
        if (sim->opt.trace) {
            fprintf(stderr, "trace: %s got action %d reason %d for %s (sequence %" PRIu64 ")\n", device->hex,
                    command.action, command.reason, command.accessory_id, command.sequence);
        }
        /* Applied only when its (epoch, sequence) is above the last applied one's: a redelivery, or a command of an
         * owner that lost its slot since (a smaller epoch), is not. */
        bool older_epoch = command.epoch < device->last_command_epoch;
        if (older_epoch || (command.epoch == device->last_command_epoch &&
                            command.sequence <= device->last_command_sequence)) {
            sim->command_redeliveries++;
            if (older_epoch) {
                sim->older_epoch_commands++;
            }
        } else {
            device->last_command_epoch = command.epoch;
            device->last_command_sequence = command.sequence;
            sim->commands++;
            if (command.action == device->last_action && strcmp(command.accessory_id, device->last_accessory) == 0) {
                sim->repeated_commands++;
                if (sim->repeated_example[0] == '\0') {
                    snprintf(sim->repeated_example, sizeof sim->repeated_example,
                             "device %s got action %d for %s twice in a row (reasons %d then %d, sequence %" PRIu64
                             ")", device->hex, command.action, command.accessory_id, device->last_reason,
                             command.reason, command.sequence);
                }
            }
            device->last_action = command.action;
            device->last_reason = command.reason;
            long index = accessory_index(sim, command.accessory_id);
            int kind = command.reason == WIRE_REASON_PUT_ON     ? PUT_ON
                       : command.reason == WIRE_REASON_TAKEN_OFF ? TAKEN_OFF
                       : command.reason == WIRE_REASON_SOURCE_DISCONNECTED ? SOURCES_CHANGED
                                                                            : -1;
            if (index >= 0 && kind >= 0 && command.action >= 1 && command.action <= 4) {
                sim->accessories[index].cited[kind][command.action]++;
            }
            snprintf(device->last_accessory, sizeof device->last_accessory, "%s", command.accessory_id);
            switch (command.action) {
            case WIRE_ACTION_ROUTE:
                snprintf(device->routed, sizeof device->routed, "%s", command.accessory_id);
                break;
            case WIRE_ACTION_PAUSE:
                if (device->activity != WIRE_ACTIVITY_IDLE) {
                    device->paused_activity = device->activity;
                }
                device->activity = WIRE_ACTIVITY_IDLE;
                device->routed[0] = '\0';
                break;
            case WIRE_ACTION_RESUME:
                if (device->paused_activity != 0) {
                    device->activity = device->paused_activity;
                    device->paused_activity = 0;
                }
                break;
            case WIRE_ACTION_RELEASE:
                device->routed[0] = '\0';
                break;
            default:
                break;
            }
            publish_source_state(sim, device);
        }
    }
    pthread_mutex_unlock(&sim->mutex);
}

static void on_device_connect(struct mosquitto *mosq, void *userdata, int rc, int flags,
                              const mosquitto_property *properties)
{
    (void)flags;
    (void)properties;
    struct sim *sim = userdata;
    if (rc == 0) {
        char filter[300];
        snprintf(filter, sizeof filter, "%s/sources/+/commands", sim->opt.topic_root);
        mosquitto_subscribe_v5(mosq, NULL, filter, 1, 0, NULL);
        for (long i = 0; i < sim->fence_count; i++) {
            char fence[400];
            fence_topic(sim, i, "result", fence, sizeof fence);
            mosquitto_subscribe_v5(mosq, NULL, fence, 1, 0, NULL);
        }
    }
}

/* Waits until no command is still on its way to the devices, so that counting them (count_excess) misses none. The
 * devices' connection sends the fence, a request the bridge answers on that same connection's subscriptions: the bridge
 * handles what reaches it in order and publishes through one connection, so the answer comes behind every command it
 * published for what came before, the hubs' requests (all answered by now) and the devices' reports alike. In a
 * cluster, each slot is such a bridge: a fence goes to every slot. Commands that arrive meanwhile make devices report
 * again, which may bring more: the fences go again until a round brings no command. False when a fence is not
 * answered. */
static bool fence_commands(struct sim *sim)
{
    static const char fence[] = "{\"placement\": {\"placement\": \"PLACEMENT_ON_HEAD\"}}";
    for (int round = 0; round < 20; round++) {
        pthread_mutex_lock(&sim->mutex);
        uint64_t commands = sim->commands + sim->command_redeliveries;
        uint64_t answered = sim->fences_answered;
        pthread_mutex_unlock(&sim->mutex);
        for (long i = 0; i < sim->fence_count; i++) {
            char topic[400];
            fence_topic(sim, i, "telemetry", topic, sizeof topic);
            if (mosquitto_publish_v5(sim->device_client, NULL, topic, (int)strlen(fence), fence, 1, false, NULL) !=
                MOSQ_ERR_SUCCESS) {
                return false;
            }
        }
        bool back = false;
        for (int wait = 0; wait < 6000 && !back; wait++) {
            pthread_mutex_lock(&sim->mutex);
            back = sim->fences_answered >= answered + (uint64_t)sim->fence_count;
            pthread_mutex_unlock(&sim->mutex);
            if (!back) {
                sleep_ms(10);
            }
        }
        if (!back) {
            return false;
        }
        pthread_mutex_lock(&sim->mutex);
        bool quiet = commands == sim->commands + sim->command_redeliveries;
        pthread_mutex_unlock(&sim->mutex);
        if (quiet) {
            return true;
        }
    }
    return false;
}

static bool start_devices(struct sim *sim)
{
    char client_id[128];
    snprintf(client_id, sizeof client_id, "%s-devices", sim->opt.prefix);
    sim->device_client = mosquitto_new(client_id, false, sim);
    if (sim->device_client == NULL) {
        return false;
    }
    mosquitto_int_option(sim->device_client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(sim->device_client, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_v5_callback_set(sim->device_client, on_device_connect);
    mosquitto_message_v5_callback_set(sim->device_client, on_device_message);
    mosquitto_reconnect_delay_set(sim->device_client, 1, 2, false);
    if (sim->tls && mosquitto_tls_set(sim->device_client, sim->opt.ca_file, NULL, NULL, NULL, NULL) != 0) {
        return false;
    }
    /* A persistent session: commands sent while the broker restarts still arrive. */
    mosquitto_property *properties = NULL;
    mosquitto_property_add_int32(&properties, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 600);
    int rc = mosquitto_connect_bind_v5(sim->device_client, sim->host, sim->port, 30, NULL, properties);
    mosquitto_property_free_all(&properties);
    if (rc != MOSQ_ERR_SUCCESS || mosquitto_loop_start(sim->device_client) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "hub-sim: the devices cannot connect: %s\n", mosquitto_strerror(rc));
        return false;
    }
    pthread_mutex_lock(&sim->mutex);
    for (long i = 0; i < sim->opt.devices; i++) {
        struct device *device = &sim->devices[i];
        device->activity = WIRE_ACTIVITY_MEDIA;
        device->report_sequence = (uint64_t)time(NULL) * 1000000ULL;
        publish_source_state(sim, device);
    }
    pthread_mutex_unlock(&sim->mutex);
    return true;
}

/* The calls scenario: a device changes between media, call and idle. */
static void change_activity(struct sim *sim)
{
    pthread_mutex_lock(&sim->mutex);
    struct device *device = &sim->devices[next_random(sim) % (unsigned)sim->opt.devices];
    static const int next[4] = {0, WIRE_ACTIVITY_MEDIA, WIRE_ACTIVITY_CALL, WIRE_ACTIVITY_MEDIA};
    if (device->activity == WIRE_ACTIVITY_CALL) {
        device->activity = next_random(sim) % 2 ? WIRE_ACTIVITY_MEDIA : WIRE_ACTIVITY_IDLE;
    } else {
        device->activity = next[device->activity];
    }
    device->paused_activity = 0;
    publish_source_state(sim, device);
    pthread_mutex_unlock(&sim->mutex);
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Requests                                                                                                      */
/* ------------------------------------------------------------------------------------------------------------ */

static enum audiohub_err submit_next(struct sim *sim, int index, bool measured);

static bool worn(enum audiohub_placement placement)
{
    return placement == AUDIOHUB_PLACEMENT_IN_EAR || placement == AUDIOHUB_PLACEMENT_ON_HEAD ||
           placement == AUDIOHUB_PLACEMENT_OVER_THE_EAR;
}

/* Commands beyond what the hub's changes justify: a change applied twice (mutex held). */
static uint64_t count_excess(struct sim *sim)
{
    static const char *const kinds[JUSTIFIED_KINDS] = {"PUT_ON", "TAKEN_OFF", "SOURCE_DISCONNECTED"};
    uint64_t excess = 0;
    for (long i = 0; i < sim->accessory_count; i++) {
        struct accessory *a = &sim->accessories[i];
        for (int kind = 0; kind < JUSTIFIED_KINDS; kind++) {
            for (int action = 1; action <= 4; action++) {
                if (a->cited[kind][action] > a->changes[kind]) {
                    excess += a->cited[kind][action] - a->changes[kind];
                    if (sim->excess_example[0] == '\0') {
                        snprintf(sim->excess_example, sizeof sim->excess_example,
                                 "%s: %" PRIu64 " commands of action %d for %" PRIu64 " %s changes", a->id,
                                 a->cited[kind][action], action, a->changes[kind], kinds[kind]);
                    }
                }
            }
        }
    }
    return excess;
}

static void completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    struct sim *sim = userdata;
    struct op *op = result->context;
    uint64_t finished = now_ns();
    pthread_mutex_lock(&sim->mutex);
    struct accessory *accessory = &sim->accessories[op->accessory];
    accessory->outstanding--;
    sim->outstanding--;
    bool ok = result->status == AUDIOHUB_ERR_SUCCESS && result->error == AUDIOHUB_KIT_NONE;
    if (sim->opt.trace) {
        fprintf(stderr, "trace: %s request %d (placement %d, sources %d %d) #%" PRIu64 ": %s\n", result->accessory_id,
                op->operation, op->effect.placement, op->effect.primary, op->effect.secondary, result->sequence,
                audiohub_kit_error_name(result->error));
    }
    if (ok) {
        if (op->operation == AUDIOHUB_OP_PLACEMENT || op->operation == AUDIOHUB_OP_UPDATE) {
            bool was_worn = worn(accessory->expected.placement);
            if (worn(op->effect.placement) != was_worn && accessory->registered) {
                accessory->changes[was_worn ? TAKEN_OFF : PUT_ON]++;
            }
            accessory->expected.placement = op->effect.placement;
        }
        if (op->operation == AUDIOHUB_OP_SOURCES || op->operation == AUDIOHUB_OP_UPDATE) {
            if ((accessory->expected.primary != op->effect.primary ||
                 accessory->expected.secondary != op->effect.secondary) && accessory->registered) {
                accessory->changes[SOURCES_CHANGED]++;
            }
            accessory->expected.primary = op->effect.primary;
            accessory->expected.secondary = op->effect.secondary;
        }
        if (op->operation == AUDIOHUB_OP_REGISTER) {
            accessory->registered = true;
        }
    }
    if (op->measured) {
        struct phase_stats *stats = &sim->stats;
        if (result->status == AUDIOHUB_ERR_SUCCESS) {
            stats->results++;
            record_latency(stats, (double)(finished - op->submitted_ns) / 1e6);
        } else {
            stats->cancelled++;
        }
        if (result->duplicate) {
            stats->duplicated++;
        }
        if (result->attempts > 1) {
            stats->retried++;
        }
        if (!ok) {
            stats->errors++;
            if (stats->first_error[0] == '\0') {
                snprintf(stats->first_error, sizeof stats->first_error, "%s on %s: %s %s (%s)",
                         result->operation == AUDIOHUB_OP_PLACEMENT ? "placement" : "request", result->accessory_id,
                         audiohub_strerror(result->status), audiohub_kit_error_name(result->error), result->message);
            }
        }
    } else if (!ok) {
        sim->setup_failures++;
        if (sim->setup_error[0] == '\0') {
            snprintf(sim->setup_error, sizeof sim->setup_error, "set-up of %s: %s %s (%s)", result->accessory_id,
                     audiohub_strerror(result->status), audiohub_kit_error_name(result->error), result->message);
        }
    }
    bool again = op->measured && sim->measuring && !sim->stopping && sim->rate == 0 &&
                 (sim->rounds == 0 || accessory->rounds_submitted < sim->rounds);
    int index = op->accessory;
    pthread_mutex_unlock(&sim->mutex);
    free(op);
    if (again) {
        submit_next(sim, index, true);
    }
}

/* The next request of the scenario for accessory `index` (mutex held); fills `op`. */
static enum audiohub_err make_request(struct sim *sim, int index, struct op *op, struct audiohub **hub)
{
    struct accessory *accessory = &sim->accessories[index];
    *hub = sim->hubs[accessory->hub];
    op->effect = accessory->expected;
    unsigned choice = next_random(sim) % 100;
    const char *scenario = sim->opt.scenario;
    bool varied = strcmp(scenario, "mixed") == 0 || strcmp(scenario, "changes") == 0;
    bool sources = strcmp(scenario, "sources") == 0 || (varied && choice < 25);
    bool update = varied && choice >= 25 && choice < 40;
    if (sources || update) {
        accessory->source_cursor = (accessory->source_cursor + 1) % (int)sim->opt.devices;
        op->effect.primary = device_choice(sim, accessory->hub, accessory->source_cursor);
        op->effect.secondary = device_choice(sim, accessory->hub, accessory->source_cursor + 1);
    }
    if (!sources) {
        accessory->next_off = !accessory->next_off;
        op->effect.placement = accessory->next_off ? AUDIOHUB_PLACEMENT_OFF_HEAD
                                                   : (choice % 2 ? AUDIOHUB_PLACEMENT_IN_EAR : AUDIOHUB_PLACEMENT_ON_HEAD);
    }
    op->operation = sources ? AUDIOHUB_OP_SOURCES : (update ? AUDIOHUB_OP_UPDATE : AUDIOHUB_OP_PLACEMENT);
    return AUDIOHUB_ERR_SUCCESS;
}

static enum audiohub_err submit_next(struct sim *sim, int index, bool measured)
{
    struct op *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    op->accessory = index;
    op->measured = measured;
    struct audiohub *hub;
    pthread_mutex_lock(&sim->mutex);
    make_request(sim, index, op, &hub);
    struct accessory *accessory = &sim->accessories[index];
    accessory->rounds_submitted++;
    accessory->outstanding++;
    sim->outstanding++;
    if (measured) {
        sim->stats.sent++;
    }
    op->submitted_ns = now_ns();
    pthread_mutex_unlock(&sim->mutex);

    enum audiohub_err rc;
    if (op->operation == AUDIOHUB_OP_PLACEMENT) {
        rc = audiohub_placement(hub, accessory->id, op->effect.placement, completed, op);
    } else {
        struct audiohub_configuration configuration = {AUDIOHUB_CAP_ALL, op->effect.placement, {0, {0}}, {0, {0}}};
        configuration.primary = sim->devices[op->effect.primary].address;
        configuration.secondary = sim->devices[op->effect.secondary].address;
        if (op->operation == AUDIOHUB_OP_SOURCES) {
            rc = audiohub_sources(hub, accessory->id, &configuration.primary, &configuration.secondary, completed, op);
        } else {
            rc = audiohub_update(hub, accessory->id, &configuration, completed, op);
        }
    }
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        pthread_mutex_lock(&sim->mutex);
        accessory->rounds_submitted--;
        accessory->outstanding--;
        sim->outstanding--;
        if (measured) {
            sim->stats.sent--;
            sim->stats.refused++;
        }
        pthread_mutex_unlock(&sim->mutex);
        free(op);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Set-up and phases                                                                                             */
/* ------------------------------------------------------------------------------------------------------------ */

static void setup_completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    struct op *op = result->context;
    op->measured = false;
    completed(hub, userdata, result);
}

static struct op *setup_op(int index)
{
    struct op *op = calloc(1, sizeof *op);
    if (op != NULL) {
        op->accessory = index;
        op->submitted_ns = now_ns();
        op->operation = AUDIOHUB_OP_PAIR;
    }
    return op;
}

static void print_progress(struct sim *sim, uint64_t started, uint64_t *last_results, uint64_t *last_ns)
{
    pthread_mutex_lock(&sim->mutex);
    uint64_t now = now_ns();
    uint64_t results = sim->stats.results;
    uint64_t sent = sim->stats.sent;
    uint64_t outstanding = sim->outstanding;
    uint64_t retried = sim->stats.retried;
    pthread_mutex_unlock(&sim->mutex);
    double interval = (double)(now - *last_ns) / 1e9;
    fprintf(stderr, "hub-sim: %5.1f s  sent %" PRIu64 "  results %" PRIu64 "  outstanding %" PRIu64
                    "  retried %" PRIu64 "  %.0f results/s\n",
            (double)(now - started) / 1e9, sent, results, outstanding, retried,
            interval > 0 ? (double)(results - *last_results) / interval : 0.0);
    *last_results = results;
    *last_ns = now;
}

/* Waits until every request completed, or `seconds`. While measuring, progress continues each second. */
static bool wait_outstanding(struct sim *sim, double seconds, const char *what)
{
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    uint64_t next_report = now_ns() + 1000000000ULL;
    uint64_t last_results = sim->stats.results;
    uint64_t last_ns = now_ns();
    for (;;) {
        pthread_mutex_lock(&sim->mutex);
        uint64_t outstanding = sim->outstanding;
        pthread_mutex_unlock(&sim->mutex);
        if (outstanding == 0) {
            return true;
        }
        uint64_t now = now_ns();
        /* A stop during the set-up ends it; during a drain, only a second one does. */
        if (now >= deadline || (stop_requested(sim) && (!sim->stopping || sim->stop_signals > 1))) {
            return false;
        }
        if (!sim->opt.quiet && now >= next_report) {
            if (sim->measuring) {
                print_progress(sim, sim->stats.started_ns, &last_results, &last_ns);
            } else {
                fprintf(stderr, "hub-sim: %s: %" PRIu64 " requests outstanding\n", what, outstanding);
            }
            next_report = now + 1000000000ULL;
        }
        sleep_ms(5);
    }
}

static bool setup(struct sim *sim)
{
    for (long i = 0; i < sim->accessory_count; i++) {
        struct accessory *accessory = &sim->accessories[i];
        struct audiohub *hub = sim->hubs[accessory->hub];
        struct expected target = {AUDIOHUB_PLACEMENT_ON_HEAD, device_choice(sim, accessory->hub, i),
                                  device_choice(sim, accessory->hub, i + 1)};
        accessory->expected = (struct expected){AUDIOHUB_PLACEMENT_NONE, -1, -1};
        accessory->source_cursor = (int)(i % sim->opt.devices);
        char name[64];
        snprintf(name, sizeof name, "Sim %ld", i);
        struct op *ops[4] = {setup_op((int)i), setup_op((int)i), setup_op((int)i), setup_op((int)i)};
        for (int k = 0; k < 4; k++) {
            if (ops[k] == NULL) {
                return false;
            }
        }
        pthread_mutex_lock(&sim->mutex);
        accessory->outstanding += 4;
        sim->outstanding += 4;
        pthread_mutex_unlock(&sim->mutex);
        ops[3]->operation = AUDIOHUB_OP_PLACEMENT;
        ops[3]->effect = target;
        ops[2]->operation = AUDIOHUB_OP_SOURCES;
        ops[2]->effect = target;
        ops[1]->operation = AUDIOHUB_OP_REGISTER;
        enum audiohub_err rc = audiohub_pair(hub, accessory->id, name, "SIM-1", AUDIOHUB_CAP_ALL, setup_completed, ops[0]);
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            rc = audiohub_register(hub, accessory->id, AUDIOHUB_CAP_ALL, setup_completed, ops[1]);
        }
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            rc = audiohub_sources(hub, accessory->id, &sim->devices[target.primary].address,
                                  &sim->devices[target.secondary].address, setup_completed, ops[2]);
        }
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            rc = audiohub_placement(hub, accessory->id, AUDIOHUB_PLACEMENT_ON_HEAD, setup_completed, ops[3]);
        }
        if (rc != AUDIOHUB_ERR_SUCCESS) {
            fprintf(stderr, "hub-sim: set-up of %s refused: %s\n", accessory->id, audiohub_strerror(rc));
            return false;
        }
    }
    if (!wait_outstanding(sim, 60 + sim->opt.drain, "set-up")) {
        fprintf(stderr, "hub-sim: set-up did not complete\n");
        return false;
    }
    if (sim->setup_failures > 0) {
        fprintf(stderr, "hub-sim: %" PRIu64 " set-up requests failed; first: %s\n", sim->setup_failures,
                sim->setup_error);
        return false;
    }
    return true;
}

/* One measured phase at `rate` (0: flood). Returns its summary. */
static struct summary run_phase(struct sim *sim, double rate)
{
    pthread_mutex_lock(&sim->mutex);
    free(sim->stats.latencies);
    memset(&sim->stats, 0, sizeof sim->stats);
    for (long i = 0; i < sim->accessory_count; i++) {
        sim->accessories[i].rounds_submitted = 0;
    }
    sim->rate = rate;
    sim->rounds = sim->opt.rounds;
    /* Commands and reports count per phase; what justifies commands (each accessory's changes) counts throughout. */
    sim->commands = 0;
    sim->repeated_commands = 0;
    sim->source_reports = 0;
    sim->stopping = false;
    sim->measuring = true;
    sim->stats.started_ns = now_ns();
    pthread_mutex_unlock(&sim->mutex);

    uint64_t started = sim->stats.started_ns;
    uint64_t end = sim->opt.seconds > 0 ? started + (uint64_t)(sim->opt.seconds * 1e9) : UINT64_MAX;
    if (rate == 0) {
        for (long i = 0; i < sim->accessory_count; i++) {
            submit_next(sim, (int)i, true);
        }
    }
    uint64_t offered = 0;
    long cursor = 0;
    uint64_t next_progress = started + 1000000000ULL;
    uint64_t last_results = 0;
    uint64_t last_ns = started;
    uint64_t next_activity = started;
    bool calls = strcmp(sim->opt.scenario, "calls") == 0 || strcmp(sim->opt.scenario, "mixed") == 0;
    for (;;) {
        uint64_t now = now_ns();
        bool rounds_done = true;
        if (sim->opt.rounds > 0) {
            pthread_mutex_lock(&sim->mutex);
            for (long i = 0; i < sim->accessory_count && rounds_done; i++) {
                rounds_done = sim->accessories[i].rounds_submitted >= sim->opt.rounds &&
                              (rate > 0 || sim->accessories[i].outstanding == 0);
            }
            pthread_mutex_unlock(&sim->mutex);
        } else {
            rounds_done = false;
        }
        if (now >= end || rounds_done || stop_requested(sim)) {
            break;
        }
        if (rate > 0) {
            uint64_t due = (uint64_t)((double)(now - started) / 1e9 * rate);
            long guard = 0;
            while (offered < due && guard < sim->accessory_count) {
                long index = cursor;
                cursor = (cursor + 1) % sim->accessory_count;
                if (sim->opt.rounds > 0 && sim->accessories[index].rounds_submitted >= sim->opt.rounds) {
                    guard++;
                    continue;
                }
                guard = 0;
                submit_next(sim, (int)index, true);
                offered++;
            }
        }
        if (calls && now >= next_activity) {
            change_activity(sim);
            /* About one activity change per accessory every 2 s, at most 200/s. */
            double per_second = (double)sim->accessory_count / 2.0;
            per_second = per_second > 200 ? 200 : (per_second < 1 ? 1 : per_second);
            next_activity = now + (uint64_t)(1e9 / per_second);
        }
        if (!sim->opt.quiet && now >= next_progress) {
            print_progress(sim, started, &last_results, &last_ns);
            next_progress += 1000000000ULL;
        }
        sleep_ms(1);
    }
    pthread_mutex_lock(&sim->mutex);
    sim->stopping = true;
    pthread_mutex_unlock(&sim->mutex);
    bool drained = wait_outstanding(sim, sim->opt.drain, "draining");
    pthread_mutex_lock(&sim->mutex);
    sim->measuring = false;
    uint64_t lost = sim->outstanding;
    sim->stats.stopped_ns = now_ns();
    struct summary summary = summarize(&sim->stats, lost, rate);
    pthread_mutex_unlock(&sim->mutex);
    if (!drained && !sim->opt.quiet) {
        fprintf(stderr, "hub-sim: %" PRIu64 " requests still without a result after %.0f s\n", lost, sim->opt.drain);
    }
    return summary;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Verification                                                                                                  */
/* ------------------------------------------------------------------------------------------------------------ */

struct verifier {
    struct sim *sim;
    pthread_mutex_t mutex;
    struct wire_state *states; /* by accessory index */
    bool *seen;
};

static long accessory_index(struct sim *sim, const char *id)
{
    /* {prefix}-h{hub}-a{accessory} */
    size_t prefix = strlen(sim->opt.prefix);
    long hub = 0;
    long index = 0;
    if (strncmp(id, sim->opt.prefix, prefix) != 0 || sscanf(id + prefix, "-h%ld-a%ld", &hub, &index) != 2 ||
        hub < 0 || hub >= sim->opt.hubs || index < 0 || index >= sim->opt.accessories) {
        return -1;
    }
    long i = hub * sim->opt.accessories + index;
    return strcmp(sim->accessories[i].id, id) == 0 ? i : -1;
}

static void on_state(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message)
{
    (void)mosq;
    struct verifier *verifier = userdata;
    struct wire_state state;
    if (!wire_unpack_state(message->payload, (size_t)message->payloadlen, &state)) {
        return;
    }
    long index = accessory_index(verifier->sim, state.accessory_id);
    if (index < 0) {
        return;
    }
    pthread_mutex_lock(&verifier->mutex);
    verifier->states[index] = state;
    verifier->seen[index] = true;
    pthread_mutex_unlock(&verifier->mutex);
}

/* Why the retained state differs from what the hub last sent, or NULL when it does not. */
static const char *mismatch(struct sim *sim, long index, const struct wire_state *state, char *why, size_t size)
{
    struct accessory *accessory = &sim->accessories[index];
    struct audiohub_accessory cached;
    if (audiohub_accessory_get(sim->hubs[accessory->hub], accessory->id, &cached, sizeof cached) != AUDIOHUB_ERR_SUCCESS) {
        snprintf(why, size, "the hub does not know it");
        return why;
    }
    const struct expected *e = &accessory->expected;
    char hub_id[AUDIOHUB_ID_MAX + 1];
    hub_name(sim, accessory->hub, hub_id, sizeof hub_id);
    const struct audiohub_address *primary = &sim->devices[e->primary].address;
    const struct audiohub_address *secondary = &sim->devices[e->secondary].address;
    if (strcmp(state->hub_id, hub_id) != 0) {
        snprintf(why, size, "hub %s, expected %s", state->hub_id, hub_id);
    } else if (state->registration != AUDIOHUB_REGISTRATION_REGISTERED) {
        snprintf(why, size, "registration %d", state->registration);
    } else if (state->hardware_capabilities != AUDIOHUB_CAP_ALL || state->capabilities != AUDIOHUB_CAP_ALL) {
        snprintf(why, size, "capabilities %u/%u", state->hardware_capabilities, state->capabilities);
    } else if ((int)state->placement != (int)e->placement) {
        snprintf(why, size, "placement %d, last sent %d", state->placement, e->placement);
    } else if (memcmp(state->primary, primary->bytes, 6) != 0 || memcmp(state->secondary, secondary->bytes, 6) != 0) {
        snprintf(why, size, "sources differ from the last sent");
    } else if (state->last_sequence != cached.last_sequence) {
        snprintf(why, size, "last sequence %" PRIu64 ", last sent %" PRIu64, state->last_sequence,
                 cached.last_sequence);
    } else if (state->last_error != AUDIOHUB_KIT_NONE) {
        snprintf(why, size, "last error %d", state->last_error);
    } else if (state->stale) {
        snprintf(why, size, "stale");
    } else {
        return NULL;
    }
    return why;
}

/* Reads the retained states and counts the accessories whose state is not what the hub last sent. Retries for up
 * to 10 s, as the bridge's last states may still be on their way. */
static long verify(struct sim *sim, char *first, size_t size)
{
    struct verifier verifier = {.sim = sim};
    pthread_mutex_init(&verifier.mutex, NULL);
    verifier.states = calloc((size_t)sim->accessory_count, sizeof *verifier.states);
    verifier.seen = calloc((size_t)sim->accessory_count, sizeof *verifier.seen);
    char client_id[128];
    snprintf(client_id, sizeof client_id, "%s-verifier-%ld", sim->opt.prefix, (long)getpid());
    struct mosquitto *reader = mosquitto_new(client_id, true, &verifier);
    long mismatches = sim->accessory_count;
    if (verifier.states == NULL || verifier.seen == NULL || reader == NULL) {
        snprintf(first, size, "out of memory");
        goto done;
    }
    mosquitto_int_option(reader, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_message_callback_set(reader, on_state);
    if (sim->tls) {
        mosquitto_tls_set(reader, sim->opt.ca_file, NULL, NULL, NULL, NULL);
    }
    if (mosquitto_connect(reader, sim->host, sim->port, 30) != MOSQ_ERR_SUCCESS ||
        mosquitto_loop_start(reader) != MOSQ_ERR_SUCCESS) {
        snprintf(first, size, "cannot connect to read the states");
        goto done;
    }
    char filter[300];
    snprintf(filter, sizeof filter, sim->opt.slots > 0 ? "%s/slots/+/accessories/+/state" : "%s/accessories/+/state",
             sim->opt.topic_root);
    mosquitto_subscribe(reader, NULL, filter, 1);
    uint64_t deadline = now_ns() + 10000000000ULL;
    for (;;) {
        sleep_ms(200);
        long count = 0;
        first[0] = '\0';
        pthread_mutex_lock(&verifier.mutex);
        for (long i = 0; i < sim->accessory_count; i++) {
            char why[200];
            const char *reason = verifier.seen[i] ? mismatch(sim, i, &verifier.states[i], why, sizeof why)
                                                  : "no retained state";
            if (reason != NULL) {
                if (count++ == 0) {
                    snprintf(first, size, "%s: %s", sim->accessories[i].id, reason);
                }
            }
        }
        /* Rule 3: a playing device is routed to one accessory at most. */
        for (long i = 0; i < sim->accessory_count; i++) {
            static const uint8_t none[6] = {0};
            if (!verifier.seen[i] || memcmp(verifier.states[i].routed, none, 6) == 0) {
                continue;
            }
            for (long j = i + 1; j < sim->accessory_count; j++) {
                if (verifier.seen[j] && memcmp(verifier.states[i].routed, verifier.states[j].routed, 6) == 0) {
                    if (count++ == 0) {
                        snprintf(first, size, "%s and %s: both routed from the same device", sim->accessories[i].id,
                                 sim->accessories[j].id);
                    }
                }
            }
        }
        pthread_mutex_unlock(&verifier.mutex);
        mismatches = count;
        if (count == 0 || now_ns() >= deadline) {
            break;
        }
    }
    mosquitto_disconnect(reader);
    mosquitto_loop_stop(reader, false);
done:
    mosquitto_destroy(reader);
    free(verifier.states);
    free(verifier.seen);
    pthread_mutex_destroy(&verifier.mutex);
    return mismatches;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Output                                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

static void print_summary(struct sim *sim, const struct summary *s, long mismatches, const char *mismatch_text)
{
    struct audiohub_stats total = {0};
    for (long h = 0; h < sim->opt.hubs; h++) {
        struct audiohub_stats stats;
        audiohub_stats_get(sim->hubs[h], &stats, sizeof stats);
        total.resends += stats.resends;
        total.connections += stats.connections;
        total.rebirths += stats.rebirths;
        total.resyncs += stats.resyncs;
        total.stray_results += stats.stray_results;
    }
    if (sim->opt.json) {
        printf("{\"hubs\":%ld,\"accessories\":%ld,\"rate\":%.1f,\"seconds\":%.3f,\"sent\":%" PRIu64
               ",\"results\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"retried\":%" PRIu64
               ",\"errors\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f"
               ",\"max_ms\":%.3f,\"throughput\":%.1f,\"resends\":%" PRIu64 ",\"connections\":%" PRIu64
               ",\"rebirths\":%" PRIu64 ",\"resyncs\":%" PRIu64 ",\"stray_results\":%" PRIu64
               ",\"commands\":%" PRIu64 ",\"excess_commands\":%" PRIu64 ",\"repeated_commands\":%" PRIu64
               ",\"source_reports\":%" PRIu64 ",\"older_epoch_commands\":%" PRIu64,
               sim->opt.hubs, sim->opt.accessories, s->offered, s->seconds, s->sent, s->results, s->lost,
               s->duplicated, s->retried, s->errors, s->refused, s->p50, s->p90, s->p99, s->max, s->throughput,
               total.resends, total.connections, total.rebirths, total.resyncs, total.stray_results, sim->commands,
               sim->excess_commands, sim->repeated_commands, sim->source_reports, sim->older_epoch_commands);
        if (mismatches >= 0) {
            printf(",\"state_mismatches\":%ld", mismatches);
        }
        printf("}\n");
    } else {
        printf("hub-sim: %ld hub%s x %ld accessories, %s, %s, %.1f s\n", sim->opt.hubs, sim->opt.hubs == 1 ? "" : "s",
               sim->opt.accessories, sim->opt.scenario, s->offered == 0 ? "flood" : "paced", s->seconds);
        if (s->offered > 0) {
            printf("  offered     %.0f requests/s\n", s->offered);
        }
        printf("  sent        %" PRIu64 "\n  results     %" PRIu64 "\n  lost        %" PRIu64 "\n", s->sent,
               s->results, s->lost);
        printf("  duplicated  %" PRIu64 " (results marked duplicate)\n  retried     %" PRIu64
               " (requests sent more than once; %" PRIu64 " resends)\n",
               s->duplicated, s->retried, total.resends);
        printf("  errors      %" PRIu64 "\n  refused     %" PRIu64 " (queue full)\n", s->errors, s->refused);
        printf("  latency     p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", s->p50, s->p90, s->p99, s->max);
        printf("  throughput  %.0f results/s\n", s->throughput);
        printf("  commands    %" PRIu64 ": %" PRIu64 " beyond the changes that justify them (a change applied twice), "
               "%" PRIu64 " equal to the one before for the same device; %" PRIu64 " device reports\n",
               sim->commands, sim->excess_commands, sim->repeated_commands, sim->source_reports);
        if (sim->older_epoch_commands > 0) {
            printf("  fenced      %" PRIu64 " commands of an older owner dropped by the devices\n",
                   sim->older_epoch_commands);
        }
        printf("  connections %" PRIu64 ", rebirths %" PRIu64 ", resyncs %" PRIu64 "\n", total.connections,
               total.rebirths, total.resyncs);
        if (mismatches >= 0) {
            printf("  states      %ld differ from what the hubs last sent%s%s\n", mismatches,
                   mismatches > 0 ? ": " : "", mismatches > 0 ? mismatch_text : "");
        }
    }
    if (s->errors > 0 && sim->stats.first_error[0] != '\0') {
        fprintf(stderr, "hub-sim: first error: %s\n", sim->stats.first_error);
    }
    if (sim->excess_commands > 0) {
        fprintf(stderr, "hub-sim: a change applied twice: %s\n", sim->excess_example);
    }
    if (sim->repeated_commands > 0 && !sim->opt.quiet) {
        fprintf(stderr, "hub-sim: %s\n", sim->repeated_example);
    }
    fflush(stdout);
}

/* Latency (log scale) against offered rate, one line per percentile. */
static bool write_svg(const char *path, const struct summary *points, int count, const struct options *opt)
{
    FILE *out = fopen(path, "w");
    if (out == NULL) {
        return false;
    }
    const double width = 760, height = 440, left = 70, right = 170, top = 40, bottom = 60;
    double max_rate = 0, max_ms = 1, min_ms = 1e9;
    for (int i = 0; i < count; i++) {
        max_rate = fmax(max_rate, points[i].offered);
        max_ms = fmax(max_ms, points[i].p99);
        min_ms = fmin(min_ms, fmax(points[i].p50, 0.01));
    }
    double low = pow(10, floor(log10(min_ms)));
    double high = pow(10, ceil(log10(max_ms)));
    if (high <= low) {
        high = low * 10;
    }
    double plot_w = width - left - right, plot_h = height - top - bottom;
#define X(rate) (left + (rate) / max_rate * plot_w)
#define Y(ms) (top + plot_h - (log10(fmax((ms), low)) - log10(low)) / (log10(high) - log10(low)) * plot_h)
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                 "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", width, height);
    fprintf(out, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">hub-sim: latency against offered rate (%ld hub%s x %ld "
                 "accessories, %s)</text>\n", left, opt->hubs, opt->hubs == 1 ? "" : "s", opt->accessories, opt->scenario);
    for (double ms = low; ms <= high * 1.001; ms *= 10) {
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, Y(ms),
                left + plot_w, Y(ms));
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g ms</text>\n", left - 6, Y(ms) + 4, ms);
    }
    for (int i = 0; i <= 5; i++) {
        double rate = max_rate * i / 5;
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(rate), top, X(rate),
                top + plot_h);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", X(rate), top + plot_h + 18,
                rate);
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">offered requests/s</text>\n", left + plot_w / 2,
            height - 15);
    fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", left,
            top, plot_w, plot_h);
    const char *colors[3] = {"#1f77b4", "#ff7f0e", "#d62728"};
    const char *names[3] = {"p50", "p90", "p99"};
    for (int line = 0; line < 3; line++) {
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[line]);
        for (int i = 0; i < count; i++) {
            double ms = line == 0 ? points[i].p50 : (line == 1 ? points[i].p90 : points[i].p99);
            fprintf(out, "%.1f,%.1f ", X(points[i].offered), Y(ms));
        }
        fprintf(out, "\"/>\n");
        for (int i = 0; i < count; i++) {
            double ms = line == 0 ? points[i].p50 : (line == 1 ? points[i].p90 : points[i].p99);
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(points[i].offered), Y(ms),
                    colors[line]);
        }
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n", left + plot_w + 12, top + 20 + line * 18.0,
                colors[line], names[line]);
    }
    for (int i = 0; i < count; i++) {
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\" font-size=\"10\">%.0f/s: %.0f done/s, %" PRIu64
                     " lost</text>\n", left + plot_w + 12, top + 90 + i * 14.0, points[i].offered,
                points[i].throughput, points[i].lost);
    }
#undef X
#undef Y
    fprintf(out, "</svg>\n");
    return fclose(out) == 0;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Main                                                                                                          */
/* ------------------------------------------------------------------------------------------------------------ */

static bool start_hubs(struct sim *sim)
{
    sim->hubs = calloc((size_t)sim->opt.hubs, sizeof *sim->hubs);
    if (sim->hubs == NULL) {
        return false;
    }
    long limit = 4 * sim->opt.accessories + 1024;
    for (long h = 0; h < sim->opt.hubs; h++) {
        char hub_id[AUDIOHUB_ID_MAX + 1];
        hub_name(sim, h, hub_id, sizeof hub_id);
        enum audiohub_err rc = audiohub_new(hub_id, sim, &sim->hubs[h]);
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_topic_root_set(sim->hubs[h], sim->opt.topic_root);
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_int_option(sim->hubs[h], AUDIOHUB_OPT_TIMEOUT_MS, sim->opt.timeout_ms);
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            rc = audiohub_int_option(sim->hubs[h], AUDIOHUB_OPT_TIMEOUT_MAX_MS, sim->opt.timeout_max_ms);
        }
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_int_option(sim->hubs[h], AUDIOHUB_OPT_QUEUE_LIMIT, limit);
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_int_option(sim->hubs[h], AUDIOHUB_OPT_RECONNECT_MAX_MS, 2000);
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_int_option(sim->hubs[h], AUDIOHUB_OPT_SLOTS, sim->opt.slots);
        if (rc == AUDIOHUB_ERR_SUCCESS && sim->opt.ca_file != NULL) {
            rc = audiohub_tls_set(sim->hubs[h], sim->opt.ca_file, NULL, NULL);
        }
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_connect(sim->hubs[h], sim->opt.broker, NULL, NULL);
        if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_loop_start(sim->hubs[h]);
        if (rc != AUDIOHUB_ERR_SUCCESS) {
            fprintf(stderr, "hub-sim: hub %s: %s\n", hub_id, audiohub_strerror(rc));
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    struct sim sim;
    memset(&sim, 0, sizeof sim);
    if (!parse_options(argc, argv, &sim.opt)) {
        return 2;
    }
    if (ah_parse_url(sim.opt.broker, &sim.host, &sim.port, &sim.tls) != AUDIOHUB_ERR_SUCCESS ||
        (sim.tls && sim.opt.ca_file == NULL)) {
        fprintf(stderr, "hub-sim: --broker must be mqtt://host[:port] or mqtts://host[:port] with --ca-file\n");
        return 2;
    }
    pthread_mutex_init(&sim.mutex, NULL);
    sim.random_state = sim.opt.seed;
    audiohub_lib_init();

    sim.accessory_count = sim.opt.hubs * sim.opt.accessories;
    sim.accessories = calloc((size_t)sim.accessory_count, sizeof *sim.accessories);
    sim.devices = calloc((size_t)sim.opt.devices, sizeof *sim.devices);
    if (sim.accessories == NULL || sim.devices == NULL) {
        fprintf(stderr, "hub-sim: out of memory\n");
        return 1;
    }
    for (long i = 0; i < sim.accessory_count; i++) {
        sim.accessories[i].hub = (int)(i / sim.opt.accessories);
        snprintf(sim.accessories[i].id, sizeof sim.accessories[i].id, "%s-h%d-a%ld", sim.opt.prefix,
                 sim.accessories[i].hub, i % sim.opt.accessories);
    }
    for (long i = 0; i < sim.opt.devices; i++) {
        struct device *device = &sim.devices[i];
        uint8_t bytes[6] = {0x5a, 0x11, 0x00, 0x00, (uint8_t)(i >> 8), (uint8_t)i};
        device->address.length = 6;
        memcpy(device->address.bytes, bytes, 6);
        snprintf(device->hex, sizeof device->hex, "5a110000%04x", (unsigned)(i & 0xffff));
    }

    /* Line by line into a file or a pipe too: a summary is there at once, and a stop keeps what was printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t stop;
    stop_signal_set(&stop);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    int status = 1;
    if (!make_fence_hubs(&sim)) {
        fprintf(stderr, "hub-sim: out of memory\n");
        goto out;
    }
    if (!start_devices(&sim) || !start_hubs(&sim)) {
        goto out;
    }
    if (!sim.opt.quiet) {
        fprintf(stderr, "hub-sim: %ld hub%s x %ld accessories, %ld devices, on %s; setting up\n", sim.opt.hubs,
                sim.opt.hubs == 1 ? "" : "s", sim.opt.accessories, sim.opt.devices, sim.opt.broker);
    }
    if (!setup(&sim)) {
        goto out;
    }

    if (sim.opt.svg != NULL) {
        struct summary points[MAX_SWEEP];
        int count = 0;
        double rates[MAX_SWEEP];
        int rate_count = sim.opt.sweep_count;
        memcpy(rates, sim.opt.sweep, sizeof rates);
        if (rate_count == 0) {
            struct summary flood = run_phase(&sim, 0);
            static const double fractions[] = {0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.2};
            for (size_t i = 0; i < sizeof fractions / sizeof fractions[0]; i++) {
                rates[rate_count++] = fmax(1, flood.throughput * fractions[i]);
            }
            if (!sim.opt.quiet) {
                fprintf(stderr, "hub-sim: flood throughput %.0f/s; sweeping %d rates\n", flood.throughput,
                        rate_count);
            }
        }
        for (int i = 0; i < rate_count; i++) {
            points[count] = run_phase(&sim, rates[i]);
            print_summary(&sim, &points[count], -1, "");
            count++;
        }
        if (!write_svg(sim.opt.svg, points, count, &sim.opt)) {
            fprintf(stderr, "hub-sim: cannot write %s\n", sim.opt.svg);
            goto out;
        }
        status = 0;
        for (int i = 0; i < count; i++) {
            if (points[i].lost > 0) {
                status = 1;
            }
        }
    } else {
        struct summary summary = run_phase(&sim, sim.opt.rate);
        long mismatches = -1;
        char mismatch_text[300] = "";
        if (sim.opt.verify) {
            mismatches = verify(&sim, mismatch_text, sizeof mismatch_text);
        }
        bool fenced = fence_commands(&sim);
        if (!fenced) {
            fprintf(stderr, "hub-sim: the bridge did not answer the devices' fence: commands may still be on their way\n");
        }
        pthread_mutex_lock(&sim.mutex);
        sim.excess_commands = count_excess(&sim);
        pthread_mutex_unlock(&sim.mutex);
        print_summary(&sim, &summary, mismatches, mismatch_text);
        status = (fenced && summary.lost == 0 && summary.errors == 0 && mismatches <= 0 && sim.excess_commands == 0)
                     ? 0 : 1;
    }

out:
    for (long h = 0; sim.hubs != NULL && h < sim.opt.hubs; h++) {
        if (sim.hubs[h] != NULL) {
            audiohub_disconnect(sim.hubs[h]);
            audiohub_loop_stop(sim.hubs[h], false);
            audiohub_destroy(sim.hubs[h]);
        }
    }
    if (sim.device_client != NULL) {
        mosquitto_disconnect(sim.device_client);
        mosquitto_loop_stop(sim.device_client, false);
        mosquitto_destroy(sim.device_client);
    }
    free(sim.host);
    free(sim.hubs);
    free(sim.fence_hubs);
    free(sim.accessories);
    free(sim.devices);
    free(sim.stats.latencies);
    audiohub_lib_cleanup();
    return status;
}
