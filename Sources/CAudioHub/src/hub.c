/*
 * The hub: its connection, its accessories (the cache, the sequences, the queue of requests), and the loop that
 * sends, resends and completes them. See include/audiohub.h.
 *
 * One mutex guards the handle. libmosquitto's callbacks run inside mosquitto_loop, which is called without the
 * mutex; they take it, and call the caller's callbacks only after releasing it, so that those may make requests.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAYLOAD_MAX (2 * AUDIOHUB_TEXT_MAX + 2 * AUDIOHUB_ID_MAX + 128)
#define MAX_RESYNCS 3
/* How long a graceful disconnect waits for the broker to acknowledge the offline status before it says goodbye. */
#define GOODBYE_WAIT_MS 2000

/* ------------------------------------------------------------------------------------------------------------ */
/* Small helpers                                                                                                 */
/* ------------------------------------------------------------------------------------------------------------ */

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

static enum audiohub_err mosquitto_failure(struct audiohub *hub, int rc)
{
    hub->last_mosquitto_error = rc;
    if (rc == MOSQ_ERR_NOMEM) {
        return AUDIOHUB_ERR_NOMEM;
    }
    if (rc == MOSQ_ERR_ERRNO) {
        return AUDIOHUB_ERR_ERRNO;
    }
    return AUDIOHUB_ERR_MOSQUITTO;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Accessories                                                                                                   */
/* ------------------------------------------------------------------------------------------------------------ */

/* The accessory `id`, if the hub knows it. */
struct accessory *ah_find_accessory(struct audiohub *hub, const char *id)
{
    /* The entry is an accessory's first member. */
    return (struct accessory *)ah_table_find(&hub->accessories, id);
}

/* The accessory `id` (valid), made when new; NULL when out of memory. */
struct accessory *ah_accessory_for(struct audiohub *hub, const char *id)
{
    struct accessory *found = ah_find_accessory(hub, id);
    if (found != NULL) {
        return found;
    }
    if (!ah_table_reserve(&hub->accessories)) {
        return NULL;
    }
    struct accessory *a = calloc(1, sizeof *a);
    if (a == NULL) {
        return NULL;
    }
    strcpy(a->entry.id, id);
    ah_table_insert(&hub->accessories, &a->entry);
    return a;
}

void ah_free_request(struct request *request)
{
    if (request == NULL) {
        return;
    }
    free(request->name);
    free(request->model);
    free(request->payload);
    free(request);
}

struct request *ah_new_request(enum audiohub_operation operation)
{
    struct request *request = calloc(1, sizeof *request);
    if (request != NULL) {
        request->operation = operation;
        request->timer.index = AH_TIMER_IDLE;
    }
    return request;
}

/* Takes `request` (the head of its accessory's queue) out of the queue and the heap. */
void ah_detach_head(struct audiohub *hub, struct request *request)
{
    struct accessory *a = request->accessory;
    ah_deadlines_remove(&hub->deadlines, &request->timer);
    a->head = request->next;
    if (a->head == NULL) {
        a->tail = NULL;
    }
    request->next = NULL;
    a->queued--;
    if (request->rebirth) {
        a->rebirth_requests--;
    } else {
        hub->counted--;
    }
    hub->stats.queued--;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Sending                                                                                                       */
/* ------------------------------------------------------------------------------------------------------------ */

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
    return true;
}

/* Starts the head of `a`'s queue if it is not in flight yet (only while connected). A rebirth request with nothing
 * to say is dropped; a request that cannot be packed (out of memory) waits for the next connection. */
void ah_start_head(struct audiohub *hub, struct accessory *a)
{
    while (a->head != NULL && a->head->sequence == 0 && hub->connection == CONN_READY) {
        struct request *request = a->head;
        if (request->rebirth) {
            bool wanted =
                request->operation == AUDIOHUB_OP_PAIR ? ah_fill_rebirth(request) : request->capabilities != 0;
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

/* Appends a caller's request to its accessory's queue and starts it when possible. */
void ah_enqueue(struct audiohub *hub, struct accessory *a, struct request *request)
{
    request->accessory = a;
    request->timer.index = AH_TIMER_IDLE;
    request->next = NULL;
    if (a->tail != NULL) {
        a->tail->next = request;
    } else {
        a->head = request;
    }
    a->tail = request;
    a->queued++;
    hub->counted++;
    hub->stats.queued++;
    hub->stats.requests++;
    ah_start_head(hub, a);
}

/* Queues a rebirth's pair, register and update right after the request in flight (or first, when none is), so that
 * the bridge is restored before the caller's later requests apply on top. */
void ah_enqueue_rebirth(struct audiohub *hub, struct accessory *a, struct request *chain[3])
{
    for (int i = 0; i < 3; i++) {
        chain[i]->accessory = a;
        chain[i]->rebirth = true;
        chain[i]->timer.index = AH_TIMER_IDLE;
        chain[i]->next = i < 2 ? chain[i + 1] : NULL;
    }
    struct request *before = (a->head != NULL && a->head->sequence != 0) ? a->head : NULL;
    if (before != NULL) {
        chain[2]->next = before->next;
        before->next = chain[0];
    } else {
        chain[2]->next = a->head;
        a->head = chain[0];
    }
    if (chain[2]->next == NULL) {
        a->tail = chain[2];
    }
    a->queued += 3;
    a->rebirth_requests += 3;
    hub->stats.queued += 3;
    hub->stats.rebirth_requests += 3;
    ah_start_head(hub, a);
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

/* ------------------------------------------------------------------------------------------------------------ */
/* Completing                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/* Calls the completion of `request` (mutex released) and frees it. */
void ah_complete(struct audiohub *hub, struct request *request, const struct audiohub_result *bridge_result,
                 enum audiohub_err status)
{
    if (!request->rebirth && request->callback != NULL) {
        struct audiohub_result result;
        if (bridge_result != NULL) {
            result = *bridge_result;
        } else {
            memset(&result, 0, sizeof result);
            result.error = AUDIOHUB_KIT_UNSPECIFIED;
            result.message = "";
            result.request_id = request->request_id;
            result.sequence = request->sequence;
        }
        result.status = status;
        result.operation = request->operation;
        result.accessory_id = request->accessory->entry.id;
        result.attempts = request->attempts;
        result.context = request->context;
        request->callback(hub, hub->userdata, &result);
    }
    ah_free_request(request);
}

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
    }
    if (!request->rebirth) {
        hub->stats.completed++;
    }
    ah_start_head(hub, a);
    return request;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* libmosquitto's callbacks (inside mosquitto_loop, on the loop's thread, mutex not held)                        */
/* ------------------------------------------------------------------------------------------------------------ */

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

void ah_on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message,
                   const mosquitto_property *properties)
{
    (void)mosq;
    struct audiohub *hub = userdata;
    if (strcmp(message->topic, hub->response_topic) == 0) {
        ah_handle_result(hub, message, properties);
    } else if (strcmp(message->topic, hub->rebirth_topic) == 0) {
        ah_handle_rebirth(hub, message);
    }
}

static int publish_status(struct audiohub *hub, bool online, int *mid)
{
    uint8_t payload[32];
    size_t length = ah_pack_hub_status(online, ah_wall_ms(), payload, sizeof payload);
    mosquitto_property *properties = NULL;
    int rc = mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, CONTENT_TYPE);
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_publish_v5(hub->mosq, mid, hub->status_topic, (int)length, payload, 1, true, properties);
    }
    mosquitto_property_free_all(&properties);
    if (rc != MOSQ_ERR_SUCCESS) {
        hub->last_mosquitto_error = rc;
    }
    return rc;
}

/* Sends DISCONNECT now (with the hub's lock held). */
void ah_say_goodbye(struct audiohub *hub)
{
    hub->goodbye_pending = false;
    int rc = mosquitto_disconnect_v5(hub->mosq, MQTT_RC_NORMAL_DISCONNECTION, NULL);
    hub->connection = rc == MOSQ_ERR_SUCCESS ? CONN_DISCONNECTING : CONN_IDLE;
}

void ah_on_publish(struct mosquitto *mosq, void *userdata, int mid, int rc, const mosquitto_property *props)
{
    (void)mosq;
    (void)rc;
    (void)props;
    struct audiohub *hub = userdata;
    lock(hub);
    if (hub->goodbye_pending && mid == hub->goodbye_mid) {
        ah_say_goodbye(hub);
    }
    unlock(hub);
}

void ah_on_connect(struct mosquitto *mosq, void *userdata, int rc, int flags, const mosquitto_property *props)
{
    (void)flags;
    (void)props;
    struct audiohub *hub = userdata;
    lock(hub);
    audiohub_connect_cb callback = NULL;
    if (rc != 0) {
        /* Refused: libmosquitto closes the connection next, and ah_on_disconnect schedules the next attempt. */
        callback = hub->on_connect;
    } else if (hub->connection == CONN_CONNECTING) {
        char *topics[2] = {hub->response_topic, hub->rebirth_topic};
        int subscribed = mosquitto_subscribe_multiple(mosq, &hub->subscribe_mid, 2, topics, 1, 0, NULL);
        if (subscribed == MOSQ_ERR_SUCCESS) {
            hub->connection = CONN_SUBSCRIBING;
            publish_status(hub, true, NULL);
        } else {
            hub->last_mosquitto_error = subscribed;
            mosquitto_disconnect(mosq);
        }
    }
    unlock(hub);
    if (callback != NULL) {
        callback(hub, hub->userdata, rc);
    }
}

void ah_on_subscribe(struct mosquitto *mosq, void *userdata, int mid, int count, const int *granted,
                     const mosquitto_property *props)
{
    (void)mosq;
    (void)props;
    (void)granted;
    (void)count;
    struct audiohub *hub = userdata;
    lock(hub);
    audiohub_connect_cb callback = NULL;
    if (hub->connection == CONN_SUBSCRIBING && mid == hub->subscribe_mid) {
        hub->connection = CONN_READY;
        hub->reconnect_delay_ms = hub->reconnect_min_ms;
        hub->stats.connections++;
        ah_send_everything(hub);
        callback = hub->on_connect;
    }
    unlock(hub);
    if (callback != NULL) {
        callback(hub, hub->userdata, 0);
    }
}

/* Schedules the next connection attempt (mutex held). */
void ah_schedule_reconnect(struct audiohub *hub)
{
    hub->connection = CONN_WAITING;
    hub->reconnect_at_ms = ah_monotonic_ms() + hub->reconnect_delay_ms;
    hub->reconnect_delay_ms = hub->reconnect_delay_ms * 2 < hub->reconnect_max_ms ? hub->reconnect_delay_ms * 2
                                                                                   : hub->reconnect_max_ms;
}

void ah_on_disconnect(struct mosquitto *mosq, void *userdata, int rc, const mosquitto_property *props)
{
    (void)mosq;
    (void)props;
    struct audiohub *hub = userdata;
    lock(hub);
    bool was_up = hub->connection == CONN_READY || hub->connection == CONN_SUBSCRIBING ||
                  hub->connection == CONN_DISCONNECTING;
    hub->goodbye_pending = false;
    if (hub->connection == CONN_DISCONNECTING || hub->connection == CONN_IDLE) {
        hub->connection = CONN_IDLE;
    } else {
        if (rc != 0) {
            hub->last_mosquitto_error = rc;
        }
        ah_schedule_reconnect(hub);
    }
    audiohub_disconnect_cb callback = was_up ? hub->on_disconnect : NULL;
    unlock(hub);
    if (callback != NULL) {
        callback(hub, hub->userdata, rc);
    }
}

/* ------------------------------------------------------------------------------------------------------------ */
/* The handle                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

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

/* The hub's topics, under its root: the topic root, or in a cluster its slot's (mutex held or not yet shared). */
static void set_topics(struct audiohub *hub, const char *token)
{
    if (hub->slots > 0) {
        snprintf(hub->hub_root, sizeof hub->hub_root, "%s/slots/%ld", hub->topic_root,
                 audiohub_slot(hub->hub_id, hub->slots));
    } else {
        snprintf(hub->hub_root, sizeof hub->hub_root, "%s", hub->topic_root);
    }
    snprintf(hub->response_topic, sizeof hub->response_topic, "%s/hubs/%s/responses/%s", hub->hub_root,
             hub->hub_id, token);
    snprintf(hub->rebirth_topic, sizeof hub->rebirth_topic, "%s/hubs/%s/rebirth", hub->hub_root, hub->hub_id);
    snprintf(hub->status_topic, sizeof hub->status_topic, "%s/hubs/%s/status", hub->hub_root, hub->hub_id);
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
    if (pthread_mutex_init(&hub->mutex, NULL) != 0) {
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
        free(hub);
        return rc;
    }
    int rc = mosquitto_int_option(hub->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    if (rc == MOSQ_ERR_SUCCESS) {
        /* Small messages, each awaited: Nagle's algorithm would hold them back behind delayed ACKs (~40 ms). */
        rc = mosquitto_int_option(hub->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        /* Requests may come from any thread: let the loop do all the writing (woken through its socket pair). */
        rc = mosquitto_threaded_set(hub->mosq, true);
    }
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_destroy(hub->mosq);
        pthread_mutex_destroy(&hub->mutex);
        free(hub);
        return AUDIOHUB_ERR_MOSQUITTO;
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
    pthread_mutex_destroy(&hub->mutex);
    free(hub);
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Connecting                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

enum audiohub_err audiohub_connect(struct audiohub *hub, const char *url, const char *username,
                                   const char *password)
{
    if (hub == NULL || url == NULL || (password != NULL && username == NULL)) {
        return AUDIOHUB_ERR_INVAL;
    }
    char *host = NULL;
    int port = 0;
    bool tls = false;
    enum audiohub_err rc = ah_parse_url(url, &host, &port, &tls);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    lock(hub);
    if (hub->connection != CONN_IDLE) {
        rc = AUDIOHUB_ERR_STATE;
    } else if (tls && hub->ca_file == NULL) {
        rc = AUDIOHUB_ERR_TLS;
    } else {
        int mrc = MOSQ_ERR_SUCCESS;
        if (tls && !hub->configured) {
            mrc = mosquitto_tls_set(hub->mosq, hub->ca_file, NULL, hub->cert_file, hub->key_file, NULL);
            if (mrc != MOSQ_ERR_SUCCESS) {
                hub->last_mosquitto_error = mrc;
                rc = AUDIOHUB_ERR_TLS;
            }
        }
        if (rc == AUDIOHUB_ERR_SUCCESS && username != NULL) {
            mrc = mosquitto_username_pw_set(hub->mosq, username, password);
            if (mrc != MOSQ_ERR_SUCCESS) {
                rc = mosquitto_failure(hub, mrc);
            }
        }
        if (rc == AUDIOHUB_ERR_SUCCESS) {
            if (hub->host != NULL && (strcmp(hub->host, host) != 0 || hub->port != port)) {
                hub->ever_started = false; /* another broker: connect afresh */
            }
            free(hub->host);
            hub->host = host;
            host = NULL;
            hub->port = port;
            hub->tls = tls;
            hub->configured = true;
            hub->connection = CONN_WAITING;
            hub->reconnect_at_ms = ah_monotonic_ms();
            hub->reconnect_delay_ms = hub->reconnect_min_ms;
        }
    }
    unlock(hub);
    free(host);
    return rc;
}

/* One connection attempt (mutex held): the will, then an asynchronous connect that the loop completes. */
void ah_start_connection(struct audiohub *hub)
{
    uint8_t payload[32];
    size_t length = ah_pack_hub_status(false, ah_wall_ms(), payload, sizeof payload);
    mosquitto_property *properties = NULL;
    int rc = mosquitto_property_add_string(&properties, MQTT_PROP_CONTENT_TYPE, CONTENT_TYPE);
    if (rc == MOSQ_ERR_SUCCESS) {
        rc = mosquitto_will_set_v5(hub->mosq, hub->status_topic, (int)length, payload, 1, true, properties);
    }
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_property_free_all(&properties);
        hub->last_mosquitto_error = rc;
        ah_schedule_reconnect(hub);
        return;
    }
    if (hub->ever_started) {
        rc = mosquitto_reconnect_async(hub->mosq);
    } else {
        rc = mosquitto_connect_async(hub->mosq, hub->host, hub->port, (int)hub->keepalive_s);
        if (rc == MOSQ_ERR_SUCCESS || rc == MOSQ_ERR_ERRNO) {
            /* The host and port are stored even when the first attempt fails. */
            hub->ever_started = true;
        }
    }
    if (rc == MOSQ_ERR_SUCCESS) {
        hub->connection = CONN_CONNECTING;
    } else {
        hub->last_mosquitto_error = rc;
        ah_schedule_reconnect(hub);
    }
}

enum audiohub_err audiohub_disconnect(struct audiohub *hub)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    switch (hub->connection) {
    case CONN_IDLE:
    case CONN_DISCONNECTING:
        break;
    case CONN_WAITING:
        hub->connection = CONN_IDLE;
        break;
    case CONN_READY:
    case CONN_SUBSCRIBING:
        if (publish_status(hub, false, &hub->goodbye_mid) == MOSQ_ERR_SUCCESS) {
            /* DISCONNECT once the broker has the offline status (ah_on_publish), or at the deadline (the loop). */
            hub->goodbye_pending = true;
            hub->goodbye_deadline_ms = ah_monotonic_ms() + GOODBYE_WAIT_MS;
            hub->connection = CONN_DISCONNECTING;
            break;
        }
        /* fall through */
    case CONN_CONNECTING:
        ah_say_goodbye(hub);
        break;
    }
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}

bool audiohub_is_connected(struct audiohub *hub)
{
    if (hub == NULL) {
        return false;
    }
    lock(hub);
    bool ready = hub->connection == CONN_READY;
    unlock(hub);
    return ready;
}
