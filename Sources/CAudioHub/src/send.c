/*
 * Sending: the request at the head of an accessory's queue numbered (its sequence and request id), packed and
 * published, with its next deadline; every request again on a new connection.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAYLOAD_MAX (2 * AUDIOHUB_TEXT_MAX + 2 * AUDIOHUB_ID_MAX + 128)

static int64_t attempt_timeout_ms(const struct audiohub *hub, unsigned attempts)
{
    int64_t timeout = hub->timeout_ms;
    for (unsigned i = 1; i < attempts && timeout < hub->timeout_max_ms; i++) {
        timeout *= 2;
    }
    return timeout < hub->timeout_max_ms ? timeout : hub->timeout_max_ms;
}

/* Hands the request's PUBLISH to libmosquitto and sets its next deadline. */
void ah_publish_request(struct audiohub *hub, struct request *request)
{
    char topic[TOPIC_MAX];
    snprintf(topic, sizeof topic, "%s/hubs/%s/accessories/%s/telemetry", hub->hub_root, hub->hub_id,
             request->accessory->entry.id);
    mosquitto_property *properties = NULL;
    int rc = mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, CONTENT_TYPE);
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_property_add_string(&properties, MQTT_PROP_RESPONSE_TOPIC, hub->response_topic);
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_property_add_binary(&properties, MQTT_PROP_CORRELATION_DATA, request->request_id,
                                           (uint16_t)strlen(request->request_id));
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_publish_v5(hub->mosq, NULL, topic, (int)request->payload_length, request->payload, 1, false,
                                  properties);
    }
    mosquitto_property_free_all(&properties);
    request->attempts++;
    if (request->attempts > 1) {
        hub->stats.resends++;
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        hub->stats.publishes++;
    } else {
        /* Not sent (the connection is going, or memory ran out): the deadline or the next connection resends it. */
        hub->last_mosquitto_error = rc;
    }
    if (!ah_deadlines_reschedule(&hub->deadlines, &request->timer,
                                 ah_monotonic_ms() + attempt_timeout_ms(hub, request->attempts))) {
        /* Out of memory: it stays in flight, resent on the next connection. */
    }
}

/* The next sequence of `a`: see audiohub_sequence_callbacks_set. */
static uint64_t next_sequence(struct audiohub *hub, struct accessory *a)
{
    if (!a->sequence_known) {
        uint64_t loaded = 0;
        if (hub->load_sequence != NULL && hub->load_sequence(hub, hub->userdata, a->entry.id, &loaded)) {
            a->last_sequence = loaded;
        } else {
            int64_t now = ah_wall_ms();
            a->last_sequence = now > 1 ? (uint64_t)now - 1 : 0;
        }
        a->sequence_known = true;
    }
    if (a->last_sequence == UINT64_MAX) {
        a->last_sequence = 0; /* 0 is unsequenced; a birth would restart the count anyway */
    }
    uint64_t sequence = ++a->last_sequence;
    if (hub->save_sequence != NULL) {
        hub->save_sequence(hub, hub->userdata, a->entry.id, sequence);
    }
    return sequence;
}

/* Gives `request` a (new) sequence and request id, and packs it. On failure (out of memory) the request is left as
 * it was; the sequence it took is skipped, which at worst makes the bridge ask for a rebirth. */
bool ah_number_request(struct audiohub *hub, struct request *request)
{
    struct accessory *a = request->accessory;
    uint64_t sequence = next_sequence(hub, a);
    char request_id[REQUEST_ID_MAX];
    snprintf(request_id, sizeof request_id, "%s.%" PRIu64, a->entry.id, ++hub->request_number);

    struct audiohub_internal_telemetry telemetry;
    memset(&telemetry, 0, sizeof telemetry);
    telemetry.sequence = sequence;
    telemetry.request_id = request_id;
    telemetry.accessory_id = a->entry.id;
    telemetry.operation = request->operation;
    telemetry.name = request->name;
    telemetry.model = request->model;
    telemetry.capabilities_count = audiohub_internal_capability_values(request->capabilities, telemetry.capabilities);
    telemetry.placement = request->placement;
    telemetry.primary = request->primary;
    telemetry.secondary = request->secondary;
    telemetry.has_spatial_extension = request->has_spatial_extension;
    const struct audiohub_spatial_extension *spatial = &request->spatial_extension;
    telemetry.spatial_extension[0] = spatial->component_type;
    telemetry.spatial_extension[1] = spatial->component_sub_type;
    telemetry.spatial_extension[2] = spatial->component_manufacturer;
    telemetry.spatial_extension[3] = spatial->component_flags;
    telemetry.spatial_extension[4] = spatial->component_flags_mask;

    uint8_t buffer[PAYLOAD_MAX];
    size_t length = audiohub_internal_pack_telemetry(&telemetry, buffer, sizeof buffer);
    uint8_t *payload = length > 0 ? malloc(length) : NULL;
    if (payload == NULL) {
        return false;
    }
    memcpy(payload, buffer, length);
    free(request->payload);
    request->payload = payload;
    request->payload_length = length;
    request->sequence = sequence;
    memcpy(request->request_id, request_id, sizeof request_id);
    return true;
}

/* Starts the head of `a`'s queue if it is not in flight yet (only while connected). A rebirth request with nothing
 * to say is dropped; a request that cannot be packed (out of memory) waits for the next connection. */
void ah_start_head(struct audiohub *hub, struct accessory *a)
{
    while (a->head != NULL && a->head->sequence == 0 && hub->connection == CONN_READY) {
        struct request *request = a->head;
        if (request->rebirth) {
            bool wanted = request->operation == AUDIOHUB_OP_PAIR ? ah_fill_rebirth(request)
                          : request->probe                    ? ah_fill_probe(request)
                                                              : request->capabilities != 0;
            if (!wanted || !ah_number_request(hub, request)) {
                if (!wanted && request->operation == AUDIOHUB_OP_PAIR) {
                    /* The whole rebirth goes: its register and update follow. */
                    for (int i = 0; i < 2 && request->next != NULL && request->next->rebirth; i++) {
                        request->next->capabilities = 0;
                    }
                }
                ah_detach_head(hub, request);
                ah_free_request(request);
                continue;
            }
        } else if (!ah_number_request(hub, request)) {
            return;
        }
        ah_publish_request(hub, request);
    }
}

/* Sends again every request in flight and starts every waiting one: a new connection. */
void ah_send_everything(struct audiohub *hub)
{
    size_t bucket = 0;
    for (struct ah_entry *e = ah_table_next(&hub->accessories, &bucket, NULL); e != NULL;
         e = ah_table_next(&hub->accessories, &bucket, e)) {
        struct accessory *a = (struct accessory *)e; /* the entry is an accessory's first member */
        if (a->head == NULL) {
            continue;
        }
        if (a->head->sequence != 0) {
            ah_publish_request(hub, a->head);
        } else {
            ah_start_head(hub, a);
        }
    }
}
