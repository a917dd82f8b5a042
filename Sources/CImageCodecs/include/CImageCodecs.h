#ifndef RICHPUSH_CIMAGECODECS_H
#define RICHPUSH_CIMAGECODECS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Verdict of an inspection.
typedef enum {
    RP_IMAGE_OK = 0,
    /// Not PNG, JPEG or GIF, or a variant the 8-bit decoders cannot read (e.g. 12-bit JPEG).
    RP_IMAGE_UNSUPPORTED = 1,
    /// Width, height or pixel count over the limits (decided from the header); for a GIF also
    /// too many frames, or frames that total too many pixels (decided before each frame is decoded).
    RP_IMAGE_TOO_LARGE = 2,
    /// Anything the decoder refused or warned about.
    RP_IMAGE_CORRUPT = 3,
} rp_image_status;

typedef enum {
    RP_FORMAT_UNKNOWN = 0,
    RP_FORMAT_PNG = 1,
    RP_FORMAT_JPEG = 2,
    RP_FORMAT_GIF = 3,
} rp_image_format;

typedef enum {
    RP_COLOR_UNKNOWN = 0,
    RP_COLOR_GRAY = 1,
    RP_COLOR_GRAY_ALPHA = 2,
    RP_COLOR_RGB = 3,
    RP_COLOR_RGBA = 4,
    RP_COLOR_PALETTE = 5,
    RP_COLOR_YCBCR = 6,
    RP_COLOR_CMYK = 7,
    RP_COLOR_YCCK = 8,
} rp_color_model;

/// Limits checked from the header, before any pixel buffer is allocated.
typedef struct {
    uint64_t max_pixels;
    uint32_t max_side;
} rp_image_limits;

/// What an inspection found. `message` holds the decoder's own words on failure.
typedef struct {
    int32_t status;       /* rp_image_status */
    int32_t format;       /* rp_image_format */
    uint32_t width;
    uint32_t height;
    int32_t bit_depth;    /* bits per sample */
    int32_t color_model;  /* rp_color_model */
    int32_t interlaced;   /* PNG Adam7, progressive JPEG, or any interlaced GIF frame */
    int32_t warnings;     /* decoder warnings seen (any one makes the image corrupt) */
    char message[256];
    int32_t frames;       /* 1 for PNG and JPEG; a GIF's frame count (width and height are its canvas) */
} rp_image_result;

/// Inspects and fully decodes one PNG, JPEG or GIF held in memory.
///
/// Reads the header, refuses side and pixel limits before allocating pixels, decodes every
/// row, and reads to the end of the stream so that every checksum is verified. Never calls
/// exit(), never lets a longjmp escape; safe to call from many threads at once.
///
/// A GIF (rp_gif.c) is decoded frame by frame with giflib, each frame into one reused buffer.
/// Its logical screen is judged by the limits. Each frame must lie inside it and have a color
/// table. At most 5,000 frames are allowed, totalling at most 2 × `max_pixels` decoded pixels
/// (both TOO_LARGE, checked before each frame is decoded). A code used before it is defined,
/// more than 500,000 LZW clear codes, or any giflib error is CORRUPT. The data must hold at
/// least one whole frame. The trailer may be missing, and anything after the trailer (or after
/// a byte that starts no block) is ignored.
void rp_image_inspect(const uint8_t *data, size_t length, rp_image_limits limits,
                      rp_image_result *result);

/// Encodes `components`-channel 8-bit pixels (1 gray, 3 RGB, or any other count as libjpeg's
/// JCS_UNKNOWN) as a JPEG with libjpeg, baseline or progressive, with the ICC profile `icc` in
/// APP2 segments when it is not NULL. On success returns 0 and sets
/// `*out` (free it with `free`) and `*out_length`; on failure returns -1 and fills `message`.
int rp_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                   int quality, int progressive, const uint8_t *icc, size_t icc_length,
                   uint8_t **out, size_t *out_length, char message[256]);

/// Decoded 8-bit pixels: RGB (3 components) from a JPEG, RGBA (4) from a PNG.
typedef struct {
    uint8_t *pixels;      /* free it with `free` */
    uint32_t width;
    uint32_t height;
    int32_t components;
    uint8_t *icc;         /* the source's ICC profile, or NULL; free it with `free` */
    size_t icc_length;
} rp_pixels;

/// Decodes a validated PNG or JPEG. A JPEG is decoded at the smallest M/8 DCT scale whose long
/// side is still at least `box` (0: full size). Returns 0, or -1 with `message` filled.
int rp_decode(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]);

/// `rp_decode`, then resampled to fit `box`×`box` (never enlarged) before anything is copied out:
/// a large source's full-size pixels live only inside this call.
int rp_decode_fitted(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]);

/// Resamples `sw`×`sh` pixels of `comps` components into `dw`×`dh` with a Lanczos-3 filter
/// (alpha premultiplied when comps is 4). Returns 0, or -1 when out of memory.
int rp_resize(const uint8_t *src, uint32_t sw, uint32_t sh, int comps, uint8_t *dst, uint32_t dw, uint32_t dh);

/// Applies EXIF orientation 1-8 to `w`×`h` pixels; `dst` is `h`×`w` for 5-8.
void rp_orient(const uint8_t *src, uint32_t w, uint32_t h, int comps, int orientation, uint8_t *dst);

/// Encodes 8-bit gray (1), RGB (3) or RGBA (4) pixels as a non-interlaced PNG. Returns 0 and
/// sets `*out` (free it with `free`), or -1 with `message` filled.
int rp_png_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                  const uint8_t *icc, size_t icc_length, uint8_t **out, size_t *out_length, char message[256]);

/* ---------------------------------------------------------------- GIF */

/// What `rp_gif_strip` would remove, as flags.
typedef enum {
    /// Comment extensions (0xFE).
    RP_GIF_META_COMMENT = 1,
    /// XMP packets (application extension "XMP DataXMP").
    RP_GIF_META_XMP = 2,
    /// Any other application extension but the loop ones (ICC profiles "ICCRGBG1012", editors' data).
    RP_GIF_META_APPLICATION = 4,
    /// Extensions of a label GIF89a does not define.
    RP_GIF_META_UNKNOWN_EXTENSION = 8,
    /// Bytes after the trailer (or from a byte that starts no block).
    RP_GIF_META_TRAILING_DATA = 16,
} rp_gif_metadata;

/// What `rp_gif_strip` would remove from a GIF: 0 when nothing (store the bytes as they are),
/// else `rp_gif_metadata` flags. Walks the blocks without decoding; 0 too for a file whose
/// blocks cannot be walked (the inspector refuses those).
int rp_gif_has_metadata(const uint8_t *data, size_t length);

/// Rewrites a GIF without its metadata, byte for byte and without re-encoding a pixel. Kept: the
/// header, screen descriptor and global color table, graphic control (0xF9) and plain text
/// (0x01) extensions, the loop application extensions ("NETSCAPE2.0", "ANIMEXTS1.0"), and every
/// image (descriptor, local color table, data). Dropped: comments, every other application
/// extension (XMP, ICC, ...), unknown extensions, and anything after the trailer. A trailer is
/// always written. Returns 0 and sets `*out` (free it with `free`) even when nothing was
/// removed (ask `rp_gif_has_metadata` first to keep the original), or -1 with `message` filled.
int rp_gif_strip(const uint8_t *data, size_t length, uint8_t **out, size_t *out_length, char message[256]);

/// The first frame of a validated GIF as RGBA (`components` 4, no ICC): drawn on a transparent
/// canvas of the logical screen's size, its transparent index left transparent, then resampled
/// to fit `box`×`box` with `rp_resize` when larger (never enlarged; 0: full size). Encode it
/// with `rp_png_encode` for the thumb. Returns 0, or -1 with `message` filled.
int rp_gif_first_frame(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]);

/// The push variant of a validated GIF: still an animated GIF, fitting `box`×`box` (0: any
/// size) and `max_bytes`. Returns 0 with `*out` NULL when the source fits both (it is its own
/// variant). Otherwise every frame is scaled by the same factor with nearest-neighbour
/// sampling of its palette indices and re-encoded with giflib (GIF89a). Each frame keeps its
/// color table, its scaled place, and its graphic control extension (delay, disposal,
/// transparency); the loop extension is kept, and comments, plain text and other extensions
/// are dropped. Starts at the scale that fits the box, then shrinks by 3/4 steps until the
/// output fits `max_bytes` (steps that cannot fit by area alone are skipped). Then 0 with
/// `*out` (free it with `free`). Returns -1 with `message` filled when it fails, or would need
/// a long side under 64 px. One frame's indices are in memory at a time.
int rp_gif_fit(const uint8_t *data, size_t length, uint32_t box, size_t max_bytes, uint8_t **out, size_t *out_length,
               char message[256]);

#ifdef __cplusplus
}
#endif

#endif
