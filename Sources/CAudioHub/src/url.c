/*
 * A broker's URL: mqtt://host[:port] or mqtts://host[:port], host a name, an address or [an IPv6 address]. See
 * url.h.
 */
#include "url.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum audiohub_err ah_parse_url(const char *url, char **host, int *port, bool *tls)
{
    const char *rest;
    if (strncmp(url, "mqtt://", 7) == 0) {
        rest = url + 7;
        *tls = false;
        *port = 1883;
    } else if (strncmp(url, "mqtts://", 8) == 0) {
        rest = url + 8;
        *tls = true;
        *port = 8883;
    } else {
        return AUDIOHUB_ERR_URL;
    }
    const char *host_start = rest;
    const char *host_end;
    const char *after;
    if (*rest == '[') {
        host_start = rest + 1;
        host_end = strchr(host_start, ']');
        if (host_end == NULL) {
            return AUDIOHUB_ERR_URL;
        }
        after = host_end + 1;
    } else {
        host_end = rest + strcspn(rest, ":/");
        after = host_end;
    }
    if (host_end == host_start || (size_t)(host_end - host_start) > 253) {
        return AUDIOHUB_ERR_URL;
    }
    if (*after == ':') {
        char *end;
        errno = 0;
        long value = strtol(after + 1, &end, 10);
        if (errno != 0 || end == after + 1 || value < 1 || value > 65535) {
            return AUDIOHUB_ERR_URL;
        }
        *port = (int)value;
        after = end;
    }
    if (*after == '/') {
        after++;
    }
    if (*after != '\0') {
        return AUDIOHUB_ERR_URL;
    }
    char *copy = malloc((size_t)(host_end - host_start) + 1);
    if (copy == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    memcpy(copy, host_start, (size_t)(host_end - host_start));
    copy[host_end - host_start] = '\0';
    *host = copy;
    return AUDIOHUB_ERR_SUCCESS;
}
