/*
 * The loop: audiohub_loop (connection attempts, libmosquitto's loop, the deadlines of the requests in flight), what
 * a caller's own poll loop needs, and the loop's thread (audiohub_loop_start, audiohub_loop_stop).
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <errno.h>
#include <poll.h>

#define STOP_GRACE_MS 3000

/* Resends the requests whose deadline passed, and takes out those out of attempts (mutex held). Returns the list
 * of requests to complete with AUDIOHUB_ERR_TIMEOUT, linked through `next`. */
static struct request *handle_deadlines(struct audiohub *hub, int64_t now)
{
    struct request *timed_out = NULL;
    if (hub->connection != CONN_READY) {
        return NULL; /* resent when the connection is back */
    }
    struct ah_timer *first;
    while ((first = ah_deadlines_first(&hub->deadlines)) != NULL && first->deadline_ms <= now) {
        struct request *request = (struct request *)first; /* the timer is a request's first member */
        if (hub->max_attempts > 0 && request->attempts >= (unsigned)hub->max_attempts) {
            struct accessory *a = request->accessory;
            ah_detach_head(hub, request);
            if (!request->rebirth) {
                hub->stats.completed++;
            }
            request->next = timed_out;
            timed_out = request;
            ah_start_head(hub, a);
        } else {
            ah_publish_request(hub, request);
        }
    }
    return timed_out;
}

static int wait_ms(struct audiohub *hub, int timeout_ms, int64_t now)
{
    int64_t wait = timeout_ms;
    struct ah_timer *first = ah_deadlines_first(&hub->deadlines);
    if (hub->connection == CONN_READY && first != NULL) {
        int64_t until = first->deadline_ms - now;
        if (until < wait) {
            wait = until;
        }
    }
    if (hub->connection == CONN_WAITING) {
        int64_t until = hub->reconnect_at_ms - now;
        if (until < wait) {
            wait = until;
        }
    }
    if (hub->goodbye_pending && hub->goodbye_deadline_ms - now < wait) {
        wait = hub->goodbye_deadline_ms - now;
    }
    return wait < 0 ? 0 : (int)wait;
}

enum audiohub_err audiohub_loop(struct audiohub *hub, int timeout_ms)
{
    if (hub == NULL || timeout_ms < 0) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    if (hub->connection == CONN_IDLE) {
        unlock(hub);
        return AUDIOHUB_ERR_NO_CONN;
    }
    int64_t now = ah_monotonic_ms();
    if (hub->goodbye_pending && now >= hub->goodbye_deadline_ms) {
        ah_say_goodbye(hub); /* the broker did not acknowledge the offline status in time */
    }
    if (hub->connection == CONN_WAITING && now >= hub->reconnect_at_ms) {
        ah_start_connection(hub);
    }
    int wait = wait_ms(hub, timeout_ms, now);
    bool has_socket = hub->connection != CONN_WAITING;
    unlock(hub);

    if (has_socket) {
        int rc = mosquitto_loop(hub->mosq, wait, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            lock(hub);
            bool closed = mosquitto_socket(hub->mosq) < 0;
            /* A failure that closed the socket without ah_on_disconnect (e.g. the connect itself). */
            if (closed && hub->connection != CONN_IDLE && hub->connection != CONN_WAITING) {
                if (hub->connection == CONN_DISCONNECTING) {
                    hub->connection = CONN_IDLE;
                } else {
                    hub->last_mosquitto_error = rc;
                    ah_schedule_reconnect(hub);
                }
            } else if (!closed) {
                /* A failure that leaves the socket (select() itself failed: a descriptor beyond FD_SETSIZE): wait
                 * rather than spin. */
                hub->last_mosquitto_error = rc;
            }
            unlock(hub);
            if (!closed && wait > 0) {
                poll(NULL, 0, wait);
            }
        }
    } else if (wait > 0) {
        poll(NULL, 0, wait);
    }

    lock(hub);
    struct request *timed_out = handle_deadlines(hub, ah_monotonic_ms());
    unlock(hub);
    while (timed_out != NULL) {
        struct request *next = timed_out->next;
        timed_out->next = NULL;
        ah_complete(hub, timed_out, NULL, AUDIOHUB_ERR_TIMEOUT);
        timed_out = next;
    }
    return AUDIOHUB_ERR_SUCCESS;
}

int audiohub_socket(struct audiohub *hub)
{
    return hub != NULL ? mosquitto_socket(hub->mosq) : -1;
}

bool audiohub_want_write(struct audiohub *hub)
{
    return hub != NULL && mosquitto_want_write(hub->mosq);
}

int audiohub_next_timeout_ms(struct audiohub *hub)
{
    if (hub == NULL) {
        return 1000;
    }
    lock(hub);
    int wait = wait_ms(hub, 1000, ah_monotonic_ms());
    unlock(hub);
    return wait;
}

static void *loop_thread(void *argument)
{
    struct audiohub *hub = argument;
    for (;;) {
        lock(hub);
        bool stop = hub->thread_stop;
        unlock(hub);
        if (stop) {
            break;
        }
        if (audiohub_loop(hub, 100) == AUDIOHUB_ERR_NO_CONN) {
            poll(NULL, 0, 20);
        }
    }
    return NULL;
}

enum audiohub_err audiohub_loop_start(struct audiohub *hub)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    if (hub->thread_running) {
        rc = AUDIOHUB_ERR_STATE;
    } else {
        hub->thread_stop = false;
        int created = pthread_create(&hub->thread, NULL, loop_thread, hub);
        if (created == 0) {
            hub->thread_running = true;
        } else {
            errno = created;
            rc = AUDIOHUB_ERR_ERRNO;
        }
    }
    unlock(hub);
    return rc;
}

enum audiohub_err audiohub_loop_stop(struct audiohub *hub, bool force)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    lock(hub);
    bool running = hub->thread_running;
    unlock(hub);
    if (!running) {
        return AUDIOHUB_ERR_SUCCESS;
    }
    if (!force) {
        int64_t deadline = ah_monotonic_ms() + STOP_GRACE_MS;
        for (;;) {
            lock(hub);
            bool finishing = hub->connection == CONN_DISCONNECTING;
            unlock(hub);
            if (!finishing || ah_monotonic_ms() >= deadline) {
                break;
            }
            poll(NULL, 0, 10);
        }
    }
    lock(hub);
    hub->thread_stop = true;
    unlock(hub);
    pthread_join(hub->thread, NULL);
    lock(hub);
    hub->thread_running = false;
    unlock(hub);
    return AUDIOHUB_ERR_SUCCESS;
}
