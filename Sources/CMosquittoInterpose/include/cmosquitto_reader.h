#ifndef CMOSQUITTO_READER_H
#define CMOSQUITTO_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <mosquitto.h>

/// One session's reads of its socket, buffered.
///
/// libmosquitto 2.0 reads a packet with one read(2) for its first byte, one for each byte of its remaining length and
/// one for the rest, and one more that finds the socket empty: 3 to 4 system calls for a 4-byte PUBACK. A reader
/// serves those reads from one read(2) of up to 1 KiB, which takes every packet that has arrived at once.
///
/// libmosquitto has no hook for its reads, so this module defines read(2) for the process (glibc on Linux only;
/// elsewhere `cmosquitto_reader_loop_read` is `mosquitto_loop_read` and nothing is buffered). That read serves the
/// reader of the calling thread's `cmosquitto_reader_loop_read`, for its socket only, and is the C library's for
/// every other call: any other thread, descriptor or moment.
///
/// Opaque; used by one thread at a time (a session's network thread). Not for a TLS connection: OpenSSL reads the
/// socket outside the reader's calls too (during the handshake), and would skip what the reader holds.
struct cmosquitto_reader;

/// A reader with nothing buffered (and no buffer: one is allocated while it holds bytes). NULL when out of memory.
struct cmosquitto_reader *cmosquitto_reader_new(void);

/// Frees the reader and what it holds.
void cmosquitto_reader_destroy(struct cmosquitto_reader *reader);

/// `mosquitto_loop_read(mosq, 1)`, with the calling thread's reads of `mosq`'s socket served by `reader`. What the
/// reader holds from another socket (an earlier connection) is dropped first. Returns libmosquitto's code.
int cmosquitto_reader_loop_read(struct cmosquitto_reader *reader, struct mosquitto *mosq);

/// Whether the reader holds bytes of `mosq`'s current socket that libmosquitto has not read yet: the socket may then
/// be empty while packets wait here, and the session must read without waiting for the socket to be readable.
bool cmosquitto_reader_pending(const struct cmosquitto_reader *reader, struct mosquitto *mosq);

/// Drops what the reader holds: its connection ended, or a new one is being made (which may get the same socket
/// number).
void cmosquitto_reader_drop(struct cmosquitto_reader *reader);

#endif
