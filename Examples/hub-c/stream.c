/*
 * A hub that streams head tracking on the audiohub SDK: one accessory with audio spatialization and head tracking,
 * its source a playing device; lines on stdin put it on (`onHead`) or take it off (`offHead`). While the bridge's
 * head-tracking session with the device is active and head tracking is on there, it sends a synthetic IMU report --
 * a rotation vector, an angular velocity and a discontinuity count, as Android's head-tracker reports -- `hz` times a
 * second, until the session is invalidated. End of input: waits for the results still due, says goodbye, exits.
 *
 *     ./stream [mqtt://127.0.0.1:1883] [hub id: hub-c] [accessory id: headphones] [source: 12:34:56:78:9A:BC] [hz: 100]
 *
 * One thread: poll() waits on stdin and the hub's socket, at most until the next frame is due; the handler is called
 * from audiohub_loop, on this thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <audiohub.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct streamer {
    bool sampling;         /* a session is active and head tracking is on at its host */
    unsigned long frames;  /* sent in the current session */
    uint8_t discontinuity; /* one more per session: a new reference frame */
    long period_ms;
    long long next_ms;
};

static long long now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void activate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session)
{
    (void)hub;
    struct streamer *s = userdata;
    char host[18];
    audiohub_address_format(&session->host, host);
    s->sampling = session->is_head_tracking_active;
    s->frames = 0;
    s->discontinuity++;
    s->next_ms = now_ms();
    printf("activate: host %s, head tracking %s, restoration id \"%s\"\n", host, s->sampling ? "on" : "off",
           session->restoration_id);
}

static void changed(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                    bool is_active)
{
    (void)hub;
    (void)session;
    struct streamer *s = userdata;
    s->sampling = is_active;
    s->next_ms = now_ms();
    printf("head tracking %s at the host\n", is_active ? "on" : "off");
}

static void invalidate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                       enum audiohub_head_tracking_reason reason)
{
    (void)hub;
    struct streamer *s = userdata;
    s->sampling = false;
    printf("invalidate: reason %d, %llu frames sent\n", (int)reason, (unsigned long long)session->frames_sent);
}

static void done(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    (void)userdata;
    printf("%s: %s%s%s\n", (const char *)result->context,
           result->status != AUDIOHUB_ERR_SUCCESS ? audiohub_strerror(result->status)
                                                   : audiohub_kit_error_name(result->error),
           result->message[0] != '\0' ? " -- " : "", result->message);
}

/* The report: int16 little-endian rotation vector (x, y, z; pi = 32767), angular velocity (32 rad/s = 32767), then the
 * discontinuity count. The head turns left and right in a triangle wave: 4 s a swing, +-0.6 rad. */
static void report(uint8_t out[13], unsigned long n, long period_ms, uint8_t discontinuity)
{
    long t = (long)((n * (unsigned long)period_ms) % 4000); /* ms into the swing */
    long yaw = t < 2000 ? -6258 + t * 12516 / 2000 : 6258 - (t - 2000) * 12516 / 2000; /* +-0.6 rad */
    long rate = t < 2000 ? 614 : -614;                                                  /* +-0.6 rad/s */
    long values[6] = {0, 0, yaw, 0, 0, rate};
    for (int i = 0; i < 6; i++) {
        out[2 * i] = (uint8_t)(values[i] & 0xff);
        out[2 * i + 1] = (uint8_t)((values[i] >> 8) & 0xff);
    }
    out[12] = discontinuity;
}

int main(int argc, char **argv)
{
    const char *broker = argc > 1 ? argv[1] : "mqtt://127.0.0.1:1883";
    const char *hub_id = argc > 2 ? argv[2] : "hub-c";
    const char *accessory = argc > 3 ? argv[3] : "headphones";
    struct audiohub_address source;
    struct streamer s = {false, 0, 0, 1000 / (argc > 5 && atoi(argv[5]) > 0 ? atoi(argv[5]) : 100), 0};
    const struct audiohub_head_tracking_handler handler = {activate, changed, invalidate};
    const struct audiohub_spatial_extension extension = {0xaaf, 0xc0f, 0xb05e, 0, 0}; /* Apple's example */
    struct audiohub *hub = NULL;
    enum audiohub_err rc = audiohub_address_parse(argc > 4 ? argv[4] : "12:34:56:78:9A:BC", &source);
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_lib_init();
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_new(hub_id, &s, &hub);
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_head_tracking_handler_set(hub, &handler, sizeof handler);
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_connect(hub, broker, getenv("HUB_USERNAME"), getenv("HUB_PASSWORD"));
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_pair(hub, accessory, "Studio Pro", "SP-3", AUDIOHUB_CAP_ALL, done, "pair");
    if (rc == AUDIOHUB_ERR_SUCCESS) {
        rc = audiohub_register_spatial(hub, accessory, AUDIOHUB_CAP_ALL, &extension, sizeof extension, done, "register");
    }
    if (rc == AUDIOHUB_ERR_SUCCESS) rc = audiohub_sources(hub, accessory, &source, NULL, done, "sources");
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        fprintf(stderr, "stream: %s\n", audiohub_strerror(rc));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    char line[256];
    bool reading = true;
    struct audiohub_stats stats = {0};
    while (reading || stats.queued > 0) {
        int timeout = audiohub_next_timeout_ms(hub);
        long long until = s.next_ms - now_ms();
        if (s.sampling && until < timeout) {
            timeout = until > 0 ? (int)until : 0;
        }
        struct pollfd fds[2] = {{reading ? 0 : -1, POLLIN, 0},
                                {audiohub_socket(hub), (short)(POLLIN | (audiohub_want_write(hub) ? POLLOUT : 0)), 0}};
        poll(fds, 2, timeout);
        if (fds[0].revents != 0) {
            if (fgets(line, sizeof line, stdin) == NULL) {
                reading = false;
            } else if (strncmp(line, "onHead", 6) == 0 || strncmp(line, "offHead", 7) == 0) {
                bool on = line[1] == 'n';
                audiohub_placement(hub, accessory, on ? AUDIOHUB_PLACEMENT_ON_HEAD : AUDIOHUB_PLACEMENT_OFF_HEAD,
                                   done, on ? "onHead" : "offHead");
            }
        }
        audiohub_loop(hub, 0);
        if (s.sampling && now_ms() >= s.next_ms) {
            uint8_t frame[13];
            report(frame, s.frames, s.period_ms, s.discontinuity);
            rc = audiohub_head_tracking_send(hub, accessory, frame, sizeof frame);
            s.frames += rc == AUDIOHUB_ERR_SUCCESS;
            s.next_ms = now_ms() > s.next_ms + s.period_ms ? now_ms() + s.period_ms : s.next_ms + s.period_ms;
        }
        audiohub_stats_get(hub, &stats, sizeof stats);
    }
    audiohub_disconnect(hub);
    while (audiohub_loop(hub, 100) != AUDIOHUB_ERR_NO_CONN) {
    }
    audiohub_destroy(hub);
    audiohub_lib_cleanup();
    return 0;
}
