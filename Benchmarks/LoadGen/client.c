/*
 * The MQTT client: made with its options and callbacks, connected and subscribed to the results, and driven one
 * iteration of libmosquitto's loop at a time (pump).
 */
#include "loadgen.h"

#include <mqtt_protocol.h>

#include <errno.h>
#include <string.h>

static void on_connect(struct mosquitto *mosq, void *userdata, int reason_code, int flags,
                       const mosquitto_property *properties)
{
    (void)flags;
    (void)properties;
    struct loadgen *lg = userdata;
    if (reason_code != 0) {
        fprintf(stderr, "loadgen: connection refused: %s\n", mosquitto_reason_string(reason_code));
        lg->failed_fatally = true;
        return;
    }
    lg->connected = true;
    char filter[MAX_TOPIC];
    snprintf(filter, sizeof filter, "%s+/result", lg->result_prefix);
    int rc = mosquitto_subscribe_v5(mosq, NULL, filter, 1, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: subscribe %s: %s\n", filter, mosquitto_strerror(rc));
        lg->failed_fatally = true;
    }
}

static void on_subscribe(struct mosquitto *mosq, void *userdata, int mid, int count, const int *granted,
                         const mosquitto_property *properties)
{
    (void)mosq;
    (void)mid;
    (void)properties;
    struct loadgen *lg = userdata;
    if (count != 1 || granted[0] != 1) {
        fprintf(stderr, "loadgen: result subscription refused (%d)\n", count > 0 ? granted[0] : -1);
        lg->failed_fatally = true;
        return;
    }
    lg->subscribed = true;
}

static void on_disconnect(struct mosquitto *mosq, void *userdata, int reason_code,
                          const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct loadgen *lg = userdata;
    if (reason_code != 0) {
        fprintf(stderr, "loadgen: lost the broker: %s\n", mosquitto_strerror(reason_code));
        lg->failed_fatally = true;
    }
    lg->connected = false;
}

/* mosquitto_new and its options; NULL (after a message) on failure. */
struct mosquitto *make_client(struct loadgen *lg)
{
    struct mosquitto *mosq = mosquitto_new(lg->opt.client_id, true, lg);
    if (mosq == NULL) {
        fprintf(stderr, "loadgen: mosquitto_new: %s\n", strerror(errno));
        return NULL;
    }
    const struct {
        enum mosq_opt_t option;
        int value;
        const char *name;
    } options[] = {
        {MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5, "MOSQ_OPT_PROTOCOL_VERSION"},
        {MOSQ_OPT_TCP_NODELAY, 1, "MOSQ_OPT_TCP_NODELAY"},
        /* At most one report per accessory in flight, 3 per accessory during the set-up: never the limit. */
        {MOSQ_OPT_SEND_MAXIMUM, 65535, "MOSQ_OPT_SEND_MAXIMUM"},
        /* The results must not wait for this client's acknowledgements. */
        {MOSQ_OPT_RECEIVE_MAXIMUM, 65535, "MOSQ_OPT_RECEIVE_MAXIMUM"},
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        int rc = mosquitto_int_option(mosq, options[i].option, options[i].value);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "loadgen: %s: %s\n", options[i].name, mosquitto_strerror(rc));
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

/* One iteration of libmosquitto's loop, waiting up to timeout_ms for the socket. */
int pump(struct loadgen *lg, int timeout_ms)
{
    int rc = mosquitto_loop(lg->mosq, timeout_ms, 1);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: network loop: %s\n",
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        return -1;
    }
    return lg->failed_fatally ? -1 : 0;
}

int wait_connected(struct loadgen *lg)
{
    uint64_t deadline = now_ns() + 10 * NS_PER_S;
    while (!lg->subscribed) {
        if (now_ns() > deadline) {
            fprintf(stderr, "loadgen: no CONNACK and SUBACK within 10 s\n");
            return -1;
        }
        if (pump(lg, 100) != 0) {
            return -1;
        }
    }
    return 0;
}
