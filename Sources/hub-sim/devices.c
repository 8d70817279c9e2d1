/*
 * The playing devices: one MQTT connection (a persistent session) for all of them, each retaining its SourceState and
 * answering the bridge's commands as a real device would; the activity changes of the calls scenario; and the fence
 * that tells when no command is still on its way to them.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <mqtt_protocol.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The device an accessory of `hub` lists at position `n` of its choices: any device, or its household's (and, one
 * position in three, one of the devices all households share). */
int device_choice(const struct sim *sim, long hub, long n)
{
    if (sim->opt.households == 0) {
        return (int)(n % sim->opt.devices);
    }
    long shared = sim->opt.shared_devices;
    long own = sim->opt.devices - shared;
    if (shared > 0 && n % 3 == 2) {
        return (int)(own + (n / 3 + hub) % shared);
    }
    long household = hub % sim->opt.households;
    long count = (own - household + sim->opt.households - 1) / sim->opt.households;
    return (int)(household + sim->opt.households * (n % count));
}

bool own_devices(const struct sim *sim)
{
    return sim->opt.households == 0 && sim->opt.devices >= 2 * sim->accessory_count;
}

static void publish_source_state(struct sim *sim, struct device *device)
{
    uint8_t payload[128];
    device->report_sequence++;
    /* With --head-tracking, every device hosts sessions: the person's Head Tracking setting is on. */
    int head_tracking = sim->opt.head_tracking > 0 ? WIRE_HEAD_TRACKING_ON : WIRE_HEAD_TRACKING_UNSPECIFIED;
    size_t length = wire_pack_source_state(device->report_sequence, device->activity, device->routed,
                                           device->last_command_epoch, device->last_command_sequence, head_tracking,
                                           payload, sizeof payload);
    char topic[300];
    snprintf(topic, sizeof topic, "%s/sources/%s/state", sim->opt.topic_root, device->hex);
    mosquitto_property *properties = NULL;
    mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    mosquitto_publish_v5(sim->device_client, NULL, topic, (int)length, payload, 1, true, properties);
    mosquitto_property_free_all(&properties);
    sim->source_reports++;
    if (sim->opt.trace) {
        fprintf(stderr, "trace: %s reports activity %d, routed to \"%s\"\n", device->hex, device->activity,
                device->routed);
    }
}

static struct device *device_for_topic(struct sim *sim, const char *topic)
{
    /* R/sources/{hex}/commands */
    size_t root = strlen(sim->opt.topic_root);
    if (strncmp(topic, sim->opt.topic_root, root) != 0 || strncmp(topic + root, "/sources/", 9) != 0) {
        return NULL;
    }
    const char *hex = topic + root + 9;
    if (strlen(hex) != 12 + 9 || strcmp(hex + 12, "/commands") != 0) {
        return NULL;
    }
    unsigned index = 0;
    if (sscanf(hex + 8, "%4x", &index) != 1 || index >= (unsigned)sim->opt.devices ||
        strncmp(sim->devices[index].hex, hex, 12) != 0) {
        return NULL;
    }
    return &sim->devices[index];
}

/* The devices' fence number `index`: a hub id of its own (of slot `index` in a cluster) and an accessory never paired,
 * so that the bridge (the slot's owner) answers invalidRequest. */
static void fence_topic(struct sim *sim, long index, const char *kind, char *topic, size_t size)
{
    if (sim->slots > 0) {
        snprintf(topic, size, "%s/slots/%ld/hubs/%s/accessories/fence/%s", sim->opt.topic_root, index,
                 sim->fence_hubs[index], kind);
    } else {
        snprintf(topic, size, "%s/hubs/%s/accessories/fence/%s", sim->opt.topic_root, sim->fence_hubs[index], kind);
    }
}

/* A fence hub per slot: "{prefix}-fence-{n}" for the first n that falls in each slot. */
bool make_fence_hubs(struct sim *sim)
{
    sim->fence_count = sim->slots > 0 ? sim->slots : 1;
    sim->fence_hubs = calloc((size_t)sim->fence_count, sizeof *sim->fence_hubs);
    if (sim->fence_hubs == NULL) {
        return false;
    }
    if (sim->slots == 0) {
        snprintf(sim->fence_hubs[0], sizeof sim->fence_hubs[0], "%s-fence", sim->opt.prefix);
        return true;
    }
    long found = 0;
    for (long n = 0; found < sim->fence_count && n < 1000000; n++) {
        char id[AUDIOHUB_ID_MAX + 1];
        snprintf(id, sizeof id, "%s-fence-%ld", sim->opt.prefix, n);
        long slot = audiohub_slot(id, sim->slots);
        if (sim->fence_hubs[slot][0] == '\0') {
            snprintf(sim->fence_hubs[slot], sizeof sim->fence_hubs[slot], "%s", id);
            found++;
        }
    }
    return found == sim->fence_count;
}

/* Whether `topic` is the result topic of one of the devices' fences. */
static bool is_fence_result(struct sim *sim, const char *topic)
{
    size_t length = strlen(topic);
    static const char suffix[] = "/accessories/fence/result";
    if (length < sizeof suffix || strcmp(topic + length - (sizeof suffix - 1), suffix) != 0) {
        return false;
    }
    for (long i = 0; i < sim->fence_count; i++) {
        char fence[400];
        fence_topic(sim, i, "result", fence, sizeof fence);
        if (strcmp(topic, fence) == 0) {
            return true;
        }
    }
    return false;
}

static void on_device_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message,
                              const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct sim *sim = userdata;
    if (host_message(sim, message)) {
        return; /* head-tracking news or a frame (head_tracking.c) */
    }
    if (is_fence_result(sim, message->topic)) {
        pthread_mutex_lock(&sim->mutex);
        sim->fences_answered++;
        pthread_mutex_unlock(&sim->mutex);
        return;
    }
    struct wire_command command;
    if (!wire_unpack_command(message->payload, (size_t)message->payloadlen, &command)) {
        /* Counted on a device's command topic only: what else reaches here is a session's news or a frame that the
         * hosts did not take (it came before they started, after an earlier run on the same bridge), not a command. */
        pthread_mutex_lock(&sim->mutex);
        if (device_for_topic(sim, message->topic) != NULL) {
            sim->unreadable_commands++;
        }
        pthread_mutex_unlock(&sim->mutex);
        return;
    }
    pthread_mutex_lock(&sim->mutex);
    struct device *device = device_for_topic(sim, message->topic);
    if (device != NULL) {
        if (sim->opt.trace) {
            fprintf(stderr, "trace: %s got action %d reason %d for %s (epoch %" PRIu64 ", sequence %" PRIu64 ")\n",
                    device->hex, command.action, command.reason, command.accessory_id, command.epoch, command.sequence);
        }
        /* Applied only when its (epoch, sequence) is above the last applied one's: a redelivery, or a command of an
         * owner that lost its slot since (a smaller epoch), is not. */
        bool older_epoch = command.epoch < device->last_command_epoch;
        if (older_epoch || (command.epoch == device->last_command_epoch &&
                            command.sequence <= device->last_command_sequence)) {
            sim->command_redeliveries++;
            if (older_epoch) {
                sim->older_epoch_commands++;
            }
        } else {
            uint64_t previous_epoch = device->last_command_epoch;
            uint64_t previous_sequence = device->last_command_sequence;
            device->last_command_epoch = command.epoch;
            device->last_command_sequence = command.sequence;
            sim->commands++;
            if (command.action == device->last_action && strcmp(command.accessory_id, device->last_accessory) == 0) {
                sim->repeated_commands++;
                if (sim->repeated_example[0] == '\0') {
                    /* Both commands' (epoch, sequence): a new owner's (a takeover, a shared device claimed back) or
                     * the same one's. */
                    snprintf(sim->repeated_example, sizeof sim->repeated_example,
                             "device %s got action %d for %s twice in a row (reasons %d then %d, (epoch, sequence) "
                             "(%" PRIu64 ", %" PRIu64 ") then (%" PRIu64 ", %" PRIu64 "))",
                             device->hex, command.action, command.accessory_id, device->last_reason, command.reason,
                             previous_epoch, previous_sequence, command.epoch, command.sequence);
                }
            }
            device->last_action = command.action;
            device->last_reason = command.reason;
            long index = accessory_index(sim, command.accessory_id);
            int kind = command.reason == WIRE_REASON_PUT_ON     ? PUT_ON
                       : command.reason == WIRE_REASON_TAKEN_OFF ? TAKEN_OFF
                       : command.reason == WIRE_REASON_SOURCE_DISCONNECTED ? SOURCES_CHANGED
                                                                            : -1;
            if (index >= 0 && kind >= 0 && command.action >= 1 && command.action <= 4) {
                sim->accessories[index].cited[kind][command.action]++;
            }
            snprintf(device->last_accessory, sizeof device->last_accessory, "%s", command.accessory_id);
            switch (command.action) {
            case WIRE_ACTION_ROUTE:
                snprintf(device->routed, sizeof device->routed, "%s", command.accessory_id);
                host_routed(sim, device, command.accessory_id);
                break;
            case WIRE_ACTION_PAUSE:
                if (device->activity != WIRE_ACTIVITY_IDLE) {
                    device->paused_activity = device->activity;
                }
                device->activity = WIRE_ACTIVITY_IDLE;
                device->routed[0] = '\0';
                break;
            case WIRE_ACTION_RESUME:
                if (device->paused_activity != 0) {
                    device->activity = device->paused_activity;
                    device->paused_activity = 0;
                }
                break;
            case WIRE_ACTION_RELEASE:
                device->routed[0] = '\0';
                break;
            default:
                break;
            }
            publish_source_state(sim, device);
        }
    }
    pthread_mutex_unlock(&sim->mutex);
}

static void on_device_connect(struct mosquitto *mosq, void *userdata, int rc, int flags,
                              const mosquitto_property *properties)
{
    (void)flags;
    (void)properties;
    struct sim *sim = userdata;
    if (rc == 0) {
        char filter[300];
        snprintf(filter, sizeof filter, "%s/sources/+/commands", sim->opt.topic_root);
        mosquitto_subscribe_v5(mosq, NULL, filter, 1, 0, NULL);
        for (long i = 0; i < sim->fence_count; i++) {
            char fence[400];
            fence_topic(sim, i, "result", fence, sizeof fence);
            mosquitto_subscribe_v5(mosq, NULL, fence, 1, 0, NULL);
        }
        if (sim->opt.head_tracking > 0) {
            subscribe_hosts(sim, mosq);
        }
    }
}

/* Waits until no command is still on its way to the devices, so that counting them (count_excess) misses none. The
 * devices' connection sends the fence, a request the bridge answers on that same connection's subscriptions: the bridge
 * handles what reaches it in order and publishes through one connection, so the answer comes behind every command it
 * published for what came before, the hubs' requests (all answered by now) and the devices' reports alike. In a
 * cluster, each slot is such a bridge: a fence goes to every slot. Commands that arrive meanwhile make devices report
 * again, which may bring more: the fences go again until a round brings no command. False when a fence is not
 * answered. */
bool fence_commands(struct sim *sim)
{
    static const char fence[] = "{\"placement\": {\"placement\": \"PLACEMENT_ON_HEAD\"}}";
    for (int round = 0; round < 20; round++) {
        pthread_mutex_lock(&sim->mutex);
        uint64_t commands = sim->commands + sim->command_redeliveries;
        uint64_t answered = sim->fences_answered;
        pthread_mutex_unlock(&sim->mutex);
        for (long i = 0; i < sim->fence_count; i++) {
            char topic[400];
            fence_topic(sim, i, "telemetry", topic, sizeof topic);
            int rc = mosquitto_publish_v5(sim->device_client, NULL, topic, (int)strlen(fence), fence, 1, false, NULL);
            /* While the broker is away (a restart the run ended in), libmosquitto keeps a QoS 1 message for the
             * devices' next connection and says MOSQ_ERR_NO_CONN: its answer comes once they are back, within the
             * wait below. Failing at once made a fence sent during a restart look unanswered. */
            if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN) {
                return false;
            }
        }
        bool back = false;
        for (int wait = 0; wait < 6000 && !back; wait++) {
            pthread_mutex_lock(&sim->mutex);
            back = sim->fences_answered >= answered + (uint64_t)sim->fence_count;
            pthread_mutex_unlock(&sim->mutex);
            if (!back) {
                sleep_ms(10);
            }
        }
        if (!back) {
            return false;
        }
        pthread_mutex_lock(&sim->mutex);
        bool quiet = commands == sim->commands + sim->command_redeliveries;
        pthread_mutex_unlock(&sim->mutex);
        if (quiet) {
            return true;
        }
    }
    return false;
}

bool start_devices(struct sim *sim)
{
    char client_id[128];
    snprintf(client_id, sizeof client_id, "%s-devices", sim->opt.prefix);
    sim->device_client = mosquitto_new(client_id, false, sim);
    if (sim->device_client == NULL) {
        return false;
    }
    mosquitto_int_option(sim->device_client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(sim->device_client, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_v5_callback_set(sim->device_client, on_device_connect);
    mosquitto_message_v5_callback_set(sim->device_client, on_device_message);
    mosquitto_reconnect_delay_set(sim->device_client, 1, 2, false);
    if (sim->tls && mosquitto_tls_set(sim->device_client, sim->opt.ca_file, NULL, NULL, NULL, NULL) != 0) {
        return false;
    }
    /* A persistent session: commands sent while the broker restarts still arrive. */
    mosquitto_property *properties = NULL;
    mosquitto_property_add_int32(&properties, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 600);
    int rc = mosquitto_connect_bind_v5(sim->device_client, sim->host, sim->port, 30, NULL, properties);
    mosquitto_property_free_all(&properties);
    if (rc != MOSQ_ERR_SUCCESS || mosquitto_loop_start(sim->device_client) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "hub-sim: the devices cannot connect: %s\n", mosquitto_strerror(rc));
        return false;
    }
    pthread_mutex_lock(&sim->mutex);
    for (long i = 0; i < sim->opt.devices; i++) {
        struct device *device = &sim->devices[i];
        device->activity = WIRE_ACTIVITY_MEDIA;
        device->report_sequence = (uint64_t)time(NULL) * 1000000ULL;
        publish_source_state(sim, device);
    }
    pthread_mutex_unlock(&sim->mutex);
    return true;
}

/* The calls scenario: a device changes between media, call and idle. */
void change_activity(struct sim *sim)
{
    pthread_mutex_lock(&sim->mutex);
    struct device *device = &sim->devices[next_random(sim) % (unsigned)sim->opt.devices];
    static const int next[4] = {0, WIRE_ACTIVITY_MEDIA, WIRE_ACTIVITY_CALL, WIRE_ACTIVITY_MEDIA};
    if (device->activity == WIRE_ACTIVITY_CALL) {
        device->activity = next_random(sim) % 2 ? WIRE_ACTIVITY_MEDIA : WIRE_ACTIVITY_IDLE;
    } else {
        device->activity = next[device->activity];
    }
    device->paused_activity = 0;
    publish_source_state(sim, device);
    pthread_mutex_unlock(&sim->mutex);
}
