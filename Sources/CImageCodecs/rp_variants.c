/*
 * Variants (docs/configuration.md#the-media-store): decode a stored image to 8-bit pixels (JPEG through libjpeg's DCT
 * scaling, so a 12 MP photo made into a 2048 px one is decoded at 5/8 of its size), resample
 * with a Lanczos-3 filter, turn it upright, and write a baseline JPEG (rp_jpeg_encode) or a PNG.
 * Only images that passed rp_image_inspect come here, and the same limits bound every buffer.
 */
#include "CImageCodecs.h"
#include "rp_internal.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <jpeglib.h>
#include <jerror.h>

/* ------------------------------------------------------------ decode JPEG */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} variant_jpeg_error;

static void variant_jpeg_exit(j_common_ptr cinfo) {
    variant_jpeg_error *e = (variant_jpeg_error *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->message);
    longjmp(e->jump, 1);
}

static void variant_jpeg_message(j_common_ptr cinfo, int level) {
    (void)cinfo;
    (void)level; /* the image was validated on ingest: warnings were refused there */
}

static int decode_jpeg(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]) {
    struct jpeg_decompress_struct cinfo;
    variant_jpeg_error err;
    uint8_t *volatile pixels = NULL;
    uint8_t *volatile cmyk = NULL;
    uint8_t *volatile icc = NULL;
    volatile size_t icc_length = 0;
    memset(&cinfo, 0, sizeof cinfo);
    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = variant_jpeg_exit;
    err.pub.emit_message = variant_jpeg_message;
    if (setjmp(err.jump)) {
        snprintf(message, 256, "%s", err.message);
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        free(cmyk);
        free(icc);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    cinfo.mem->max_memory_to_use = 192L * 1024L * 1024L;
    jpeg_mem_src(&cinfo, data, (unsigned long)length);
    jpeg_save_markers(&cinfo, JPEG_APP0 + 2, 0xFFFF); /* the ICC profile goes along */
    (void)jpeg_read_header(&cinfo, TRUE);
    {
        JOCTET *profile = NULL;
        unsigned int profile_length = 0;
        if (jpeg_read_icc_profile(&cinfo, &profile, &profile_length)) {
            icc = profile;
            icc_length = profile_length;
        }
    }
    /* The smallest M/8 scale whose long side still covers the box: the resampler only shrinks. */
    uint32_t longest = cinfo.image_width > cinfo.image_height ? cinfo.image_width : cinfo.image_height;
    unsigned int num = 8;
    if (box > 0) {
        for (unsigned int n = 1; n <= 8; n++) {
            if ((uint64_t)longest * n >= (uint64_t)box * 8) { num = n; break; }
        }
    }
    cinfo.scale_num = num;
    cinfo.scale_denom = 8;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    int inverted = 0;
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        cinfo.out_color_space = JCS_CMYK;
        inverted = cinfo.saw_Adobe_marker; /* Adobe writes CMYK inverted */
    } else {
        cinfo.out_color_space = JCS_RGB;
    }
    jpeg_start_decompress(&cinfo);
    uint32_t w = cinfo.output_width, h = cinfo.output_height;
    int comps = cinfo.output_components;
    size_t stride = (size_t)w * (size_t)comps;
    uint8_t *buffer = malloc(stride * h);
    if (buffer == NULL) {
        snprintf(message, 256, "out of memory for %ux%u pixels", w, h);
        jpeg_destroy_decompress(&cinfo);
        free(icc);
        return -1;
    }
    if (comps == 4) cmyk = buffer; else pixels = buffer;
    while (cinfo.output_scanline < h) {
        JSAMPROW row = buffer + (size_t)cinfo.output_scanline * stride;
        if (jpeg_read_scanlines(&cinfo, &row, 1) == 0) {
            /* Only a suspending source returns 0; ours never suspends. */
            snprintf(message, 256, "decoder stopped before the last row");
            jpeg_destroy_decompress(&cinfo);
            free(buffer);
            free(icc);
            return -1;
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (comps == 4) {
        uint8_t *rgb = malloc((size_t)w * h * 3);
        if (rgb == NULL) {
            free(cmyk);
            free(icc);
            snprintf(message, 256, "out of memory for %ux%u pixels", w, h);
            return -1;
        }
        for (size_t i = 0; i < (size_t)w * h; i++) {
            unsigned c = cmyk[i * 4], m = cmyk[i * 4 + 1], y = cmyk[i * 4 + 2], k = cmyk[i * 4 + 3];
            if (!inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
            rgb[i * 3] = (uint8_t)((c * k + 127) / 255);
            rgb[i * 3 + 1] = (uint8_t)((m * k + 127) / 255);
            rgb[i * 3 + 2] = (uint8_t)((y * k + 127) / 255);
        }
        free(cmyk);
        buffer = rgb;
        comps = 3;
    } else if (comps == 1) {
        /* JCS_RGB was asked for; a grayscale file still gives RGB with libjpeg-turbo, but be safe. */
        uint8_t *rgb = malloc((size_t)w * h * 3);
        if (rgb == NULL) {
            free(buffer);
            free(icc);
            snprintf(message, 256, "out of memory for %ux%u pixels", w, h);
            return -1;
        }
        for (size_t i = 0; i < (size_t)w * h; i++) rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = buffer[i];
        free(buffer);
        buffer = rgb;
        comps = 3;
    }
    out->pixels = buffer;
    out->width = w;
    out->height = h;
    out->components = comps;
    out->icc = icc;
    out->icc_length = icc_length;
    return 0;
}

/* ------------------------------------------------------------- decode PNG */

typedef struct {
    const uint8_t *data;
    size_t length;
    size_t offset;
    char message[256];
} variant_png_io;

static void variant_png_read(png_structp png, png_bytep out, size_t count) {
    variant_png_io *io = (variant_png_io *)png_get_io_ptr(png);
    if (count > io->length - io->offset) png_error(png, "file is truncated");
    memcpy(out, io->data + io->offset, count);
    io->offset += count;
}

static void variant_png_error(png_structp png, png_const_charp text) {
    variant_png_io *io = (variant_png_io *)png_get_error_ptr(png);
    snprintf(io->message, sizeof io->message, "%s", text);
    png_longjmp(png, 1);
}

static void variant_png_warning(png_structp png, png_const_charp text) {
    (void)png;
    (void)text;
}

static int decode_png(const uint8_t *data, size_t length, rp_pixels *out, char message[256]) {
    variant_png_io io = {data, length, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, variant_png_error, variant_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    uint8_t *volatile icc = NULL;
    volatile size_t icc_length = 0;
    if (png == NULL || info == NULL) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        snprintf(message, 256, "libpng could not be initialised");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        snprintf(message, 256, "%s", io.message);
        free(pixels);
        free(rows);
        free(icc);
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    png_set_read_fn(png, &io, variant_png_read);
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_chunk_malloc_max(png, 8u * 1024u * 1024u);
    static const png_byte text_chunks[] = {'t', 'E', 'X', 't', '\0', 'z', 'T', 'X', 't', '\0', 'i', 'T', 'X', 't', '\0'};
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, text_chunks, 3);
    png_read_info(png, info);
    {
        png_charp name = NULL;
        int compression = 0;
        png_bytep profile = NULL;
        png_uint_32 profile_length = 0;
        if (png_get_iCCP(png, info, &name, &compression, &profile, &profile_length) == PNG_INFO_iCCP && profile_length > 0) {
            icc = malloc(profile_length);
            if (icc != NULL) {
                memcpy(icc, profile, profile_length);
                icc_length = profile_length;
            }
        }
    }
    png_uint_32 w = 0, h = 0;
    int depth = 0, color = 0;
    png_get_IHDR(png, info, &w, &h, &depth, &color, NULL, NULL, NULL);
    /* Everything to 8-bit RGBA. */
    png_set_expand(png);
    png_set_scale_16(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);
    (void)png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t stride = (size_t)w * 4;
    if (png_get_rowbytes(png, info) != stride) png_error(png, "unexpected row size after transforms");
    pixels = malloc(stride * h);
    rows = malloc(sizeof(png_bytep) * h);
    if (pixels == NULL || rows == NULL) png_error(png, "out of memory for the pixels");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pixels + (size_t)y * stride;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    out->pixels = pixels;
    out->width = w;
    out->height = h;
    out->components = 4;
    out->icc = icc;
    out->icc_length = icc_length;
    return 0;
}

int rp_decode(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memset(out, 0, sizeof *out);
    message[0] = '\0';
    if (length >= 8 && memcmp(data, png_signature, 8) == 0) return decode_png(data, length, out, message);
    if (length >= 3 && data[0] == 0xFF && data[1] == 0xD8) return decode_jpeg(data, length, box, out, message);
    snprintf(message, 256, "not a PNG or JPEG file");
    return -1;
}

void rp_fit_box(uint32_t w, uint32_t h, uint32_t box, uint32_t *dw, uint32_t *dh) {
    *dw = w;
    *dh = h;
    if (box == 0 || (w <= box && h <= box)) return;
    if (w >= h) {
        *dw = box;
        *dh = (uint32_t)llround((double)h * box / w);
    } else {
        *dh = box;
        *dw = (uint32_t)llround((double)w * box / h);
    }
    if (*dw < 1) *dw = 1;
    if (*dh < 1) *dh = 1;
}

int rp_decode_fitted(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]) {
    rp_pixels full;
    if (rp_decode(data, length, box, &full, message) != 0) return -1;
    uint32_t w = full.width, h = full.height, dw, dh;
    rp_fit_box(w, h, box, &dw, &dh);
    if (dw == w && dh == h) {
        *out = full;
        return 0;
    }
    uint8_t *fitted = malloc((size_t)dw * dh * (size_t)full.components);
    if (fitted == NULL || rp_resize(full.pixels, w, h, full.components, fitted, dw, dh) != 0) {
        free(fitted);
        free(full.pixels);
        free(full.icc);
        snprintf(message, 256, "out of memory resizing %ux%u to %ux%u", w, h, dw, dh);
        return -1;
    }
    free(full.pixels);
    out->pixels = fitted;
    out->width = dw;
    out->height = dh;
    out->components = full.components;
    out->icc = full.icc;
    out->icc_length = full.icc_length;
    return 0;
}

/* --------------------------------------------------------------- resample */

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return sin(x) / x;
}

static double lanczos3(double x) {
    if (x <= -3.0 || x >= 3.0) return 0.0;
    return sinc(x) * sinc(x / 3.0);
}

/* Weights for one axis: for each output index, `count` taps starting at `first`. */
typedef struct {
    int *first;
    int *count;
    float *weights;
    int taps;
} axis_weights;

static int make_weights(uint32_t in, uint32_t out, axis_weights *a) {
    double scale = (double)in / (double)out;
    double support = scale > 1.0 ? 3.0 * scale : 3.0;
    double filter_scale = scale > 1.0 ? scale : 1.0;
    a->taps = (int)ceil(support) * 2 + 1;
    a->first = malloc(sizeof(int) * out);
    a->count = malloc(sizeof(int) * out);
    a->weights = malloc(sizeof(float) * (size_t)out * (size_t)a->taps);
    if (!a->first || !a->count || !a->weights) return -1;
    for (uint32_t o = 0; o < out; o++) {
        double center = ((double)o + 0.5) * scale;
        int lo = (int)floor(center - support);
        int hi = (int)ceil(center + support);
        if (lo < 0) lo = 0;
        if (hi > (int)in) hi = (int)in;
        if (hi - lo > a->taps) hi = lo + a->taps;
        double total = 0.0;
        float *w = a->weights + (size_t)o * (size_t)a->taps;
        for (int i = lo; i < hi; i++) {
            double v = lanczos3(((double)i + 0.5 - center) / filter_scale);
            w[i - lo] = (float)v;
            total += v;
        }
        if (total == 0.0) total = 1.0;
        for (int i = lo; i < hi; i++) w[i - lo] = (float)(w[i - lo] / total);
        a->first[o] = lo;
        a->count[o] = hi - lo;
    }
    return 0;
}

static void free_weights(axis_weights *a) {
    free(a->first);
    free(a->count);
    free(a->weights);
}

static uint8_t clamp8(float v) {
    if (v <= 0.0f) return 0;
    if (v >= 255.0f) return 255;
    return (uint8_t)(v + 0.5f);
}

int rp_resize(const uint8_t *src, uint32_t sw, uint32_t sh, int comps, uint8_t *dst, uint32_t dw, uint32_t dh) {
    axis_weights horizontal = {0}, vertical = {0};
    float *temp = NULL;
    int status = -1;
    if (make_weights(sw, dw, &horizontal) != 0 || make_weights(sh, dh, &vertical) != 0) goto done;
    temp = malloc(sizeof(float) * (size_t)dw * (size_t)sh * (size_t)comps);
    if (temp == NULL) goto done;
    /* Horizontal pass, alpha premultiplied so transparent pixels do not bleed their color. */
    for (uint32_t y = 0; y < sh; y++) {
        const uint8_t *row = src + (size_t)y * sw * (size_t)comps;
        float *out = temp + (size_t)y * dw * (size_t)comps;
        for (uint32_t x = 0; x < dw; x++) {
            float acc[4] = {0, 0, 0, 0};
            const float *w = horizontal.weights + (size_t)x * (size_t)horizontal.taps;
            int first = horizontal.first[x];
            for (int t = 0; t < horizontal.count[x]; t++) {
                const uint8_t *p = row + (size_t)(first + t) * (size_t)comps;
                float weight = w[t];
                if (comps == 4) {
                    float alpha = p[3] * weight;
                    acc[0] += p[0] * alpha;
                    acc[1] += p[1] * alpha;
                    acc[2] += p[2] * alpha;
                    acc[3] += alpha;
                } else if (comps == 3) {
                    acc[0] += p[0] * weight;
                    acc[1] += p[1] * weight;
                    acc[2] += p[2] * weight;
                } else {
                    for (int c = 0; c < comps; c++) acc[c] += p[c] * weight;
                }
            }
            for (int c = 0; c < comps; c++) out[(size_t)x * (size_t)comps + (size_t)c] = acc[c];
        }
    }
    /* Vertical pass, a whole row at a time (contiguous, so the compiler vectorizes it), then
     * un-premultiply. */
    size_t row_floats = (size_t)dw * (size_t)comps;
    float *acc = malloc(sizeof(float) * row_floats);
    if (acc == NULL) goto done;
    for (uint32_t y = 0; y < dh; y++) {
        const float *w = vertical.weights + (size_t)y * (size_t)vertical.taps;
        int first = vertical.first[y];
        memset(acc, 0, sizeof(float) * row_floats);
        for (int t = 0; t < vertical.count[y]; t++) {
            const float *in = temp + (size_t)(first + t) * row_floats;
            float weight = w[t];
            for (size_t i = 0; i < row_floats; i++) acc[i] += in[i] * weight;
        }
        uint8_t *out = dst + (size_t)y * row_floats;
        if (comps == 4) {
            for (uint32_t x = 0; x < dw; x++) {
                float alpha = acc[x * 4 + 3];
                if (alpha <= 0.0f) {
                    out[x * 4] = out[x * 4 + 1] = out[x * 4 + 2] = out[x * 4 + 3] = 0;
                } else {
                    out[x * 4] = clamp8(acc[x * 4] / alpha);
                    out[x * 4 + 1] = clamp8(acc[x * 4 + 1] / alpha);
                    out[x * 4 + 2] = clamp8(acc[x * 4 + 2] / alpha);
                    out[x * 4 + 3] = clamp8(alpha);
                }
            }
        } else {
            for (size_t i = 0; i < row_floats; i++) out[i] = clamp8(acc[i]);
        }
    }
    free(acc);
    status = 0;
done:
    free(temp);
    free_weights(&horizontal);
    free_weights(&vertical);
    return status;
}

/* ----------------------------------------------------------------- orient */

void rp_orient(const uint8_t *src, uint32_t w, uint32_t h, int comps, int orientation, uint8_t *dst) {
    int swap = orientation >= 5 && orientation <= 8;
    uint32_t dw = swap ? h : w;
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            uint32_t nx, ny;
            switch (orientation) {
            case 2: nx = w - 1 - x; ny = y; break;              /* mirror horizontal */
            case 3: nx = w - 1 - x; ny = h - 1 - y; break;      /* rotate 180 */
            case 4: nx = x; ny = h - 1 - y; break;              /* mirror vertical */
            case 5: nx = y; ny = x; break;                      /* transpose */
            case 6: nx = h - 1 - y; ny = x; break;              /* rotate 90 clockwise */
            case 7: nx = h - 1 - y; ny = w - 1 - x; break;      /* transverse */
            case 8: nx = y; ny = w - 1 - x; break;              /* rotate 270 clockwise */
            default: nx = x; ny = y; break;
            }
            memcpy(dst + ((size_t)ny * dw + nx) * (size_t)comps, src + ((size_t)y * w + x) * (size_t)comps, (size_t)comps);
        }
    }
}

/* -------------------------------------------------------------- PNG write */

typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
    char message[256];
} variant_png_sink;

static void variant_png_write(png_structp png, png_bytep bytes, size_t count) {
    variant_png_sink *sink = (variant_png_sink *)png_get_io_ptr(png);
    if (sink->length + count > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity * 2 : 65536;
        while (capacity < sink->length + count) capacity *= 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (grown == NULL) png_error(png, "out of memory for the PNG");
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->length, bytes, count);
    sink->length += count;
}

static void variant_png_flush(png_structp png) { (void)png; }

static void variant_png_write_error(png_structp png, png_const_charp text) {
    variant_png_sink *sink = (variant_png_sink *)png_get_error_ptr(png);
    snprintf(sink->message, sizeof sink->message, "%s", text);
    png_longjmp(png, 1);
}

int rp_png_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                  const uint8_t *icc, size_t icc_length, uint8_t **out, size_t *out_length, char message[256]) {
    variant_png_sink sink;
    memset(&sink, 0, sizeof sink);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, variant_png_write_error, variant_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (png == NULL || info == NULL) {
        png_destroy_write_struct(png ? &png : NULL, NULL);
        snprintf(message, 256, "libpng could not be initialised");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        snprintf(message, 256, "%s", sink.message);
        png_destroy_write_struct(&png, &info);
        free(sink.data);
        return -1;
    }
    png_set_write_fn(png, &sink, variant_png_write, variant_png_flush);
    int color = components == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : components == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY;
    png_set_IHDR(png, info, width, height, 8, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (icc != NULL && icc_length > 0) png_set_iCCP(png, info, "icc", PNG_COMPRESSION_TYPE_BASE, icc, (png_uint_32)icc_length);
    png_write_info(png, info);
    for (uint32_t y = 0; y < height; y++) {
        png_write_row(png, (png_const_bytep)(pixels + (size_t)y * width * (size_t)components));
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    *out = sink.data;
    *out_length = sink.length;
    message[0] = '\0';
    return 0;
}
