/*
 * The cache, what succeeded for each accessory (so that the hub can answer a rebirth), and the caller's copies of
 * it and of the counters (audiohub_accessory_get, audiohub_stats_get).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a successful request changes in the cache. */
void ah_apply_to_cache(struct accessory *a, const struct request *request)
{
    switch (request->operation) {
    case AUDIOHUB_OP_PAIR:
        if (ah_replace_text(&a->name, request->name) && ah_replace_text(&a->model, request->model)) {
            a->paired = true;
        }
        a->birth_sequence = request->sequence;
        a->hardware_capabilities = request->capabilities;
        /* Paired again while registered: the registration is invalidated until the next register. */
        a->registered = false;
        break;
    case AUDIOHUB_OP_UNPAIR:
        a->paired = false;
        a->registered = false;
        free(a->name);
        free(a->model);
        a->name = NULL;
        a->model = NULL;
        a->hardware_capabilities = 0;
        memset(&a->configuration, 0, sizeof a->configuration);
        a->has_spatial_extension = false;
        break;
    case AUDIOHUB_OP_REGISTER:
        a->registered = true;
        a->birth_sequence = request->sequence;
        a->configuration.capabilities = request->capabilities;
        a->has_spatial_extension = request->has_spatial_extension;
        a->spatial_extension = request->spatial_extension;
        if (!(request->capabilities & AUDIOHUB_CAP_PLACEMENT)) {
            a->configuration.placement = AUDIOHUB_PLACEMENT_NONE;
        }
        break;
    case AUDIOHUB_OP_UPDATE:
        a->configuration.capabilities = request->capabilities;
        a->configuration.placement = request->placement;
        a->configuration.primary = request->primary;
        a->configuration.secondary = request->secondary;
        a->has_spatial_extension = request->has_spatial_extension;
        a->spatial_extension = request->spatial_extension;
        break;
    case AUDIOHUB_OP_PLACEMENT:
        a->configuration.placement = request->placement;
        break;
    case AUDIOHUB_OP_SOURCES:
        a->configuration.primary = request->primary;
        a->configuration.secondary = request->secondary;
        break;
    }
}

/* A hub that restarted knows nothing of an accessory it paired before: it takes the bridge's view from the first
 * result about it, so that it can answer a rebirth. */
void ah_adopt_state(struct audiohub *hub, struct accessory *a, const struct audiohub_state *state)
{
    if (a->paired || state == NULL || strcmp(state->hub_id, hub->hub_id) != 0 ||
        strcmp(state->accessory_id, a->entry.id) != 0) {
        return;
    }
    if (state->registration != AUDIOHUB_REGISTRATION_PAIRED &&
        state->registration != AUDIOHUB_REGISTRATION_REGISTERED &&
        state->registration != AUDIOHUB_REGISTRATION_INVALIDATED) {
        return;
    }
    if (!ah_replace_text(&a->name, state->name) || !ah_replace_text(&a->model, state->model)) {
        return;
    }
    a->paired = true;
    a->registered = state->registration == AUDIOHUB_REGISTRATION_REGISTERED;
    a->hardware_capabilities = state->hardware_capabilities;
    a->configuration = state->configuration;
    a->has_spatial_extension = state->has_spatial_extension;
    a->spatial_extension = state->spatial_extension;
}

/* Copies `full` (the library's struct, `full_size` bytes) into the caller's `out` of `size` bytes: the fields both
 * know, then zeros for those only the caller's header has. */
void ah_copy_sized(void *out, size_t size, const void *full, size_t full_size)
{
    memcpy(out, full, size < full_size ? size : full_size);
    if (size > full_size) {
        memset((char *)out + full_size, 0, size - full_size);
    }
}

enum audiohub_err audiohub_accessory_get(struct audiohub *hub, const char *accessory_id,
                                         struct audiohub_accessory *out, size_t size)
{
    if (hub == NULL || out == NULL || size < AUDIOHUB_ACCESSORY_MIN_SIZE) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (!ah_valid_id(accessory_id)) {
        return AUDIOHUB_ERR_ACCESSORY_ID;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_NOT_FOUND;
    struct audiohub_accessory view;
    memset(&view, 0, sizeof view);
    lock(hub);
    struct accessory *a = ah_find_accessory(hub, accessory_id);
    if (a != NULL) {
        strcpy(view.accessory_id, a->entry.id);
        view.paired = a->paired;
        view.registered = a->registered;
        snprintf(view.name, sizeof view.name, "%s", a->name != NULL ? a->name : "");
        snprintf(view.model, sizeof view.model, "%s", a->model != NULL ? a->model : "");
        view.hardware_capabilities = a->hardware_capabilities;
        view.configuration = a->configuration;
        view.last_sequence = a->sequence_known ? a->last_sequence : 0;
        view.queued = a->queued;
        view.has_spatial_extension = a->has_spatial_extension;
        view.spatial_extension = a->spatial_extension;
        rc = AUDIOHUB_ERR_SUCCESS;
    }
    unlock(hub);
    if (rc == AUDIOHUB_ERR_SUCCESS) {
        ah_copy_sized(out, size, &view, sizeof view);
    }
    return rc;
}

enum audiohub_err audiohub_stats_get(struct audiohub *hub, struct audiohub_stats *out, size_t size)
{
    if (hub == NULL || out == NULL || size < AUDIOHUB_STATS_MIN_SIZE) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    struct audiohub_stats stats = hub->stats;
    unlock(hub);
    ah_copy_sized(out, size, &stats, sizeof stats);
    return AUDIOHUB_ERR_SUCCESS;
}
