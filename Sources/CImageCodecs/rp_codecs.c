/*
 * The only code in RichPush that calls setjmp. Each decoder runs a whole job inside one
 * function: create the library structs, decode, destroy them on every path.
 */
#include "CImageCodecs.h"
#include "rp_gif_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <jpeglib.h>
#include <jerror.h>

static void set_message(rp_image_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

/* Returns 1 and fills `r` when the header's dimensions are over the limits. */
static int over_limits(rp_image_result *r, rp_image_limits limits) {
    if (r->width == 0 || r->height == 0) {
        r->status = RP_IMAGE_CORRUPT;
        set_message(r, "image declares a zero dimension (%ux%u)", r->width, r->height);
        return 1;
    }
    if (r->width > limits.max_side || r->height > limits.max_side) {
        r->status = RP_IMAGE_TOO_LARGE;
        set_message(r, "%ux%u pixels: a side is over the limit of %u", r->width, r->height,
                    limits.max_side);
        return 1;
    }
    uint64_t pixels = (uint64_t)r->width * (uint64_t)r->height;
    if (pixels > limits.max_pixels) {
        r->status = RP_IMAGE_TOO_LARGE;
        set_message(r, "%ux%u is %llu pixels, over the limit of %llu", r->width, r->height,
                    (unsigned long long)pixels, (unsigned long long)limits.max_pixels);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------- header pre-checks */
/*
 * The limits are judged from the header alone, before libpng or libjpeg read anything else:
 * a file that declares a huge image is too_large whatever follows its header.
 */

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* PNG: the first chunk must be a 13-byte IHDR; only a CRC-valid one is trusted here. */
static int png_header_over_limits(const uint8_t *data, size_t length, rp_image_limits limits,
                                  rp_image_result *r) {
    if (length < 8 + 8 + 13 + 4) return 0;
    const uint8_t *chunk = data + 8;
    if (be32(chunk) != 13 || memcmp(chunk + 4, "IHDR", 4) != 0) return 0;
    if (crc32_of(chunk + 4, 4 + 13) != be32(chunk + 8 + 13)) return 0;
    r->width = be32(chunk + 8);
    r->height = be32(chunk + 12);
    if (r->width == 0 || r->height == 0) return 0; /* libpng names that error */
    return over_limits(r, limits);
}

/* PNG: every chunk's declared length must fit in the file. libpng allocates some chunks by
 * their declared length before it reads them (the fuzzer found a 60-byte file that made it ask
 * for 1.9 GB); the whole file is in memory, so a length past its end is refused here first. */
static int png_chunk_lengths_invalid(const uint8_t *data, size_t length, rp_image_result *r) {
    size_t offset = 8;
    while (offset + 8 <= length) {
        uint32_t declared = be32(data + offset);
        if (declared > 0x7FFFFFFFu || (uint64_t)offset + 12u + declared > (uint64_t)length) {
            r->status = RP_IMAGE_CORRUPT;
            set_message(r, "chunk at byte %zu declares %u bytes, past the end of the %zu-byte file", offset, declared, length);
            return 1;
        }
        if (memcmp(data + offset + 4, "IEND", 4) == 0) return 0;
        offset += 12u + declared;
    }
    return 0; /* a file cut short: libpng says so */
}

/* JPEG: walk the markers to the first SOFn and read its height and width. */
static int jpeg_header_over_limits(const uint8_t *data, size_t length, rp_image_limits limits,
                                   rp_image_result *r) {
    size_t i = 2;
    while (i + 4 <= length) {
        if (data[i] != 0xFF) return 0;
        uint8_t marker = data[i + 1];
        if (marker == 0xFF) { i++; continue; }                       /* fill byte */
        if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) { i += 2; continue; }
        if (marker == 0xD9 || marker == 0xDA) return 0;               /* EOI / SOS before a frame */
        size_t segment = ((size_t)data[i + 2] << 8) | data[i + 3];
        if (segment < 2) return 0;
        int is_sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (is_sof) {
            if (i + 9 > length || segment < 7) return 0;
            r->height = ((uint32_t)data[i + 5] << 8) | data[i + 6];
            r->width = ((uint32_t)data[i + 7] << 8) | data[i + 8];
            if (r->width == 0 || r->height == 0) return 0;
            return over_limits(r, limits);
        }
        i += 2 + segment;
    }
    return 0;
}

/* ---------------------------------------------------------------- PNG */

typedef struct {
    rp_image_result *result;
    const uint8_t *data;
    size_t length;
    size_t offset;
    char first_warning[200];
} png_job;

static void png_job_read(png_structp png, png_bytep out, size_t count) {
    png_job *job = (png_job *)png_get_io_ptr(png);
    if (count > job->length - job->offset) {
        png_error(png, "file is truncated: unexpected end of data");
    }
    memcpy(out, job->data + job->offset, count);
    job->offset += count;
}

static void png_job_error(png_structp png, png_const_charp message) {
    png_job *job = (png_job *)png_get_error_ptr(png);
    if (job->result->warnings > 0) {
        /* libpng often warns with the specific cause before its generic error. */
        set_message(job->result, "%s (%s)", message, job->first_warning);
    } else {
        set_message(job->result, "%s", message);
    }
    png_longjmp(png, 1);
}

static void png_job_warning(png_structp png, png_const_charp message) {
    png_job *job = (png_job *)png_get_error_ptr(png);
    if (job->result->warnings++ == 0) {
        snprintf(job->first_warning, sizeof job->first_warning, "%s", message);
    }
}

static int png_color_model(int color_type) {
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return RP_COLOR_GRAY;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return RP_COLOR_GRAY_ALPHA;
    case PNG_COLOR_TYPE_RGB: return RP_COLOR_RGB;
    case PNG_COLOR_TYPE_RGB_ALPHA: return RP_COLOR_RGBA;
    case PNG_COLOR_TYPE_PALETTE: return RP_COLOR_PALETTE;
    default: return RP_COLOR_UNKNOWN;
    }
}

static void inspect_png(const uint8_t *data, size_t length, rp_image_limits limits,
                        rp_image_result *r) {
    png_job job = {r, data, length, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, png_job_error,
                                             png_job_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep volatile row = NULL;
    if (png == NULL || info == NULL) {
        r->status = RP_IMAGE_CORRUPT;
        set_message(r, "libpng could not be initialised (out of memory)");
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return;
    }
    if (setjmp(png_jmpbuf(png))) {
        r->status = RP_IMAGE_CORRUPT;
        goto done;
    }
    png_set_read_fn(png, &job, png_job_read);
    /* Our limits classify size; libpng's own would call it an error. */
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    /* Ancillary chunks (iCCP, ...) may not inflate past 8 MB. */
    png_set_chunk_malloc_max(png, 8u * 1024u * 1024u);
    /* Text chunks are read and CRC-checked but never inflated: a thousand zTXt chunks that each
     * inflate to 8 MB would otherwise cost seconds. At most 64 ancillary chunks are kept. */
    static const png_byte text_chunks[] = {'t', 'E', 'X', 't', '\0', 'z', 'T', 'X', 't', '\0', 'i', 'T', 'X', 't', '\0'};
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, text_chunks, 3);
    png_set_chunk_cache_max(png, 64);

    png_read_info(png, info);
    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0, interlace = 0;
    png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, &interlace, NULL, NULL);
    r->width = width;
    r->height = height;
    r->bit_depth = bit_depth;
    r->color_model = png_color_model(color_type);
    r->interlaced = interlace != PNG_INTERLACE_NONE;
    if (over_limits(r, limits)) goto done;

    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    row = (png_bytep)malloc(rowbytes ? rowbytes : 1);
    if (row == NULL) {
        r->status = RP_IMAGE_CORRUPT;
        set_message(r, "out of memory for a %zu-byte row", rowbytes);
        goto done;
    }
    for (int pass = 0; pass < passes; pass++) {
        for (png_uint_32 y = 0; y < height; y++) {
            png_read_row(png, row, NULL);
        }
    }
    /* Reads every chunk up to IEND, checking each CRC. */
    png_read_end(png, NULL);
    if (r->warnings > 0) {
        r->status = RP_IMAGE_CORRUPT;
        set_message(r, "%s", job.first_warning);
    } else {
        r->status = RP_IMAGE_OK;
    }
done:
    free(row);
    png_destroy_read_struct(&png, &info, NULL);
}

/* --------------------------------------------------------------- JPEG */

/* Bounds on the work one JPEG may cost, not only its bytes. */
enum {
    /* Encoders write at most about a dozen progressive scans; a file that repeats its last
     * scan thousands of times makes each repeat cost a full pass over every coefficient. */
    RP_JPEG_MAX_SCANS = 100,
};
/* libjpeg's own memory (coefficient buffers of progressive files) is refused past this. */
#define RP_JPEG_MAX_MEMORY (192L * 1024L * 1024L)

typedef struct {
    struct jpeg_error_mgr pub; /* first: libjpeg hands us a pointer to it */
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    rp_image_result *result;
    char first_warning[JMSG_LENGTH_MAX];
} jpeg_job;

/* Replaces libjpeg's error_exit, which would call exit(). */
static void jpeg_job_error(j_common_ptr cinfo) {
    jpeg_job *job = (jpeg_job *)cinfo->err;
    char buffer[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buffer);
    set_message(job->result, "%s", buffer);
    longjmp(job->jump, 1);
}

/* A warning (level -1) is how libjpeg reports a truncated or damaged file, and any warning
 * makes the image corrupt: stop at the first instead of decoding the damage to the end. */
static void jpeg_job_message(j_common_ptr cinfo, int level) {
    if (level >= 0) return; /* trace messages */
    jpeg_job *job = (jpeg_job *)cinfo->err;
    if (job->result->warnings++ == 0) {
        (*cinfo->err->format_message)(cinfo, job->first_warning);
    }
    set_message(job->result, "%s", job->first_warning);
    longjmp(job->jump, 2);
}

/* Called by libjpeg as it consumes input: refuses a file with too many scans. */
static void jpeg_job_progress(j_common_ptr cinfo) {
    if (!cinfo->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > RP_JPEG_MAX_SCANS) {
        jpeg_job *job = (jpeg_job *)cinfo->err;
        set_message(job->result, "more than %d scans (a real progressive JPEG has about ten)", RP_JPEG_MAX_SCANS);
        longjmp(job->jump, 2);
    }
}

static int jpeg_color_model(J_COLOR_SPACE space) {
    switch (space) {
    case JCS_GRAYSCALE: return RP_COLOR_GRAY;
    case JCS_RGB: return RP_COLOR_RGB;
    case JCS_YCbCr: return RP_COLOR_YCBCR;
    case JCS_CMYK: return RP_COLOR_CMYK;
    case JCS_YCCK: return RP_COLOR_YCCK;
    default: return RP_COLOR_UNKNOWN;
    }
}

static void inspect_jpeg(const uint8_t *data, size_t length, rp_image_limits limits,
                         rp_image_result *r) {
    struct jpeg_decompress_struct cinfo;
    jpeg_job job;
    memset(&cinfo, 0, sizeof cinfo);
    memset(&job, 0, sizeof job);
    job.result = r;
    cinfo.err = jpeg_std_error(&job.pub);
    job.pub.error_exit = jpeg_job_error;
    job.pub.emit_message = jpeg_job_message;
    job.progress.progress_monitor = jpeg_job_progress;
    int jumped = setjmp(job.jump);
    if (jumped) {
        r->status = jumped == 1 && job.pub.msg_code == JERR_BAD_PRECISION ? RP_IMAGE_UNSUPPORTED
                                                                          : RP_IMAGE_CORRUPT;
        if (r->status == RP_IMAGE_UNSUPPORTED) {
            set_message(r, "%d-bit JPEG is not supported; send an 8-bit JPEG",
                        cinfo.data_precision);
        }
        jpeg_destroy_decompress(&cinfo);
        return;
    }
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &job.progress;
    cinfo.mem->max_memory_to_use = RP_JPEG_MAX_MEMORY;
    jpeg_mem_src(&cinfo, data, (unsigned long)length);
    (void)jpeg_read_header(&cinfo, TRUE);
    r->width = cinfo.image_width;
    r->height = cinfo.image_height;
    r->bit_depth = cinfo.data_precision;
    r->color_model = jpeg_color_model(cinfo.jpeg_color_space);
    r->interlaced = cinfo.progressive_mode ? 1 : 0;
    if (cinfo.data_precision != 8) {
        r->status = RP_IMAGE_UNSUPPORTED;
        set_message(r, "%d-bit JPEG is not supported; send an 8-bit JPEG", cinfo.data_precision);
        jpeg_destroy_decompress(&cinfo);
        return;
    }
    if (over_limits(r, limits)) {
        jpeg_destroy_decompress(&cinfo);
        return;
    }
    if (cinfo.num_components != 1 && cinfo.num_components != 3 && cinfo.num_components != 4) {
        r->status = RP_IMAGE_UNSUPPORTED;
        set_message(r, "a JPEG with %d components is not supported (1, 3 or 4)", cinfo.num_components);
        jpeg_destroy_decompress(&cinfo);
        return;
    }
    /* Validation needs every coefficient decoded, not the prettiest pixels. */
    cinfo.dct_method = JDCT_IFAST;
    cinfo.do_fancy_upsampling = FALSE;
    cinfo.do_block_smoothing = FALSE;
    jpeg_start_decompress(&cinfo);
    JDIMENSION stride = cinfo.output_width * (JDIMENSION)cinfo.output_components;
    JDIMENSION batch = cinfo.rec_outbuf_height > 0 ? (JDIMENSION)cinfo.rec_outbuf_height : 1;
    JSAMPARRAY rows = (*cinfo.mem->alloc_sarray)((j_common_ptr)&cinfo, JPOOL_IMAGE, stride, batch);
    while (cinfo.output_scanline < cinfo.output_height) {
        if (jpeg_read_scanlines(&cinfo, rows, batch) == 0) {
            /* Only a suspending source returns 0; ours never suspends. */
            set_message(r, "decoder stopped before the last row");
            r->status = RP_IMAGE_CORRUPT;
            jpeg_destroy_decompress(&cinfo);
            return;
        }
    }
    jpeg_finish_decompress(&cinfo);
    if (r->warnings > 0) {
        r->status = RP_IMAGE_CORRUPT;
        set_message(r, "%s", job.first_warning);
    } else {
        r->status = RP_IMAGE_OK;
    }
    jpeg_destroy_decompress(&cinfo);
}

/* ------------------------------------------------------------- encode */

int rp_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                   int quality, int progressive, const uint8_t *icc, size_t icc_length,
                   uint8_t **out, size_t *out_length, char message[256]) {
    struct jpeg_compress_struct cinfo;
    jpeg_job job;
    rp_image_result scratch;
    unsigned char *volatile buffer = NULL;
    unsigned long size = 0;
    memset(&cinfo, 0, sizeof cinfo);
    memset(&job, 0, sizeof job);
    memset(&scratch, 0, sizeof scratch);
    job.result = &scratch;
    cinfo.err = jpeg_std_error(&job.pub);
    job.pub.error_exit = jpeg_job_error;
    job.pub.emit_message = jpeg_job_message;
    if (setjmp(job.jump)) {
        snprintf(message, 256, "%s", scratch.message);
        jpeg_destroy_compress(&cinfo);
        free(buffer);
        return -1;
    }
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, (unsigned char **)&buffer, &size);
    cinfo.image_width = width;
    cinfo.image_height = height;
    cinfo.input_components = components;
    cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_UNKNOWN;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    if (progressive) jpeg_simple_progression(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    if (icc != NULL && icc_length > 0) jpeg_write_icc_profile(&cinfo, icc, (unsigned int)icc_length);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)cinfo.next_scanline * width * (size_t)components);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    *out = buffer;
    *out_length = size;
    message[0] = '\0';
    return 0;
}

/* -------------------------------------------------------------- entry */

void rp_image_inspect(const uint8_t *data, size_t length, rp_image_limits limits,
                      rp_image_result *result) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memset(result, 0, sizeof *result);
    if (data != NULL && length >= 8 && memcmp(data, png_signature, 8) == 0) {
        result->format = RP_FORMAT_PNG;
        if (!png_header_over_limits(data, length, limits, result) && !png_chunk_lengths_invalid(data, length, result)) {
            memset(result, 0, sizeof *result);
            result->format = RP_FORMAT_PNG;
            inspect_png(data, length, limits, result);
        }
        result->frames = 1;
    } else if (data != NULL && length >= 3 && data[0] == 0xFF && data[1] == 0xD8 &&
               data[2] == 0xFF) {
        result->format = RP_FORMAT_JPEG;
        if (!jpeg_header_over_limits(data, length, limits, result)) {
            memset(result, 0, sizeof *result);
            result->format = RP_FORMAT_JPEG;
            inspect_jpeg(data, length, limits, result);
        }
        result->frames = 1;
    } else if (data != NULL && length >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0)) {
        rp_gif_inspect_into(data, length, limits, result);
    } else {
        result->status = RP_IMAGE_UNSUPPORTED;
        set_message(result, "not a PNG, JPEG or GIF file");
    }
}
