/*
 * The measured phase's figures: latency percentiles (of the whole phase, and the median and worst of its windows'
 * p99s), throughput, CPU per result, as text or one JSON line.
 */
#include "loadgen.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
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

int write_trace(const struct loadgen *lg)
{
    if (lg->opt.trace == NULL) {
        return 0;
    }
    FILE *out = fopen(lg->opt.trace, "w");
    if (out == NULL) {
        perror(lg->opt.trace);
        return -1;
    }
    fprintf(out, "# the measured phase began at %.3f ms on CLOCK_MONOTONIC; then SENT_MS LATENCY_MS per result\n",
            (double)lg->measure_started_ns / 1e6);
    for (size_t i = 0; i < lg->results; i++) {
        int64_t sent = (int64_t)lg->sent_ns[i] - (int64_t)lg->measure_started_ns;
        fprintf(out, "%.3f %.3f\n", (double)sent / 1e6, (double)lg->latencies_ns[i] / 1e6);
    }
    if (fclose(out) != 0) {
        perror(lg->opt.trace);
        return -1;
    }
    return 0;
}

/* The p99s of the windows that lie wholly inside the measured phase (--window seconds each, by the results' arrival),
 * ascending in `p99_ms` (room for lg->windows); their count. Sorts each window's latencies in place. */
static size_t window_p99s(const struct loadgen *lg, const struct measurement *m, double *p99_ms)
{
    uint64_t length = seconds_ns(lg->opt.window);
    size_t count = 0;
    for (size_t w = 0; w < lg->windows; w++) {
        if (m->started_ns + (w + 1) * length > m->ended_ns) {
            break;
        }
        size_t first = lg->window_first[w];
        size_t end = w + 1 < lg->windows ? lg->window_first[w + 1] : lg->results;
        qsort(lg->latencies_ns + first, end - first, sizeof *lg->latencies_ns, compare_u64);
        double p99 = percentile_ms(lg->latencies_ns + first, end - first, 99);
        if (!isnan(p99)) {
            p99_ms[count++] = p99;
        }
    }
    qsort(p99_ms, count, sizeof *p99_ms, compare_double);
    return count;
}

void report(const struct loadgen *lg, const struct measurement *m, double setup_s)
{
    double *windows_p99 = malloc((lg->windows ? lg->windows : 1) * sizeof *windows_p99);
    size_t windows = windows_p99 != NULL ? window_p99s(lg, m, windows_p99) : 0;
    double window_median = windows ? windows_p99[(windows - 1) / 2] : NAN;
    double window_max = windows ? windows_p99[windows - 1] : NAN;
    free(windows_p99);
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
        printf("\"window_s\":%.3f,\"windows\":%zu,", lg->opt.window, windows);
        print_number("window_p99_median_ms", window_median, false);
        print_number("window_p99_max_ms", window_max, false);
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
        printf("p99 of each %.3g s window: median %.3f  max %.3f ms (%zu windows)\n", lg->opt.window, window_median,
               window_max, windows);
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
