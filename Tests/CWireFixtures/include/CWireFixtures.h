/*
 * CWireFixtures: the C half of the cross-language golden vector tests (GoldenVectorTests).
 *
 * It plays the part of a C hub: it builds every wire sample with nothing but the protoc-c generated
 * API of CAccessoryWire and packs it with protobuf-c, and it decodes bytes with protobuf-c and shows
 * what protobuf-c saw as canonical proto3 JSON, which Swift can compare with its own messages.
 *
 * Every function is reentrant: the fixtures keep no mutable state.
 */
#ifndef CWIREFIXTURES_H
#define CWIREFIXTURES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Builds the sample called `name` (one of the names of WireSamples.all on the Swift side, e.g.
 * "telemetry_paired", "accessory_state") with the protoc-c generated C structs, and packs it into
 * `out` with protobuf-c.
 *
 * The values are written independently of the Swift samples and must equal them field for field.
 *
 * Returns the packed length, or 0 when `name` is unknown or `capacity` is smaller than the packed
 * size (nothing is written to `out` then). Every sample packs to more than 0 bytes.
 */
size_t cwf_pack_sample(const char *name, uint8_t *out, size_t capacity);

/*
 * Unpacks `data` (`length` bytes) with the protobuf-c descriptor of the message whose full proto
 * name is `message_full_name` (e.g. "audioaccessory.v1.AccessoryTelemetry"), and renders the
 * decoded C struct, by walking its ProtobufCMessageDescriptor, as canonical proto3 JSON:
 * - lowerCamelCase field names (the proto3 json_name), in field number order;
 * - a field at its default value (0, false, "", empty bytes, enum 0, empty repeated, absent
 *   sub-message) is omitted, except a set oneof member, which is always written;
 * - 64-bit integers as JSON strings, 32-bit integers as numbers, enums by value name (the name in
 *   the .proto file, e.g. "CAPABILITY_PLACEMENT"; a number when the value has no name);
 * - bytes as standard base64 with padding; strings JSON-escaped, UTF-8 kept as is;
 * - repeated fields as arrays, sub-messages as nested objects.
 *
 * Returns a NUL-terminated string allocated with malloc, which the caller releases with cwf_free,
 * or NULL when the name is unknown, protobuf-c cannot unpack the bytes, or memory runs out.
 */
char *cwf_describe_json(const char *message_full_name, const uint8_t *data, size_t length);

/* Releases a string returned by cwf_describe_json. NULL is allowed and does nothing. */
void cwf_free(char *json);

/*
 * The full proto names of every message cwf_describe_json knows (every message of the
 * audioaccessory.v1 schemas), in a static array. Stores the number of names in `*count`.
 */
const char *const *cwf_message_names(size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* CWIREFIXTURES_H */
