/*
 * hub-sim: H hubs x A accessories on the C hub SDK (audiohub.h), with the playing devices they listen to, against
 * a broker and a bridge. It measures what the SDK promises end to end: every request completes exactly once, none
 * is lost, and how long each takes.
 *
 * 1. Each hub is an audiohub handle with its own loop thread (audiohub_loop_start; with --head-tracking its streamer
 *    runs the loop instead, head_tracking.c). Set-up (not measured): every accessory is paired (audio switching and
 *    placement), registered with both, given two sources and put on, at most 1,000 accessories at once (phases.c).
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
 *    root, the devices' fence goes to every slot, and the states are read under every slot. --slots bridge: the hubs
 *    read the count from the bridge's layout and follow it (AUDIOHUB_SLOTS_FROM_BRIDGE); the fence and --verify take
 *    the count the first hub read.
 * --households K groups the hubs into K households (routing domains: hub h is "{prefix}-home{h mod K}--hub-{h}") and
 *    the devices with them: an accessory lists only its household's devices, which its household's other hubs share.
 *    Without it, every accessory may list any device.
 * --shared-devices N (with --households) keeps the last N devices out of the households: every household's accessories
 *    list them too (one choice in three), so that in a cluster they are listed by accessories of several slots, which
 *    arbitrate them through etcd (docs/scale-out.md, "Shared devices").
 * --head-tracking HZ registers every accessory with audio spatialization (its extension: Apple's example) and head
 *    tracking, hardware and registration, and makes the devices hosts (their Head Tracking setting on): each hub streams
 *    a synthetic head-tracker report HZ times a second for every accessory in session, the hosts render the frames of
 *    their current sessions only and measure their latency (head_tracking.c); --verify also fails on a frame rendered
 *    outside its session, a session active on two hosts at once, or one left active after its accessory was taken off.
 *    SIGUSR1 starts the frames' measurement (their latencies and rate) again, for a script's own window.
 * --devices D: with at least two devices per accessory (and no households), each accessory has two of its own, and a
 *    sources change swaps them: every accessory can be routed at once (a head-tracking stream from every one).
 * --svg FILE sweeps offered rates (--sweep R1,R2,... or fractions of a first flood's throughput) and draws latency
 * against offered rate.
 *
 * Live progress goes to stderr each second; the summary to stdout, as text or (--json) one JSON line.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

unsigned next_random(struct sim *sim)
{
    sim->random_state = sim->random_state * 1103515245u + 12345u;
    return (sim->random_state >> 16) & 0x7fff;
}

/* Hub h's id: "{prefix}-hub-{h}", or with households "{prefix}-home{k}--hub-{h}" (routing domain "{prefix}-home{k}"). */
void hub_name(const struct sim *sim, long hub, char *out, size_t size)
{
    if (sim->opt.households > 0) {
        snprintf(out, size, "%s-home%ld--hub-%ld", sim->opt.prefix, hub % sim->opt.households, hub);
    } else {
        snprintf(out, size, "%s-hub-%ld", sim->opt.prefix, hub);
    }
}

/* --slots bridge: the slot count the first hub read from the bridge's layout, for the devices' fence and --verify
 * (within 30 s; the hubs follow the layout on their own). */
static bool learn_slots(struct sim *sim)
{
    for (int i = 0; i < 3000; i++) {
        long slots = audiohub_slots(sim->hubs[0]);
        if (slots >= 0) {
            sim->slots = slots;
            if (!sim->opt.quiet) {
                fprintf(stderr, "hub-sim: the bridge's layout: %ld slots\n", slots);
            }
            return true;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "hub-sim: no bridge's layout under %s/bridge/layout within 30 s: is a bridge running there?\n",
            sim->opt.topic_root);
    return false;
}

/* Starts hubs `from` to `to` (exclusive), each with its loop thread. */
static bool start_hubs(struct sim *sim, long from, long to)
{
    if (sim->hubs == NULL) {
        sim->hubs = calloc((size_t)sim->opt.hubs, sizeof *sim->hubs);
    }
    if (sim->hubs == NULL) {
        return false;
    }
    long limit = 4 * sim->opt.accessories + 1024;
    for (long h = from; h < to; h++) {
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
    sim.capabilities = AUDIOHUB_CAP_AUDIO_SWITCHING | AUDIOHUB_CAP_PLACEMENT;
    if (sim.opt.head_tracking > 0) {
        sim.capabilities |= AUDIOHUB_CAP_AUDIO_SPATIALIZATION | AUDIOHUB_CAP_HEAD_TRACKING;
    }
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
    /* --slots bridge: the first hub reads the layout before the devices start, which need the count for the fence.
     * The others start after the devices, as without it: the devices' connection keeps a low descriptor (libmosquitto's
     * own loop thread waits in select(), which takes none past FD_SETSIZE). */
    long first = 0;
    sim.slots = sim.opt.slots;
    if (sim.opt.slots == AUDIOHUB_SLOTS_FROM_BRIDGE) {
        if (!start_hubs(&sim, 0, 1) || !learn_slots(&sim)) {
            goto out;
        }
        first = 1;
    }
    if (!make_fence_hubs(&sim)) {
        fprintf(stderr, "hub-sim: out of memory\n");
        goto out;
    }
    if (!start_devices(&sim) || !start_hubs(&sim, first, sim.opt.hubs) ||
        (sim.opt.head_tracking > 0 && !start_head_tracking(&sim))) {
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
            print_summary(&sim, &points[count], -1, "", NULL);
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
        /* Head tracking: verified after the fence (the hosts' last news came before its answer), then summarized. */
        long violations = sim.ht != NULL && sim.opt.verify ? verify_head_tracking(&sim) : 0;
        struct ht_summary head_tracking;
        stop_head_tracking(&sim, &head_tracking);
        print_summary(&sim, &summary, mismatches, mismatch_text, sim.ht != NULL ? &head_tracking : NULL);
        status = (fenced && summary.lost == 0 && summary.errors == 0 && mismatches <= 0 && sim.excess_commands == 0 &&
                  violations == 0 && count_unreadable(&sim, sim.ht != NULL ? &head_tracking : NULL) == 0)
                     ? 0 : 1;
    }

out:
    stop_head_tracking(&sim, NULL); /* no frame may be sent once the hubs go */
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
    free_head_tracking(&sim);
    free(sim.host);
    free(sim.hubs);
    free(sim.fence_hubs);
    free(sim.accessories);
    free(sim.devices);
    free(sim.stats.latencies.values);
    audiohub_lib_cleanup();
    return status;
}
