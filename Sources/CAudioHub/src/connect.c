/*
 * The connection (enum connection): audiohub_connect, each attempt with its will (none while the hub reads the
 * bridge's layout), the online status, libmosquitto's callbacks (inside its loop functions, on the loop's thread,
 * mutex not held), and the goodbye of audiohub_disconnect.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <stdlib.h>
#include <string.h>

/* How long a graceful disconnect waits for the broker to acknowledge the offline status before it says goodbye. */
#define GOODBYE_WAIT_MS 2000

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

void ah_on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message,
                   const mosquitto_property *properties)
{
    (void)mosq;
    struct audiohub *hub = userdata;
    char accessory_id[AUDIOHUB_ID_MAX + 1];
    if (strcmp(message->topic, hub->response_topic) == 0) {
        ah_handle_result(hub, message, properties);
    } else if (strcmp(message->topic, hub->rebirth_topic) == 0) {
        ah_handle_rebirth(hub, message);
    } else if (ah_is_head_tracking_topic(hub, message->topic, accessory_id)) {
        ah_handle_head_tracking(hub, message, properties, accessory_id);
    } else if (hub->follow_layout && strcmp(message->topic, hub->layout_topic) == 0) {
        ah_handle_layout(hub, message, properties);
    }
}

int ah_publish_status(struct audiohub *hub, bool online, int *mid)
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
        /* Without the layout yet, the layout alone; with it, the hub's topics, and the layout while following it. */
        bool learning = hub->follow_layout && !hub->layout_known;
        char *topics[4] = {hub->response_topic, hub->rebirth_topic, hub->head_tracking_filter, hub->layout_topic};
        int subscribed = learning ? mosquitto_subscribe(mosq, &hub->subscribe_mid, hub->layout_topic, 1)
                                  : mosquitto_subscribe_multiple(mosq, &hub->subscribe_mid, hub->follow_layout ? 4 : 3,
                                                                 topics, 1, 0, NULL);
        if (subscribed == MOSQ_ERR_SUCCESS && learning) {
            hub->connection = CONN_LEARNING;
        } else if (subscribed == MOSQ_ERR_SUCCESS) {
            hub->connection = CONN_SUBSCRIBING;
            ah_publish_status(hub, true, NULL);
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
                  hub->connection == CONN_DISCONNECTING || hub->connection == CONN_MOVING;
    hub->goodbye_pending = false;
    if (hub->connection == CONN_DISCONNECTING || hub->connection == CONN_IDLE) {
        hub->connection = CONN_IDLE;
    } else if (hub->connection == CONN_MOVING) {
        /* Ended to connect again under the layout's root (handle_layout.c): at once, the wait unchanged. */
        hub->connection = CONN_WAITING;
        hub->reconnect_at_ms = ah_monotonic_ms();
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
    if (rc == MOSQ_ERR_SUCCESS && hub->follow_layout && !hub->layout_known) {
        /* Reading the layout: the hub is not online anywhere yet, so no will says it went offline. */
        mosquitto_property_free_all(&properties);
        rc = mosquitto_will_clear(hub->mosq);
    } else if (rc == MOSQ_ERR_SUCCESS) {
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
        if (ah_publish_status(hub, false, &hub->goodbye_mid) == MOSQ_ERR_SUCCESS) {
            /* DISCONNECT once the broker has the offline status (ah_on_publish), or at the deadline (the loop). */
            hub->goodbye_pending = true;
            hub->goodbye_deadline_ms = ah_monotonic_ms() + GOODBYE_WAIT_MS;
            hub->connection = CONN_DISCONNECTING;
            break;
        }
        /* fall through */
    case CONN_CONNECTING:
    case CONN_LEARNING:
    case CONN_MOVING:
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
