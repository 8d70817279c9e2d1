/*
 * The accessories and their queues of requests: an accessory found or made, a request made, queued (the caller's
 * at the tail, a rebirth's after the one in flight), taken out at the head, and completed.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <stdlib.h>
#include <string.h>

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
void ah_enqueue_rebirth(struct audiohub *hub, struct accessory *a, struct request *chain[], int count)
{
    struct request *last = chain[count - 1];
    for (int i = 0; i < count; i++) {
        chain[i]->accessory = a;
        chain[i]->rebirth = true;
        chain[i]->timer.index = AH_TIMER_IDLE;
        chain[i]->next = i < count - 1 ? chain[i + 1] : NULL;
    }
    struct request *before = (a->head != NULL && a->head->sequence != 0) ? a->head : NULL;
    if (before != NULL) {
        last->next = before->next;
        before->next = chain[0];
    } else {
        last->next = a->head;
        a->head = chain[0];
    }
    if (last->next == NULL) {
        a->tail = last;
    }
    a->queued += (size_t)count;
    a->rebirth_requests += (size_t)count;
    hub->stats.queued += (uint64_t)count;
    hub->stats.rebirth_requests += (uint64_t)count;
    ah_start_head(hub, a);
}

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
