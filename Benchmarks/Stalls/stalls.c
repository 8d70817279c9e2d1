/*
 * stalls: how often this machine runs a fixed piece of work much slower than it should, while it reports no steal.
 *
 * Every --interval-ms (10), one piece of work (integer arithmetic and writes to a 128 kB buffer, sized at the start to
 * take --work-us, 100, of this thread's CPU time); its CPU time (CLOCK_THREAD_CPUTIME_ID) is compared with the median
 * of all pieces. A piece that took more than --slow (4) times the median is slow; slow pieces less than 100 ms apart
 * make one burst. Prints the pieces, the median, the share of slow pieces, the bursts, the median time between their
 * starts and their median length, and the machine's steal meanwhile (/proc/stat): on 2026-12-01 (a Firecracker VM,
 * docs/performance-history.md, twenty-fifth session) a piece took ~10x its CPU time for 50-70 ms every ~1.5 s, idle or
 * under load, with 0.0% steal, and every tail of `make bench-e2e` at 65% began with one. About 1% of one core.
 *
 * Usage: stalls [--seconds 10] [--work-us 100] [--interval-ms 10] [--slow 4] [--trace FILE] [--json]
 *   --trace FILE: a line "MONO_MS CPU_US" per piece (CLOCK_MONOTONIC, as LoadGen's --trace gives its start).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUFFER_WORDS (1u << 14)

struct options {
    double seconds;
    double work_us;
    long interval_ms;
    double slow;
    const char *trace;
    bool json;
};

/* The work: a linear congruential generator scattering writes over a buffer the caller owns. */
struct work {
    uint64_t state;
    uint64_t buffer[BUFFER_WORDS];
};

static double now_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The CPU time, in microseconds, of `iterations` steps of the work. */
static double run_piece(struct work *work, long iterations)
{
    double start = now_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t x = work->state;
    for (long i = 0; i < iterations; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        work->buffer[(x >> 20) & (BUFFER_WORDS - 1)] += x;
    }
    work->state = x;
    return (now_ns(CLOCK_THREAD_CPUTIME_ID) - start) / 1e3;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of `count` values (sorts a copy). */
static double median(const double *values, size_t count)
{
    if (count == 0) {
        return 0;
    }
    double *sorted = malloc(count * sizeof *sorted);
    if (sorted == NULL) {
        return values[0];
    }
    memcpy(sorted, values, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, compare_doubles);
    double middle = count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
    free(sorted);
    return middle;
}

/* The machine's steal ticks and all its ticks so far, from /proc/stat's first line; false when unreadable. */
static bool machine_ticks(unsigned long long *steal, unsigned long long *total)
{
    FILE *stat = fopen("/proc/stat", "r");
    if (stat == NULL) {
        return false;
    }
    unsigned long long v[8] = {0};
    int read = fscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                      &v[6], &v[7]);
    fclose(stat);
    if (read != 8) {
        return false;
    }
    *steal = v[7];
    *total = 0;
    for (int i = 0; i < 8; i++) {
        *total += v[i];
    }
    return true;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: stalls [--seconds 10] [--work-us 100] [--interval-ms 10] [--slow 4] [--trace FILE]"
                 " [--json]\n");
}

static bool parse_double(const char *text, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= min && value <= max)) {
        return false;
    }
    *out = value;
    return true;
}

/* The options (getopt_long); -1 after a message on a bad one. */
static int parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){.seconds = 10, .work_us = 100, .interval_ms = 10, .slow = 4};
    static const struct option longs[] = {
        {"seconds", required_argument, NULL, 's'},
        {"work-us", required_argument, NULL, 'w'},
        {"interval-ms", required_argument, NULL, 'i'},
        {"slow", required_argument, NULL, 'x'},
        {"trace", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    double number = 0;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 's': ok = parse_double(optarg, 1, 86400, &opt->seconds); break;
        case 'w': ok = parse_double(optarg, 1, 100000, &opt->work_us); break;
        case 'i':
            ok = parse_double(optarg, 1, 10000, &number);
            opt->interval_ms = (long)number;
            break;
        case 'x': ok = parse_double(optarg, 1.5, 1000, &opt->slow); break;
        case 't': opt->trace = optarg; break;
        case 'j': opt->json = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (!ok) {
            for (const struct option *o = longs; o->name != NULL; o++) {
                if (o->val == c) {
                    fprintf(stderr, "stalls: --%s %s: out of range\n", o->name, optarg);
                }
            }
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "stalls: %s: unexpected\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    if (parse_options(argc, argv, &opt) != 0) {
        return 2;
    }
    struct work *work = calloc(1, sizeof *work);
    size_t capacity = (size_t)(opt.seconds * 1000 / (double)opt.interval_ms) + 16;
    double *at_ms = malloc(capacity * sizeof *at_ms);
    double *cpu_us = malloc(capacity * sizeof *cpu_us);
    if (work == NULL || at_ms == NULL || cpu_us == NULL) {
        fprintf(stderr, "stalls: out of memory\n");
        return 1;
    }
    work->state = 1;

    /* Size the piece: the median CPU time of 21 runs of 10,000 steps. */
    double calibration[21];
    for (size_t i = 0; i < 21; i++) {
        calibration[i] = run_piece(work, 10000);
    }
    double per_step_us = median(calibration, 21) / 10000;
    long iterations = per_step_us > 0 ? (long)(opt.work_us / per_step_us) : 10000;

    unsigned long long steal0 = 0, total0 = 0, steal1 = 0, total1 = 0;
    bool have_ticks = machine_ticks(&steal0, &total0);
    double end = now_ns(CLOCK_MONOTONIC) + opt.seconds * 1e9;
    size_t pieces = 0;
    while (pieces < capacity && now_ns(CLOCK_MONOTONIC) < end) {
        at_ms[pieces] = now_ns(CLOCK_MONOTONIC) / 1e6;
        cpu_us[pieces] = run_piece(work, iterations);
        pieces++;
        struct timespec pause = {opt.interval_ms / 1000, (opt.interval_ms % 1000) * 1000000};
        nanosleep(&pause, NULL);
    }
    have_ticks = have_ticks && machine_ticks(&steal1, &total1);
    double steal = have_ticks && total1 > total0 ? 100.0 * (double)(steal1 - steal0) / (double)(total1 - total0) : 0;

    if (opt.trace != NULL) {
        FILE *trace = fopen(opt.trace, "w");
        if (trace == NULL) {
            fprintf(stderr, "stalls: %s: %s\n", opt.trace, strerror(errno));
            return 1;
        }
        fprintf(trace, "# MONO_MS CPU_US per piece of %ld steps\n", iterations);
        for (size_t i = 0; i < pieces; i++) {
            fprintf(trace, "%.3f %.1f\n", at_ms[i], cpu_us[i]);
        }
        fclose(trace);
    }

    /* Slow pieces, and the bursts they make. */
    double typical = median(cpu_us, pieces);
    size_t slow = 0, bursts = 0;
    double *burst_start = malloc((pieces + 1) * sizeof *burst_start);
    double *burst_length = malloc((pieces + 1) * sizeof *burst_length);
    if (burst_start == NULL || burst_length == NULL) {
        fprintf(stderr, "stalls: out of memory\n");
        return 1;
    }
    double last_slow = -1e18;
    for (size_t i = 0; i < pieces; i++) {
        if (cpu_us[i] <= opt.slow * typical) {
            continue;
        }
        slow++;
        if (at_ms[i] - last_slow > 100) {
            burst_start[bursts] = at_ms[i];
            burst_length[bursts] = 0;
            bursts++;
        }
        burst_length[bursts - 1] = at_ms[i] + cpu_us[i] / 1e3 - burst_start[bursts - 1];
        last_slow = at_ms[i];
    }
    double *gaps = malloc((bursts + 1) * sizeof *gaps);
    if (gaps == NULL) {
        fprintf(stderr, "stalls: out of memory\n");
        return 1;
    }
    for (size_t i = 1; i < bursts; i++) {
        gaps[i - 1] = burst_start[i] - burst_start[i - 1];
    }
    double gap = bursts > 1 ? median(gaps, bursts - 1) : 0;
    double length = median(burst_length, bursts);
    double share = pieces ? 100.0 * (double)slow / (double)pieces : 0;

    if (opt.json) {
        printf("{\"pieces\":%zu,\"piece_us\":%.1f,\"slow\":%zu,\"slow_percent\":%.2f,\"bursts\":%zu,"
               "\"burst_interval_ms\":%.1f,\"burst_ms\":%.1f,\"steal_percent\":%.2f}\n",
               pieces, typical, slow, share, bursts, gap, length, steal);
    } else {
        printf("%zu pieces of %ld steps, every %ld ms over %.0f s: median %.1f us of CPU each\n", pieces, iterations,
               opt.interval_ms, opt.seconds, typical);
        printf("slow (more than %.1fx the median): %zu (%.2f%%), in %zu bursts", opt.slow, slow, share, bursts);
        if (bursts > 0) {
            printf("; a burst every %.0f ms (median), %.0f ms long (median)", gap, length);
        }
        printf("\nthe machine's steal meanwhile: %.2f%%\n", steal);
    }
    free(gaps);
    free(burst_length);
    free(burst_start);
    free(cpu_us);
    free(at_ms);
    free(work);
    return 0;
}
