#ifndef CMOSQUITTO_HANDLE_H
#define CMOSQUITTO_HANDLE_H

#include <stdbool.h>
#include <mosquitto.h>

/// `mosquitto_new`, without the handle's wake-up socket pair.
///
/// libmosquitto 2.0 gives every handle a pair of connected sockets, and writes a byte to it for every packet it queues,
/// so that `mosquitto_loop`'s select(2) wakes for it. A session run by its own network loop (which never calls
/// `mosquitto_loop`, and wakes itself) never reads the pair: the writes only fill it, then fail, one failing write(2) a
/// packet, and the pair costs the handle two descriptors. libmosquitto makes the handle without one (and writes
/// nothing) when the pair cannot be made; this module defines socketpair(2) for the process (glibc on Linux only;
/// elsewhere this is `mosquitto_new`), failing during this call on the calling thread, and the system call for
/// every other call.
///
/// Only for a handle whose `mosquitto_loop`, `mosquitto_loop_forever` and `mosquitto_loop_start` are never called:
/// those wait on the pair for queued packets.
struct mosquitto *cmosquitto_new(const char *id, bool clean_start, void *userdata);

#endif
