/* Fitting a decoded image to a model's input (image.h steps 2-4): channel
 * conversion, PIL's bilinear resampling and torchvision's centre crop.
 *
 * Resampling follows Pillow's Resample.c (precompute_coeffs,
 * normalize_coeffs_8bpc, ImagingResampleHorizontal/Vertical_8bpc): per
 * output pixel a window of source pixels with triangle-filter weights in
 * 22-bit fixed point, a horizontal pass rounded to bytes, then a vertical
 * one. Only the cropped window is computed: an output pixel's weights depend
 * on its own index alone, so the crop of a full resize is the resize of the
 * window. */
#include <math.h>
#include <string.h>

#include "dtrain/image.h"
#include "dtrain/mem.h"

#define PRECISION_BITS 22 /* Pillow's 32 - 8 - 2: sums of 255 x weights stay in int32 */

/* Weights of a 1-D resize from `in` samples to `out`, for the output
 * indices [first, first + count): output j reads source samples
 * start[j] .. start[j] + len[j] - 1 with weights k[j * ksize ..]. */
typedef struct {
    int ksize;
    int *start, *len; /* (count) */
    int32_t *k;       /* (count, ksize) */
} weights;

static void weights_free(weights *w) {
    dt_free(w->start);
    dt_free(w->len);
    dt_free(w->k);
}

static double triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static dt_status weights_make(weights *w, int in, int out, int first, int count) {
    memset(w, 0, sizeof *w);
    const double scale = (double)in / out, filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = filterscale, ss = 1.0 / filterscale; /* the triangle's support is 1 */
    w->ksize = (int)ceil(support) * 2 + 1;
    void *p;
    double *kd = NULL; /* (ksize) one output's weights before fixed point */
    size_t nk;
    dt_status s = dt_mul_size(&nk, (size_t)count, (size_t)w->ksize * sizeof(int32_t), "resize weights");
    if (s == DT_OK) s = dt_alloc_bytes(&p, nk, "resize weights"), w->k = p;
    if (s == DT_OK) s = dt_alloc_bytes(&p, sizeof(int) * (size_t)count, "resize weights"), w->start = p;
    if (s == DT_OK) s = dt_alloc_bytes(&p, sizeof(int) * (size_t)count, "resize weights"), w->len = p;
    if (s == DT_OK) s = dt_alloc_bytes(&p, sizeof(double) * (size_t)w->ksize, "resize weights"), kd = p;
    if (s != DT_OK) {
        weights_free(w);
        return s;
    }
    for (int j = 0; j < count; j++) {
        const double center = (first + j + 0.5) * scale;
        /* Pillow rounds with (int)(x + 0.5): truncation toward zero. */
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        double sum = 0;
        for (int x = 0; x < hi - lo; x++) sum += kd[x] = triangle((x + lo - center + 0.5) * ss);
        int32_t *k = w->k + (size_t)j * w->ksize;
        for (int x = 0; x < hi - lo; x++) {
            double v = sum != 0.0 ? kd[x] / sum : kd[x];
            k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
        w->start[j] = lo;
        w->len[j] = hi - lo;
    }
    dt_free(kd);
    return DT_OK;
}

/* A weighted sum (with Pillow's rounding half) to a byte. */
static inline uint8_t clip8(int32_t ss) {
    if (ss < 0) return 0;
    ss >>= PRECISION_BITS;
    return ss > 255 ? 255 : (uint8_t)ss;
}

/* The resized size (*rh, *rw) that just covers H x W, as image.h step 3. */
static void cover(int h, int w, int H, int W, int *rh, int *rw) {
    if ((int64_t)H * w >= (int64_t)W * h) { /* the height limits */
        *rh = H;
        *rw = (int)((int64_t)H * w / h);
    } else {
        *rw = W;
        *rh = (int)((int64_t)W * h / w);
    }
}

/* torchvision's centre crop offset: int(round(d / 2)), Python rounding
 * halves to even. */
static int centre(int d) {
    int q = d / 2;
    return d % 2 && q % 2 ? q + 1 : q;
}

/* One row of the horizontal pass: o (W, c) <- src row (w, c) through wx.
 * The channels of a pixel share its taps, so they are summed together. */
static void resample_row(uint8_t *o, const uint8_t *row, int W, int c, const weights *wx) {
    for (int x = 0; x < W; x++) {
        const int32_t *k = wx->k + (size_t)x * wx->ksize;
        const uint8_t *in = row + (size_t)wx->start[x] * c;
        const int n = wx->len[x];
        if (c == 3) {
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int i = 0; i < n; i++) {
                s0 += in[3 * i] * k[i];
                s1 += in[3 * i + 1] * k[i];
                s2 += in[3 * i + 2] * k[i];
            }
            o[3 * x] = clip8(s0), o[3 * x + 1] = clip8(s1), o[3 * x + 2] = clip8(s2);
        } else {
            int32_t ss = 1 << (PRECISION_BITS - 1);
            for (int i = 0; i < n; i++) ss += in[i] * k[i];
            o[x] = clip8(ss);
        }
    }
}

/* out (c, H, W) <- rows [top, top + H) and columns [left, left + W) of src
 * (h, w, c) resized to (rh, rw). The vertical pass accumulates whole rows
 * (W x c sums in acc, a loop the compiler vectorises); integer sums, so the
 * order changes no bit of Pillow's result. */
static dt_status resample(uint8_t *out, int H, int W, const uint8_t *src, int h, int w, int c, int rh, int rw,
                          int top, int left) {
    weights wx, wy;
    DT_TRY(weights_make(&wx, w, rw, left, W));
    dt_status s = weights_make(&wy, h, rh, top, H);
    if (s != DT_OK) {
        weights_free(&wx);
        return s;
    }
    /* The source rows the vertical pass reads: [y0, y1). */
    const int y0 = wy.start[0], y1 = wy.start[H - 1] + wy.len[H - 1];
    const size_t rowlen = (size_t)W * (size_t)c;
    uint8_t *tmp = NULL; /* (y1 - y0, W, c) after the horizontal pass */
    int32_t *acc = NULL; /* (W, c) one output row's sums */
    void *p;
    s = dt_alloc_bytes(&p, (size_t)(y1 - y0) * rowlen, "resize rows");
    tmp = p;
    if (s == DT_OK) s = dt_alloc_bytes(&p, rowlen * sizeof *acc, "resize sums"), acc = p;
    for (int y = y0; s == DT_OK && y < y1; y++)
        resample_row(tmp + (size_t)(y - y0) * rowlen, src + (size_t)y * w * c, W, c, &wx);
    for (int y = 0; s == DT_OK && y < H; y++) {
        const int32_t *k = wy.k + (size_t)y * wy.ksize;
        for (size_t j = 0; j < rowlen; j++) acc[j] = 1 << (PRECISION_BITS - 1);
        for (int i = 0; i < wy.len[y]; i++) {
            const uint8_t *in = tmp + (size_t)(wy.start[y] - y0 + i) * rowlen;
            const int32_t kk = k[i];
            for (size_t j = 0; j < rowlen; j++) acc[j] += in[j] * kk;
        }
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < c; ch++) out[((size_t)ch * H + y) * W + x] = clip8(acc[(size_t)x * c + ch]);
    }
    dt_free(acc);
    dt_free(tmp);
    weights_free(&wx);
    weights_free(&wy);
    return s;
}

/* gray (h, w) <- PIL's convert("L") of rgb (h, w, 3). */
static void luma(uint8_t *gray, const uint8_t *rgb, size_t pixels) {
    for (size_t i = 0; i < pixels; i++, rgb += 3)
        gray[i] = (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

void dt_image_gray(dt_image *img) {
    if (img->c != 3) return;
    luma(img->px, img->px, (size_t)img->h * (size_t)img->w); /* pixel i is written after it is read */
    img->c = 1;
}

/* torchvision's Resize(side) of an h x w image: the shorter side becomes
 * side, the other int(side x longer / shorter). */
static void shorter_to(int h, int w, int side, int *rh, int *rw) {
    if (w <= h) {
        *rw = side;
        *rh = (int)((int64_t)side * h / w);
    } else {
        *rh = side;
        *rw = (int)((int64_t)side * w / h);
    }
}

void dt_image_fit_size(int h, int w, dt_shape shape, int side, int *rh, int *rw) {
    if (side > 0)
        shorter_to(h, w, side, rh, rw);
    else
        cover(h, w, shape.h, shape.w, rh, rw);
}

dt_status dt_image_fit(uint8_t *out, dt_shape shape, int side, const dt_image *img) {
    const int C = shape.c, H = shape.h, W = shape.w;
    if (C != 1 && C != 3)
        return dt_fail(DT_ERR_USAGE, "images fit models of 1 (luminance) or 3 (RGB) input channels, not %d", C);
    if (H < 1 || W < 1 || img->h < 1 || img->w < 1 || (img->c != 1 && img->c != 3))
        return dt_fail(DT_ERR_USAGE, "cannot fit a %dx%dx%d image to %dx%dx%d", img->c, img->h, img->w, C, H, W);
    const uint8_t *src = img->px;
    uint8_t *gray = NULL;
    const size_t pixels = (size_t)img->h * (size_t)img->w;
    if (C == 1 && img->c == 3) { /* PIL converts before it resizes */
        void *p;
        DT_TRY(dt_alloc_bytes(&p, pixels, "luminance"));
        gray = p;
        luma(gray, img->px, pixels);
        src = gray;
    }
    /* A gray image for an RGB model: the one resampled plane, repeated
     * (resampling is per channel, so this equals resampling three copies). */
    const int c = gray ? 1 : img->c;
    int rh, rw;
    dt_image_fit_size(img->h, img->w, shape, side, &rh, &rw);
    if (rh < H || rw < W) {
        dt_free(gray);
        return dt_fail(DT_ERR_USAGE, "a %dx%d image resized to %dx%d (shorter side %d) is smaller than the %dx%d "
                       "crop", img->h, img->w, rh, rw, side, H, W);
    }
    dt_status s = resample(out, H, W, src, img->h, img->w, c, rh, rw, centre(rh - H), centre(rw - W));
    for (int ch = c; s == DT_OK && ch < C; ch++) memcpy(out + (size_t)ch * H * W, out, (size_t)H * W);
    dt_free(gray);
    return s;
}
