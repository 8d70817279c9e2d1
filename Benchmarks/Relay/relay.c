/*
 * relay: the bare minimum the bridge must do, as a baseline for scripts/bench-e2e.sh.
 *
 * Subscribes at QoS 1 to R/hubs/+/accessories/+/telemetry and, for every telemetry message, unpacks the
 * AccessoryTelemetry (protobuf-c) and publishes three messages at QoS 1, each with the MQTT 5 content type
 * application/protobuf:
 *   - a RequestResult (request_id and sequence echoed, ERROR_CODE_NONE, the accessory's state) on
 *     R/hubs/{hub}/accessories/{accessory}/result;
 *   - that AccessoryState, retained, on R/accessories/{accessory}/state;
 *   - one SwitchCommand on R/sources/123456789abc/commands.
 * With --home-automation, also what the bridge publishes for home automation, as JSON (application/json) of the
 * bridge's shape and size: the accessory's view, retained, on R/accessories/{accessory}/view, and the command's event
 * on R/accessories/{accessory}/events. No model, no routing, no validation: every message succeeds. The MQTT session
 * is the bridge's: MQTT 5, clean start off with a session expiry, TCP_NODELAY, a send window of 100 (--send-maximum;
 * the bridge's MQTTConfiguration.maximumInflightMessages) and a receive maximum of 100.
 *
 * libmosquitto's own thread runs the network loop (mosquitto_loop_start) and the callback publishes from it, as the
 * bridge does; the main thread waits for SIGINT or SIGTERM, then disconnects.
 *
 * Usage: relay [--broker mqtt://127.0.0.1:1883] [--topic-root audio] [--client-id relay]
 *              [--send-maximum 100] [--session-expiry 86400] [--home-automation]
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include "audioaccessory/v1/source.pb-c.h"
#include "audioaccessory/v1/state.pb-c.h"
#include "audioaccessory/v1/telemetry.pb-c.h"

#include "../../Sources/CAudioHub/src/url.h"

#define MAX_ID 64           /* hub and accessory ids: 1-64 characters */
#define MAX_TOPIC 512
#define MAX_PAYLOAD 1024    /* every message the relay packs is far smaller */
#define SOURCE_HEX "123456789abc"

static const uint8_t source_address[6] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc};
static const Audioaccessory__V1__Capability all_capabilities[2] = {
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_AUDIO_SWITCHING,
    AUDIOACCESSORY__V1__CAPABILITY__CAPABILITY_PLACEMENT,
};

struct options {
    const char *broker;
    char *host; /* from broker (url.c) */
    int port;
    const char *topic_root;
    const char *client_id;
    int send_maximum;
    int receive_maximum;
    int keepalive;
    long session_expiry;
    bool home_automation;
};

/* The program's state, given to libmosquitto as userdata. Touched only by libmosquitto's thread once it runs. */
struct relay {
    struct options opt;
    size_t root_len;
    char subscription[MAX_TOPIC];
    char commands_topic[MAX_TOPIC];
    mosquitto_property *content_type;
    mosquitto_property *json_type;
    uint64_t command_sequence;
    uint64_t handled;
    uint64_t refused;
    uint64_t publish_failures;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: relay [--broker mqtt://HOST:PORT] [--topic-root R] [--client-id ID]\n"
            "             [--send-maximum N] [--session-expiry SECONDS] [--home-automation]\n"
            "Answers every R/hubs/+/accessories/+/telemetry with a result, a retained state and a command; with\n"
            "--home-automation also the accessory's view (retained) and the command's event, as the bridge's JSON.\n");
}

static bool parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        return false;
    }
    *out = value;
    return true;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .broker = "mqtt://127.0.0.1:1883", .topic_root = "audio", .client_id = "relay",
        .send_maximum = 100, .receive_maximum = 100, .keepalive = 30, .session_expiry = 86400,
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "--home-automation") == 0) {
            opt->home_automation = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "relay: %s needs a value\n", arg);
            return -1;
        }
        const char *value = argv[++i];
        long number;
        if (strcmp(arg, "--broker") == 0) {
            opt->broker = value;
        } else if (strcmp(arg, "--topic-root") == 0) {
            opt->topic_root = value;
        } else if (strcmp(arg, "--client-id") == 0) {
            opt->client_id = value;
        } else if (strcmp(arg, "--send-maximum") == 0) {
            if (!parse_long(value, 1, 65535, &number)) {
                fprintf(stderr, "relay: --send-maximum %s: expected 1...65535\n", value);
                return -1;
            }
            opt->send_maximum = (int)number;
        } else if (strcmp(arg, "--session-expiry") == 0) {
            if (!parse_long(value, 0, UINT32_MAX, &number)) {
                fprintf(stderr, "relay: --session-expiry %s: expected seconds\n", value);
                return -1;
            }
            opt->session_expiry = number;
        } else {
            fprintf(stderr, "relay: unknown option %s\n", arg);
            usage(stderr);
            return -1;
        }
    }
    bool tls = false;
    if (ah_parse_url(opt->broker, &opt->host, &opt->port, &tls) != AUDIOHUB_ERR_SUCCESS || tls) {
        fprintf(stderr, "relay: --broker %s: expected mqtt://host:port\n", opt->broker);
        return -1;
    }
    if (opt->topic_root[0] == '\0' || strpbrk(opt->topic_root, "+#") != NULL) {
        fprintf(stderr, "relay: invalid topic root '%s'\n", opt->topic_root);
        return -1;
    }
    return 0;
}

static int64_t unix_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/*
 * R/hubs/{hub}/accessories/{accessory}/telemetry -> hub and accessory, copied NUL-terminated into buffers of
 * MAX_ID + 1 bytes. False when the topic has another shape or an id is empty or too long.
 */
static bool parse_topic(const struct relay *relay, const char *topic, char *hub, char *accessory)
{
    if (strncmp(topic, relay->opt.topic_root, relay->root_len) != 0 ||
        strncmp(topic + relay->root_len, "/hubs/", 6) != 0) {
        return false;
    }
    const char *level = topic + relay->root_len + 6;
    const char *slash = strchr(level, '/');
    if (slash == NULL || slash == level || slash - level > MAX_ID) {
        return false;
    }
    memcpy(hub, level, (size_t)(slash - level));
    hub[slash - level] = '\0';
    if (strncmp(slash, "/accessories/", 13) != 0) {
        return false;
    }
    level = slash + 13;
    slash = strchr(level, '/');
    if (slash == NULL || slash == level || slash - level > MAX_ID || strcmp(slash, "/telemetry") != 0) {
        return false;
    }
    memcpy(accessory, level, (size_t)(slash - level));
    accessory[slash - level] = '\0';
    return true;
}

/* Publishes `size` bytes at QoS 1 with `properties` (the content type); `size` past MAX_PAYLOAD: too large. */
static void publish_bytes(struct mosquitto *mosq, struct relay *relay, const char *topic, const void *payload,
                          size_t size, bool retain, const mosquitto_property *properties)
{
    if (size > MAX_PAYLOAD) {
        fprintf(stderr, "relay: %s: message of %zu bytes too large\n", topic, size);
        relay->publish_failures++;
        return;
    }
    int rc = mosquitto_publish_v5(mosq, NULL, topic, (int)size, payload, 1, retain, properties);
    if (rc != MOSQ_ERR_SUCCESS) {
        if (relay->publish_failures++ < 10) {
            fprintf(stderr, "relay: publish on %s: %s\n", topic, mosquitto_strerror(rc));
        }
    }
}

static void publish(struct mosquitto *mosq, struct relay *relay, const char *topic, const ProtobufCMessage *message,
                    bool retain)
{
    uint8_t payload[MAX_PAYLOAD];
    size_t size = protobuf_c_message_get_packed_size(message);
    if (size <= sizeof payload) {
        protobuf_c_message_pack(message, payload);
    }
    publish_bytes(mosq, relay, topic, payload, size, retain, relay->content_type);
}

/* --home-automation: the accessory's view (retained) and the command's event, in the bridge's JSON. */
static void publish_home_automation(struct mosquitto *mosq, struct relay *relay, const char *hub,
                                    const char *accessory, bool worn, const Audioaccessory__V1__SwitchCommand *command)
{
    char topic[MAX_TOPIC], json[MAX_PAYLOAD];
    snprintf(topic, sizeof topic, "%s/accessories/%s/view", relay->opt.topic_root, accessory);
    int length = snprintf(json, sizeof json,
                          "{\"accessory\":\"%s\",\"automatic_switching\":\"ON\",\"diagnostics\":[],\"hub\":\"%s\","
                          "\"model\":\"relay\",\"name\":\"Relay\",\"pinned_source\":\"automatic\","
                          "\"placement\":\"%s\",\"problem\":\"OFF\",\"registration\":\"registered\","
                          "\"routed_source\":\"%s\",\"sources\":[\"12:34:56:78:9A:BC\"],\"stale\":false,"
                          "\"updated_at_unix_ms\":%" PRId64 ",\"worn\":\"%s\"}",
                          accessory, hub, worn ? "on_head" : "off_head", worn ? "12:34:56:78:9A:BC" : "none",
                          command->issued_at_unix_ms, worn ? "ON" : "OFF");
    publish_bytes(mosq, relay, topic, json, (size_t)length, true, relay->json_type);
    snprintf(topic, sizeof topic, "%s/accessories/%s/events", relay->opt.topic_root, accessory);
    length = snprintf(json, sizeof json,
                      "{\"at_unix_ms\":%" PRId64 ",\"command_id\":\"%s\",\"event_type\":\"%s\","
                      "\"reason\":\"%s\",\"sequence\":%" PRIu64 ",\"source\":\"12:34:56:78:9A:BC\"}",
                      command->issued_at_unix_ms, command->command_id, worn ? "route_to_accessory" : "pause",
                      worn ? "put_on" : "taken_off", command->sequence);
    publish_bytes(mosq, relay, topic, json, (size_t)length, false, relay->json_type);
}

static void on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *msg,
                       const mosquitto_property *properties)
{
    (void)properties;
    struct relay *relay = userdata;
    char hub[MAX_ID + 1], accessory[MAX_ID + 1];
    if (!parse_topic(relay, msg->topic, hub, accessory)) {
        relay->refused++;
        return;
    }
    Audioaccessory__V1__AccessoryTelemetry *telemetry =
        audioaccessory__v1__accessory_telemetry__unpack(NULL, (size_t)msg->payloadlen, msg->payload);
    if (telemetry == NULL) {
        relay->refused++;
        return;
    }
    relay->handled++;
    int64_t now = unix_ms();
    bool worn = telemetry->event_case == AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT &&
                telemetry->placement->placement != AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_OFF_HEAD &&
                telemetry->placement->placement != AUDIOACCESSORY__V1__PLACEMENT__PLACEMENT_UNSPECIFIED;

    Audioaccessory__V1__Configuration configuration = AUDIOACCESSORY__V1__CONFIGURATION__INIT;
    configuration.n_device_capabilities = 2;
    configuration.device_capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    if (telemetry->event_case == AUDIOACCESSORY__V1__ACCESSORY_TELEMETRY__EVENT_PLACEMENT) {
        configuration.device_placement = telemetry->placement->placement;
    }
    configuration.primary_audio_source_device_identifier =
        (ProtobufCBinaryData){.len = sizeof source_address, .data = (uint8_t *)source_address};

    Audioaccessory__V1__AccessoryState state = AUDIOACCESSORY__V1__ACCESSORY_STATE__INIT;
    state.accessory_id = accessory;
    state.hub_id = hub;
    state.registration = AUDIOACCESSORY__V1__REGISTRATION__REGISTRATION_REGISTERED;
    state.n_hardware_capabilities = 2;
    state.hardware_capabilities = (Audioaccessory__V1__Capability *)all_capabilities;
    state.configuration = &configuration;
    if (worn) {
        state.routed_source = configuration.primary_audio_source_device_identifier;
    }
    state.last_sequence = telemetry->sequence;
    state.updated_at_unix_ms = now;

    Audioaccessory__V1__RequestResult result = AUDIOACCESSORY__V1__REQUEST_RESULT__INIT;
    result.request_id = telemetry->request_id;
    result.sequence = telemetry->sequence;
    result.error = AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_NONE;
    result.state = &state;

    char command_id[64];
    uint64_t sequence = ++relay->command_sequence;
    snprintf(command_id, sizeof command_id, "relay-" SOURCE_HEX "-%" PRIu64, sequence);
    Audioaccessory__V1__SwitchCommand command = AUDIOACCESSORY__V1__SWITCH_COMMAND__INIT;
    command.command_id = command_id;
    command.sequence = sequence;
    command.accessory_id = accessory;
    command.action =
        worn ? AUDIOACCESSORY__V1__ACTION__ACTION_ROUTE_TO_ACCESSORY : AUDIOACCESSORY__V1__ACTION__ACTION_PAUSE;
    command.reason = worn ? AUDIOACCESSORY__V1__REASON__REASON_PUT_ON : AUDIOACCESSORY__V1__REASON__REASON_TAKEN_OFF;
    command.issued_at_unix_ms = now;

    char topic[MAX_TOPIC];
    snprintf(topic, sizeof topic, "%s/hubs/%s/accessories/%s/result", relay->opt.topic_root, hub, accessory);
    publish(mosq, relay, topic, &result.base, false);
    snprintf(topic, sizeof topic, "%s/accessories/%s/state", relay->opt.topic_root, accessory);
    publish(mosq, relay, topic, &state.base, true);
    publish(mosq, relay, relay->commands_topic, &command.base, false);
    if (relay->opt.home_automation) {
        publish_home_automation(mosq, relay, hub, accessory, worn, &command);
    }

    audioaccessory__v1__accessory_telemetry__free_unpacked(telemetry, NULL);
}

static void on_connect(struct mosquitto *mosq, void *userdata, int reason_code, int flags,
                       const mosquitto_property *properties)
{
    (void)flags;
    (void)properties;
    struct relay *relay = userdata;
    if (reason_code != 0) {
        fprintf(stderr, "relay: connection refused: %s\n", mosquitto_reason_string(reason_code));
        return;
    }
    /* Again on every connection: harmless when the broker kept the session. */
    int rc = mosquitto_subscribe_v5(mosq, NULL, relay->subscription, 1, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: subscribe %s: %s\n", relay->subscription, mosquitto_strerror(rc));
    }
}

static void on_subscribe(struct mosquitto *mosq, void *userdata, int mid, int count, const int *granted,
                         const mosquitto_property *properties)
{
    (void)mosq;
    (void)mid;
    (void)properties;
    struct relay *relay = userdata;
    if (count != 1 || granted[0] != 1) {
        fprintf(stderr, "relay: subscription %s refused (%d)\n", relay->subscription, count > 0 ? granted[0] : -1);
        return;
    }
    fprintf(stderr, "relay: relaying %s\n", relay->subscription);
}

static void on_disconnect(struct mosquitto *mosq, void *userdata, int reason_code,
                          const mosquitto_property *properties)
{
    (void)mosq;
    (void)userdata;
    (void)properties;
    if (reason_code != 0) {
        fprintf(stderr, "relay: lost the broker (%s); reconnecting\n", mosquitto_strerror(reason_code));
    }
}

/* mosquitto_new and its options; NULL (after a message) on failure. */
static struct mosquitto *make_client(struct relay *relay)
{
    struct mosquitto *mosq = mosquitto_new(relay->opt.client_id, false, relay);
    if (mosq == NULL) {
        fprintf(stderr, "relay: mosquitto_new: %s\n", strerror(errno));
        return NULL;
    }
    const struct {
        enum mosq_opt_t option;
        int value;
        const char *name;
    } options[] = {
        {MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5, "MOSQ_OPT_PROTOCOL_VERSION"},
        {MOSQ_OPT_TCP_NODELAY, 1, "MOSQ_OPT_TCP_NODELAY"},
        {MOSQ_OPT_SEND_MAXIMUM, relay->opt.send_maximum, "MOSQ_OPT_SEND_MAXIMUM"},
        {MOSQ_OPT_RECEIVE_MAXIMUM, relay->opt.receive_maximum, "MOSQ_OPT_RECEIVE_MAXIMUM"},
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        int rc = mosquitto_int_option(mosq, options[i].option, options[i].value);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "relay: %s: %s\n", options[i].name, mosquitto_strerror(rc));
            mosquitto_destroy(mosq);
            return NULL;
        }
    }
    mosquitto_connect_v5_callback_set(mosq, on_connect);
    mosquitto_subscribe_v5_callback_set(mosq, on_subscribe);
    mosquitto_message_v5_callback_set(mosq, on_message);
    mosquitto_disconnect_v5_callback_set(mosq, on_disconnect);
    return mosq;
}

static int run(struct relay *relay)
{
    int status = 1;
    mosquitto_property *connect_properties = NULL;
    struct mosquitto *mosq = make_client(relay);
    if (mosq == NULL) {
        return 1;
    }
    int rc = mosquitto_property_add_int32(&connect_properties, MQTT_PROP_SESSION_EXPIRY_INTERVAL,
                                          (uint32_t)relay->opt.session_expiry);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: session expiry property: %s\n", mosquitto_strerror(rc));
        goto out;
    }
    rc = mosquitto_connect_bind_v5(mosq, relay->opt.host, relay->opt.port, relay->opt.keepalive, NULL,
                                   connect_properties);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: connect to %s:%d: %s\n", relay->opt.host, relay->opt.port,
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        goto out;
    }

    /* SIGINT and SIGTERM are blocked in every thread (libmosquitto's inherits the mask) and taken by sigwait. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    rc = pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    if (rc != 0) {
        fprintf(stderr, "relay: pthread_sigmask: %s\n", strerror(rc));
        goto out;
    }
    rc = mosquitto_loop_start(mosq);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: mosquitto_loop_start: %s\n", mosquitto_strerror(rc));
        goto out;
    }
    int signal_number;
    rc = sigwait(&stop_signals, &signal_number);
    if (rc != 0) {
        fprintf(stderr, "relay: sigwait: %s\n", strerror(rc));
    }
    /* Normal disconnection (reason 0): the loop thread sends DISCONNECT and ends. */
    rc = mosquitto_disconnect_v5(mosq, MQTT_RC_NORMAL_DISCONNECTION, NULL);
    if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN) {
        fprintf(stderr, "relay: disconnect: %s\n", mosquitto_strerror(rc));
    }
    rc = mosquitto_loop_stop(mosq, false);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: mosquitto_loop_stop: %s\n", mosquitto_strerror(rc));
        goto out;
    }
    fprintf(stderr, "relay: stopped; %" PRIu64 " telemetry messages relayed, %" PRIu64 " refused, %" PRIu64
                    " publish failures\n",
            relay->handled, relay->refused, relay->publish_failures);
    status = relay->publish_failures == 0 ? 0 : 1;
out:
    mosquitto_property_free_all(&connect_properties);
    mosquitto_destroy(mosq);
    return status;
}

int main(int argc, char **argv)
{
    struct relay relay = {0};
    if (parse_options(argc, argv, &relay.opt) != 0) {
        return 2;
    }
    relay.root_len = strlen(relay.opt.topic_root);
    if (snprintf(relay.subscription, sizeof relay.subscription, "%s/hubs/+/accessories/+/telemetry",
                 relay.opt.topic_root) >= (int)sizeof relay.subscription ||
        snprintf(relay.commands_topic, sizeof relay.commands_topic, "%s/sources/" SOURCE_HEX "/commands",
                 relay.opt.topic_root) >= (int)sizeof relay.commands_topic) {
        fprintf(stderr, "relay: topic root too long\n");
        return 2;
    }
    int rc = mosquitto_lib_init();
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: mosquitto_lib_init: %s\n", mosquitto_strerror(rc));
        return 1;
    }
    rc = mosquitto_property_add_string(&relay.content_type, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_property_add_string(&relay.json_type, MQTT_PROP_CONTENT_TYPE, "application/json");
    }
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "relay: content type property: %s\n", mosquitto_strerror(rc));
        mosquitto_property_free_all(&relay.content_type);
        mosquitto_lib_cleanup();
        return 1;
    }
    int status = run(&relay);
    mosquitto_property_free_all(&relay.content_type);
    mosquitto_property_free_all(&relay.json_type);
    mosquitto_lib_cleanup();
    free(relay.opt.host);
    return status;
}
