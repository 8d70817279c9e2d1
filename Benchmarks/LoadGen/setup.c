/*
 * Before the measured phase: the ready check (the probe, until the other side answers) and the set-up of every
 * accessory (Paired, Register, Sources; the source's retained state), not timed.
 */
#include "loadgen.h"

#include <inttypes.h>

/* Set-up requests unanswered at most at once. */
#define SETUP_WINDOW 3000

static const Audioaccessory__V1__Capability all_capabilities[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT,
};

/* Unpaired, unsequenced, for "probe", every 200 ms until a result for it arrives. */
int wait_ready(struct loadgen *lg)
{
    char topic[MAX_TOPIC];
    snprintf(topic, sizeof topic, "%s" PROBE_ID "/telemetry", lg->result_prefix);
    Audioaccessory__V1__Unpaired unpaired = AUDIOACCESSORY__V1__UNPAIRED__INIT;
    uint64_t deadline = now_ns() + seconds_ns(lg->opt.ready_timeout);
    uint64_t next_probe = 0;
    lg->phase = PHASE_PROBING;
    lg->probe_answered = false;
    while (!lg->probe_answered) {
        uint64_t now = now_ns();
        if (now > deadline) {
            fprintf(stderr, "loadgen: nothing answered on %s within %.0f s\n", topic, lg->opt.ready_timeout);
            return -1;
        }
        if (now >= next_probe) {
            Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
            telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_UNPAIRED;
            telemetry.unpaired = &unpaired;
            if (publish_telemetry(lg, topic, &telemetry) != 0) {
                return -1;
            }
            next_probe = now + NS_PER_S / 5;
        }
        if (pump(lg, 50) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Paired, Register and Sources for every accessory, then the source's retained state; waits for every result. */
int set_up(struct loadgen *lg)
{
    Audioaccessory__V1__Paired paired = AUDIOACCESSORY__V1__PAIRED__INIT;
    paired.name = "Load";
    paired.model = "LG-1";
    paired.n_hardware_capabilities = 2;
    paired.hardware_capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    Audioaccessory__V1__Register register_ = AUDIOACCESSORY__V1__REGISTER__INIT;
    register_.n_capabilities = 2;
    register_.capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    Audioaccessory__V1__SourcesReport sources = AUDIOACCESSORY__V1__SOURCES_REPORT__INIT;
    uint8_t own_address[sizeof lg->opt.source] = {0x02};
    sources.primary = (ProtobufCBinaryData){
        .len = sizeof lg->opt.source,
        .data = lg->opt.own_sources ? own_address : lg->opt.source,
    };

    lg->phase = PHASE_SETUP;
    lg->setup_pending = 3 * (uint64_t)lg->opt.accessories;
    for (long i = 0; i < lg->opt.accessories; i++) {
        struct accessory *accessory = &lg->accessories[i];
        /* At most SETUP_WINDOW set-up requests unanswered, like a hub that waits for its answers: a burst of 300,000
         * is more than a bridge queues for a slow broker, and answers it refuses are not sent again here. */
        uint64_t sent = 3 * (uint64_t)i;
        while (sent - (3 * (uint64_t)lg->opt.accessories - lg->setup_pending) > SETUP_WINDOW) {
            if (pump(lg, 10) != 0) {
                return -1;
            }
        }
        for (int byte = 5; byte >= 2; byte--) {
            own_address[byte] = (uint8_t)((unsigned long)i >> (8 * (5 - byte)));
        }
        for (uint64_t sequence = 1; sequence <= 3; sequence++) {
            Audioaccessory__V1__AccessoryTelemetry telemetry = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__INIT;
            telemetry.sequence = sequence;
            switch (sequence) {
            case 1:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PAIRED;
                telemetry.paired = &paired;
                break;
            case 2:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_REGISTER;
                telemetry.register_ = &register_;
                break;
            default:
                telemetry.event_case = AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_SOURCES;
                telemetry.sources = &sources;
                break;
            }
            if (publish_telemetry(lg, accessory_topic(lg, (size_t)i), &telemetry) != 0) {
                return -1;
            }
        }
        accessory->sequence = 3;
        accessory->answered = 3;
        /* Keep the socket moving: read results while the set-up goes out. */
        if (i % 256 == 255 && pump(lg, 0) != 0) {
            return -1;
        }
    }
    char topic[MAX_TOPIC];
    snprintf(topic, sizeof topic, "%s/sources/%s/state",
             lg->opt.source_root != NULL ? lg->opt.source_root : lg->opt.topic_root, lg->opt.source_hex);
    Audioaccessory__V1__SourceState source = AUDIOACCESSORY__V1__SOURCE_STATE__INIT;
    source.activity = AUDIOACCESSORY__V1__ACTIVITY__ACTIVITY_MEDIA;
    if (!lg->opt.own_sources && publish_message(lg, topic, &source.base, true) != 0) {
        return -1;
    }
    uint64_t deadline = now_ns() + seconds_ns(lg->opt.setup_timeout);
    while (lg->setup_pending > 0) {
        if (now_ns() > deadline) {
            fprintf(stderr, "loadgen: %" PRIu64 " set-up results missing after %.0f s\n", lg->setup_pending,
                    lg->opt.setup_timeout);
            return -1;
        }
        if (pump(lg, 100) != 0) {
            return -1;
        }
    }
    if (lg->setup_failed > 0) {
        fprintf(stderr, "loadgen: %" PRIu64 " set-up requests failed; first: %s\n", lg->setup_failed,
                lg->first_failure);
        return -1;
    }
    uint64_t settled = now_ns() + seconds_ns(lg->opt.settle);
    while (now_ns() < settled) {
        if (pump(lg, 10) != 0) {
            return -1;
        }
    }
    return wait_ready(lg);
}
