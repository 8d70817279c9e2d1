/*
 * A hub firmware's sensor loop on the audiohub SDK: one accessory, whose sensors are lines on stdin --
 * `inEar`, `onHead`, `overTheEar`, `offHead`, `none` (placement), `sources AA:BB:CC:DD:EE:FF [11:22:33:44:55:66]`.
 * Each line becomes one request; its result is printed when the bridge answers. End of input: waits for the
 * results still due, says goodbye (offline), exits.
 *
 *     ./hub [mqtt://127.0.0.1:1883] [hub id: hub-c] [accessory id: headphones]
 *
 * One thread: poll() waits on stdin and on the hub's socket, then audiohub_loop(hub, 0) does the network work.
 */
#define _POSIX_C_SOURCE 200809L
#include <audiohub.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void done(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    (void)userdata;
    printf("%s #%llu: %s%s%s%s\n", (const char *)result->context, (unsigned long long)result->sequence,
           result->status != AUDIOHUB_ERR_SUCCESS ? audiohub_strerror(result->status)
                                                   : audiohub_kit_error_name(result->error),
           result->message[0] != '\0' ? " -- " : "", result->message, result->duplicate ? " (duplicate)" : "");
    fflush(stdout);
}

/* One line from the sensors: a request, or an error. */
static enum audiohub_err handle(struct audiohub *hub, const char *accessory, char *line)
{
    static const char *const words[] = {"none", "inEar", "onHead", "overTheEar", "offHead"};
    for (int placement = 0; placement < 5; placement++) {
        if (strcmp(line, words[placement]) == 0) {
            return audiohub_placement(hub, accessory, (enum audiohub_placement)placement, done, "placement");
        }
    }
    if (strncmp(line, "sources", 7) == 0 && (line[7] == '\0' || line[7] == ' ')) {
        struct audiohub_address address[2] = {{0, {0}}, {0, {0}}};
        char *save = NULL;
        char *word = strtok_r(line + 7, " ", &save);
        for (int i = 0; word != NULL; i++, word = strtok_r(NULL, " ", &save)) {
            enum audiohub_err rc = i < 2 ? audiohub_address_parse(word, &address[i]) : AUDIOHUB_ERR_ADDRESS;
            if (rc != AUDIOHUB_ERR_SUCCESS) {
                return rc;
            }
        }
        return audiohub_sources(hub, accessory, &address[0], &address[1], done, "sources");
    }
    return AUDIOHUB_ERR_INVAL;
}

int main(int argc, char **argv)
{
    const char *broker = argc > 1 ? argv[1] : "mqtt://127.0.0.1:1883";
    const char *hub_id = argc > 2 ? argv[2] : "hub-c";
    const char *accessory = argc > 3 ? argv[3] : "headphones";
    struct audiohub *hub = NULL;
    enum audiohub_err rc = audiohub_lib_init();
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_new(hub_id, NULL, &hub);
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_connect(hub, broker, getenv("HUB_USERNAME"), getenv("HUB_PASSWORD"));
    /* AccessorySetupKit finished pairing; the accessory registers what it can do. */
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_pair(hub, accessory, "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, done, "pair");
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_register(hub, accessory, AUDIOHUB_CAP_ALL, done, "register");
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        fprintf(stderr, "hub: %s\n", audiohub_strerror(rc));
        return 1;
    }

    char line[256];
    bool reading = true;
    struct audiohub_stats stats = {0};
    while (reading || stats.queued > 0) {
        int socket = audiohub_socket(hub);
        struct pollfd fds[2] = {{reading ? 0 : -1, POLLIN, 0},
                                {socket, (short)(POLLIN | (audiohub_want_write(hub) ? POLLOUT : 0)), 0}};
        poll(fds, 2, audiohub_next_timeout_ms(hub));
        if (fds[0].revents != 0) {
            if (fgets(line, sizeof line, stdin) == NULL) {
                reading = false;
            } else if ((line[strcspn(line, "\r\n")] = '\0', line[0] != '\0')) {
                rc = handle(hub, accessory, line);
                if (rc != AUDIOHUB_ERR_SUCCESS) {
                    printf("%s: %s\n", line, audiohub_strerror(rc));
                }
            }
        }
        audiohub_loop(hub, 0);
        audiohub_stats_get(hub, &stats, sizeof stats);
    }
    /* Goodbye: the retained status says offline, then the loop sends it and closes. */
    audiohub_disconnect(hub);
    while (audiohub_loop(hub, 100) != AUDIOHUB_ERR_NO_CONN) {
    }
    audiohub_destroy(hub);
    audiohub_lib_cleanup();
    return 0;
}
