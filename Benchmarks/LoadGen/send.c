/*
 * What loadgen publishes: a protobuf message, a telemetry with its request id, the next placement report of an idle
 * accessory; and the ring of the idle accessories.
 */
#include "loadgen.h"

#include <inttypes.h>

#define MAX_PAYLOAD 256

const char *accessory_topic(const struct loadgen *lg, size_t index)
{
    return lg->topics + index * MAX_TOPIC;
}

int publish_message(struct loadgen *lg, const char *topic, const ProtobufCMessage *message, bool retain)
{
    uint8_t payload[MAX_PAYLOAD];
    size_t size = protobuf_c_message_get_packed_size(message);
    if (size > sizeof payload) {
        fprintf(stderr, "loadgen: %s: message of %zu bytes too large\n", topic, size);
        return -1;
    }
    protobuf_c_message_pack(message, payload);
    int rc = mosquitto_publish_v5(lg->mosq, NULL, topic, (int)size, payload, 1, retain, lg->content_type);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: publish on %s: %s\n", topic, mosquitto_strerror(rc));
        return -1;
    }
    return 0;
}

int publish_telemetry(struct loadgen *lg, const char *topic, Audioaccessory__V1__AccessoryTelemetry *telemetry)
{
    char request_id[24];
    snprintf(request_id, sizeof request_id, "%" PRIu64, ++lg->request_number);
    telemetry->request_id = request_id;
    return publish_message(lg, topic, &telemetry->base, false);
}

/* The next placement report of an idle accessory. */
int send_report(struct loadgen *lg, uint32_t index)
{
    struct accessory *accessory = &lg->accessories[index];
    Audioaccessory__V1__PlacementReport placement = AUDIOACCESSORY__V1__PLACEMENT_REPORT__INIT;
    placement.placement = accessory->next_off ? AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OFF_HEAD
                                              : AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_ON_HEAD;
    Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
    telemetry.sequence = accessory->sequence + 1;
    telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT;
    telemetry.placement = &placement;
    accessory->sent_at_ns = now_ns();
    if (publish_telemetry(lg, accessory_topic(lg, index), &telemetry) != 0) {
        return -1;
    }
    accessory->sequence++;
    accessory->outstanding = accessory->sequence;
    accessory->next_off = !accessory->next_off;
    lg->sent++;
    lg->outstanding++;
    return 0;
}

void push_idle(struct loadgen *lg, uint32_t index)
{
    lg->idle[(lg->idle_head + lg->idle_count) % (size_t)lg->opt.accessories] = index;
    lg->idle_count++;
}

uint32_t pop_idle(struct loadgen *lg)
{
    uint32_t index = lg->idle[lg->idle_head];
    lg->idle_head = (lg->idle_head + 1) % (size_t)lg->opt.accessories;
    lg->idle_count--;
    return index;
}
