/*
 * The caller's requests (audiohub_pair, audiohub_unpair, audiohub_register, audiohub_update, audiohub_placement,
 * audiohub_sources, and with a spatial extension audiohub_register_spatial, audiohub_update_spatial): checked as the
 * bridge would check them, then queued behind the accessory's others.
 */
#define _POSIX_C_SOURCE 200809L

#include "hub_private.h"

#include <string.h>

/* Checks what every request checks, then queues `request` (taking it) or frees it. */
static enum audiohub_err submit(struct audiohub *hub, const char *accessory_id, struct request *request,
                                audiohub_completion_cb callback, void *context)
{
    request->callback = callback;
    request->context = context;
    enum audiohub_err rc = AUDIOHUB_ERR_SUCCESS;
    lock(hub);
    if (hub->counted >= (size_t)hub->queue_limit) {
        rc = AUDIOHUB_ERR_QUEUE_FULL;
    } else {
        struct accessory *a = ah_accessory_for(hub, accessory_id);
        if (a == NULL) {
            rc = AUDIOHUB_ERR_NOMEM;
        } else {
            ah_enqueue(hub, a, request);
            request = NULL;
        }
    }
    unlock(hub);
    ah_free_request(request);
    return rc;
}

static enum audiohub_err check_common(struct audiohub *hub, const char *accessory_id)
{
    if (hub == NULL) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (!ah_valid_id(accessory_id)) {
        return AUDIOHUB_ERR_ACCESSORY_ID;
    }
    return AUDIOHUB_ERR_SUCCESS;
}

static bool valid_placement(enum audiohub_placement placement)
{
    return placement >= AUDIOHUB_PLACEMENT_NONE && placement <= AUDIOHUB_PLACEMENT_OFF_HEAD;
}

/* The sources rules the bridge would refuse with invalidRequest, checked here first. */
static enum audiohub_err check_sources(const struct audiohub_address *primary,
                                       const struct audiohub_address *secondary)
{
    if (ah_check_address(primary) != AUDIOHUB_ERR_SUCCESS || ah_check_address(secondary) != AUDIOHUB_ERR_SUCCESS) {
        return AUDIOHUB_ERR_ADDRESS;
    }
    bool has_primary = primary != NULL && primary->length == AUDIOHUB_ADDRESS_SIZE;
    bool has_secondary = secondary != NULL && secondary->length == AUDIOHUB_ADDRESS_SIZE;
    if (has_secondary && !has_primary) {
        return AUDIOHUB_ERR_ADDRESS;
    }
    if (has_primary && has_secondary && memcmp(primary->bytes, secondary->bytes, AUDIOHUB_ADDRESS_SIZE) == 0) {
        return AUDIOHUB_ERR_ADDRESS;
    }
    return AUDIOHUB_ERR_SUCCESS;
}

static void copy_sources(struct request *request, const struct audiohub_address *primary,
                         const struct audiohub_address *secondary)
{
    if (primary != NULL && primary->length == AUDIOHUB_ADDRESS_SIZE) {
        request->primary = *primary;
    }
    if (secondary != NULL && secondary->length == AUDIOHUB_ADDRESS_SIZE) {
        request->secondary = *secondary;
    }
}

enum audiohub_err audiohub_pair(struct audiohub *hub, const char *accessory_id, const char *name, const char *model,
                                unsigned hardware_capabilities, audiohub_completion_cb callback, void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    if (hardware_capabilities & ~AUDIOHUB_CAP_ALL) {
        return AUDIOHUB_ERR_CAPABILITIES;
    }
    if ((name != NULL && strlen(name) > AUDIOHUB_TEXT_MAX) || (model != NULL && strlen(model) > AUDIOHUB_TEXT_MAX)) {
        return AUDIOHUB_ERR_TEXT;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_PAIR);
    if (request == NULL || !ah_replace_text(&request->name, name) || !ah_replace_text(&request->model, model)) {
        ah_free_request(request);
        return AUDIOHUB_ERR_NOMEM;
    }
    request->capabilities = hardware_capabilities;
    return submit(hub, accessory_id, request, callback, context);
}

enum audiohub_err audiohub_unpair(struct audiohub *hub, const char *accessory_id, audiohub_completion_cb callback,
                                  void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_UNPAIR);
    if (request == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    return submit(hub, accessory_id, request, callback, context);
}

/* The caller's spatial extension (NULL: none) into `request`; AUDIOHUB_ERR_INVAL for a size below the first one's. */
static enum audiohub_err copy_spatial_extension(struct request *request,
                                                const struct audiohub_spatial_extension *extension, size_t size)
{
    if (extension == NULL) {
        return AUDIOHUB_ERR_SUCCESS;
    }
    if (size < AUDIOHUB_SPATIAL_EXTENSION_MIN_SIZE) {
        return AUDIOHUB_ERR_INVAL;
    }
    memset(&request->spatial_extension, 0, sizeof request->spatial_extension);
    memcpy(&request->spatial_extension, extension,
           size < sizeof request->spatial_extension ? size : sizeof request->spatial_extension);
    request->has_spatial_extension = true;
    return AUDIOHUB_ERR_SUCCESS;
}

enum audiohub_err audiohub_register_spatial(struct audiohub *hub, const char *accessory_id, unsigned capabilities,
                                            const struct audiohub_spatial_extension *extension, size_t extension_size,
                                            audiohub_completion_cb callback, void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    if (capabilities == 0 || (capabilities & ~AUDIOHUB_CAP_ALL)) {
        return AUDIOHUB_ERR_CAPABILITIES;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_REGISTER);
    if (request == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    rc = copy_spatial_extension(request, extension, extension_size);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        ah_free_request(request);
        return rc;
    }
    request->capabilities = capabilities;
    return submit(hub, accessory_id, request, callback, context);
}

enum audiohub_err audiohub_register(struct audiohub *hub, const char *accessory_id, unsigned capabilities,
                                    audiohub_completion_cb callback, void *context)
{
    return audiohub_register_spatial(hub, accessory_id, capabilities, NULL, 0, callback, context);
}

enum audiohub_err audiohub_update(struct audiohub *hub, const char *accessory_id,
                                  const struct audiohub_configuration *configuration,
                                  audiohub_completion_cb callback, void *context)
{
    return audiohub_update_spatial(hub, accessory_id, configuration, NULL, 0, callback, context);
}

enum audiohub_err audiohub_update_spatial(struct audiohub *hub, const char *accessory_id,
                                          const struct audiohub_configuration *configuration,
                                          const struct audiohub_spatial_extension *extension, size_t extension_size,
                                          audiohub_completion_cb callback, void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    if (configuration == NULL || !valid_placement(configuration->placement) ||
        (extension != NULL && extension_size < AUDIOHUB_SPATIAL_EXTENSION_MIN_SIZE)) {
        return AUDIOHUB_ERR_INVAL;
    }
    if (configuration->capabilities & ~AUDIOHUB_CAP_ALL) {
        return AUDIOHUB_ERR_CAPABILITIES;
    }
    rc = check_sources(&configuration->primary, &configuration->secondary);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_UPDATE);
    if (request == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    request->capabilities = configuration->capabilities;
    request->placement = configuration->placement;
    copy_sources(request, &configuration->primary, &configuration->secondary);
    copy_spatial_extension(request, extension, extension_size); /* its size was checked above */
    return submit(hub, accessory_id, request, callback, context);
}

enum audiohub_err audiohub_placement(struct audiohub *hub, const char *accessory_id,
                                     enum audiohub_placement placement, audiohub_completion_cb callback,
                                     void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    if (!valid_placement(placement)) {
        return AUDIOHUB_ERR_INVAL;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_PLACEMENT);
    if (request == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    request->placement = placement;
    return submit(hub, accessory_id, request, callback, context);
}

enum audiohub_err audiohub_sources(struct audiohub *hub, const char *accessory_id,
                                   const struct audiohub_address *primary, const struct audiohub_address *secondary,
                                   audiohub_completion_cb callback, void *context)
{
    enum audiohub_err rc = check_common(hub, accessory_id);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    rc = check_sources(primary, secondary);
    if (rc != AUDIOHUB_ERR_SUCCESS) {
        return rc;
    }
    struct request *request = ah_new_request(AUDIOHUB_OP_SOURCES);
    if (request == NULL) {
        return AUDIOHUB_ERR_NOMEM;
    }
    copy_sources(request, primary, secondary);
    return submit(hub, accessory_id, request, callback, context);
}
