#include "cmosquitto_reader.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/// The most one read(2) takes: a flood's wake-up finds a few reports of ~150 bytes and their acknowledgements; a
/// larger packet's payload is read straight into libmosquitto's buffer. Allocated only while bytes are held (an idle
/// session holds none), and small enough for glibc's per-thread cache of free blocks.
enum { READER_CAPACITY = 1024 };

struct cmosquitto_reader {
    /// The session whose `cmosquitto_reader_loop_read` runs (NULL outside it).
    struct mosquitto *mosq;
    /// The socket the held bytes came from (-1: none yet).
    int socket;
    /// bytes[start..<end] were read from `socket` and not handed to libmosquitto yet.
    size_t start;
    size_t end;
    unsigned char *bytes;
};

struct cmosquitto_reader *cmosquitto_reader_new(void) {
    struct cmosquitto_reader *reader = calloc(1, sizeof *reader);
    if (reader) reader->socket = -1;
    return reader;
}

void cmosquitto_reader_drop(struct cmosquitto_reader *reader) {
    free(reader->bytes);
    reader->bytes = NULL;
    reader->start = 0;
    reader->end = 0;
}

void cmosquitto_reader_destroy(struct cmosquitto_reader *reader) {
    if (!reader) return;
    cmosquitto_reader_drop(reader);
    free(reader);
}

bool cmosquitto_reader_pending(const struct cmosquitto_reader *reader, struct mosquitto *mosq) {
    return reader->start < reader->end && reader->socket == mosquitto_socket(mosq);
}

#if defined(__linux__) && defined(__GLIBC__)

/// The reader of this thread's `cmosquitto_reader_loop_read` (NULL outside it): the only state read(2) consults.
static _Thread_local struct cmosquitto_reader *current;

/// glibc's read(2), which this module's `read` stands in front of.
extern ssize_t __read(int descriptor, void *buffer, size_t count);

/// read(2) for the process: the C library's, except on the current reader's socket during its
/// `cmosquitto_reader_loop_read`, where what the reader holds is handed out first, and an empty reader takes what the
/// socket has (up to READER_CAPACITY) in one call. Errors, end of file and errno are the C library's. The socket must
/// still be the session's: once libmosquitto closed it (a callback of the same call may open a file that gets its
/// number), its number is nobody's to the reader.
ssize_t read(int descriptor, void *buffer, size_t count) {
    struct cmosquitto_reader *reader = current;
    if (!reader || descriptor != reader->socket || count == 0 || descriptor != mosquitto_socket(reader->mosq)) {
        return __read(descriptor, buffer, count);
    }
    if (reader->start == reader->end) {
        if (count >= READER_CAPACITY) return __read(descriptor, buffer, count);
        if (!reader->bytes && !(reader->bytes = malloc(READER_CAPACITY))) return __read(descriptor, buffer, count);
        ssize_t got = __read(descriptor, reader->bytes, READER_CAPACITY);
        if (got <= 0) return got;
        reader->start = 0;
        reader->end = (size_t)got;
    }
    size_t held = reader->end - reader->start;
    size_t given = count < held ? count : held;
    memcpy(buffer, reader->bytes + reader->start, given);
    reader->start += given;
    return (ssize_t)given;
}

int cmosquitto_reader_loop_read(struct cmosquitto_reader *reader, struct mosquitto *mosq) {
    int socket = mosquitto_socket(mosq);
    if (socket != reader->socket) {
        cmosquitto_reader_drop(reader);
        reader->socket = socket;
    }
    // A callback of this read may read another session (a nested call): each restores the reader it found.
    struct cmosquitto_reader *outer = current;
    reader->mosq = mosq;
    current = reader;
    int rc = mosquitto_loop_read(mosq, 1);
    current = outer;
    reader->mosq = NULL;
    if (reader->start == reader->end) cmosquitto_reader_drop(reader);
    return rc;
}

#else

int cmosquitto_reader_loop_read(struct cmosquitto_reader *reader, struct mosquitto *mosq) {
    (void)reader;
    return mosquitto_loop_read(mosq, 1);
}

#endif
