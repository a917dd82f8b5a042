/*
 * GIF, animated or not, with giflib. Three layers:
 *
 *  - A byte walker (next_block) that steps over the file's blocks without decoding them. It is
 *    all rp_gif_strip and rp_gif_has_metadata use: kept blocks are copied byte for byte.
 *  - A decoder (gif_walk) over giflib's record-at-a-time API, reading from memory. Each frame's
 *    descriptor is checked before any of its pixels is decoded: inside the canvas, a colour
 *    table, and the frame-count and total-pixel bounds. Its LZW codes are then pre-scanned, and
 *    every pixel is decoded into one reused 64 KiB buffer (DGifSlurp would hold every frame).
 *    DGifGetImageHeader is used instead of DGifGetImageDesc, which appends every frame's
 *    descriptor and colour table to a list that lives until the file is closed.
 *  - Three users of the decoder: the inspector, the first frame as RGBA (the thumb), and the
 *    push variant, re-encoded with giflib's EGif API at a smaller scale.
 *
 * Why pre-scan the LZW codes: giflib decodes a code that names a dictionary entry not defined
 * yet as garbage instead of failing (browsers and Pillow refuse it). It also resets a 16 KiB
 * table on every clear code: a megabyte of clear codes costs it 0.65 s of CPU (ten megabytes
 * 6.5 s) and decodes no pixel at all. The pre-scan mirrors giflib's code reader (code widths,
 * dictionary growth, string lengths, stopping where the frame is full). It refuses undefined
 * codes and more than RP_GIF_MAX_CLEARS clear codes per file, and leaves every other fault for
 * giflib to name. It allocates nothing and costs a few nanoseconds a code.
 *
 * Where a GIF ends: at its trailer, at the end of the data, or at a byte that starts no block.
 * Browsers show all three. Bytes after that end are ignored, and stripped. The data must hold at
 * least one frame, and a frame cut short is refused (a browser would show it half drawn).
 *
 * giflib reports errors by return value (no exit, no longjmp). Nothing here is global, so every
 * function may be called from many threads at once.
 */
#include "CImageCodecs.h"
#include "rp_internal.h"
#include "rp_gif_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

enum {
    /* Frames per file. 5,000 frames at a typical 60 ms each is five minutes of animation. */
    RP_GIF_MAX_FRAMES = 5000,
    /* Pixels decoded over all frames, as a multiple of the limits' max_pixels (80 million with
     * the default 40 million): two full-size frames, or 320 frames of 500x500. giflib decodes
     * the most compressible LZW (4,000 pixels a 12-bit code) at about 435 million pixels a
     * second, and the worst mix, 16,384 pixels per frame, at 225 million. So the whole budget
     * costs 0.2-0.35 s of CPU, whatever the 10 MB of a file hold. */
    RP_GIF_PIXEL_BUDGET_FACTOR = 2,
    /* Clear codes per file: giflib spends about 0.24 us on each, so these cost 0.12 s. An
     * encoder clears when its dictionary is full: about 2,000 clears for 80 million pixels. */
    RP_GIF_MAX_CLEARS = 500000,
    /* Pixels asked of giflib per call, and the size of the one decode buffer. Any GIF row fits
     * (widths are 16-bit), and narrow frames are not decoded a row per call. */
    RP_GIF_CHUNK = 65536,
    /* The push variant is not shrunk below this many pixels on its long side. */
    RP_GIF_MIN_SIDE = 64,
};

/* gif_walk and its callbacks: go on, stop early (a success), or fail with a message. */
enum { WALK_ON = 0, WALK_STOP = 1, WALK_FAIL = -1 };

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }

static const char *gif_error_text(int code) {
    const char *text = GifErrorString(code);
    return text != NULL ? text : "unknown giflib error";
}

/* --------------------------------------------------------- byte walker */
/*
 * The file's block structure, walked without giflib: the header, screen descriptor and global
 * colour table, then extensions (0x21) and images (0x2C), each ending with its sub-blocks'
 * zero terminator. Every length is checked against the bytes at hand before it is followed.
 */

typedef struct {
    const uint8_t *data;
    size_t length;
    size_t pos;
} block_cursor;

typedef struct {
    uint8_t introducer; /* 0x21 extension, 0x2C image */
    uint8_t label;      /* an extension's label */
    size_t start;       /* the introducer */
    size_t end;         /* just past the sub-blocks' terminator */
} gif_block;

/* Just past the zero terminator of the sub-blocks starting at `pos`, or 0 if they run past the end. */
static size_t skip_sub_blocks(const uint8_t *data, size_t length, size_t pos) {
    while (pos < length) {
        size_t n = data[pos];
        if (n == 0) return pos + 1;
        pos += 1 + n;
    }
    return 0;
}

static size_t color_table_bytes(uint8_t flags) {
    return (flags & 0x80) ? (size_t)3 << ((flags & 0x07) + 1) : 0;
}

/* Positions the cursor after the global colour table. Returns 0, or -1 with `message` filled. */
static int cursor_open(block_cursor *c, const uint8_t *data, size_t length, char message[256]) {
    c->data = data;
    c->length = length;
    c->pos = 0;
    if (data == NULL || length < 13 || (memcmp(data, "GIF87a", 6) != 0 && memcmp(data, "GIF89a", 6) != 0)) {
        snprintf(message, 256, "not a GIF file");
        return -1;
    }
    size_t screen_end = 13 + color_table_bytes(data[10]);
    if (screen_end > length) {
        snprintf(message, 256, "the global color table runs past the end of the %zu-byte file", length);
        return -1;
    }
    c->pos = screen_end;
    return 0;
}

/* Reads the block at the cursor: 1 with `b` filled, 0 at the GIF's end (trailer, end of data, or
 * a byte that starts no block; c->pos is there), -1 when a block runs past the end. */
static int next_block(block_cursor *c, gif_block *b, char message[256]) {
    const uint8_t *data = c->data;
    size_t pos = c->pos, end = 0;
    if (pos >= c->length) return 0;
    b->introducer = data[pos];
    b->start = pos;
    b->label = 0;
    if (b->introducer == 0x21 && pos + 2 <= c->length) {
        b->label = data[pos + 1];
        end = skip_sub_blocks(data, c->length, pos + 2);
    } else if (b->introducer == 0x2C && pos + 10 <= c->length) {
        size_t lzw = pos + 10 + color_table_bytes(data[pos + 9]); /* the LZW minimum code size */
        end = lzw < c->length ? skip_sub_blocks(data, c->length, lzw + 1) : 0;
    } else if (b->introducer == 0x21 || b->introducer == 0x2C) {
        end = 0;
    } else {
        return 0;
    }
    if (end == 0) {
        snprintf(message, 256, "the block at byte %zu runs past the end of the %zu-byte file", pos, c->length);
        return -1;
    }
    b->end = end;
    c->pos = end;
    return 1;
}

/* Application extensions that only say how often to loop. */
static int is_loop_extension(const uint8_t *raw, size_t length) {
    return length >= 2 + 1 + 11 && raw[2] == 11 &&
           (memcmp(raw + 3, "NETSCAPE2.0", 11) == 0 || memcmp(raw + 3, "ANIMEXTS1.0", 11) == 0);
}

/* What stripping does with an extension: 0 keeps it, else the rp_gif_metadata flag it is under. */
static int extension_metadata(const uint8_t *data, const gif_block *b) {
    const uint8_t *raw = data + b->start;
    size_t length = b->end - b->start;
    switch (b->label) {
    case GRAPHICS_EXT_FUNC_CODE:
    case PLAINTEXT_EXT_FUNC_CODE:
        return 0;
    case COMMENT_EXT_FUNC_CODE:
        return RP_GIF_META_COMMENT;
    case APPLICATION_EXT_FUNC_CODE:
        if (is_loop_extension(raw, length)) return 0;
        if (length >= 2 + 1 + 11 && raw[2] == 11 && memcmp(raw + 3, "XMP DataXMP", 11) == 0) return RP_GIF_META_XMP;
        return RP_GIF_META_APPLICATION;
    default:
        return RP_GIF_META_UNKNOWN_EXTENSION;
    }
}

int rp_gif_has_metadata(const uint8_t *data, size_t length) {
    block_cursor c;
    gif_block b;
    char message[256];
    int found = 0, rc;
    if (cursor_open(&c, data, length, message) != 0) return 0;
    while ((rc = next_block(&c, &b, message)) == 1) {
        if (b.introducer == 0x21) found |= extension_metadata(data, &b);
    }
    if (rc < 0) return 0; /* cannot be walked: the inspector refuses it */
    /* At the trailer, anything after it; at a byte that starts no block, that byte onwards. */
    size_t kept = c.pos < length && data[c.pos] == 0x3B ? c.pos + 1 : c.pos;
    if (kept < length) found |= RP_GIF_META_TRAILING_DATA;
    return found;
}

int rp_gif_strip(const uint8_t *data, size_t length, uint8_t **out, size_t *out_length, char message[256]) {
    block_cursor c;
    gif_block b;
    int rc;
    *out = NULL;
    *out_length = 0;
    message[0] = '\0';
    if (cursor_open(&c, data, length, message) != 0) return -1;
    uint8_t *buffer = malloc(length + 1); /* + a trailer the source may lack */
    if (buffer == NULL) {
        snprintf(message, 256, "out of memory for %zu bytes", length + 1);
        return -1;
    }
    size_t n = c.pos;
    memcpy(buffer, data, n);
    while ((rc = next_block(&c, &b, message)) == 1) {
        if (b.introducer == 0x21 && extension_metadata(data, &b) != 0) continue;
        memcpy(buffer + n, data + b.start, b.end - b.start);
        n += b.end - b.start;
    }
    if (rc < 0) {
        free(buffer);
        return -1;
    }
    buffer[n++] = 0x3B;
    *out = buffer;
    *out_length = n;
    return 0;
}

/* ------------------------------------------------------------- decoder */

typedef struct {
    const uint8_t *data;
    size_t length;
    size_t pos;
} gif_input;

/* giflib's InputFunc. giflib asks for exactly the bytes it needs, so after a call returns,
 * `pos` is where the next structure starts (the pre-scan relies on it). */
static int gif_input_read(GifFileType *gif, GifByteType *out, int count) {
    gif_input *in = (gif_input *)gif->UserData;
    if (count <= 0) return 0;
    size_t n = in->length - in->pos;
    if ((size_t)count < n) n = (size_t)count;
    memcpy(out, in->data + in->pos, n);
    in->pos += n;
    return (int)n;
}

typedef struct {
    uint32_t number;                /* 1 for the first frame */
    uint32_t left, top, width, height;
    int interlaced;
    const ColorMapObject *colors;   /* the frame's own table, else the global one */
    int local;                      /* `colors` is the frame's own */
    int transparent;                /* palette index, or -1 */
    int has_gce;
    uint8_t gce[4];                 /* its graphic control extension */
} gif_frame;

typedef struct {
    GifFileType *gif;
    gif_input input;
    uint64_t pixel_budget;          /* UINT64_MAX: none */
    uint64_t pixels;                /* over all frames so far */
    uint64_t clears;
    uint32_t frames;
    int interlaced;                 /* any frame */
    int has_gce;                    /* a control extension waits for the next frame */
    uint8_t gce[4];
    uint8_t *buffer;                /* RP_GIF_CHUNK bytes */
    int status;                     /* rp_image_status of a failure */
    char message[256];
} gif_reader;

/* What a walk does with what it decodes. Any callback may be NULL. */
typedef struct {
    /* A frame, checked, before its pixels. */
    int (*frame)(gif_reader *r, void *ctx, const gif_frame *frame);
    /* Each of its rows (palette indices), in display order. NULL: rows are decoded and dropped. */
    void (*row)(void *ctx, const gif_frame *frame, uint32_t y, const uint8_t *indices);
    /* After its last row. */
    int (*frame_done)(gif_reader *r, void *ctx, const gif_frame *frame);
    /* An extension, checked, as its raw bytes from the introducer to the terminator. */
    int (*extension)(gif_reader *r, void *ctx, int label, const uint8_t *raw, size_t length);
    void *ctx;
} gif_visitor;

static int reader_fail(gif_reader *r, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    r->status = status;
    return WALK_FAIL;
}

/* giflib's own words on its last error, and where it happened. */
static int giflib_fail(gif_reader *r, uint32_t frame) {
    const char *text = gif_error_text(r->gif->Error);
    if (frame > 0) return reader_fail(r, RP_IMAGE_CORRUPT, "frame %u: %s", frame, text);
    if (r->frames > 0) return reader_fail(r, RP_IMAGE_CORRUPT, "after frame %u: %s", r->frames, text);
    return reader_fail(r, RP_IMAGE_CORRUPT, "before the first frame: %s", text);
}

static int reader_open(gif_reader *r, const uint8_t *data, size_t length, uint64_t pixel_budget) {
    int error = 0;
    memset(r, 0, sizeof *r);
    r->input.data = data;
    r->input.length = length;
    r->pixel_budget = pixel_budget;
    r->status = RP_IMAGE_CORRUPT;
    r->gif = DGifOpen(&r->input, gif_input_read, &error);
    if (r->gif == NULL) return reader_fail(r, RP_IMAGE_CORRUPT, "the GIF header cannot be read: %s", gif_error_text(error));
    r->buffer = malloc(RP_GIF_CHUNK);
    if (r->buffer == NULL) return reader_fail(r, RP_IMAGE_CORRUPT, "out of memory for the decode buffer");
    return 0;
}

static void reader_close(gif_reader *r) {
    if (r->gif != NULL) DGifCloseFile(r->gif, NULL);
    r->gif = NULL;
    free(r->buffer);
    r->buffer = NULL;
}

/* ------------------------------------------------------- LZW pre-scan */

typedef struct {
    const uint8_t *data;
    size_t length;
    size_t pos;        /* the next byte to read */
    size_t block_end;  /* the end of the current sub-block */
    uint32_t bits;     /* unread bits, LSB first */
    int count;         /* how many */
} code_reader;

/* The next `width`-bit code, or -1 where the data ends or a zero-length block comes first. */
static int next_code(code_reader *c, int width) {
    while (c->count < width) {
        if (c->pos == c->block_end) {
            if (c->pos >= c->length || c->data[c->pos] == 0) return -1;
            c->block_end = c->pos + 1 + c->data[c->pos];
            c->pos++;
            if (c->block_end > c->length) return -1;
        }
        c->bits |= (uint32_t)c->data[c->pos++] << c->count;
        c->count += 8;
    }
    int code = (int)(c->bits & ((1u << width) - 1));
    c->bits >>= width;
    c->count -= width;
    return code;
}

/* giflib's dictionary state, mirrored (dgif_lib.c: DGifDecompressInput, DGifDecompressLine). */
typedef struct {
    int clear, eoi;
    int running_code;   /* giflib's RunningCode: the next entry + 2 */
    int running_bits;
    int max_code1;
    int next_entry;     /* entries below this are defined */
    int last;           /* the previous code, or -1 after a clear */
    uint16_t length[4096];
} lzw_state;

static void lzw_reset(lzw_state *s, int min_code_size) {
    s->clear = 1 << min_code_size;
    s->eoi = s->clear + 1;
    s->running_code = s->eoi + 1;
    s->running_bits = min_code_size + 1;
    s->max_code1 = 1 << s->running_bits;
    s->next_entry = s->eoi + 1;
    s->last = -1;
}

static uint32_t string_length(const lzw_state *s, int code) {
    return code < s->clear ? 1u : s->length[code];
}

/* Reads frame `f`'s codes up to its last pixel, as giflib will. Returns 0 (the faults it does not
 * own are left for giflib) or WALK_FAIL for an undefined code or too many clear codes. */
static int lzw_prescan(gif_reader *r, const gif_frame *f) {
    lzw_state s;
    int min_code_size = r->input.data[r->input.pos - 1]; /* giflib has just read it */
    if (min_code_size > 8) return 0;
    code_reader c = {r->input.data, r->input.length, r->input.pos, r->input.pos, 0, 0};
    uint64_t needed = (uint64_t)f->width * f->height, decoded = 0;
    lzw_reset(&s, min_code_size);
    while (decoded < needed) {
        int code = next_code(&c, s.running_bits);
        if (code < 0) return 0;
        if (s.running_code < 4097 && ++s.running_code > s.max_code1 && s.running_bits < 12) {
            s.max_code1 <<= 1;
            s.running_bits++;
        }
        if (code == s.eoi) return 0; /* giflib: "Image EOF detected before image complete" */
        if (code == s.clear) {
            if (++r->clears > RP_GIF_MAX_CLEARS) {
                return reader_fail(r, RP_IMAGE_CORRUPT, "frame %u: more than %d LZW clear codes (an encoder clears when its dictionary is full)",
                                   f->number, RP_GIF_MAX_CLEARS);
            }
            lzw_reset(&s, min_code_size);
            continue;
        }
        uint32_t n;
        int entry = s.running_code - 2; /* where giflib defines the next entry */
        if (code < s.clear || code < s.next_entry) {
            n = string_length(&s, code);
        } else if (code == entry && s.last >= 0) {
            n = string_length(&s, s.last) + 1; /* the entry being defined by this very code */
        } else {
            return reader_fail(r, RP_IMAGE_CORRUPT, "frame %u: LZW code %d is used before it is defined (the dictionary ends at %d)",
                               f->number, code, s.next_entry - 1);
        }
        if (s.last >= 0 && entry < 4096 && entry >= s.next_entry) {
            s.length[entry] = (uint16_t)(string_length(&s, s.last) + 1);
            s.next_entry = entry + 1;
        }
        s.last = code;
        decoded += n;
    }
    return 0;
}

/* ------------------------------------------------------------ records */

static void describe_frame(const gif_reader *r, gif_frame *f) {
    const GifImageDesc *d = &r->gif->Image;
    memset(f, 0, sizeof *f);
    f->number = r->frames + 1;
    f->left = (uint32_t)d->Left;
    f->top = (uint32_t)d->Top;
    f->width = (uint32_t)d->Width;
    f->height = (uint32_t)d->Height;
    f->interlaced = d->Interlace ? 1 : 0;
    f->local = d->ColorMap != NULL;
    f->colors = d->ColorMap != NULL ? d->ColorMap : r->gif->SColorMap;
    f->has_gce = r->has_gce;
    memcpy(f->gce, r->gce, 4);
    f->transparent = r->has_gce && (r->gce[0] & 0x01) ? r->gce[3] : -1;
}

/* Returns 1 and fills the reader's message when the descriptor is refused. */
static int frame_refused(gif_reader *r, const gif_frame *f) {
    uint32_t sw = (uint32_t)r->gif->SWidth, sh = (uint32_t)r->gif->SHeight;
    uint64_t total = r->pixels + (uint64_t)f->width * f->height;
    if (f->width == 0 || f->height == 0) {
        reader_fail(r, RP_IMAGE_CORRUPT, "frame %u declares a zero dimension (%ux%u)", f->number, f->width, f->height);
    } else if (f->left + f->width > sw || f->top + f->height > sh) {
        reader_fail(r, RP_IMAGE_CORRUPT, "frame %u (%ux%u at %u,%u) lies outside the %ux%u canvas", f->number, f->width,
                    f->height, f->left, f->top, sw, sh);
    } else if (f->colors == NULL) {
        reader_fail(r, RP_IMAGE_CORRUPT, "frame %u has no color table (neither its own nor a global one)", f->number);
    } else if (total > r->pixel_budget) {
        reader_fail(r, RP_IMAGE_TOO_LARGE, "the frames total %llu pixels, over the limit of %llu", (unsigned long long)total,
                    (unsigned long long)r->pixel_budget);
    } else {
        return 0;
    }
    return 1;
}

/* Row `k` of an interlaced frame's data is this row of the picture (passes every 8, 8, 4, 2). */
static uint32_t interlaced_row(uint32_t k, uint32_t height) {
    uint32_t pass1 = (height + 7) / 8, pass2 = (height + 3) / 8, pass3 = (height + 1) / 4;
    if (k < pass1) return k * 8;
    k -= pass1;
    if (k < pass2) return 4 + k * 8;
    k -= pass2;
    if (k < pass3) return 2 + k * 4;
    return 1 + (k - pass3) * 2;
}

/* Every pixel of the frame, RP_GIF_CHUNK at a time: whole rows when the visitor wants rows. */
static int decode_frame(gif_reader *r, const gif_visitor *v, const gif_frame *f) {
    if (v->row == NULL) {
        uint64_t left = (uint64_t)f->width * f->height;
        while (left > 0) {
            int n = left < RP_GIF_CHUNK ? (int)left : RP_GIF_CHUNK;
            if (DGifGetLine(r->gif, r->buffer, n) == GIF_ERROR) return giflib_fail(r, f->number);
            left -= (uint64_t)n;
        }
        return 0;
    }
    uint32_t per_call = RP_GIF_CHUNK / f->width;
    for (uint32_t k = 0; k < f->height; k += per_call) {
        uint32_t rows = f->height - k < per_call ? f->height - k : per_call;
        if (DGifGetLine(r->gif, r->buffer, (int)(rows * f->width)) == GIF_ERROR) return giflib_fail(r, f->number);
        for (uint32_t i = 0; i < rows; i++) {
            uint32_t y = f->interlaced ? interlaced_row(k + i, f->height) : k + i;
            v->row(v->ctx, f, y, r->buffer + (size_t)i * f->width);
        }
    }
    return 0;
}

static int read_frame(gif_reader *r, const gif_visitor *v) {
    gif_frame f;
    if (r->frames >= RP_GIF_MAX_FRAMES) {
        return reader_fail(r, RP_IMAGE_TOO_LARGE, "more than %d frames, over the limit of %d", RP_GIF_MAX_FRAMES, RP_GIF_MAX_FRAMES);
    }
    if (DGifGetImageHeader(r->gif) == GIF_ERROR) return giflib_fail(r, r->frames + 1);
    describe_frame(r, &f);
    if (frame_refused(r, &f) || lzw_prescan(r, &f) != 0) return WALK_FAIL;
    r->frames++;
    r->pixels += (uint64_t)f.width * f.height;
    r->interlaced |= f.interlaced;
    r->has_gce = 0; /* a control extension governs the one frame after it */
    int rc = v->frame != NULL ? v->frame(r, v->ctx, &f) : WALK_ON;
    if (rc != WALK_ON) return rc;
    if (decode_frame(r, v, &f) != 0) return WALK_FAIL;
    return v->frame_done != NULL ? v->frame_done(r, v->ctx, &f) : WALK_ON;
}

static int read_extension(gif_reader *r, const gif_visitor *v, size_t start) {
    int label = 0;
    GifByteType *block = NULL;
    if (DGifGetExtension(r->gif, &label, &block) == GIF_ERROR) return giflib_fail(r, 0);
    if (label == GRAPHICS_EXT_FUNC_CODE) {
        if (block == NULL || block[0] != 4) {
            return reader_fail(r, RP_IMAGE_CORRUPT, "after frame %u: a graphic control extension of %d bytes (it has 4)", r->frames,
                               block != NULL ? block[0] : 0);
        }
        memcpy(r->gce, block + 1, 4);
        r->has_gce = 1;
    } else if (label == PLAINTEXT_EXT_FUNC_CODE) {
        r->has_gce = 0; /* a control extension before plain text was the text's */
    }
    while (block != NULL) {
        if (DGifGetExtensionNext(r->gif, &block) == GIF_ERROR) return giflib_fail(r, 0);
    }
    if (v->extension == NULL) return WALK_ON;
    return v->extension(r, v->ctx, label, r->input.data + start, r->input.pos - start);
}

/* Reads the GIF record by record to its end. WALK_ON at the end, WALK_STOP when a callback
 * stopped it, WALK_FAIL with the reader's status and message. */
static int gif_walk(gif_reader *r, const gif_visitor *v) {
    for (;;) {
        size_t start = r->input.pos;
        GifRecordType type = UNDEFINED_RECORD_TYPE;
        int rc;
        if (DGifGetRecordType(r->gif, &type) == GIF_ERROR) {
            /* No trailer: the end of the data, or a byte that starts no block, ends the GIF. */
            int at_end = start == r->input.length || r->gif->Error == D_GIF_ERR_WRONG_RECORD;
            if (at_end && r->frames > 0) return WALK_ON;
            return giflib_fail(r, 0);
        }
        if (type == TERMINATE_RECORD_TYPE) {
            if (r->frames > 0) return WALK_ON;
            return reader_fail(r, RP_IMAGE_CORRUPT, "the GIF holds no image");
        }
        rc = type == EXTENSION_RECORD_TYPE ? read_extension(r, v, start) : read_frame(r, v);
        if (rc != WALK_ON) return rc;
    }
}

/* ---------------------------------------------------------- inspection */

/* Returns 1 and fills `r` when the logical screen is over the limits (rp_codecs.c's words). */
static int screen_over_limits(rp_image_result *r, rp_image_limits limits) {
    if (r->width == 0 || r->height == 0) {
        r->status = RP_IMAGE_CORRUPT;
        snprintf(r->message, sizeof r->message, "image declares a zero dimension (%ux%u)", r->width, r->height);
        return 1;
    }
    if (r->width > limits.max_side || r->height > limits.max_side) {
        r->status = RP_IMAGE_TOO_LARGE;
        snprintf(r->message, sizeof r->message, "%ux%u pixels: a side is over the limit of %u", r->width, r->height, limits.max_side);
        return 1;
    }
    uint64_t pixels = (uint64_t)r->width * (uint64_t)r->height;
    if (pixels > limits.max_pixels) {
        r->status = RP_IMAGE_TOO_LARGE;
        snprintf(r->message, sizeof r->message, "%ux%u is %llu pixels, over the limit of %llu", r->width, r->height,
                 (unsigned long long)pixels, (unsigned long long)limits.max_pixels);
        return 1;
    }
    return 0;
}

void rp_gif_inspect_into(const uint8_t *data, size_t length, rp_image_limits limits, rp_image_result *result) {
    gif_reader r;
    gif_visitor decode_only = {NULL, NULL, NULL, NULL, NULL};
    memset(result, 0, sizeof *result);
    result->format = RP_FORMAT_GIF;
    result->bit_depth = 8;
    result->color_model = RP_COLOR_PALETTE;
    if (data == NULL || length < 13) {
        result->status = RP_IMAGE_CORRUPT;
        snprintf(result->message, sizeof result->message, "the file ends inside the GIF header (%zu bytes)", length);
        return;
    }
    result->width = le16(data + 6);
    result->height = le16(data + 8);
    if (screen_over_limits(result, limits)) return;
    uint64_t budget = limits.max_pixels > UINT64_MAX / RP_GIF_PIXEL_BUDGET_FACTOR
                          ? UINT64_MAX : limits.max_pixels * RP_GIF_PIXEL_BUDGET_FACTOR;
    if (reader_open(&r, data, length, budget) == 0 && gif_walk(&r, &decode_only) != WALK_FAIL) {
        r.status = RP_IMAGE_OK;
        r.message[0] = '\0';
    }
    result->status = r.status;
    result->frames = (int32_t)r.frames;
    result->interlaced = r.interlaced;
    snprintf(result->message, sizeof result->message, "%s", r.message);
    reader_close(&r);
}

/* --------------------------------------------------------- first frame */

typedef struct {
    uint32_t width, height;   /* the canvas */
    uint8_t *rgba;
    uint8_t palette[256][4];
    int transparent;
} first_frame_job;

static int first_frame_begin(gif_reader *r, void *ctx, const gif_frame *f) {
    first_frame_job *job = (first_frame_job *)ctx;
    job->rgba = calloc((size_t)job->width * job->height, 4); /* transparent */
    if (job->rgba == NULL) return reader_fail(r, RP_IMAGE_CORRUPT, "out of memory for a %ux%u canvas", job->width, job->height);
    /* Indices past the table show black, as in browsers. */
    for (int i = 0; i < 256; i++) {
        const GifColorType *c = i < f->colors->ColorCount ? &f->colors->Colors[i] : NULL;
        job->palette[i][0] = c ? c->Red : 0;
        job->palette[i][1] = c ? c->Green : 0;
        job->palette[i][2] = c ? c->Blue : 0;
        job->palette[i][3] = 255;
    }
    job->transparent = f->transparent;
    return WALK_ON;
}

static void first_frame_row(void *ctx, const gif_frame *f, uint32_t y, const uint8_t *indices) {
    first_frame_job *job = (first_frame_job *)ctx;
    uint8_t *out = job->rgba + ((size_t)(f->top + y) * job->width + f->left) * 4;
    for (uint32_t x = 0; x < f->width; x++) {
        if (indices[x] != job->transparent) memcpy(out + (size_t)x * 4, job->palette[indices[x]], 4);
    }
}

static int first_frame_done(gif_reader *r, void *ctx, const gif_frame *f) {
    (void)r;
    (void)ctx;
    (void)f;
    return WALK_STOP;
}

/* Hands `rgba` (taken over) to `out`, resampled to fit `box`×`box` when larger. */
static int fit_rgba(uint8_t *rgba, uint32_t w, uint32_t h, uint32_t box, rp_pixels *out, char message[256]) {
    uint32_t dw, dh;
    rp_fit_box(w, h, box, &dw, &dh);
    if (dw != w || dh != h) {
        uint8_t *fitted = malloc((size_t)dw * dh * 4);
        if (fitted == NULL || rp_resize(rgba, w, h, 4, fitted, dw, dh) != 0) {
            free(fitted);
            free(rgba);
            snprintf(message, 256, "out of memory resizing %ux%u to %ux%u", w, h, dw, dh);
            return -1;
        }
        free(rgba);
        rgba = fitted;
    }
    out->pixels = rgba;
    out->width = dw;
    out->height = dh;
    out->components = 4;
    return 0;
}

int rp_gif_first_frame(const uint8_t *data, size_t length, uint32_t box, rp_pixels *out, char message[256]) {
    gif_reader r;
    first_frame_job job;
    memset(out, 0, sizeof *out);
    memset(&job, 0, sizeof job);
    message[0] = '\0';
    gif_visitor v = {first_frame_begin, first_frame_row, first_frame_done, NULL, &job};
    if (reader_open(&r, data, length, UINT64_MAX) != 0) {
        snprintf(message, 256, "%s", r.message);
        reader_close(&r);
        return -1;
    }
    job.width = (uint32_t)r.gif->SWidth;
    job.height = (uint32_t)r.gif->SHeight;
    if (gif_walk(&r, &v) == WALK_FAIL || job.rgba == NULL) {
        snprintf(message, 256, "%s", r.message[0] ? r.message : "the GIF holds no image");
        free(job.rgba);
        reader_close(&r);
        return -1;
    }
    reader_close(&r);
    return fit_rgba(job.rgba, job.width, job.height, box, out, message);
}

/* ---------------------------------------------------------- push variant */

/* giflib's output, grown as it writes; past `limit` bytes are counted, not kept. */
typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
    size_t limit;
    int over;
    int failed;
} gif_sink;

static int gif_sink_write(GifFileType *gif, const GifByteType *bytes, int count) {
    gif_sink *s = (gif_sink *)gif->UserData;
    if (count <= 0) return 0;
    if (s->over || s->length + (size_t)count > s->limit) {
        s->over = 1;
        s->length += (size_t)count;
        return count;
    }
    if (s->length + (size_t)count > s->capacity) {
        size_t capacity = s->capacity ? s->capacity * 2 : 65536;
        while (capacity < s->length + (size_t)count) capacity *= 2;
        uint8_t *grown = realloc(s->data, capacity);
        if (grown == NULL) {
            s->failed = 1;
            return 0;
        }
        s->data = grown;
        s->capacity = capacity;
    }
    memcpy(s->data + s->length, bytes, (size_t)count);
    s->length += (size_t)count;
    return count;
}

typedef struct {
    GifFileType *out;
    gif_sink sink;
    uint32_t sw, sh;            /* the source canvas */
    uint32_t dw, dh;            /* the scaled canvas */
    uint32_t x0, y0, fw, fh;    /* the current frame in the scaled canvas */
    uint8_t *pixels;            /* its palette indices, fw×fh (room for dw×dh) */
    uint32_t *columns;          /* per scaled column: the source frame's column (dw) */
    uint32_t *first_row;        /* per source frame row: its first scaled row (sh + 1) */
} fit_job;

/* The source pixel under the centre of scaled pixel `x`, for a side of `s` scaled to `d`. */
static uint32_t source_of(uint32_t x, uint32_t s, uint32_t d) {
    return (uint32_t)(((2 * (uint64_t)x + 1) * s) / (2 * (uint64_t)d));
}

/* The first scaled pixel whose centre is in source pixel `v` or after it. */
static uint32_t scaled_start(uint32_t v, uint32_t s, uint32_t d) {
    uint64_t numerator = 2 * (uint64_t)d * v;
    if (numerator <= s) return 0;
    uint64_t x = (numerator - s + 2 * (uint64_t)s - 1) / (2 * (uint64_t)s);
    return x > d ? d : (uint32_t)x;
}

/* The scaled span [*start, *start + *count) of source span [from, from + n): at least a pixel. */
static void scaled_span(uint32_t from, uint32_t n, uint32_t s, uint32_t d, uint32_t *start, uint32_t *count) {
    uint32_t a = scaled_start(from, s, d), b = scaled_start(from + n, s, d);
    if (b <= a) {
        a = a < d ? a : d - 1;
        b = a + 1;
    }
    *start = a;
    *count = b - a;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Nearest-neighbour maps for the frame: the same for every frame, so frames stay aligned. */
static int fit_frame_begin(gif_reader *r, void *ctx, const gif_frame *f) {
    fit_job *job = (fit_job *)ctx;
    (void)r;
    scaled_span(f->left, f->width, job->sw, job->dw, &job->x0, &job->fw);
    scaled_span(f->top, f->height, job->sh, job->dh, &job->y0, &job->fh);
    for (uint32_t i = 0; i < job->fw; i++) {
        job->columns[i] = clamp_u32(source_of(job->x0 + i, job->sw, job->dw), f->left, f->left + f->width - 1) - f->left;
    }
    uint32_t j = 0;
    for (uint32_t row = 0; row < f->height; row++) {
        job->first_row[row] = j;
        while (j < job->fh && clamp_u32(source_of(job->y0 + j, job->sh, job->dh), f->top, f->top + f->height - 1) - f->top == row) j++;
    }
    job->first_row[f->height] = job->fh;
    return WALK_ON;
}

static void fit_row(void *ctx, const gif_frame *f, uint32_t y, const uint8_t *indices) {
    fit_job *job = (fit_job *)ctx;
    (void)f;
    uint32_t first = job->first_row[y], end = job->first_row[y + 1];
    if (first >= end) return;
    uint8_t *out = job->pixels + (size_t)first * job->fw;
    for (uint32_t i = 0; i < job->fw; i++) out[i] = indices[job->columns[i]];
    for (uint32_t j = first + 1; j < end; j++) memcpy(job->pixels + (size_t)j * job->fw, out, job->fw);
}

/* The frame's colour table as written, in *map: its own, or NULL for the global one, padded
 * with black when an index used (or the transparent one) is past it, so that no index changes
 * meaning (giflib's encoder masks indices to the table's size). *owned is what the caller frees.
 * Returns -1 when out of memory. */
static int fit_color_map(const fit_job *job, const gif_frame *f, const ColorMapObject **map, ColorMapObject **owned) {
    int highest = f->transparent;
    size_t count = (size_t)job->fw * job->fh;
    *owned = NULL;
    *map = f->local ? f->colors : NULL;
    for (size_t i = 0; i < count; i++) {
        if (job->pixels[i] > highest) highest = job->pixels[i];
    }
    if (highest < f->colors->ColorCount) return 0;
    ColorMapObject *padded = GifMakeMapObject(1 << GifBitSize(highest + 1), NULL);
    if (padded == NULL) return -1;
    memcpy(padded->Colors, f->colors->Colors, sizeof(GifColorType) * (size_t)f->colors->ColorCount);
    *owned = padded;
    *map = padded;
    return 0;
}

static int fit_frame_done(gif_reader *r, void *ctx, const gif_frame *f) {
    fit_job *job = (fit_job *)ctx;
    ColorMapObject *owned = NULL;
    const ColorMapObject *map = NULL;
    if (fit_color_map(job, f, &map, &owned) != 0) return reader_fail(r, RP_IMAGE_CORRUPT, "out of memory for a color table");
    int ok = 1;
    if (f->has_gce) ok = EGifPutExtension(job->out, GRAPHICS_EXT_FUNC_CODE, 4, f->gce) == GIF_OK;
    if (ok && map == NULL && job->out->Image.ColorMap != NULL) {
        /* Given no table, giflib forgets the previous frame's without freeing it. */
        GifFreeMapObject(job->out->Image.ColorMap);
        job->out->Image.ColorMap = NULL;
    }
    if (ok) ok = EGifPutImageDesc(job->out, (int)job->x0, (int)job->y0, (int)job->fw, (int)job->fh, false, map) == GIF_OK;
    for (uint32_t j = 0; ok && j < job->fh; j++) {
        ok = EGifPutLine(job->out, job->pixels + (size_t)j * job->fw, (int)job->fw) == GIF_OK;
    }
    GifFreeMapObject(owned);
    if (!ok || job->sink.failed) {
        return reader_fail(r, RP_IMAGE_CORRUPT, "frame %u: writing the GIF failed: %s", f->number,
                           job->sink.failed ? "out of memory" : gif_error_text(job->out->Error));
    }
    return job->sink.over ? WALK_STOP : WALK_ON;
}

/* The loop extension goes along, sub-block by sub-block; comments and the rest do not. */
static int fit_extension(gif_reader *r, void *ctx, int label, const uint8_t *raw, size_t length) {
    fit_job *job = (fit_job *)ctx;
    if (label != APPLICATION_EXT_FUNC_CODE || !is_loop_extension(raw, length)) return WALK_ON;
    int ok = EGifPutExtensionLeader(job->out, APPLICATION_EXT_FUNC_CODE) == GIF_OK;
    for (size_t p = 2; ok && p < length && raw[p] != 0; p += 1 + (size_t)raw[p]) {
        ok = EGifPutExtensionBlock(job->out, raw[p], raw + p + 1) == GIF_OK;
    }
    if (ok) ok = EGifPutExtensionTrailer(job->out) == GIF_OK;
    if (!ok) return reader_fail(r, RP_IMAGE_CORRUPT, "writing the loop extension failed: %s", gif_error_text(job->out->Error));
    return WALK_ON;
}

static int fit_job_open(fit_job *job, gif_reader *r, uint32_t dw, uint32_t dh, size_t max_bytes) {
    int error = 0;
    memset(job, 0, sizeof *job);
    job->sw = (uint32_t)r->gif->SWidth;
    job->sh = (uint32_t)r->gif->SHeight;
    job->dw = dw;
    job->dh = dh;
    job->sink.limit = max_bytes;
    job->pixels = malloc((size_t)dw * dh);
    job->columns = malloc(sizeof(uint32_t) * dw);
    job->first_row = malloc(sizeof(uint32_t) * ((size_t)job->sh + 1));
    if (job->pixels == NULL || job->columns == NULL || job->first_row == NULL) {
        return reader_fail(r, RP_IMAGE_CORRUPT, "out of memory for a %ux%u frame", dw, dh);
    }
    job->out = EGifOpen(&job->sink, gif_sink_write, &error);
    if (job->out == NULL) return reader_fail(r, RP_IMAGE_CORRUPT, "giflib could not start a GIF: %s", gif_error_text(error));
    EGifSetGifVersion(job->out, true);
    if (EGifPutScreenDesc(job->out, (int)dw, (int)dh, r->gif->SColorResolution, r->gif->SBackGroundColor,
                          r->gif->SColorMap) == GIF_ERROR) {
        return reader_fail(r, RP_IMAGE_CORRUPT, "writing the GIF failed: %s", gif_error_text(job->out->Error));
    }
    return 0;
}

static void fit_job_close(fit_job *job) {
    if (job->out != NULL) EGifCloseFile(job->out, NULL); /* writes the trailer */
    free(job->pixels);
    free(job->columns);
    free(job->first_row);
}

/* The source re-encoded at dw×dh. Returns 0 with `sink` (the caller frees sink->data); when it
 * grew past max_bytes, sink->over is set and *estimate is its likely full size. -1 on failure. */
static int encode_scaled(const uint8_t *data, size_t length, uint32_t dw, uint32_t dh, size_t max_bytes, gif_sink *sink,
                         size_t *estimate, char message[256]) {
    gif_reader r;
    fit_job job;
    int rc = reader_open(&r, data, length, UINT64_MAX);
    memset(&job, 0, sizeof job);
    if (rc == 0) rc = fit_job_open(&job, &r, dw, dh, max_bytes);
    if (rc == 0) {
        gif_visitor v = {fit_frame_begin, fit_row, fit_frame_done, fit_extension, &job};
        rc = gif_walk(&r, &v) == WALK_FAIL ? -1 : 0;
    }
    size_t consumed = r.input.pos;
    fit_job_close(&job);
    *sink = job.sink;
    /* The output grows about as the input is consumed. */
    *estimate = sink->over && consumed > 0 ? (size_t)((double)sink->length * ((double)length / (double)consumed)) : sink->length;
    if (rc != 0 || sink->failed) {
        snprintf(message, 256, "%s", sink->failed ? "out of memory for the GIF" : r.message);
        free(sink->data);
        sink->data = NULL;
        rc = -1;
    }
    reader_close(&r);
    return rc;
}

static void scaled_canvas(uint32_t sw, uint32_t sh, uint32_t target, uint32_t *dw, uint32_t *dh) {
    if (sw >= sh) {
        *dw = target;
        *dh = (uint32_t)llround((double)sh * target / sw);
    } else {
        *dh = target;
        *dw = (uint32_t)llround((double)sw * target / sh);
    }
    if (*dw < 1) *dw = 1;
    if (*dh < 1) *dh = 1;
}

/* The next long side to try after `size` bytes at `target`: 3/4 of it, and further 3/4 steps
 * while the size, going with the area, still could not fit (never below RP_GIF_MIN_SIDE by skipping). */
static uint32_t next_target(uint32_t target, size_t size, size_t max_bytes) {
    uint32_t next = target * 3 / 4;
    for (;;) {
        double ratio = (double)next / (double)target;
        uint32_t after = next * 3 / 4;
        if (after < RP_GIF_MIN_SIDE || (double)size * ratio * ratio <= (double)max_bytes) return next;
        next = after;
    }
}

int rp_gif_fit(const uint8_t *data, size_t length, uint32_t box, size_t max_bytes, uint8_t **out, size_t *out_length,
               char message[256]) {
    *out = NULL;
    *out_length = 0;
    message[0] = '\0';
    if (data == NULL || length < 13) {
        snprintf(message, 256, "not a GIF file");
        return -1;
    }
    uint32_t sw = le16(data + 6), sh = le16(data + 8);
    uint32_t longest = sw > sh ? sw : sh;
    if (longest == 0) {
        snprintf(message, 256, "image declares a zero dimension (%ux%u)", sw, sh);
        return -1;
    }
    uint32_t target = box > 0 && longest > box ? box : longest;
    if (target == longest && length <= max_bytes) return 0; /* the source is the variant */
    for (;;) {
        uint32_t dw, dh;
        gif_sink sink;
        size_t estimate = 0;
        scaled_canvas(sw, sh, target, &dw, &dh);
        if (encode_scaled(data, length, dw, dh, max_bytes, &sink, &estimate, message) != 0) return -1;
        if (!sink.over) {
            *out = sink.data;
            *out_length = sink.length;
            return 0;
        }
        free(sink.data);
        uint32_t next = next_target(target, estimate, max_bytes);
        if (next < RP_GIF_MIN_SIDE) {
            snprintf(message, 256, "the GIF does not fit in %zu bytes: at %ux%u it takes about %zu", max_bytes, dw, dh, estimate);
            return -1;
        }
        target = next;
    }
}
