/*
 * The handle: audiohub_new and audiohub_destroy, its topics, and the library's set-up. See include/audiohub.h, and
 * hub_private.h for the units the hub is made of.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *duplicate_text(const char *text)
{
    size_t length = strlen(text) + 1;
    char *copy = malloc(length);
    if (copy != NULL) {
        memcpy(copy, text, length);
    }
    return copy;
}

bool ah_replace_text(char **slot, const char *text)
{
    char *copy = duplicate_text(text != NULL ? text : "");
    if (copy == NULL) {
        return false;
    }
    free(*slot);
    *slot = copy;
    return true;
}

static bool is_lowercase_hex12(const char *id)
{
    if (strlen(id) != 12) {
        return false;
    }
    for (const char *c = id; *c != '\0'; c++) {
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) {
            return false;
        }
    }
    return true;
}

enum audiohub_err audiohub_lib_init(void)
{
    return mosquitto_lib_init() == MOSQ_ERR_SUCCESS ? AUDIOHUB_ERR_SUCCESS : AUDIOHUB_ERR_MOSQUITTO;
}

enum audiohub_err audiohub_lib_cleanup(void)
{
    mosquitto_lib_cleanup();
    return AUDIOHUB_ERR_SUCCESS;
}

long audiohub_slot(const char *hub_id, long slots)
{
    if (hub_id == NULL || slots < 1 || slots > 4096) {
        return -1;
    }
    /* The routing domain: the id up to its first "--", or all of it. */
    const char *end = strstr(hub_id, "--");
    if (end == NULL) {
        end = hub_id + strlen(hub_id);
    }
    uint64_t hash = 0xcbf29ce484222325ULL; /* FNV-1a, 64 bits */
    for (const unsigned char *byte = (const unsigned char *)hub_id; byte < (const unsigned char *)end; byte++) {
        hash ^= *byte;
        hash *= 0x100000001b3ULL;
    }
    return (long)(hash % (uint64_t)slots);
}

long audiohub_slots(struct audiohub *hub)
{
    if (hub == NULL) {
        return -1;
    }
    lock(hub);
    long slots = hub->follow_layout && !hub->layout_known ? -1 : hub->slots;
    unlock(hub);
    return slots;
}

void ah_root_of(const struct audiohub *hub, long slots, char *out, size_t size)
{
    if (slots > 0) {
        snprintf(out, size, "%s/slots/%ld", hub->topic_root, audiohub_slot(hub->hub_id, slots));
    } else {
        snprintf(out, size, "%s", hub->topic_root);
    }
}

/* The hub's topics, under its root: the topic root, or in a cluster its slot's (mutex held or not yet shared). */
static void set_topics(struct audiohub *hub, const char *token)
{
    ah_root_of(hub, hub->slots, hub->hub_root, sizeof hub->hub_root);
    snprintf(hub->response_topic, sizeof hub->response_topic, "%s/hubs/%s/responses/%s", hub->hub_root,
             hub->hub_id, token);
    snprintf(hub->rebirth_topic, sizeof hub->rebirth_topic, "%s/hubs/%s/rebirth", hub->hub_root, hub->hub_id);
    snprintf(hub->status_topic, sizeof hub->status_topic, "%s/hubs/%s/status", hub->hub_root, hub->hub_id);
    snprintf(hub->head_tracking_filter, sizeof hub->head_tracking_filter, "%s/hubs/%s/accessories/+/headtracking",
             hub->hub_root, hub->hub_id);
    snprintf(hub->layout_topic, sizeof hub->layout_topic, "%s/bridge/layout", hub->topic_root);
}

/* Builds the topics again after the root or the slots changed (mutex held). */
void ah_reset_topics(struct audiohub *hub)
{
    const char *token = strrchr(hub->response_topic, '/') + 1;
    char saved[20];
    snprintf(saved, sizeof saved, "%s", token);
    set_topics(hub, saved);
}

/* A token for the response topic, different for every handle of every process. */
static void make_token(struct audiohub *hub, char *out, size_t size)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t mix = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^ (uint64_t)(uintptr_t)hub;
    FILE *random = fopen("/dev/urandom", "rb");
    if (random != NULL) {
        uint64_t bytes = 0;
        if (fread(&bytes, sizeof bytes, 1, random) == 1) {
            mix ^= bytes;
        }
        fclose(random);
    }
    snprintf(out, size, "%016" PRIx64, mix);
}

enum audiohub_err audiohub_new(const char *hub_id, void *userdata, struct audiohub **out)
{
    if (out == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    *out = NULL;
    if (!ah_valid_id(hub_id) || is_lowercase_hex12(hub_id)) {
        return AUDIOHUB_ERR_HUB_ID;
    }
    struct audiohub *hub = calloc(1, sizeof *hub);
    if (hub == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    if (!ah_wake_open(hub)) {
        free(hub);
        return AUDIOHUB_ERR_ERRNO;
    }
    if (pthread_mutex_init(&hub->mutex, NULL) != 0) {
        ah_wake_close(hub);
        free(hub);
        return AUDIOHUB_ERR_ERRNO;
    }
    hub->userdata = userdata;
    strcpy(hub->hub_id, hub_id);
    strcpy(hub->topic_root, "audio");
    hub->timeout_ms = 2000;
    hub->timeout_max_ms = 30000;
    hub->max_attempts = 0;
    hub->queue_limit = 1024;
    hub->reconnect_min_ms = 250;
    hub->reconnect_max_ms = 30000;
    hub->keepalive_s = 30;
    hub->reconnect_delay_ms = hub->reconnect_min_ms;
    hub->connection = CONN_IDLE;
    char token[20];
    make_token(hub, token, sizeof token);
    set_topics(hub, token);

    hub->mosq = mosquitto_new(hub_id, true, hub);
    if (hub->mosq == NULL) {
        enum audiohub_err rc = errno == ENOMEM ? AUDIOHUB_ERR_NOMEM : AUDIOHUB_ERR_ERRNO;
        pthread_mutex_destroy(&hub->mutex);
        ah_wake_close(hub);
        free(hub);
        return rc;
    }
    int rc = mosquitto_int_option(hub->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    if (rc == MOSQ_ERR_SUCCESS) {
        /* Small messages, each awaited: Nagle's algorithm would hold them back behind delayed ACKs (~40 ms). */
        rc = mosquitto_int_option(hub->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        /* Requests may come from any thread: the loop does all the writing (woken by unlock, hub_private.h). */
        rc = mosquitto_threaded_set(hub->mosq, true);
    }
    if (rc != MOSQ_ERR_SUCCESS || !ah_make_frame_properties(hub)) {
        mosquitto_destroy(hub->mosq);
        pthread_mutex_destroy(&hub->mutex);
        ah_wake_close(hub);
        free(hub);
        return rc != MOSQ_ERR_SUCCESS ? AUDIOHUB_ERR_MOSQUITTO : AUDIOHUB_ERR_NOMEM;
    }
    mosquitto_connect_v5_callback_set(hub->mosq, ah_on_connect);
    mosquitto_disconnect_v5_callback_set(hub->mosq, ah_on_disconnect);
    mosquitto_publish_v5_callback_set(hub->mosq, ah_on_publish);
    mosquitto_subscribe_v5_callback_set(hub->mosq, ah_on_subscribe);
    mosquitto_message_v5_callback_set(hub->mosq, ah_on_message);
    *out = hub;
    return AUDIOHUB_ERR_SUCCESS;
}

void audiohub_destroy(struct audiohub *hub)
{
    if (hub == NULL) {
        return;
    }
    audiohub_loop_stop(hub, true);
    /* Closing the socket without DISCONNECT: the broker publishes the will (offline). */
    mosquitto_destroy(hub->mosq);
    hub->mosq = NULL;

    size_t bucket = 0;
    struct ah_entry *next = NULL;
    for (struct ah_entry *e = ah_table_next(&hub->accessories, &bucket, NULL); e != NULL; e = next) {
        next = ah_table_next(&hub->accessories, &bucket, e);
        struct accessory *a = (struct accessory *)e;
        while (a->head != NULL) {
            struct request *request = a->head;
            ah_detach_head(hub, request);
            ah_complete(hub, request, NULL, AUDIOHUB_ERR_CANCELLED);
        }
        ah_session_end(a);
        free(a->name);
        free(a->model);
        free(a);
    }
    ah_table_free(&hub->accessories);
    ah_deadlines_free(&hub->deadlines);
    free(hub->host);
    free(hub->ca_file);
    free(hub->cert_file);
    free(hub->key_file);
    mosquitto_property_free_all(&hub->frame_properties);
    pthread_mutex_destroy(&hub->mutex);
    ah_wake_close(hub);
    free(hub);
}
