/*
 * A RebirthRequest: the bridge lost an accessory's state, and the hub sends it again from its cache (pair, then
 * register and update when registered), ahead of the caller's later requests.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

/* Fills the requests of a rebirth from the cache when the first (its pair) starts: pair, and register and update
 * when the accessory is registered (else they are marked with capabilities 0 and dropped when their turn comes).
 * Returns false when the cache cannot answer: the accessory was unpaired meanwhile. */
bool ah_fill_rebirth(struct request *pair)
{
    struct accessory *a = pair->accessory;
    if (!a->paired || !ah_replace_text(&pair->name, a->name) || !ah_replace_text(&pair->model, a->model)) {
        return false;
    }
    pair->capabilities = a->hardware_capabilities;
    struct request *registration = pair->next;
    struct request *update = registration->next;
    bool registered = a->registered && a->configuration.capabilities != 0;
    registration->capabilities = registered ? a->configuration.capabilities : 0;
    update->capabilities = registered ? a->configuration.capabilities : 0;
    update->placement = a->configuration.placement;
    update->primary = a->configuration.primary;
    update->secondary = a->configuration.secondary;
    registration->has_spatial_extension = update->has_spatial_extension = a->has_spatial_extension;
    registration->spatial_extension = update->spatial_extension = a->spatial_extension;
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
        if (a->rebirth_requests > 0) {
            answered = true; /* already being answered */
        } else {
            struct request *chain[3] = {ah_new_request(AUDIOHUB_OP_PAIR), ah_new_request(AUDIOHUB_OP_REGISTER),
                                        ah_new_request(AUDIOHUB_OP_UPDATE)};
            if (chain[0] != NULL && chain[1] != NULL && chain[2] != NULL) {
                ah_enqueue_rebirth(hub, a, chain);
                answered = true;
            } else {
                for (int i = 0; i < 3; i++) {
                    ah_free_request(chain[i]);
                }
            }
        }
    }
    audiohub_rebirth_cb on_rebirth = hub->on_rebirth;
    unlock(hub);
    if (on_rebirth != NULL) {
        on_rebirth(hub, hub->userdata, accessory_id, last, received, answered);
    }
}
