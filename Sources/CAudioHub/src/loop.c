/*
 * The loop: audiohub_loop (connection attempts, waiting in poll, libmosquitto's read, write and housekeeping, the
 * deadlines of the requests in flight), its wake-up, what a caller's own poll loop needs, and the loop's thread
 * (audiohub_loop_start, audiohub_loop_stop).
 *
 * Not mosquitto_loop: in threaded mode libmosquitto writes a byte to its own socket pair for every packet queued,
 * and mosquitto_loop's select wakes for each and reads one, so a hub streaming head-tracking frames paid a wake-up of
 * the loop per frame (docs/performance-history.md, "The hub's loop wakes once for a burst"). Here the loop polls its
 * socket and a pipe of its own, and the thread that queues packets while it waits writes to that pipe once, however
 * many it queues before the loop runs (unlock, hub_private.h); libmosquitto's pair fills and its writes fail, unread.
 * poll also has no FD_SETSIZE limit on the socket's number.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#define STOP_GRACE_MS 3000
/* The longest wait in poll: libmosquitto's housekeeping (keepalive) runs at least this often. */
#define POLL_MAX_MS 1000

static bool set_flags(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

bool ah_wake_open(struct audiohub *hub)
{
    if (pipe(hub->wake) != 0) {
        hub->wake[0] = hub->wake[1] = -1;
        return false;
    }
    if (!set_flags(hub->wake[0]) || !set_flags(hub->wake[1])) {
        int saved = errno;
        ah_wake_close(hub);
        errno = saved;
        return false;
    }
    return true;
}

void ah_wake_close(struct audiohub *hub)
{
    for (int i = 0; i < 2; i++) {
        if (hub->wake[i] >= 0) {
            close(hub->wake[i]);
            hub->wake[i] = -1;
        }
    }
}

void ah_wake_loop(struct audiohub *hub)
{
    hub->wake_pending = true;
    const char byte = 0;
    if (write(hub->wake[1], &byte, 1) < 0) {
        /* Full (EAGAIN): a byte the loop has not read yet wakes it anyway. */
    }
}

/* A libmosquitto call's code, MOSQ_ERR_NO_CONN when it succeeded but closed the socket. */
static int connection_kept(struct audiohub *hub, int rc)
{
    return rc == MOSQ_ERR_SUCCESS && mosquitto_socket(hub->mosq) < 0 ? MOSQ_ERR_NO_CONN : rc;
}

/* One turn on the socket: poll it and the wake-up pipe for at most `wait` ms, then read what came, write what is
 * queued, and libmosquitto's housekeeping. Returns libmosquitto's code (MOSQ_ERR_ERRNO when poll failed). */
static int service(struct audiohub *hub, int wait)
{
    lock(hub);
    int socket = mosquitto_socket(hub->mosq);
    bool writing = mosquitto_want_write(hub->mosq);
    /* Asking to write, poll returns as soon as the socket can take it: no wake-up needed meanwhile. */
    hub->polling = socket >= 0 && !writing;
    unlock(hub);
    if (socket < 0) {
        return MOSQ_ERR_NO_CONN;
    }
    struct pollfd fds[2] = {{socket, (short)(POLLIN | (writing ? POLLOUT : 0)), 0}, {hub->wake[0], POLLIN, 0}};
    int ready = poll(fds, 2, wait < POLL_MAX_MS ? wait : POLL_MAX_MS);
    int saved = errno;
    lock(hub);
    hub->polling = false;
    if (fds[1].revents != 0) {
        char drain[64];
        while (read(hub->wake[0], drain, sizeof drain) > 0) {
        }
        hub->wake_pending = false;
    }
    unlock(hub);
    if (ready < 0) {
        errno = saved;
        return saved == EINTR ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ERRNO;
    }
    int rc = MOSQ_ERR_SUCCESS;
    /* A TLS handshake goes on in libmosquitto's read, whichever way the socket became ready. */
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 || (hub->tls && fds[0].revents != 0)) {
        rc = connection_kept(hub, mosquitto_loop_read(hub->mosq, 1));
    }
    /* What came in may have queued packets (an acknowledgement, a request sent again from a callback). */
    if (rc == MOSQ_ERR_SUCCESS && mosquitto_want_write(hub->mosq)) {
        rc = connection_kept(hub, mosquitto_loop_write(hub->mosq, 1));
    }
    return rc == MOSQ_ERR_SUCCESS ? mosquitto_loop_misc(hub->mosq) : rc;
}

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
        int rc = service(hub, wait);
        if (rc != MOSQ_ERR_SUCCESS) {
            lock(hub);
            bool closed = mosquitto_socket(hub->mosq) < 0;
            /* A failure that closed the socket without ah_on_disconnect (e.g. the connect itself). */
            if (closed && hub->connection != CONN_IDLE && hub->connection != CONN_WAITING) {
                if (hub->connection == CONN_DISCONNECTING) {
                    hub->connection = CONN_IDLE;
                } else if (hub->connection == CONN_MOVING) {
                    hub->connection = CONN_WAITING; /* at once, under the new root */
                    hub->reconnect_at_ms = ah_monotonic_ms();
                } else {
                    hub->last_mosquitto_error = rc;
                    ah_schedule_reconnect(hub);
                }
            } else if (!closed) {
                /* A failure that leaves the socket (poll itself failed): wait rather than spin. */
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
