/*
 * A RequestResult on the hub's response topic: the request in flight it answers, taken out of its queue (or sent
 * again, as new, when the bridge's count is ahead), the cache updated, and the request completed.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <stdlib.h>
#include <string.h>

#define MAX_RESYNCS 3

/* The bridge's answer to the request in flight of `a` (mutex held). Returns the request to complete, or NULL when
 * the answer completes nothing (a stray, or a resync sent the request again). */
static struct request *take_answer(struct audiohub *hub, struct accessory *a, const struct audiohub_result *result)
{
    struct request *request = a->head;
    if (result->epoch < a->epoch || request == NULL || request->sequence == 0 ||
        strcmp(request->request_id, result->request_id) != 0) {
        hub->stats.stray_results++;
        return NULL;
    }
    a->epoch = result->epoch;
    const struct audiohub_state *state = result->state;
    if (result->duplicate && state != NULL && state->last_sequence > request->sequence &&
        strcmp(state->hub_id, hub->hub_id) == 0 && request->resyncs < MAX_RESYNCS) {
        /* A duplicate of a sequence older than the bridge's last: this count is behind the bridge's (a clock that
         * went back, a stale restore). Continue above it and send the request again, as new. */
        request->resyncs++;
        hub->stats.resyncs++;
        a->last_sequence = state->last_sequence;
        if (ah_number_request(hub, request)) {
            request->attempts = 0;
            ah_publish_request(hub, request);
            return NULL;
        }
    }
    ah_detach_head(hub, request);
    ah_adopt_state(hub, a, state);
    if (result->error == AUDIOHUB_KIT_NONE) {
        ah_apply_to_cache(a, request);
    } else if (request->probe) {
        /* A rebirth's update refused: the bridge does not know the accessory as the hub does. Out of memory, it
         * asks for the rebirth again when the next request shows a gap. */
        (void)ah_queue_rebirth(hub, a);
    }
    if (!request->rebirth) {
        hub->stats.completed++;
    }
    ah_start_head(hub, a);
    return request;
}

void ah_handle_result(struct audiohub *hub, const struct mosquitto_message *message,
                      const mosquitto_property *properties)
{
    struct ah_decoded_result decoded;
    if (ah_decode_result(message->payload, (size_t)message->payloadlen, &decoded) != AUDIOHUB_ERR_SUCCESS) {
        return;
    }
    /* The correlation data is the request id; the payload's request_id says the same. */
    char request_id[REQUEST_ID_MAX] = "";
    void *correlation = NULL;
    uint16_t correlation_length = 0;
    if (mosquitto_property_read_binary(properties, MQTT_PROP_CORRELATION_DATA, &correlation, &correlation_length,
                                       false) != NULL &&
        correlation_length < sizeof request_id) {
        memcpy(request_id, correlation, correlation_length);
        request_id[correlation_length] = '\0';
    } else if (strlen(decoded.view.request_id) < sizeof request_id) {
        strcpy(request_id, decoded.view.request_id);
    }
    free(correlation);
    decoded.view.request_id = request_id;

    /* Request ids are "<accessory id>.<number>". */
    char accessory_id[AUDIOHUB_ID_MAX + 1] = "";
    const char *dot = strrchr(request_id, '.');
    if (dot != NULL && (size_t)(dot - request_id) <= AUDIOHUB_ID_MAX) {
        memcpy(accessory_id, request_id, (size_t)(dot - request_id));
        accessory_id[dot - request_id] = '\0';
    }

    lock(hub);
    hub->stats.results++;
    if (decoded.view.duplicate) {
        hub->stats.duplicates++;
    }
    struct accessory *a = ah_find_accessory(hub, accessory_id);
    struct request *done = NULL;
    if (a != NULL) {
        done = take_answer(hub, a, &decoded.view);
    } else {
        hub->stats.stray_results++;
    }
    unlock(hub);

    if (done != NULL) {
        ah_complete(hub, done, &decoded.view, AUDIOHUB_ERR_SUCCESS);
    }
    ah_decoded_result_free(&decoded);
}
