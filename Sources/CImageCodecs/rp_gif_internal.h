#ifndef RICHPUSH_RP_GIF_INTERNAL_H
#define RICHPUSH_RP_GIF_INTERNAL_H

#include "CImageCodecs.h"

/* rp_image_inspect's GIF branch (rp_gif.c): fills `result` (zeroed first) as the PNG and JPEG
 * inspectors do, with `frames` set. Not part of the public header: callers use rp_image_inspect. */
void rp_gif_inspect_into(const uint8_t *data, size_t length, rp_image_limits limits,
                         rp_image_result *result);

#endif
