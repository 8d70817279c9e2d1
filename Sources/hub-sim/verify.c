/*
 * --verify: every accessory's retained state against what its hub last sent, no playing device routed to two
 * accessories; and the commands the devices received against the changes that justify them.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_sim.h"

#include <mqtt_protocol.h>

#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Commands beyond what the hub's changes justify: a change applied twice (mutex held). */
uint64_t count_excess(struct sim *sim)
{
    static const char *const kinds[JUSTIFIED_KINDS] = {"PUT_ON", "TAKEN_OFF", "SOURCE_DISCONNECTED"};
    uint64_t excess = 0;
    for (long i = 0; i < sim->accessory_count; i++) {
        struct accessory *a = &sim->accessories[i];
        for (int kind = 0; kind < JUSTIFIED_KINDS; kind++) {
            for (int action = 1; action <= 4; action++) {
                if (a->cited[kind][action] > a->changes[kind]) {
                    excess += a->cited[kind][action] - a->changes[kind];
                    if (sim->excess_example[0] == '\0') {
                        snprintf(sim->excess_example, sizeof sim->excess_example,
                                 "%s: %" PRIu64 " commands of action %d for %" PRIu64 " %s changes", a->id,
                                 a->cited[kind][action], action, a->changes[kind], kinds[kind]);
                    }
                }
            }
        }
    }
    return excess;
}

struct verifier {
    struct sim *sim;
    pthread_mutex_t mutex;
    struct wire_state *states; /* by accessory index */
    bool *seen;
};

long accessory_index(struct sim *sim, const char *id)
{
    /* {prefix}-h{hub}-a{accessory} */
    size_t prefix = strlen(sim->opt.prefix);
    long hub = 0;
    long index = 0;
    if (strncmp(id, sim->opt.prefix, prefix) != 0 || sscanf(id + prefix, "-h%ld-a%ld", &hub, &index) != 2 ||
        hub < 0 || hub >= sim->opt.hubs || index < 0 || index >= sim->opt.accessories) {
        return -1;
    }
    long i = hub * sim->opt.accessories + index;
    return strcmp(sim->accessories[i].id, id) == 0 ? i : -1;
}

static void on_state(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *message)
{
    (void)mosq;
    struct verifier *verifier = userdata;
    struct wire_state state;
    if (!wire_unpack_state(message->payload, (size_t)message->payloadlen, &state)) {
        return;
    }
    long index = accessory_index(verifier->sim, state.accessory_id);
    if (index < 0) {
        return;
    }
    pthread_mutex_lock(&verifier->mutex);
    verifier->states[index] = state;
    verifier->seen[index] = true;
    pthread_mutex_unlock(&verifier->mutex);
}

/* Runs the reader's network on this thread for `ms` milliseconds, polling its socket. Not libmosquitto's loop: its
 * select() refuses a descriptor past FD_SETSIZE (1,024), and a process with a few hundred hubs holds more than that
 * (a hub holds five), so that the reader created last read nothing and every state looked missing. */
static int run_reader(struct mosquitto *reader, long ms)
{
    uint64_t until = now_ns() + (uint64_t)ms * 1000000ULL;
    for (uint64_t now = now_ns(); now < until; now = now_ns()) {
        struct pollfd socket = {.fd = mosquitto_socket(reader), .events = POLLIN};
        if (socket.fd < 0) {
            return MOSQ_ERR_NO_CONN;
        }
        if (mosquitto_want_write(reader)) {
            socket.events |= POLLOUT;
        }
        int ready = poll(&socket, 1, (int)((until - now) / 1000000ULL) + 1);
        int rc = MOSQ_ERR_SUCCESS;
        if (ready > 0 && (socket.revents & (POLLIN | POLLHUP | POLLERR))) {
            rc = mosquitto_loop_read(reader, 1);
        }
        if (rc == MOSQ_ERR_SUCCESS && ready > 0 && (socket.revents & POLLOUT)) {
            rc = mosquitto_loop_write(reader, 1);
        }
        if (rc == MOSQ_ERR_SUCCESS) {
            rc = mosquitto_loop_misc(reader);
        }
        if (rc != MOSQ_ERR_SUCCESS) {
            return rc;
        }
    }
    return MOSQ_ERR_SUCCESS;
}

/* Why the retained state differs from what the hub last sent, or NULL when it does not. */
static const char *mismatch(struct sim *sim, long index, const struct wire_state *state, char *why, size_t size)
{
    struct accessory *accessory = &sim->accessories[index];
    struct audiohub_accessory cached;
    if (audiohub_accessory_get(sim->hubs[accessory->hub], accessory->id, &cached, sizeof cached) != AUDIOHUB_ERR_SUCCESS) {
        snprintf(why, size, "the hub does not know it");
        return why;
    }
    const struct expected *e = &accessory->expected;
    char hub_id[AUDIOHUB_ID_MAX + 1];
    hub_name(sim, accessory->hub, hub_id, sizeof hub_id);
    const struct audiohub_address *primary = &sim->devices[e->primary].address;
    const struct audiohub_address *secondary = &sim->devices[e->secondary].address;
    if (strcmp(state->hub_id, hub_id) != 0) {
        snprintf(why, size, "hub %s, expected %s", state->hub_id, hub_id);
    } else if (state->registration != AUDIOHUB_REGISTRATION_REGISTERED) {
        snprintf(why, size, "registration %d", state->registration);
    } else if (state->hardware_capabilities != sim->capabilities || state->capabilities != sim->capabilities) {
        snprintf(why, size, "capabilities %u/%u", state->hardware_capabilities, state->capabilities);
    } else if ((int)state->placement != (int)e->placement) {
        snprintf(why, size, "placement %d, last sent %d", state->placement, e->placement);
    } else if (memcmp(state->primary, primary->bytes, 6) != 0 || memcmp(state->secondary, secondary->bytes, 6) != 0) {
        snprintf(why, size, "sources differ from the last sent");
    } else if (state->last_sequence != cached.last_sequence) {
        snprintf(why, size, "last sequence %" PRIu64 ", last sent %" PRIu64, state->last_sequence,
                 cached.last_sequence);
    } else if (state->has_spatial_extension != (sim->opt.head_tracking > 0) ||
               (state->has_spatial_extension &&
                (state->spatial_extension[0] != SIM_SPATIAL_EXTENSION.component_type ||
                 state->spatial_extension[1] != SIM_SPATIAL_EXTENSION.component_sub_type ||
                 state->spatial_extension[2] != SIM_SPATIAL_EXTENSION.component_manufacturer))) {
        snprintf(why, size, "spatial extension %s", state->has_spatial_extension ? "not the one sent" : "missing");
    } else if (state->last_error != AUDIOHUB_KIT_NONE) {
        snprintf(why, size, "last error %d", state->last_error);
    } else if (state->stale) {
        snprintf(why, size, "stale");
    } else {
        return NULL;
    }
    return why;
}

/* Reads the retained states and counts the accessories whose state is not what the hub last sent. Retries for up
 * to 10 s, as the bridge's last states may still be on their way. */
long verify(struct sim *sim, char *first, size_t size)
{
    struct verifier verifier = {.sim = sim};
    pthread_mutex_init(&verifier.mutex, NULL);
    verifier.states = calloc((size_t)sim->accessory_count, sizeof *verifier.states);
    verifier.seen = calloc((size_t)sim->accessory_count, sizeof *verifier.seen);
    char client_id[128];
    snprintf(client_id, sizeof client_id, "%s-verifier-%ld", sim->opt.prefix, (long)getpid());
    struct mosquitto *reader = mosquitto_new(client_id, true, &verifier);
    long mismatches = sim->accessory_count;
    if (verifier.states == NULL || verifier.seen == NULL || reader == NULL) {
        snprintf(first, size, "out of memory");
        goto done;
    }
    mosquitto_int_option(reader, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_message_callback_set(reader, on_state);
    if (sim->tls) {
        mosquitto_tls_set(reader, sim->opt.ca_file, NULL, NULL, NULL, NULL);
    }
    if (mosquitto_connect(reader, sim->host, sim->port, 30) != MOSQ_ERR_SUCCESS) {
        snprintf(first, size, "cannot connect to read the states");
        goto done;
    }
    char filter[300];
    snprintf(filter, sizeof filter, sim->slots > 0 ? "%s/slots/+/accessories/+/state" : "%s/accessories/+/state",
             sim->opt.topic_root);
    mosquitto_subscribe(reader, NULL, filter, 1);
    uint64_t deadline = now_ns() + 10000000000ULL;
    for (;;) {
        int rc = run_reader(reader, 200);
        if (rc != MOSQ_ERR_SUCCESS) {
            snprintf(first, size, "the connection reading the states failed: %s", mosquitto_strerror(rc));
            break;
        }
        long count = 0;
        first[0] = '\0';
        pthread_mutex_lock(&verifier.mutex);
        for (long i = 0; i < sim->accessory_count; i++) {
            char why[200];
            const char *reason = verifier.seen[i] ? mismatch(sim, i, &verifier.states[i], why, sizeof why)
                                                  : "no retained state";
            if (reason != NULL) {
                if (count++ == 0) {
                    snprintf(first, size, "%s: %s", sim->accessories[i].id, reason);
                }
            }
        }
        /* Rule 3: a playing device is routed to one accessory at most. */
        for (long i = 0; i < sim->accessory_count; i++) {
            static const uint8_t none[6] = {0};
            if (!verifier.seen[i] || memcmp(verifier.states[i].routed, none, 6) == 0) {
                continue;
            }
            for (long j = i + 1; j < sim->accessory_count; j++) {
                if (verifier.seen[j] && memcmp(verifier.states[i].routed, verifier.states[j].routed, 6) == 0) {
                    if (count++ == 0) {
                        snprintf(first, size, "%s and %s: both routed from the same device", sim->accessories[i].id,
                                 sim->accessories[j].id);
                    }
                }
            }
        }
        pthread_mutex_unlock(&verifier.mutex);
        mismatches = count;
        if (count == 0 || now_ns() >= deadline) {
            break;
        }
    }
    mosquitto_disconnect(reader);
done:
    mosquitto_destroy(reader);
    free(verifier.states);
    free(verifier.seen);
    pthread_mutex_destroy(&verifier.mutex);
    return mismatches;
}
