/*
 * A broker's URL, parsed the same way by every C program of the repository: the SDK (url.c is one of its units,
 * declared to the others through hub_private.h), hub-sim (which links the SDK), and the benchmarks' relay and loadgen
 * (which compile url.c with their own sources). Private: never installed.
 */
#ifndef AUDIOHUB_URL_H
#define AUDIOHUB_URL_H

#include "audiohub.h"

#include <stdbool.h>

/* Parses mqtt://host[:port] or mqtts://host[:port] (host may be [IPv6]): `host` (malloc'd), `port` (1883 or 8883
 * when absent), `tls`. AUDIOHUB_ERR_URL for anything else, AUDIOHUB_ERR_NOMEM. */
enum audiohub_err ah_parse_url(const char *url, char **host, int *port, bool *tls);

#endif /* AUDIOHUB_URL_H */
