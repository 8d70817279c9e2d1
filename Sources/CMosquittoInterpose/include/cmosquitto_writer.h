#ifndef CMOSQUITTO_WRITER_H
#define CMOSQUITTO_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <mosquitto.h>

/// One session's writes to its socket, gathered.
///
/// libmosquitto 2.0 writes each packet with a write(2) of its own: a report's PUBACK, result, state and command are
/// four system calls, and with TCP_NODELAY four segments unless the socket is corked around them (two setsockopt(2)
/// calls more). A writer takes what one `cmosquitto_writer_loop_write` writes, and writes it with one write(2) at its
/// end, or, while held, at `cmosquitto_writer_flush`: one system call and one segment for a batch of packets.
///
/// libmosquitto has no hook for its writes, so this module defines write(2) for the process (glibc on Linux only;
/// elsewhere `cmosquitto_writer_loop_write` is `mosquitto_loop_write` and nothing is gathered). That write serves the
/// writer of the calling thread's `cmosquitto_writer_loop_write`, for its socket only, and is the C library's for
/// every other call: any other thread, descriptor or moment. To libmosquitto each packet is written whole, or not at
/// all (EAGAIN: it keeps the packet and writes it again later): what the socket cannot take yet waits in the writer
/// (`cmosquitto_writer_pending`), in front of everything written after it. A DISCONNECT, after which libmosquitto
/// closes the socket, is written straight after what waits; so is a packet larger than the writer takes.
///
/// Opaque; used by one thread at a time (a session's network thread). Not for a TLS connection: OpenSSL writes the
/// socket itself.
struct cmosquitto_writer;

/// A writer with nothing gathered (and no buffer: one is allocated while it holds bytes). NULL when out of memory.
struct cmosquitto_writer *cmosquitto_writer_new(void);

/// Frees the writer and what it holds.
void cmosquitto_writer_destroy(struct cmosquitto_writer *writer);

/// `mosquitto_loop_write(mosq, 1)`, with the calling thread's writes to `mosq`'s socket gathered by `writer`, then
/// flushed (`cmosquitto_writer_flush`) unless `hold`. What the writer holds from another socket (an earlier
/// connection) is dropped first. Returns libmosquitto's code.
int cmosquitto_writer_loop_write(struct cmosquitto_writer *writer, struct mosquitto *mosq, bool hold);

/// Writes what the writer holds for `mosq`'s socket with one write(2). What the socket does not take now stays, to be
/// written first the next time. On an error that ends the connection (the broker closed it), what is held is dropped
/// and the socket shut down: libmosquitto's next read finds it closed and ends the connection, as it does for a
/// connection its own write found broken.
void cmosquitto_writer_flush(struct cmosquitto_writer *writer, struct mosquitto *mosq);

/// Whether the writer holds bytes for `mosq`'s current socket: the socket must then be watched for writing, and
/// flushed when it may be.
bool cmosquitto_writer_pending(const struct cmosquitto_writer *writer, struct mosquitto *mosq);

/// Drops what the writer holds: its connection ended, or a new one is being made (which may get the same socket
/// number).
void cmosquitto_writer_drop(struct cmosquitto_writer *writer);

#endif
