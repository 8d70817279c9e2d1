/*
 * What hub-sim tells: each phase's latencies and counts summarized, the summary as text or one JSON line, and the SVG
 * chart of latency against offered rate (--svg).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

void record_latency(struct latencies *latencies, double ms)
{
    if (latencies->count == latencies->capacity) {
        size_t capacity = latencies->capacity == 0 ? 4096 : latencies->capacity * 2;
        double *grown = realloc(latencies->values, capacity * sizeof *grown);
        if (grown == NULL) {
            return;
        }
        latencies->values = grown;
        latencies->capacity = capacity;
    }
    latencies->values[latencies->count++] = ms;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

void sort_latencies(double *values, size_t count)
{
    if (count > 0) {
        qsort(values, count, sizeof(double), compare_doubles);
    }
}

/* The q-quantile of sorted values (nearest rank). */
double quantile(const double *sorted, size_t count, double q)
{
    if (count == 0) {
        return 0;
    }
    size_t rank = (size_t)ceil(q * (double)count);
    return sorted[rank == 0 ? 0 : rank - 1];
}

struct summary summarize(struct phase_stats *stats, uint64_t lost, double offered)
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
    const struct latencies *latencies = &stats->latencies;
    sort_latencies(latencies->values, latencies->count);
    s.p50 = quantile(latencies->values, latencies->count, 0.50);
    s.p90 = quantile(latencies->values, latencies->count, 0.90);
    s.p99 = quantile(latencies->values, latencies->count, 0.99);
    s.max = latencies->count > 0 ? latencies->values[latencies->count - 1] : 0;
    s.seconds = (double)(stats->stopped_ns - stats->started_ns) / 1e9;
    s.throughput = s.seconds > 0 ? (double)s.results / s.seconds : 0;
    return s;
}

/* The head-tracking figures: JSON keys, or a text line (and one for --verify). */
static void print_head_tracking(const struct ht_summary *ht, bool json)
{
    if (json) {
        printf(",\"head_tracking_hz\":%.1f,\"frames_sent\":%" PRIu64 ",\"frames_rendered\":%" PRIu64
               ",\"frame_p50_ms\":%.3f,\"frame_p99_ms\":%.3f,\"frame_max_ms\":%.3f,\"frames_outside_session\":%" PRIu64
               ",\"frames_dropped\":%" PRIu64 ",\"frames_missed\":%" PRIu64 ",\"frames_refused\":%" PRIu64
               ",\"head_tracking_sessions\":%" PRIu64 ",\"head_tracking_malformed\":%" PRIu64
               ",\"sessions_on_two_hosts\":%ld,\"frames_per_s\":%.1f,\"streaming\":%ld,\"frames_late\":%" PRIu64
               ",\"routes\":%" PRIu64 ",\"routes_rendered\":%" PRIu64
               ",\"route_first_frame_p50_ms\":%.3f,\"route_first_frame_p99_ms\":%.3f"
               ",\"route_first_frame_max_ms\":%.3f",
               ht->hz, ht->sent, ht->rendered, ht->p50, ht->p99, ht->max, ht->outside, ht->dropped, ht->missed,
               ht->refused, ht->sessions, ht->malformed, ht->two_hosts, ht->per_second, ht->streaming, ht->late,
               ht->routes, ht->routes_rendered, ht->route_p50, ht->route_p99, ht->route_max);
        if (ht->left_active >= 0) {
            printf(",\"sessions_left_active\":%ld", ht->left_active);
        }
        return;
    }
    printf("  head track. %" PRIu64 " frames sent (%.0f/s per accessory in session), %" PRIu64 " rendered: p50 %.2f ms"
           "  p99 %.2f ms  max %.2f ms; %" PRIu64 " outside their session, %" PRIu64 " dropped (not the host's "
           "current session), %" PRIu64 " missed; %" PRIu64 " sessions\n",
           ht->sent, ht->hz, ht->rendered, ht->p50, ht->p99, ht->max, ht->outside, ht->dropped, ht->missed,
           ht->sessions);
    printf("  routes      %" PRIu64 " ROUTE commands while measuring, %" PRIu64 " followed by a frame at their host: "
           "p50 %.2f ms  p99 %.2f ms  max %.2f ms; %" PRIu64 " late frames of ended sessions dropped\n",
           ht->routes, ht->routes_rendered, ht->route_p50, ht->route_p99, ht->route_max, ht->late);
    if (ht->left_active >= 0) {
        printf("  sessions    %ld active on two hosts at once, %ld left active after a take-off%s%s\n", ht->two_hosts,
               ht->left_active, ht->first[0] != '\0' ? ": " : "", ht->first);
    }
}

uint64_t count_unreadable(struct sim *sim, const struct ht_summary *ht)
{
    uint64_t unreadable = ht != NULL ? ht->malformed : 0;
    for (long h = 0; sim->hubs != NULL && h < sim->opt.hubs; h++) {
        struct audiohub_stats stats;
        audiohub_stats_get(sim->hubs[h], &stats, sizeof stats);
        unreadable += stats.head_tracking_malformed;
    }
    pthread_mutex_lock(&sim->mutex);
    unreadable += sim->unreadable_commands;
    pthread_mutex_unlock(&sim->mutex);
    return unreadable;
}

void print_summary(struct sim *sim, const struct summary *s, long mismatches, const char *mismatch_text,
                   const struct ht_summary *ht)
{
    uint64_t unreadable = count_unreadable(sim, ht);
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
               ",\"source_reports\":%" PRIu64 ",\"older_epoch_commands\":%" PRIu64 ",\"unreadable\":%" PRIu64,
               sim->opt.hubs, sim->opt.accessories, s->offered, s->seconds, s->sent, s->results, s->lost,
               s->duplicated, s->retried, s->errors, s->refused, s->p50, s->p90, s->p99, s->max, s->throughput,
               total.resends, total.connections, total.rebirths, total.resyncs, total.stray_results, sim->commands,
               sim->excess_commands, sim->repeated_commands, sim->source_reports, sim->older_epoch_commands, unreadable);
        if (mismatches >= 0) {
            printf(",\"state_mismatches\":%ld", mismatches);
        }
        if (ht != NULL) {
            print_head_tracking(ht, true);
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
        if (ht != NULL) {
            print_head_tracking(ht, false);
        }
    }
    if (s->errors > 0 && sim->stats.first_error[0] != '\0') {
        fprintf(stderr, "hub-sim: first error: %s\n", sim->stats.first_error);
    }
    if (sim->excess_commands > 0) {
        fprintf(stderr, "hub-sim: a change applied twice: %s\n", sim->excess_example);
    }
    if (unreadable > 0) {
        fprintf(stderr,
                "hub-sim: %" PRIu64 " commands, head-tracking news or frames could not be read: hub-sim reads "
                "protobuf (the bridge sends each hub and device the format it speaks), so something else published "
                "JSON or a malformed message on its topics\n",
                unreadable);
    }
    if (sim->repeated_commands > 0 && !sim->opt.quiet) {
        fprintf(stderr, "hub-sim: %s\n", sim->repeated_example);
    }
    fflush(stdout);
}

/* Latency (log scale) against offered rate, one line per percentile. */
bool write_svg(const char *path, const struct summary *points, int count, const struct options *opt)
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
