/*
 * A HeadTrackingSession on one of the hub's headtracking topics: the news read (anything unreadable is counted and
 * ignored), fenced by its (epoch, sequence) against the last taken for the accessory, the accessory's session
 * started, changed or ended, and the handler told -- after the mutex is released.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <mqtt_protocol.h>

#include <stdlib.h>
#include <string.h>

/* What the handler is told: at most two calls per piece of news (a replaced session's end, then the news itself). */
enum delivery_kind { DELIVER_ACTIVATE, DELIVER_STATE, DELIVER_INVALIDATE };
struct delivery {
    enum delivery_kind kind;
    enum audiohub_head_tracking_reason reason;
    struct audiohub_head_tracking_session session;
};

bool ah_is_head_tracking_topic(const struct audiohub *hub, const char *topic, char accessory_id[AUDIOHUB_ID_MAX + 1])
{
    /* {hub root}/hubs/{hub}/accessories/{accessory}/headtracking */
    static const char suffix[] = "/headtracking";
    size_t root = strlen(hub->hub_root);
    size_t id = strlen(hub->hub_id);
    if (strncmp(topic, hub->hub_root, root) != 0 || strncmp(topic + root, "/hubs/", 6) != 0 ||
        strncmp(topic + root + 6, hub->hub_id, id) != 0 || strncmp(topic + root + 6 + id, "/accessories/", 13) != 0) {
        return false;
    }
    const char *accessory = topic + root + 6 + id + 13;
    const char *end = strchr(accessory, '/');
    if (end == NULL || strcmp(end, suffix) != 0 || end - accessory > AUDIOHUB_ID_MAX) {
        return false;
    }
    memcpy(accessory_id, accessory, (size_t)(end - accessory));
    accessory_id[end - accessory] = '\0';
    return ah_valid_id(accessory_id);
}

/* Whether news of order (epoch, sequence) is newer than the last taken for `a`. */
static bool newer(const struct accessory *a, uint64_t epoch, uint64_t sequence)
{
    return !a->ht_known || epoch > a->ht_epoch || (epoch == a->ht_epoch && sequence > a->ht_sequence);
}

/* Starts `view` as `a`'s session, after ending the one it replaces (told to the handler as ended by the hub itself:
 * its invalidation never came). Returns how many deliveries it added. */
static int activate(struct audiohub *hub, struct accessory *a, const struct audiohub_head_tracking_session *view,
                    struct delivery *out)
{
    int count = 0;
    if (a->session != NULL) {
        out[count++] = (struct delivery){DELIVER_INVALIDATE, AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED,
                                         a->session->view};
        ah_session_end(a);
    }
    if (ah_session_start(hub, a, view)) {
        out[count++] = (struct delivery){DELIVER_ACTIVATE, AUDIOHUB_HEAD_TRACKING_REASON_ROUTED, a->session->view};
    }
    return count;
}

/* Applies news newer than the last taken for `a` (mutex held); fills `out` with what to tell the handler. */
static int apply(struct audiohub *hub, struct accessory *a, const struct ah_head_tracking_news *news,
                 struct delivery *out)
{
    struct ah_session *session = a->session;
    bool same = session != NULL &&
                memcmp(session->view.session_id, news->session.session_id, AUDIOHUB_SESSION_ID_SIZE) == 0;
    switch (news->event) {
    case AH_HT_ACTIVATED:
    case AH_HT_STATE_CHANGED:
        if (!same) {
            /* An activation; or news of a session the hub never heard activated (it was away meanwhile: session news
             * is not retained), which is the session in force now. */
            return activate(hub, a, &news->session, out);
        }
        session->view.epoch = news->session.epoch;
        session->view.sequence = news->session.sequence;
        if (session->view.is_head_tracking_active == news->session.is_head_tracking_active) {
            return 0;
        }
        session->view.is_head_tracking_active = news->session.is_head_tracking_active;
        out[0] = (struct delivery){DELIVER_STATE, news->reason, session->view};
        return 1;
    case AH_HT_INVALIDATED:
        /* Newer than anything taken: it ends the session in force, whichever it is. */
        if (session == NULL) {
            return 0;
        }
        out[0] = (struct delivery){DELIVER_INVALIDATE, news->reason, session->view};
        out[0].session.epoch = news->session.epoch;
        out[0].session.sequence = news->session.sequence;
        ah_session_end(a);
        return 1;
    }
    return 0;
}

void ah_handle_head_tracking(struct audiohub *hub, const struct mosquitto_message *message,
                             const mosquitto_property *properties, const char *accessory_id)
{
    struct ah_head_tracking_news news;
    bool readable = !ah_payload_is_json(message, properties) &&
                    ah_decode_head_tracking(message->payload, (size_t)message->payloadlen, &news) ==
                        AUDIOHUB_ERR_SUCCESS &&
                    (news.session.accessory_id[0] == '\0' || strcmp(news.session.accessory_id, accessory_id) == 0) &&
                    (news.hub_id[0] == '\0' || strcmp(news.hub_id, hub->hub_id) == 0);
    struct delivery deliveries[2];
    int count = 0;
    lock(hub);
    struct accessory *a = readable ? ah_accessory_for(hub, accessory_id) : NULL;
    if (!readable) {
        hub->stats.head_tracking_malformed++;
    } else if (a == NULL) {
        /* Out of memory: as if it never came. */
    } else if (!newer(a, news.session.epoch, news.session.sequence)) {
        /* Not newer than the last taken: an older owner's, cut off since, or a redelivery. */
        hub->stats.head_tracking_stale++;
    } else {
        hub->stats.head_tracking_news++;
        a->ht_known = true;
        a->ht_epoch = news.session.epoch;
        a->ht_sequence = news.session.sequence;
        strcpy(news.session.accessory_id, accessory_id);
        count = apply(hub, a, &news, deliveries);
    }
    struct audiohub_head_tracking_handler handler = hub->head_tracking;
    unlock(hub);

    for (int i = 0; i < count; i++) {
        const struct delivery *d = &deliveries[i];
        switch (d->kind) {
        case DELIVER_ACTIVATE:
            if (handler.activate != NULL) {
                handler.activate(hub, hub->userdata, &d->session);
            }
            break;
        case DELIVER_STATE:
            if (handler.state_did_change != NULL) {
                handler.state_did_change(hub, hub->userdata, &d->session, d->session.is_head_tracking_active);
            }
            break;
        case DELIVER_INVALIDATE:
            if (handler.invalidate != NULL) {
                handler.invalidate(hub, hub->userdata, &d->session, d->reason);
            }
            break;
        }
    }
}
