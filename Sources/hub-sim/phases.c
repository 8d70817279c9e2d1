/*
 * The set-up (pair, register, sources, placement for every accessory), a measured phase at a rate (or a flood), waiting
 * for what is outstanding with progress each second, and the signals that stop hub-sim.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The signals hub-sim takes. They are blocked in every thread (main blocks them before it starts any) and taken
 * from the main thread's loops with sigtimedwait, so that no handler and no global is needed: SIGINT or SIGTERM ends
 * the run early (then hub-sim drains, prints its summary and exits as usual), a second one ends the drain too;
 * SIGUSR1 starts the frames' measurement again (a script that measures a window of its own: scripts/
 * bench-head-tracking.sh). */
void stop_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

/* Whether a stop signal came (counting a new one, if any; taking a SIGUSR1): never blocks. */
static bool stop_requested(struct sim *sim)
{
    static const struct timespec now = {0, 0};
    sigset_t set;
    stop_signal_set(&set);
    int taken;
    while ((taken = sigtimedwait(&set, NULL, &now)) == SIGUSR1) {
        measure_head_tracking(sim);
    }
    if (taken > 0) {
        sim->stop_signals++;
        if (!sim->opt.quiet) {
            fprintf(stderr, sim->stop_signals == 1 ? "hub-sim: stopping: draining, then the summary (again to skip "
                                                     "the drain)\n"
                                                   : "hub-sim: stopping now\n");
        }
    }
    return sim->stop_signals > 0;
}

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

/* At most this many accessories are set up at once (four requests each). A bridge answers a few thousand requests a
 * second: a large fleet's all at once outlast the request timeout and go again and again (250 hubs x 40 with the
 * 1 s default: 61,598 resends, and requests given up after their last attempt, whose gaps brought rebirths). */
enum { SETUP_WINDOW = 1000 };

/* Waits until fewer than `limit` requests are outstanding; false when a stop came first. */
static bool wait_below(struct sim *sim, uint64_t limit)
{
    for (;;) {
        pthread_mutex_lock(&sim->mutex);
        uint64_t outstanding = sim->outstanding;
        pthread_mutex_unlock(&sim->mutex);
        if (outstanding < limit) {
            return true;
        }
        if (stop_requested(sim)) {
            return false;
        }
        sleep_ms(1);
    }
}

bool setup(struct sim *sim)
{
    for (long i = 0; i < sim->accessory_count; i++) {
        if (!wait_below(sim, 4 * SETUP_WINDOW)) {
            fprintf(stderr, "hub-sim: set-up stopped\n");
            return false;
        }
        struct accessory *accessory = &sim->accessories[i];
        struct audiohub *hub = sim->hubs[accessory->hub];
        long first = own_devices(sim) ? 2 * i : i;
        struct expected target = {AUDIOHUB_PLACEMENT_ON_HEAD, device_choice(sim, accessory->hub, first),
                                  device_choice(sim, accessory->hub, first + 1)};
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
        enum audiohub_err rc = audiohub_pair(hub, accessory->id, name, "SIM-1", sim->capabilities, setup_completed,
                                             ops[0]);
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            /* With --head-tracking, the spatial rendering extension too (Apple's example). */
            rc = audiohub_register_spatial(hub, accessory->id, sim->capabilities,
                                           sim->opt.head_tracking > 0 ? &SIM_SPATIAL_EXTENSION : NULL,
                                           sizeof SIM_SPATIAL_EXTENSION, setup_completed, ops[1]);
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
struct summary run_phase(struct sim *sim, double rate)
{
    pthread_mutex_lock(&sim->mutex);
    free(sim->stats.latencies.values);
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
    measure_head_tracking(sim);

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
