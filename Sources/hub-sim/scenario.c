/*
 * The scenario's requests: the next one for an accessory (placement toggles, sources, full updates), submitted to its
 * hub, and what its completion tells (the expected state, the changes that justify commands, the phase's counts).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static bool worn(enum audiohub_placement placement)
{
    return placement == AUDIOHUB_PLACEMENT_IN_EAR || placement == AUDIOHUB_PLACEMENT_ON_HEAD ||
           placement == AUDIOHUB_PLACEMENT_OVER_THE_EAR;
}

void completed(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
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
            record_latency(&stats->latencies, (double)(finished - op->submitted_ns) / 1e6);
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
    if ((sources || update) && own_devices(sim)) {
        op->effect.primary = accessory->expected.secondary;
        op->effect.secondary = accessory->expected.primary;
    } else if (sources || update) {
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

enum audiohub_err submit_next(struct sim *sim, int index, bool measured)
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
        struct audiohub_configuration configuration = {sim->capabilities, op->effect.placement, {0, {0}}, {0, {0}}};
        configuration.primary = sim->devices[op->effect.primary].address;
        configuration.secondary = sim->devices[op->effect.secondary].address;
        if (op->operation == AUDIOHUB_OP_SOURCES) {
            rc = audiohub_sources(hub, accessory->id, &configuration.primary, &configuration.secondary, completed, op);
        } else {
            /* A full update replaces the configuration: the spatial extension goes with it. */
            rc = audiohub_update_spatial(hub, accessory->id, &configuration,
                                         sim->opt.head_tracking > 0 ? &SIM_SPATIAL_EXTENSION : NULL,
                                         sizeof SIM_SPATIAL_EXTENSION, completed, op);
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
