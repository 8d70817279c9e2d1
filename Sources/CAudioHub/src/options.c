/*
 * The handle's options and callbacks, set before audiohub_connect (the options) or at any time (the callbacks), and
 * the last error libmosquitto gave.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum audiohub_err audiohub_int_option(struct audiohub *hub, enum audiohub_option option, long value)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    if (hub->configured) {
        rc = AUDIOHUB_ERR_STATE;
    } else {
        switch (option) {
        case AUDIOHUB_OPT_TIMEOUT_MS:
            if (value >= 1 && value <= 86400000L) hub->timeout_ms = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_TIMEOUT_MAX_MS:
            if (value >= 1 && value <= 86400000L) hub->timeout_max_ms = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_MAX_ATTEMPTS:
            if (value >= 0 && value <= INT_MAX) hub->max_attempts = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_QUEUE_LIMIT:
            if (value >= 1 && value <= 100000000L) hub->queue_limit = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_RECONNECT_MIN_MS:
            if (value >= 1 && value <= 3600000L) hub->reconnect_min_ms = hub->reconnect_delay_ms = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_RECONNECT_MAX_MS:
            if (value >= 1 && value <= 3600000L) hub->reconnect_max_ms = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_KEEPALIVE_S:
            if (value >= 5 && value <= 65535) hub->keepalive_s = value;
            else rc = AUDIOHUB_ERR_INVAL;
            break;
        case AUDIOHUB_OPT_SLOTS:
            if (value == AUDIOHUB_SLOTS_FROM_BRIDGE || (value >= 0 && value <= 4096)) {
                hub->follow_layout = value == AUDIOHUB_SLOTS_FROM_BRIDGE;
                hub->layout_known = false;
                hub->slots = hub->follow_layout ? 0 : value;
                ah_reset_topics(hub);
            } else {
                rc = AUDIOHUB_ERR_INVAL;
            }
            break;
        default:
            rc = AUDIOHUB_ERR_INVAL;
        }
    }
    unlock(hub);
    return rc;
}

enum audiohub_err audiohub_topic_root_set(struct audiohub *hub, const char *topic_root)
{
    if (hub == NULL || topic_root == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    size_t length = strlen(topic_root);
    if (length == 0 || length > TOPIC_ROOT_MAX || strpbrk(topic_root, "+#") != NULL || topic_root[0] == '/' ||
        topic_root[length - 1] == '/') {
        return AUDIOHUB_ERR_INVAL;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    if (hub->configured) {
        rc = AUDIOHUB_ERR_STATE;
    } else {
        strcpy(hub->topic_root, topic_root);
        ah_reset_topics(hub);
    }
    unlock(hub);
    return rc;
}

static bool replace_optional(char **slot, const char *value)
{
    if (value == NULL) {
        free(*slot);
        *slot = NULL;
        return true;
    }
    return ah_replace_text(slot, value);
}

enum audiohub_err audiohub_tls_set(struct audiohub *hub, const char *ca_file, const char *cert_file,
                                   const char *key_file)
{
    if (hub == NULL || ca_file == NULL || (cert_file == NULL) != (key_file == NULL)) {
        return AUDIOHUB_ERR_INVAL;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    if (hub->configured) {
        rc = AUDIOHUB_ERR_STATE;
    } else if (!replace_optional(&hub->ca_file, ca_file) || !replace_optional(&hub->cert_file, cert_file) ||
               !replace_optional(&hub->key_file, key_file)) {
        rc = AUDIOHUB_ERR_NOMEM;
    }
    unlock(hub);
    return rc;
}

enum audiohub_err audiohub_sequence_callbacks_set(struct audiohub *hub, audiohub_sequence_load_cb load,
                                                  audiohub_sequence_save_cb save)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    hub->load_sequence = load;
    hub->save_sequence = save;
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_connection_callbacks_set(struct audiohub *hub, audiohub_connect_cb on_connect_cb,
                                                    audiohub_disconnect_cb on_disconnect_cb)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    hub->on_connect = on_connect_cb;
    hub->on_disconnect = on_disconnect_cb;
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_rebirth_callback_set(struct audiohub *hub, audiohub_rebirth_cb on_rebirth)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    hub->on_rebirth = on_rebirth;
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}

int audiohub_last_mosquitto_error(struct audiohub *hub, const char **text)
{
    if (hub == NULL) {
        return 0;
    }
    lock(hub);
    int rc = hub->last_mosquitto_error;
    unlock(hub);
    if (text != NULL) {
        *text = mosquitto_strerror(rc);
    }
    return rc;
}
