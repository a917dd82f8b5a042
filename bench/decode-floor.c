/*
 * The decode floor for bench/ingest.sh: one process, one core, that reads each file and
 * fully decodes it with the same libpng/libjpeg calls RichPush uses (Sources/CImageCodecs),
 * and prints one verdict line per file. No hashing, no storing, no fsync.
 */
#include "CImageCodecs.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    rp_image_limits limits = {40000000ull, 16384u};
    rp_image_result result;
    int failures = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); failures++; continue; }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
        size_t got = fread(buf, 1, (size_t)size, f);
        fclose(f);
        rp_image_inspect(buf, got, limits, &result);
        printf("%s\t%d\t%d\t%u\t%u\t%d\t%s\n", argv[i], result.status, result.format,
               result.width, result.height, result.warnings, result.message);
        free(buf);
        if (result.status != RP_IMAGE_OK) failures++;
    }
    return failures ? 1 : 0;
}
