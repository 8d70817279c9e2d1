#ifndef C_MOSQUITTO_SHIM_H
#define C_MOSQUITTO_SHIM_H

#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

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

#endif
