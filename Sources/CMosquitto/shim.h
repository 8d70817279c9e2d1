#ifndef C_MOSQUITTO_SHIM_H
#define C_MOSQUITTO_SHIM_H

#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdint.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#ifdef __linux__
#include <sys/epoll.h>
#endif

/// errno of the calling thread: Swift cannot read the `errno` macro directly. Read it only right after a
/// libmosquitto call returned MOSQ_ERR_ERRNO.
static inline int cmosquitto_errno(void) { return errno; }

/// TCP_CORK on or off: while on, the kernel keeps what is written until a full segment or until it is turned off,
/// then sends it at once. Fails harmlessly (and is ignored) on a socket that is not TCP; does nothing where the
/// system has no TCP_CORK (Linux has).
static inline void cmosquitto_cork(int socket, bool on) {
#ifdef TCP_CORK
    int value = on ? 1 : 0;
    (void)setsockopt(socket, IPPROTO_TCP, TCP_CORK, &value, sizeof value);
#else
    (void)socket;
    (void)on;
#endif
}

#ifdef __linux__
/// epoll_ctl with the event's data a 64-bit token (Swift cannot build a `struct epoll_event`: it is packed on x86-64).
static inline int cmosquitto_epoll_control(int epoll, int operation, int descriptor, uint32_t events, uint64_t token) {
    struct epoll_event event = {.events = events, .data.u64 = token};
    return epoll_ctl(epoll, operation, descriptor, &event);
}

/// epoll_wait for at most 64 descriptors, their tokens and events copied into `tokens` and `events` (each at least
/// 64 long); returns how many, or -1 (errno says why).
static inline int cmosquitto_epoll_wait(int epoll, uint64_t *tokens, uint32_t *events, int timeout) {
    struct epoll_event ready[64];
    int count = epoll_wait(epoll, ready, 64, timeout);
    for (int index = 0; index < count; index++) {
        tokens[index] = ready[index].data.u64;
        events[index] = ready[index].events;
    }
    return count;
}
#endif

#endif
