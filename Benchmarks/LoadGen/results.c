/*
 * The results: each matched to the report it answers by (accessory, sequence), its latency recorded, its accessory
 * idle again; the probe's answer; duplicates, strays and failures counted.
 */
#include "loadgen.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void record_failure(struct loadgen *lg, const char *accessory, const Audioaccessory__V1__RequestResult *result)
{
    if (lg->first_failure[0] == '\0') {
        snprintf(lg->first_failure, sizeof lg->first_failure, "%s sequence %" PRIu64 ": error %d: %s", accessory,
                 result->sequence, (int)result->error, result->message);
    }
}

/* Accessory index from "{result prefix}{accessory prefix}-{index}/result"; -1 for the probe, -2 for anything else. */
static long result_index(const struct loadgen *lg, const char *topic)
{
    if (strncmp(topic, lg->result_prefix, lg->result_prefix_len) != 0) {
        return -2;
    }
    const char *id = topic + lg->result_prefix_len;
    if (strcmp(id, PROBE_ID "/result") == 0) {
        return -1;
    }
    size_t prefix = strlen(lg->opt.accessory_prefix);
    if (strncmp(id, lg->opt.accessory_prefix, prefix) != 0 || id[prefix] != '-') {
        return -2;
    }
    char *end;
    long index = strtol(id + prefix + 1, &end, 10);
    if (end == id + prefix + 1 || strcmp(end, "/result") != 0 || index < 0 || index >= lg->opt.accessories) {
        return -2;
    }
    return index;
}

/* Makes room for one more element in `*array` (`count` used of `*capacity`, `size` bytes each; the first allocation
 * holds `first`); -1 after saying so when out of memory (the run then stops). */
static int reserve(struct loadgen *lg, void **array, size_t count, size_t *capacity, size_t size, size_t first,
                   const char *what)
{
    if (count < *capacity) {
        return 0;
    }
    size_t grown_capacity = *capacity ? *capacity * 2 : first;
    void *grown = realloc(*array, grown_capacity * size);
    if (grown == NULL) {
        fprintf(stderr, "loadgen: out of memory for %s\n", what);
        lg->failed_fatally = true;
        return -1;
    }
    *array = grown;
    *capacity = grown_capacity;
    return 0;
}

/* Opens every --window that began by `arrived` (none of them may stay without a first index); -1 when out of
 * memory. */
static int open_windows(struct loadgen *lg, uint64_t arrived)
{
    uint64_t elapsed = arrived > lg->measure_started_ns ? arrived - lg->measure_started_ns : 0;
    size_t window = (size_t)(elapsed / seconds_ns(lg->opt.window));
    while (lg->windows <= window) {
        if (reserve(lg, (void **)&lg->window_first, lg->windows, &lg->window_capacity, sizeof *lg->window_first, 64,
                    "windows") != 0) {
            return -1;
        }
        lg->window_first[lg->windows++] = lg->results;
    }
    return 0;
}

static void on_result(struct loadgen *lg, long index, const Audioaccessory__V1__RequestResult *result)
{
    uint64_t arrived = now_ns();
    struct accessory *accessory = &lg->accessories[index];
    bool success = result->error == AUDIOACCESSORY__V1__ERROR_CODE__ERROR_CODE_NONE;
    uint64_t sequence = result->sequence;
    if (lg->phase == PHASE_SETUP && sequence >= 1 && sequence <= 3) {
        if (accessory->setup_answered & (1u << sequence)) {
            lg->duplicated++;
            return;
        }
        accessory->setup_answered |= (uint8_t)(1u << sequence);
        lg->setup_pending--;
        if (!success) {
            lg->setup_failed++;
            record_failure(lg, accessory_topic(lg, (size_t)index), result);
        }
        return;
    }
    if (accessory->outstanding != 0 && sequence == accessory->outstanding) {
        if (reserve(lg, (void **)&lg->latencies_ns, lg->results, &lg->latency_capacity, sizeof *lg->latencies_ns,
                    65536, "latencies") != 0 ||
            open_windows(lg, arrived) != 0 ||
            (lg->opt.trace != NULL && reserve(lg, (void **)&lg->sent_ns, lg->results, &lg->sent_capacity,
                                              sizeof *lg->sent_ns, 65536, "the trace") != 0)) {
            return;
        }
        if (lg->opt.trace != NULL) {
            lg->sent_ns[lg->results] = accessory->sent_at_ns;
        }
        lg->latencies_ns[lg->results++] = arrived - accessory->sent_at_ns;
        lg->last_result_ns = arrived;
        accessory->answered = sequence;
        accessory->outstanding = 0;
        lg->outstanding--;
        if (!success) {
            lg->failed++;
            record_failure(lg, accessory_topic(lg, (size_t)index), result);
        }
        push_idle(lg, (uint32_t)index);
    } else if (sequence <= accessory->answered) {
        lg->duplicated++;
    } else {
        lg->unexpected++;
    }
}

void on_message(struct mosquitto *mosq, void *userdata, const struct mosquitto_message *msg,
                const mosquitto_property *properties)
{
    (void)mosq;
    (void)properties;
    struct loadgen *lg = userdata;
    long index = result_index(lg, msg->topic);
    if (index == -2) {
        lg->unexpected++;
        return;
    }
    if (index == -1) {
        lg->probe_answered = true;
        return;
    }
    Audioaccessory__V1__RequestResult *result =
        audioaccessory__v1__request_result__unpack(NULL, (size_t)msg->payloadlen, msg->payload);
    if (result == NULL) {
        fprintf(stderr, "loadgen: %s: not a RequestResult (%d bytes)\n", msg->topic, msg->payloadlen);
        lg->unexpected++;
        return;
    }
    on_result(lg, index, result);
    audioaccessory__v1__request_result__free_unpacked(result, NULL);
}
