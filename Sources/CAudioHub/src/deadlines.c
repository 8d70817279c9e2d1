/*
 * The requests in flight, by deadline: a binary min-heap of timers, each of which knows its place in it, so that a
 * request leaves or moves in O(log n). See hub_private.h.
 */
#include "hub_private.h"

#include <stdlib.h>

static void swap(struct ah_deadlines *heap, size_t a, size_t b)
{
    struct ah_timer *t = heap->items[a];
    heap->items[a] = heap->items[b];
    heap->items[b] = t;
    heap->items[a]->index = a;
    heap->items[b]->index = b;
}

static void up(struct ah_deadlines *heap, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap->items[parent]->deadline_ms <= heap->items[i]->deadline_ms) {
            break;
        }
        swap(heap, i, parent);
        i = parent;
    }
}

static void down(struct ah_deadlines *heap, size_t i)
{
    for (;;) {
        size_t smallest = i;
        size_t left = 2 * i + 1;
        size_t right = left + 1;
        if (left < heap->count && heap->items[left]->deadline_ms < heap->items[smallest]->deadline_ms) {
            smallest = left;
        }
        if (right < heap->count && heap->items[right]->deadline_ms < heap->items[smallest]->deadline_ms) {
            smallest = right;
        }
        if (smallest == i) {
            return;
        }
        swap(heap, i, smallest);
        i = smallest;
    }
}

bool ah_deadlines_push(struct ah_deadlines *heap, struct ah_timer *timer)
{
    if (heap->count == heap->capacity) {
        size_t capacity = heap->capacity == 0 ? 64 : heap->capacity * 2;
        struct ah_timer **grown = realloc(heap->items, capacity * sizeof *grown);
        if (grown == NULL) {
            return false;
        }
        heap->items = grown;
        heap->capacity = capacity;
    }
    timer->index = heap->count;
    heap->items[heap->count++] = timer;
    up(heap, timer->index);
    return true;
}

void ah_deadlines_remove(struct ah_deadlines *heap, struct ah_timer *timer)
{
    size_t i = timer->index;
    if (i == AH_TIMER_IDLE) {
        return;
    }
    timer->index = AH_TIMER_IDLE;
    heap->count--;
    if (i == heap->count) {
        return;
    }
    heap->items[i] = heap->items[heap->count];
    heap->items[i]->index = i;
    down(heap, i);
    up(heap, i);
}

bool ah_deadlines_reschedule(struct ah_deadlines *heap, struct ah_timer *timer, int64_t deadline_ms)
{
    timer->deadline_ms = deadline_ms;
    if (timer->index == AH_TIMER_IDLE) {
        return ah_deadlines_push(heap, timer);
    }
    down(heap, timer->index);
    up(heap, timer->index);
    return true;
}

struct ah_timer *ah_deadlines_first(const struct ah_deadlines *heap)
{
    return heap->count > 0 ? heap->items[0] : NULL;
}

void ah_deadlines_free(struct ah_deadlines *heap)
{
    free(heap->items);
    heap->items = NULL;
    heap->count = 0;
    heap->capacity = 0;
}
