/*
 * What the SDK's source files share: the wire helpers of wire.c, used by hub.c. Not installed.
 */
#ifndef AUDIOHUB_PRIVATE_H
#define AUDIOHUB_PRIVATE_H

#include "audiohub.h"
#include "audiohub_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An id of the contract: 1-64 characters of A-Z a-z 0-9 _ - */
bool ah_valid_id(const char *id);

/* AUDIOHUB_ERR_SUCCESS when `address` is NULL, empty or 6 bytes, else AUDIOHUB_ERR_ADDRESS. */
enum audiohub_err ah_check_address(const struct audiohub_address *address);

/* A HubStatus, packed; returns its length (at most 32 bytes), 0 if it does not fit. */
size_t ah_pack_hub_status(bool online, int64_t since_unix_ms, uint8_t *out, size_t capacity);

/* A RequestResult as protobuf-c unpacked it, and its view. `view` points into `unpacked`. */
struct ah_decoded_result {
    void *unpacked; /* Audioaccessory__V1__RequestResult * */
    struct audiohub_result view;
    struct audiohub_state state; /* view.state points here when the result carries a state */
};

/* Unpacks a RequestResult into `out` (free it with ah_decoded_result_free). AUDIOHUB_ERR_INVAL for bytes that are
 * not one, AUDIOHUB_ERR_NOMEM. */
enum audiohub_err ah_decode_result(const uint8_t *data, size_t length, struct ah_decoded_result *out);
void ah_decoded_result_free(struct ah_decoded_result *result);

/* Unpacks a RebirthRequest: its accessory id (copied into `accessory_id`, which holds AUDIOHUB_ID_MAX + 1 bytes)
 * and sequences. AUDIOHUB_ERR_INVAL for bytes that are not one or an invalid accessory id. */
enum audiohub_err ah_decode_rebirth(const uint8_t *data, size_t length, char *accessory_id, uint64_t *last_sequence,
                                    uint64_t *received_sequence);

/* Milliseconds: since 1970 (wall clock), and on the monotonic clock. */
int64_t ah_wall_ms(void);
int64_t ah_monotonic_ms(void);

#endif /* AUDIOHUB_PRIVATE_H */
