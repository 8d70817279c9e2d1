/*
 * A RebirthRequest: the bridge missed some of an accessory's telemetry, and the hub sends it again from its cache,
 * ahead of the caller's later requests: the configuration alone (an update) when the bridge had taken its pairing and
 * registration before the gap, else pair, then register and update when registered. A move's rebirth
 * (handle_layout.c) asks with the update first too (a reshard moved the state, so the new root knows the accessory).
 * A pair of a registered accessory invalidates its registration: its route is released, then routed again. An update
 * that is refused brings the whole rebirth.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

/* Fills the requests of a rebirth from the cache when the first (its pair) starts: pair, and register and update
 * when the accessory is registered (else they are marked with capabilities 0 and dropped when their turn comes).
 * Returns false when the cache cannot answer: the accessory was unpaired meanwhile. */
static bool registered(const struct accessory *a)
{
    return a->paired && a->registered && a->configuration.capabilities != 0;
}

/* The cache's configuration into `update` (capabilities 0 when the accessory is not registered: dropped). */
static void fill_update(struct request *update, const struct accessory *a)
{
    update->capabilities = registered(a) ? a->configuration.capabilities : 0;
    update->placement = a->configuration.placement;
    update->primary = a->configuration.primary;
    update->secondary = a->configuration.secondary;
    update->has_spatial_extension = a->has_spatial_extension;
    update->spatial_extension = a->spatial_extension;
}

bool ah_fill_rebirth(struct request *pair)
{
    struct accessory *a = pair->accessory;
    if (!a->paired || !ah_replace_text(&pair->name, a->name) || !ah_replace_text(&pair->model, a->model)) {
        return false;
    }
    pair->capabilities = a->hardware_capabilities;
    struct request *registration = pair->next;
    registration->capabilities = registered(a) ? a->configuration.capabilities : 0;
    registration->has_spatial_extension = a->has_spatial_extension;
    registration->spatial_extension = a->spatial_extension;
    fill_update(registration->next, a);
    return true;
}

bool ah_fill_probe(struct request *update)
{
    fill_update(update, update->accessory);
    return update->capabilities != 0;
}

bool ah_queue_rebirth(struct audiohub *hub, struct accessory *a)
{
    struct request *chain[3] = {ah_new_request(AUDIOHUB_OP_PAIR), ah_new_request(AUDIOHUB_OP_REGISTER),
                                ah_new_request(AUDIOHUB_OP_UPDATE)};
    if (chain[0] == NULL || chain[1] == NULL || chain[2] == NULL) {
        for (int i = 0; i < 3; i++) {
            ah_free_request(chain[i]);
        }
        return false;
    }
    ah_enqueue_rebirth(hub, a, chain, 3);
    return true;
}

bool ah_queue_probe(struct audiohub *hub, struct accessory *a)
{
    if (!registered(a)) {
        return ah_queue_rebirth(hub, a);
    }
    struct request *probe = ah_new_request(AUDIOHUB_OP_UPDATE);
    if (probe == NULL) {
        return false;
    }
    probe->probe = true;
    ah_enqueue_rebirth(hub, a, &probe, 1);
    return true;
}

void ah_handle_rebirth(struct audiohub *hub, const struct mosquitto_message *message)
{
    char accessory_id[AUDIOHUB_ID_MAX + 1];
    uint64_t last = 0;
    uint64_t received = 0;
    if (ah_decode_rebirth(message->payload, (size_t)message->payloadlen, accessory_id, &last, &received) !=
        AUDIOHUB_ERR_SUCCESS) {
        return;
    }
    lock(hub);
    hub->stats.rebirths++;
    struct accessory *a = ah_find_accessory(hub, accessory_id);
    bool answered = false;
    if (a != NULL && a->paired) {
        /* A rebirth already queued answers it (a probe too: refused, the whole rebirth follows). The bridge applied
         * `last` before the gap: past the pair and register, it missed updates only. */
        answered = a->rebirth_requests > 0 ||
                   (last >= a->birth_sequence ? ah_queue_probe(hub, a) : ah_queue_rebirth(hub, a));
    }
    audiohub_rebirth_cb on_rebirth = hub->on_rebirth;
    unlock(hub);
    if (on_rebirth != NULL) {
        on_rebirth(hub, hub->userdata, accessory_id, last, received, answered);
    }
}
