#include "cmosquitto_handle.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__linux__) && defined(__GLIBC__) && defined(SYS_socketpair)

/// Set while the calling thread is in `cmosquitto_new`: the only state socketpair(2) consults.
static _Thread_local bool making;

/// socketpair(2) for the process: the system call, as the C library makes it, except during the calling thread's
/// `cmosquitto_new`, where it fails: libmosquitto then makes the handle without its wake-up pair.
int socketpair(int domain, int type, int protocol, int descriptors[2]) {
    if (making) {
        errno = EMFILE;
        return -1;
    }
    return (int)syscall(SYS_socketpair, domain, type, protocol, descriptors);
}

struct mosquitto *cmosquitto_new(const char *id, bool clean_start, void *userdata) {
    making = true;
    struct mosquitto *mosq = mosquitto_new(id, clean_start, userdata);
    making = false;
    return mosq;
}

#else

struct mosquitto *cmosquitto_new(const char *id, bool clean_start, void *userdata) {
    return mosquitto_new(id, clean_start, userdata);
}

#endif
