/*
 * The measured phase's figures: latency percentiles, throughput, CPU per result, as text or one JSON line.
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

void report(const struct loadgen *lg, const struct measurement *m, double setup_s)
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
