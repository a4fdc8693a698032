/* Decoding PNG (libpng) and JPEG (TurboJPEG) files held in memory, and
 * reading an image file whole (image.h). */
#include "dtrain/image.h"

#include <errno.h>
#include <png.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "data/internal.h"
#include "dtrain/mem.h"

/* Deflate expands at most 1032:1; with the zlib and chunk framing a PNG
 * cannot hold more raw pixel bytes than this many times its size. */
#define PNG_MAX_RATIO 1100

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* The sides and pixel count against image.h's bounds. */
static dt_status check_dims(long w, long h, const char *name) {
    if (w < 1 || h < 1) return dt_fail(DT_ERR_FORMAT, "%s: corrupt header (%ld x %ld pixels)", name, w, h);
    if (w > DT_IMAGE_MAX_DIM || h > DT_IMAGE_MAX_DIM || w * h > DT_IMAGE_MAX_PIXELS)
        return dt_fail(DT_ERR_FORMAT, "%s: image of %ld x %ld pixels (sides must be 1..%d, at most %ld pixels)",
                       name, w, h, DT_IMAGE_MAX_DIM, DT_IMAGE_MAX_PIXELS);
    return DT_OK;
}

/* px (h, w, c) zeroed, for a decoder to fill. */
static dt_status alloc_pixels(uint8_t **px, long w, long h, int c, const char *name) {
    void *p;
    DT_TRY(dt_alloc_bytes(&p, (size_t)w * (size_t)h * (size_t)c, name));
    *px = p;
    return DT_OK;
}

/* msg with line breaks turned into spaces (library messages end up in one
 * line of ours). */
static const char *one_line(char *buf, size_t cap, const char *msg) {
    snprintf(buf, cap, "%s", msg && *msg ? msg : "unknown error");
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return buf;
}

/* ---- PNG ------------------------------------------------------------------
 * libpng reports errors by longjmp. Everything read_png allocates, and the
 * message, live in a png_job in its caller's frame: after the longjmp they
 * still hold their values (locals of the function that called setjmp and
 * were changed after it would not), and the caller frees them. */
typedef struct {
    const uint8_t *data; /* the file */
    size_t len, pos;     /* its size; bytes handed to libpng so far */
    const char *name;
    dt_status own;       /* a failure of ours (its message recorded by dt_fail), or DT_OK */
    char msg[256];       /* libpng's message */
    uint8_t *px;         /* (h, w, c) */
    png_bytep *rows;     /* (h) pointers into px */
} png_job;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_job *j = png_get_error_ptr(png);
    one_line(j->msg, sizeof j->msg, msg);
    png_longjmp(png, 1);
}

/* Warnings (an sRGB profile libpng dislikes, a damaged ancillary chunk it
 * skips) leave the pixels intact. */
static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void png_on_read(png_structp png, png_bytep out, size_t n) {
    png_job *j = png_get_io_ptr(png);
    if (n > j->len - j->pos) png_error(png, "file ends early (truncated)");
    memcpy(out, j->data + j->pos, n);
    j->pos += n;
}

/* Leaves read_png through its setjmp with a failure s of ours (already
 * recorded by dt_fail). */
static _Noreturn void png_abort(png_structp png, png_job *j, dt_status s) {
    j->own = s;
    png_longjmp(png, 1);
}

static dt_status read_png(png_job *j, dt_image *out) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, png_on_error, png_on_warning);
    if (!png) return dt_fail(DT_ERR_NOMEM, "%s: cannot start libpng", j->name);
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return dt_fail(DT_ERR_NOMEM, "%s: cannot start libpng", j->name);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return j->own != DT_OK ? j->own : dt_fail(DT_ERR_FORMAT, "%s: corrupt PNG: %s", j->name, j->msg);
    }
    png_set_read_fn(png, j, png_on_read);
    png_read_info(png, info);
    const long w = (long)png_get_image_width(png, info), h = (long)png_get_image_height(png, info);
    const int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    dt_status s = check_dims(w, h, j->name);
    if (s != DT_OK) png_abort(png, j, s);
    double raw = (double)h * ((double)w * depth * png_get_channels(png, info) / 8 + 1);
    if (raw > (double)PNG_MAX_RATIO * (double)j->len)
        png_abort(png, j, dt_fail(DT_ERR_FORMAT, "%s: corrupt PNG: the header claims %ld x %ld pixels, more "
                                  "than its %zu bytes can hold (truncated?)", j->name, w, h, j->len));
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    png_set_strip_alpha(png); /* alpha, and the alpha palette_to_rgb makes of a tRNS chunk */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int c = png_get_channels(png, info);
    if ((c != 1 && c != 3) || png_get_rowbytes(png, info) != (size_t)w * (size_t)c)
        png_abort(png, j, dt_fail(DT_ERR_INTERNAL, "%s: libpng gave %d channels of %zu bytes per row", j->name, c,
                                  (size_t)png_get_rowbytes(png, info)));
    void *p = NULL;
    s = alloc_pixels(&j->px, w, h, c, j->name);
    if (s == DT_OK) s = dt_alloc_bytes(&p, sizeof(png_bytep) * (size_t)h, j->name);
    if (s != DT_OK) png_abort(png, j, s);
    j->rows = p;
    for (long y = 0; y < h; y++) j->rows[y] = j->px + (size_t)y * (size_t)w * (size_t)c;
    png_read_image(png, j->rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    *out = (dt_image){(int)h, (int)w, c, j->px};
    j->px = NULL; /* now out's */
    return DT_OK;
}

static dt_status decode_png(dt_image *out, const uint8_t *data, size_t len, const char *name) {
    png_job j = {data, len, 0, name, DT_OK, "", NULL, NULL};
    dt_status s = read_png(&j, out);
    dt_free(j.rows);
    dt_free(j.px);
    return s;
}

/* ---- JPEG ------------------------------------------------------------------ */

/* What a decoding is for: the region pick chooses (NULL: the whole
 * image), decoded at the smallest scale that keeps it at least out_h x
 * out_w pixels, or (out_h 0) the size dt_image_fit resizes the whole image
 * to for (shape, side). */
typedef struct {
    dt_pick_fn pick;
    void *ctx;
    int out_h, out_w;
    dt_shape shape;
    int side;
    dt_rect r;  /* the region picked, in the full image's pixels */
    int denom;  /* the image was decoded at scale 1 / denom */
} region_req;

/* q's region and the pixels it must keep, for an image of h x w. */
static void pick_region(region_req *q, int h, int w, int *oh, int *ow) {
    q->r = q->pick ? q->pick(q->ctx, h, w) : (dt_rect){0, 0, h, w};
    *oh = q->out_h, *ow = q->out_w;
    if (!q->out_h) dt_image_fit_size(h, w, q->shape, q->side, oh, ow);
}

/* The scale 1/denom for region r that must keep oh x ow pixels: the
 * largest denom of 8, 4, 2 with denom x oh <= r.h and denom x ow <= r.w
 * (so the resize after it still only shrinks or keeps, never magnifies,
 * the decoded region; PIL's draft() chooses its scale by the same
 * inequality), else 1. Only these three: libjpeg-turbo's 3/8, 5/8, 3/4 and
 * 7/8 run its non-SIMD IDCTs and decoded a 500 x 375 photo slower than at
 * full size here (docs/IMAGES.md); 1/2, 1/4 and 1/8 are its reduced
 * IDCTs, which also leave less to upsample and colour-convert. */
static int region_denom(dt_rect r, int oh, int ow) {
    for (int d = 8; d > 1; d /= 2)
        if ((int64_t)r.h >= (int64_t)oh * d && (int64_t)r.w >= (int64_t)ow * d) return d;
    return 1;
}

/* A region inside an image of h x w pixels (a picker's bug would read out of
 * bounds otherwise). */
static dt_status check_region(dt_rect r, int h, int w, const char *name) {
    if (r.h < 1 || r.w < 1 || r.y < 0 || r.x < 0 || r.y > h - r.h || r.x > w - r.w)
        return dt_fail(DT_ERR_INTERNAL, "%s: region %dx%d at (%d, %d) outside the %dx%d image", name, r.h, r.w, r.y,
                       r.x, h, w);
    return DT_OK;
}

static dt_status decode_jpeg(dt_image *out, const uint8_t *data, size_t len, const char *name, region_req *q) {
    tjhandle tj = tjInitDecompress();
    char msg[256];
    if (!tj)
        return dt_fail(DT_ERR_NOMEM, "%s: cannot start libjpeg-turbo: %s", name,
                       one_line(msg, sizeof msg, tjGetErrorStr2(NULL)));
    int w = 0, h = 0, subsamp, cs = 0;
    uint8_t *px = NULL;
    dt_status s = DT_OK;
    if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &cs) != 0)
        s = dt_fail(DT_ERR_FORMAT, "%s: corrupt JPEG: %s", name, one_line(msg, sizeof msg, tjGetErrorStr2(tj)));
    else if (cs == TJCS_CMYK || cs == TJCS_YCCK)
        s = dt_fail(DT_ERR_FORMAT, "%s: a CMYK JPEG, which dtrain does not read (save it as RGB)", name);
    else
        s = check_dims(w, h, name);
    const int c = cs == TJCS_GRAY ? 1 : 3;
    int dw = w, dh = h; /* decoded size: TJSCALED(w, 1/denom) = ceil(w / denom) */
    if (s == DT_OK && q) {
        int oh, ow;
        pick_region(q, h, w, &oh, &ow);
        s = check_region(q->r, h, w, name);
        q->denom = region_denom(q->r, oh, ow);
        dw = (w + q->denom - 1) / q->denom, dh = (h + q->denom - 1) / q->denom;
    }
    if (s == DT_OK) s = alloc_pixels(&px, dw, dh, c, name);
    /* Warnings (a truncated file, damaged entropy data) are errors: libjpeg
     * would fill what it could not decode with gray. LIMITSCANS bounds the
     * work a progressive file of endless scans can ask for. tjDecompress2
     * picks the scale from the size asked for. */
    if (s == DT_OK && tjDecompress2(tj, data, (unsigned long)len, px, dw, 0, dh, c == 1 ? TJPF_GRAY : TJPF_RGB,
                                    TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0)
        s = dt_fail(DT_ERR_FORMAT, "%s: corrupt JPEG: %s", name, one_line(msg, sizeof msg, tjGetErrorStr2(tj)));
    tjDestroy(tj);
    if (s != DT_OK) {
        dt_free(px);
        return s;
    }
    *out = (dt_image){dh, dw, c, px};
    return DT_OK;
}

/* dt_image_decode, for the region q asks (NULL: the whole image). */
static dt_status decode(dt_image *out, const uint8_t *data, size_t len, const char *name, region_req *q) {
    *out = (dt_image){0, 0, 0, NULL};
    if (len == 0) return dt_fail(DT_ERR_FORMAT, "%s: empty file (0 bytes)", name);
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return decode_jpeg(out, data, len, name, q);
    if (len < sizeof png_magic || memcmp(data, png_magic, sizeof png_magic) != 0)
        return dt_fail(DT_ERR_FORMAT, "%s: not a PNG or JPEG image (its first bytes are neither signature)", name);
    DT_TRY(decode_png(out, data, len, name));
    if (!q) return DT_OK;
    int oh, ow;
    pick_region(q, out->h, out->w, &oh, &ow);
    q->denom = 1;
    dt_status s = check_region(q->r, out->h, out->w, name);
    if (s != DT_OK) dt_image_free(out);
    return s;
}

dt_status dt_image_decode(dt_image *out, const uint8_t *data, size_t len, const char *name) {
    return decode(out, data, len, name, NULL);
}

void dt_image_free(dt_image *img) {
    if (!img) return;
    dt_free(img->px);
    *img = (dt_image){0, 0, 0, NULL};
}

/* *buf (len) <- the whole file at path: a regular file of at most
 * DT_IMAGE_MAX_FILE bytes (an empty one is read as 0 bytes). */
static dt_status read_file(uint8_t **buf, size_t *len, const char *path) {
    *buf = NULL;
    int fd;
    DT_TRY(dt_data_open(&fd, path));
    struct stat st;
    dt_status s = DT_OK;
    if (fstat(fd, &st) != 0)
        s = dt_fail(DT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = dt_fail(DT_ERR_FORMAT, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > DT_IMAGE_MAX_FILE)
        s = dt_fail(DT_ERR_FORMAT, "%s: %lld bytes, over the %zu MiB limit of an image file", path,
                    (long long)st.st_size, DT_IMAGE_MAX_FILE >> 20);
    void *p = NULL;
    size_t size = s == DT_OK ? (size_t)st.st_size : 0, got = 0;
    if (s == DT_OK) s = dt_alloc_bytes(&p, size, path);
    while (s == DT_OK && got < size) {
        ssize_t k = read(fd, (uint8_t *)p + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) s = dt_fail(DT_ERR_IO, "%s: read error: %s", path, strerror(errno));
        if (k == 0) s = dt_fail(DT_ERR_IO, "%s: the file shrank while it was read", path);
        if (k > 0) got += (size_t)k;
    }
    close(fd);
    if (s != DT_OK) {
        dt_free(p);
        return s;
    }
    *buf = p;
    *len = size;
    return DT_OK;
}

dt_status dt_image_load(uint8_t *out, dt_shape shape, int side, const char *path) {
    uint8_t *data;
    size_t len;
    DT_TRY(read_file(&data, &len, path));
    dt_image img;
    region_req q = {NULL, NULL, 0, 0, shape, side, {0, 0, 0, 0}, 1};
    dt_status s = decode(&img, data, len, path, &q);
    dt_free(data);
    if (s == DT_OK) {
        s = dt_image_fit(out, shape, side, &img);
        /* Fitting's own failures (allocations) do not know the file. */
        if (s != DT_OK) {
            char why[512]; /* a copy: dt_fail writes where dt_last_error points */
            snprintf(why, sizeof why, "%s", dt_last_error());
            s = dt_fail(s, "%s: %s", path, why);
        }
    }
    dt_image_free(&img);
    return s;
}

dt_status dt_image_load_region(dt_image *img, dt_rect *r, const char *path, int channels, int out_h, int out_w,
                               dt_pick_fn pick, void *pick_ctx) {
    *img = (dt_image){0, 0, 0, NULL};
    uint8_t *data;
    size_t len;
    DT_TRY(read_file(&data, &len, path));
    region_req q = {pick, pick_ctx, out_h, out_w, {0, 0, 0}, 0, {0, 0, 0, 0}, 1};
    dt_status s = decode(img, data, len, path, &q);
    dt_free(data);
    DT_TRY(s);
    /* The region in the decoded pixels, its edges rounded outwards: decoded
     * pixel k averages the full image's [k d, (k + 1) d). */
    const int d = q.denom, x1 = (q.r.x + q.r.w + d - 1) / d, y1 = (q.r.y + q.r.h + d - 1) / d;
    *r = (dt_rect){q.r.y / d, q.r.x / d, 0, 0};
    r->h = y1 - r->y;
    r->w = x1 - r->x;
    if (channels == 1) dt_image_gray(img);
    return DT_OK;
}
