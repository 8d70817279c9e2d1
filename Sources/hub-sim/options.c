/*
 * hub-sim's command line: the options, their defaults and their checks (usage in main.c's comment).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hub-sim [--broker mqtt://127.0.0.1:1883] [--topic-root audio] [--hubs 1] [--accessories 10]\n"
            "               [--rate 0 (flood) | N requests/s] [--seconds 10 | --rounds N] [--drain 60]\n"
            "               [--scenario mixed|placement|sources|calls] [--devices D] [--prefix sim]\n"
            "               [--timeout-ms 1000] [--timeout-max-ms 5000] [--ca-file FILE] [--seed N]\n"
            "               [--slots S|bridge (a cluster of bridges with S slots; bridge: the bridge's layout says)]\n"
            "               [--households K [--shared-devices N]]\n"
            "               [--head-tracking HZ (frames/s per accessory in a head-tracking session)]\n"
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

bool parse_options(int argc, char **argv, struct options *opt)
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
            ok = strcmp(value, "bridge") == 0 ? (opt->slots = AUDIOHUB_SLOTS_FROM_BRIDGE, true)
                                              : parse_long(value, 0, 4096, &opt->slots);
        } else if (strcmp(name, "--households") == 0) {
            ok = parse_long(value, 0, 65536, &opt->households);
        } else if (strcmp(name, "--head-tracking") == 0) {
            ok = parse_double(value, 0, &opt->head_tracking) && opt->head_tracking <= 1000;
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
