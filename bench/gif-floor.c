/*
 * The GIF decode floor for bench/gif.sh: one process, one core, giflib's own whole-file decode
 * (DGifSlurp: every frame's pixels, no limits, nothing checked beyond what giflib checks) of
 * each file, one line per file. No hashing, no storing, no fsync.
 */
#include <gif_lib.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int failures = 0;
    for (int i = 1; i < argc; i++) {
        int error = 0;
        GifFileType *gif = DGifOpenFileName(argv[i], &error);
        if (!gif) { printf("%s\topen failed: %s\n", argv[i], GifErrorString(error)); failures++; continue; }
        int ok = DGifSlurp(gif) == GIF_OK;
        printf("%s\t%d\t%d\t%d\t%s\n", argv[i], gif->SWidth, gif->SHeight, gif->ImageCount, ok ? "ok" : GifErrorString(gif->Error));
        if (!ok) failures++;
        DGifCloseFile(gif, &error);
    }
    return failures ? 1 : 0;
}
