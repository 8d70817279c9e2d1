/*
 * loadgen's command line: the options, their defaults and their checks (usage in main.c's comment).
 */
#include "loadgen.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loadgen [--broker mqtt://HOST:PORT] [--topic-root R] [--hub ID] [--accessories A]\n"
            "               [--rate N (0: flood)] [--seconds S] [--reports N] [--drain S] [--settle S]\n"
            "               [--setup-timeout S] [--client-id ID] [--json] [--own-sources | --source HEX12]\n"
            "               [--server-pid PID]\n"
            "               [--broker-pid PID] [--source-root R]\n"
            "               [--ready-file PATH] [--accessory-prefix P] [--window S]\n"
            "               [--trace FILE]\n");
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

int parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .broker = "mqtt://127.0.0.1:1883", .topic_root = "audio", .hub = "load-hub", .accessories = 1000,
        .accessory_prefix = "acc",
        .rate = 0, .seconds = 10, .reports = 0, .drain = 5, .settle = 1, .ready_timeout = 30, .setup_timeout = 60,
        .window = 1,
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
        } else if (strcmp(arg, "--window") == 0) {
            ok = parse_double(value, 0.01, &opt->window);
        } else if (strcmp(arg, "--trace") == 0) {
            opt->trace = value;
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
