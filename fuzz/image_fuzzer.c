/*
 * libFuzzer target for the C codec shim: every input goes through rp_image_inspect exactly as
 * an upload would (the default limits), under AddressSanitizer. Built and run by
 * scripts/fuzz.sh; inputs that crashed are kept in fuzz/crashes and replayed by the tests.
 */
#include <stddef.h>
#include <stdint.h>

#include "CImageCodecs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rp_image_limits limits = {40000000ULL, 16384};
    rp_image_result result;
    rp_image_inspect(data, size, limits, &result);
    return 0;
}
