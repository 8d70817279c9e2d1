#ifndef C_MOSQUITTO_SHIM_H
#define C_MOSQUITTO_SHIM_H

#include <errno.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

/// errno of the calling thread: Swift cannot read the `errno` macro directly. Read it only right after a
/// libmosquitto call returned MOSQ_ERR_ERRNO.
static inline int cmosquitto_errno(void) { return errno; }

#endif
