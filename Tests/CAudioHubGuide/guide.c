/*
 * docs/hub-sdk.md's C, compiled: every ```c block of the page stands, line for line (leading spaces aside), in this
 * file, whose functions are compiled against the installed SDK by scripts/hub-install-check.sh (`make hub-check`, run
 * by `make test`) and never run (the page's code needs a bridge; leakcheck and the examples run the API). A page that
 * names a function or a constant the SDK does not have, or calls one as it is not, fails to build there;
 * HubSDKGuideTests fails when a block of the page is not here.
 */
#define _POSIX_C_SOURCE 200809L

#include <audiohub.h>

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

/* What the page's blocks take as given. */
static void done(struct audiohub *hub, void *userdata, const struct audiohub_result *result)
{
    (void)hub;
    (void)userdata;
    (void)result;
}

/* "Its core, in the caller's own poll loop". */
void guide_core(void);
void guide_core(void)
{
    audiohub_lib_init();
    struct audiohub *hub;
    audiohub_new("hub-c", NULL, &hub);                                /* the hub id, and the userdata of every callback */
    audiohub_connect(hub, "mqtt://127.0.0.1:1883", NULL, NULL);      /* user and password, or NULL */
    audiohub_pair(hub, "headphones", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, done, "pair");
    audiohub_register(hub, "headphones", AUDIOHUB_CAP_ALL, done, "register");
    audiohub_placement(hub, "headphones", AUDIOHUB_PLACEMENT_IN_EAR, done, "placement");
    for (;;) {                                                        /* wait on stdin and the hub's socket */
        struct pollfd fds[2] = {{0, POLLIN, 0},
                                {audiohub_socket(hub), (short)(POLLIN | (audiohub_want_write(hub) ? POLLOUT : 0)), 0}};
        poll(fds, 2, audiohub_next_timeout_ms(hub));
        audiohub_loop(hub, 0);                                        /* reads, writes, resends, calls done() */
    }
}

/* "Head tracking": the handler. */
static void activate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session)
{   /* session->host, session->is_head_tracking_active, session->restoration_id: start sampling if active */ }
static void changed(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                    bool is_active) { /* the person turned head tracking on or off on the host */ }
static void invalidate(struct audiohub *hub, void *userdata, const struct audiohub_head_tracking_session *session,
                       enum audiohub_head_tracking_reason reason) { /* stop: nothing more may be sent */ }

static void track_heads(struct audiohub *hub)                    /* once, after audiohub_new */
{
    const struct audiohub_head_tracking_handler handler = {activate, changed, invalidate};
    audiohub_head_tracking_handler_set(hub, &handler, sizeof handler);    /* copied */
}

/* "Head tracking": a frame from the IMU's thread. */
void guide_sample(struct audiohub *hub, const uint8_t report[13]);
void guide_sample(struct audiohub *hub, const uint8_t report[13])
{
    track_heads(hub);
    audiohub_head_tracking_send(hub, "headphones", report, 13);   /* 1-70 bytes */
}
