/*
 * loadgen: one hub with many accessories, for scripts/bench-e2e.sh. Measures the bridge (or the relay) end to end
 * through a broker: reports out, results back, latency and throughput.
 *
 * 1. Connects (MQTT 5, clean start), subscribes at QoS 1 to R/hubs/{hub}/accessories/+/result.
 * 2. Ready check: publishes an unsequenced Unpaired for the accessory "probe" every 200 ms until any result for it
 *    comes back, so that the run starts only once the other side is subscribed and answering.
 * 3. Set-up (not timed): for each accessory, sequenced telemetry starting at 1 (a Paired restarts the count, so a
 *    second run on the same accessories works): Paired (audio switching and placement), Register (both), Sources
 *    (primary --source, 12:34:56:78:9A:BC by default); then a retained SourceState {ACTIVITY_MEDIA} on
 *    R/sources/{source}/state. Several loadgens on one cluster give each hub a device of its own (--source): one
 *    device listed by every hub would be shared by every slot, and arbitrated through etcd at each put-on.
 *    With --own-sources, each accessory lists a source of its own instead (02:00:00:00:00:00 plus its index), whose
 *    state is never published: a fleet of idle phones, for the memory benchmark.
 *    Waits for every set-up result, lets the other side settle (--settle seconds: acknowledging a burst of
 *    thousands of messages keeps libmosquitto busy for a while), and checks that it answers the probe again.
 * 4. Measured: placement reports, ON_HEAD and OFF_HEAD alternately per accessory, at most one outstanding per
 *    accessory (an accessory's next report leaves only once the result of its previous one arrived). --rate 0
 *    floods (every answered accessory is sent again at once); --rate N paces N reports/s over the idle accessories.
 *    Stops sending after --seconds or --reports, then waits up to --drain seconds for the outstanding results:
 *    those still missing are lost.
 * Results are matched to reports by (accessory, sequence); latency is publish -> result on the monotonic clock.
 *
 * One thread: this program drives libmosquitto's loop itself (mosquitto_loop) and publishes between iterations.
 *
 * Usage: loadgen [--broker mqtt://127.0.0.1:1883] [--topic-root audio] [--hub load-hub] [--accessories 1000]
 *                [--rate 0] [--seconds 10] [--reports N] [--drain 5] [--settle 1] [--client-id ID] [--json]
 *                [--own-sources | --source 123456789abc] [--server-pid PID] [--broker-pid PID] [--source-root R]
 * --source-root: where the playing devices' topics are when they are not under --topic-root (a cluster's slot's root
 * is R/slots/{slot}, its devices' R). --ready-file PATH: created when the measured phase starts, so that a script
 * running several loadgens can measure one window inside all their phases. --accessory-prefix P: accessory ids are
 * "P-{index}" ("acc-{index}" by default), so that several loadgens can share one bridge. --trace FILE: every
 * measured result as a line "SENT_MS LATENCY_MS" (sent: since the measured phase began), in the order they arrived,
 * to see a tail's shape (a stall: latencies that fall by the time between the reports sent during it).
 * With --server-pid / --broker-pid, the CPU time (utime + stime from /proc/PID/stat) those processes used during the
 * measured phase is reported per result.
 */
#include "loadgen.h"

#include <mqtt_protocol.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * NS_PER_S + (uint64_t)now.tv_nsec;
}

uint64_t seconds_ns(double seconds)
{
    return (uint64_t)(seconds * 1e9);
}

/* The accessories, their topics and the idle ring. */
static int allocate(struct loadgen *lg)
{
    size_t count = (size_t)lg->opt.accessories;
    lg->accessories = calloc(count, sizeof *lg->accessories);
    lg->topics = malloc(count * MAX_TOPIC);
    lg->idle = malloc(count * sizeof *lg->idle);
    if (lg->accessories == NULL || lg->topics == NULL || lg->idle == NULL) {
        fprintf(stderr, "loadgen: out of memory for %zu accessories\n", count);
        return -1;
    }
    int length = snprintf(lg->result_prefix, sizeof lg->result_prefix, "%s/hubs/%s/accessories/",
                          lg->opt.topic_root, lg->opt.hub);
    if (length < 0 || length >= MAX_PREFIX) {
        fprintf(stderr, "loadgen: topic root too long\n");
        return -1;
    }
    lg->result_prefix_len = (size_t)length;
    for (size_t i = 0; i < count; i++) {
        snprintf(lg->topics + i * MAX_TOPIC, MAX_TOPIC, "%s%s-%zu/telemetry", lg->result_prefix,
                 lg->opt.accessory_prefix, i);
    }
    return 0;
}

static int run(struct loadgen *lg)
{
    if (allocate(lg) != 0) {
        return 1;
    }
    lg->mosq = make_client(lg);
    if (lg->mosq == NULL) {
        return 1;
    }
    int rc = mosquitto_connect_bind_v5(lg->mosq, lg->opt.host, lg->opt.port, 30, NULL, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: connect to %s:%d: %s\n", lg->opt.host, lg->opt.port,
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        return 1;
    }
    if (wait_connected(lg) != 0 || wait_ready(lg) != 0) {
        return 1;
    }
    uint64_t setup_start = now_ns();
    if (set_up(lg) != 0) {
        return 1;
    }
    double setup_s = (double)(now_ns() - setup_start) / 1e9;
    struct measurement m;
    if (measure(lg, &m) != 0) {
        return 1;
    }
    if (write_trace(lg) != 0) {
        return 1;
    }
    report(lg, &m, setup_s);
    rc = mosquitto_disconnect_v5(lg->mosq, MQTT_RC_NORMAL_DISCONNECTION, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: disconnect: %s\n", mosquitto_strerror(rc));
    }
    /* Let the DISCONNECT and the last acknowledgements leave. */
    for (int i = 0; i < 10 && mosquitto_loop(lg->mosq, 10, 1) == MOSQ_ERR_SUCCESS; i++) {
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct loadgen lg = {0};
    if (parse_options(argc, argv, &lg.opt) != 0) {
        return 2;
    }
    int rc = mosquitto_lib_init();
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: mosquitto_lib_init: %s\n", mosquitto_strerror(rc));
        return 1;
    }
    rc = mosquitto_property_add_string(&lg.content_type, MQTT_PROP_CONTENT_TYPE, "application/protobuf");
    int status = 1;
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "loadgen: content type property: %s\n", mosquitto_strerror(rc));
    } else {
        status = run(&lg);
    }
    mosquitto_destroy(lg.mosq);
    mosquitto_property_free_all(&lg.content_type);
    free(lg.accessories);
    free(lg.topics);
    free(lg.idle);
    free(lg.latencies_ns);
    free(lg.sent_ns);
    free(lg.window_first);
    free(lg.opt.host);
    mosquitto_lib_cleanup();
    return status;
}
