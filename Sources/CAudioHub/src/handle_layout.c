/*
 * The bridge's layout (AUDIOHUB_SLOTS_FROM_BRIDGE): the slot count a hub that is not told it reads from the bridge's
 * retained "{topic root}/bridge/layout", taken once (the hub then connects under its slot's root), and followed when
 * it changes (the hub moves: it says offline where it was, and is born again under its new root).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <stdlib.h>
#include <string.h>

/* Makes every accessory ready to be born again under the new root (mutex held): its request in flight goes out anew
 * (a new sequence, after the rebirth), a rebirth from the cache goes first when it is paired (a probe: the new root
 * may know it, handle_rebirth.c), the fences of the old root's owner are forgotten (another slot's epochs are not
 * comparable), and its head-tracking session ends. The sessions ended are copied into `ended` (at most
 * `capacity`); returns how many there are in all. */
static size_t prepare_move(struct audiohub *hub, struct audiohub_head_tracking_session *ended, size_t capacity)
{
    size_t count = 0;
    size_t bucket = 0;
    for (struct ah_entry *e = ah_table_next(&hub->accessories, &bucket, NULL); e != NULL;
         e = ah_table_next(&hub->accessories, &bucket, e)) {
        struct accessory *a = (struct accessory *)e; /* the entry is an accessory's first member */
        struct request *head = a->head;
        if (head != NULL && head->sequence != 0) {
            ah_deadlines_remove(&hub->deadlines, &head->timer);
            head->sequence = 0;
        }
        /* First: nothing is in flight now. Out of memory, the new root's bridge asks for the rebirth when the next
         * request shows a gap. */
        if (a->paired) {
            (void)ah_queue_probe(hub, a);
        }
        a->epoch = 0;
        a->ht_known = false;
        if (a->session != NULL) {
            if (count < capacity) {
                ended[count] = a->session->view;
            }
            count++;
            ah_session_end(a);
        }
    }
    return count;
}

/* How many accessories hold a session (mutex held). */
static size_t sessions(struct audiohub *hub)
{
    size_t count = 0;
    size_t bucket = 0;
    for (struct ah_entry *e = ah_table_next(&hub->accessories, &bucket, NULL); e != NULL;
         e = ah_table_next(&hub->accessories, &bucket, e)) {
        count += ((struct accessory *)e)->session != NULL;
    }
    return count;
}

void ah_handle_layout(struct audiohub *hub, const struct mosquitto_message *message,
                      const mosquitto_property *properties)
{
    long slots = ah_decode_layout(message->payload, (size_t)message->payloadlen,
                                  ah_payload_is_json(message, properties));
    lock(hub);
    size_t capacity = sessions(hub);
    unlock(hub);
    /* Allocated before the lock is taken again; a session started meanwhile is ended but not told (as at destroy). */
    struct audiohub_head_tracking_session *ended = capacity > 0 ? calloc(capacity, sizeof *ended) : NULL;
    if (ended == NULL) {
        capacity = 0;
    }
    size_t count = 0;
    lock(hub);
    bool connected = hub->connection == CONN_LEARNING || hub->connection == CONN_SUBSCRIBING ||
                     hub->connection == CONN_READY;
    if (slots < 0) {
        hub->stats.layout_malformed++;
    } else if (!hub->follow_layout || !connected || (hub->layout_known && slots == hub->slots)) {
        /* Not following, a connection going, or the layout in use (the retained copy at each subscription). */
    } else {
        char root[sizeof hub->hub_root];
        ah_root_of(hub, slots, root, sizeof root);
        bool same_root = hub->layout_known && strcmp(root, hub->hub_root) == 0;
        if (!same_root) {
            if (hub->layout_known) {
                /* A move: offline where the hub was (before DISCONNECT, on the same connection). */
                ah_publish_status(hub, false, NULL);
            }
            /* Nothing more goes out on this connection: the rebirth queued below, and any request started meanwhile,
             * wait for the next one, under the new root. */
            hub->connection = CONN_MOVING;
            if (hub->layout_known) {
                count = prepare_move(hub, ended, capacity);
            }
        }
        hub->slots = slots;
        hub->layout_known = true;
        hub->stats.layout_moves++;
        if (!same_root) {
            /* The will and the subscriptions are the connection's: connect again at once, under the new root. */
            ah_reset_topics(hub);
            int rc = mosquitto_disconnect(hub->mosq);
            if (rc != MOSQ_ERR_SUCCESS) {
                hub->last_mosquitto_error = rc;
            }
        }
        /* Else the count changed and the hub's slot did not: its topics stay, and its accessories are there. */
    }
    struct audiohub_head_tracking_handler handler = hub->head_tracking;
    unlock(hub);
    for (size_t i = 0; i < count && i < capacity && handler.invalidate != NULL; i++) {
        handler.invalidate(hub, hub->userdata, &ended[i], AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED);
    }
    free(ended);
}
