#ifndef RICHPUSH_RP_INTERNAL_H
#define RICHPUSH_RP_INTERNAL_H

#include <stdint.h>

/* Helpers the codec files share; not part of the public header. */

/* The size `w`×`h` scaled to fit `box`×`box`, aspect kept and rounded, never enlarged (box 0:
 * as it is), at least 1×1: what rp_decode_fitted and the GIF thumb resample to (rp_variants.c). */
void rp_fit_box(uint32_t w, uint32_t h, uint32_t box, uint32_t *dw, uint32_t *dh);

#endif
