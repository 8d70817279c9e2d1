/*
 * CAudioHubInternal: the C hub SDK's private wire functions (Sources/CAudioHub/src/audiohub_internal.h, which
 * include/ here links to), for the cross-language tests only. The SDK's own targets build the functions; this target
 * only gives Swift their declarations.
 */
#include "audiohub_internal.h"
