/*
 * Head tracking, the caller's side: the handler (audiohub_head_tracking_handler_set), the session in force
 * (audiohub_head_tracking_get) and the frames (audiohub_head_tracking_send); and an accessory's session started or
 * ended, for handle_head_tracking.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The properties of every frame, made once: libmosquitto copies them into each PUBLISH. */
bool ah_make_frame_properties(struct audiohub *hub)
{
    int rc = mosquitto_property_add_string(&hub->frame_properties, MQTT_PROP_CONTENT_TYPE, CONTENT_TYPE);
    if (rc == MOSQ_ERR_SUCCESS) {
        /* A late frame is worthless: the broker drops one not delivered within a second. */
        rc = mosquitto_property_add_int32(&hub->frame_properties, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 1);
    }
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_property_free_all(&hub->frame_properties);
        return false;
    }
    return true;
}

bool ah_session_start(struct audiohub *hub, struct accessory *a, const struct audiohub_head_tracking_session *view)
{
    if (a->session == NULL) {
        a->session = calloc(1, sizeof *a->session);
        if (a->session == NULL) {
            return false;
        }
    }
    struct ah_session *session = a->session;
    session->view = *view;
    strcpy(session->view.accessory_id, a->entry.id);
    session->view.frames_sent = 0;
    /* The host's topics stay under the topic root, also in a cluster (the hub's own are under its slot's). */
    const uint8_t *h = view->host.bytes;
    snprintf(session->frame_topic, sizeof session->frame_topic,
             "%s/sources/%02x%02x%02x%02x%02x%02x/frames/%s/%s", hub->topic_root, h[0], h[1], h[2], h[3], h[4],
             h[5], hub->hub_id, a->entry.id);
    return true;
}

void ah_session_end(struct accessory *a)
{
    free(a->session);
    a->session = NULL;
}

enum audiohub_err audiohub_head_tracking_handler_set(struct audiohub *hub,
                                                     const struct audiohub_head_tracking_handler *handler, size_t size)
{
    if (hub == NULL || (handler != NULL && size < AUDIOHUB_HEAD_TRACKING_HANDLER_MIN_SIZE)) {
        return AUDIOHUB_ERR_INVAL;
    }
    struct audiohub_head_tracking_handler copy;
    memset(&copy, 0, sizeof copy);
    if (handler != NULL) {
        /* A caller's older, smaller handler: the members it does not know stay NULL. */
        memcpy(&copy, handler, size < sizeof copy ? size : sizeof copy);
    }
    lock(hub);
    hub->head_tracking = copy;
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_head_tracking_get(struct audiohub *hub, const char *accessory_id,
                                             struct audiohub_head_tracking_session *out, size_t size)
{
    if (hub == NULL || out == NULL || size < AUDIOHUB_HEAD_TRACKING_SESSION_MIN_SIZE) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (!ah_valid_id(accessory_id)) {
        return AUDIOHUB_ERR_ACCESSORY_ID;
    }
    struct audiohub_head_tracking_session view;
    enum audiohub_err rc = AUDIOHUB_ERR_NOT_ACTIVATED;
    lock(hub);
    struct accessory *a = ah_find_accessory(hub, accessory_id);
    if (a != NULL && a->session != NULL) {
        view = a->session->view;
        rc = AUDIOHUB_ERR_SUCCESS;
    }
    unlock(hub);
    if (rc == AUDIOHUB_ERR_SUCCESS) {
        ah_copy_sized(out, size, &view, sizeof view);
    }
    return rc;
}

static int64_t wall_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

enum audiohub_err audiohub_head_tracking_send(struct audiohub *hub, const char *accessory_id, const void *data,
                                              size_t length)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (!ah_valid_id(accessory_id)) {
        return AUDIOHUB_ERR_ACCESSORY_ID;
    }
    if (length == 0 || length > AUDIOHUB_FRAME_MAX) {
        return AUDIOHUB_ERR_INVALID_DATA_SIZE;
    }
    if (data == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    uint8_t payload[AH_FRAME_PAYLOAD_MAX];
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    struct accessory *a = ah_find_accessory(hub, accessory_id);
    struct ah_session *session = a != NULL ? a->session : NULL;
    if (session == NULL || !session->view.is_head_tracking_active) {
        rc = AUDIOHUB_ERR_NOT_ACTIVATED;
    } else if (hub->connection != CONN_READY) {
        rc = AUDIOHUB_ERR_NO_CONN;
    } else {
        size_t packed = ah_pack_frame(session->view.session_id, session->view.frames_sent + 1, wall_us(), data,
                                      length, payload);
        /* QoS 0, not retained: the loop thread writes it (libmosquitto is told the handle is threaded). */
        int mrc = mosquitto_publish_v5(hub->mosq, NULL, session->frame_topic, (int)packed, payload, 0, false,
                                       hub->frame_properties);
        if (mrc == MOSQ_ERR_SUCCESS) {
            session->view.frames_sent++;
            hub->stats.frames_sent++;
        } else {
            hub->last_mosquitto_error = mrc;
            rc = mrc == MOSQ_ERR_NOMEM ? AUDIOHUB_ERR_NOMEM
                 : mrc == MOSQ_ERR_NO_CONN ? AUDIOHUB_ERR_NO_CONN
                                           : AUDIOHUB_ERR_MOSQUITTO;
        }
    }
    unlock(hub);
    return rc;
}
