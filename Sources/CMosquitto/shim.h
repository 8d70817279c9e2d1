#ifndef C_MOSQUITTO_SHIM_H
#define C_MOSQUITTO_SHIM_H

#include <errno.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

/// errno of the calling thread: Swift cannot read the `errno` macro directly. Read it only right after a
/// libmosquitto call returned MOSQ_ERR_ERRNO.
static inline int cmosquitto_errno(void) { return errno; }

/// Sets errno to 0, so that a libmosquitto call that succeeds without a system call leaves no stale EAGAIN behind.
static inline void cmosquitto_clear_errno(void) { errno = 0; }

/// Whether the last system call would have blocked (EAGAIN or EWOULDBLOCK).
static inline int cmosquitto_would_block(void) { return errno == EAGAIN || errno == EWOULDBLOCK; }

#endif
