#include "cmosquitto_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/// The most a writer holds: a turn writes a few packets of a few hundred bytes each. Past it, libmosquitto keeps what
/// it would write (EAGAIN) until the writer has written some; a packet larger than it is written straight.
enum { WRITER_CAPACITY = 64 * 1024 };
/// The first allocation: a report's answers and a batch's acknowledgements, without growing.
enum { WRITER_FIRST_CAPACITY = 2048 };
/// A DISCONNECT packet's first byte (MQTT's fixed header): libmosquitto closes the socket once it has written it.
enum { MQTT_DISCONNECT = 0xE0 };

struct cmosquitto_writer {
    /// The session whose `cmosquitto_writer_loop_write` runs (NULL outside it).
    struct mosquitto *mosq;
    /// The socket the held bytes are for (-1: none yet).
    int socket;
    /// bytes[start..<end] were written by libmosquitto and are not in the socket yet; `capacity` bytes allocated.
    size_t start;
    size_t end;
    size_t capacity;
    unsigned char *bytes;
    /// A packet was written straight, and only in part: the rest of it goes straight too.
    bool straight;
};

struct cmosquitto_writer *cmosquitto_writer_new(void) {
    struct cmosquitto_writer *writer = calloc(1, sizeof *writer);
    if (writer) writer->socket = -1;
    return writer;
}

/// Frees the buffer (the writer holds nothing).
static void release_bytes(struct cmosquitto_writer *writer) {
    free(writer->bytes);
    writer->bytes = NULL;
    writer->start = 0;
    writer->end = 0;
    writer->capacity = 0;
}

void cmosquitto_writer_drop(struct cmosquitto_writer *writer) {
    release_bytes(writer);
    writer->straight = false;
}

void cmosquitto_writer_destroy(struct cmosquitto_writer *writer) {
    if (!writer) return;
    cmosquitto_writer_drop(writer);
    free(writer);
}

bool cmosquitto_writer_pending(const struct cmosquitto_writer *writer, struct mosquitto *mosq) {
    return writer->start < writer->end && writer->socket == mosquitto_socket(mosq);
}

#if defined(__linux__) && defined(__GLIBC__)

/// The writer of this thread's `cmosquitto_writer_loop_write` (NULL outside it): the only state write(2) consults.
static _Thread_local struct cmosquitto_writer *current;

/// glibc's write(2), which this module's `write` stands in front of.
extern ssize_t __write(int descriptor, const void *buffer, size_t count);

/// One write(2) of what the writer holds for `socket`; what the socket does not take stays.
static void write_held(struct cmosquitto_writer *writer, int socket) {
    ssize_t wrote = __write(socket, writer->bytes + writer->start, writer->end - writer->start);
    if (wrote > 0) {
        writer->start += (size_t)wrote;
    } else if (wrote < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        // Broken (the broker closed it, or the network): libmosquitto's next read of it ends the connection.
        (void)shutdown(socket, SHUT_RDWR);
        writer->start = writer->end;
    }
    if (writer->start == writer->end) release_bytes(writer);
}

/// Room for `count` more bytes (count <= WRITER_CAPACITY - what is held); false when out of memory.
static bool make_room(struct cmosquitto_writer *writer, size_t count) {
    size_t held = writer->end - writer->start;
    if (writer->end + count <= writer->capacity) return true;
    if (held + count <= writer->capacity) {
        memmove(writer->bytes, writer->bytes + writer->start, held);
    } else {
        size_t capacity = writer->capacity ? writer->capacity : WRITER_FIRST_CAPACITY;
        while (capacity < held + count) capacity *= 2;
        if (capacity > WRITER_CAPACITY) capacity = WRITER_CAPACITY;
        unsigned char *bytes = malloc(capacity);
        if (!bytes) return false;
        if (held) memcpy(bytes, writer->bytes + writer->start, held);
        free(writer->bytes);
        writer->bytes = bytes;
        writer->capacity = capacity;
    }
    writer->start = 0;
    writer->end = held;
    return true;
}

/// write(2) for the process: the C library's, except on the current writer's socket during its
/// `cmosquitto_writer_loop_write`, where each call (libmosquitto writes a packet, or what is left of one, per call)
/// is taken whole into the writer, or refused with EAGAIN while the writer is full. A DISCONNECT, a packet larger than
/// the writer, and the rest of a packet written in part are written straight, after what the writer holds. The socket
/// must still be the session's: once libmosquitto closed it, its number is nobody's to the writer.
ssize_t write(int descriptor, const void *buffer, size_t count) {
    struct cmosquitto_writer *writer = current;
    if (!writer || descriptor != writer->socket || count == 0 || descriptor != mosquitto_socket(writer->mosq)) {
        return __write(descriptor, buffer, count);
    }
    const unsigned char *packet = buffer;
    if (writer->straight || packet[0] == MQTT_DISCONNECT || count > WRITER_CAPACITY) {
        if (writer->start < writer->end) write_held(writer, descriptor);
        if (writer->start < writer->end) {
            errno = EAGAIN;
            return -1;
        }
        ssize_t wrote = __write(descriptor, buffer, count);
        if (wrote > 0) writer->straight = (size_t)wrote < count;
        return wrote;
    }
    if (writer->end - writer->start + count > WRITER_CAPACITY || !make_room(writer, count)) {
        errno = EAGAIN;
        return -1;
    }
    memcpy(writer->bytes + writer->end, buffer, count);
    writer->end += count;
    return (ssize_t)count;
}

void cmosquitto_writer_flush(struct cmosquitto_writer *writer, struct mosquitto *mosq) {
    if (writer->start == writer->end) return;
    int socket = mosquitto_socket(mosq);
    if (socket < 0 || socket != writer->socket) {
        cmosquitto_writer_drop(writer);
        return;
    }
    int saved = errno;
    write_held(writer, socket);
    errno = saved;
}

int cmosquitto_writer_loop_write(struct cmosquitto_writer *writer, struct mosquitto *mosq, bool hold) {
    int socket = mosquitto_socket(mosq);
    if (socket != writer->socket) {
        cmosquitto_writer_drop(writer);
        writer->socket = socket;
    }
    // A callback of this write may write another session (a nested call): each restores the writer it found.
    struct cmosquitto_writer *outer = current;
    writer->mosq = mosq;
    current = writer;
    int rc = mosquitto_loop_write(mosq, 1);
    current = outer;
    writer->mosq = NULL;
    if (!hold) cmosquitto_writer_flush(writer, mosq);
    return rc;
}

#else

void cmosquitto_writer_flush(struct cmosquitto_writer *writer, struct mosquitto *mosq) {
    (void)writer;
    (void)mosq;
}

int cmosquitto_writer_loop_write(struct cmosquitto_writer *writer, struct mosquitto *mosq, bool hold) {
    (void)writer;
    (void)hold;
    return mosquitto_loop_write(mosq, 1);
}

#endif
