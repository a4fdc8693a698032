/* Darknet's classifier augmentation and evaluation transform (augment.h).
 * The formulas are Darknet's (src/image.c, src/utils.c of pjreddie/darknet),
 * with its random numbers drawn from dtrain's per-sample stream. */
#include "data/augment.h"

#include <math.h>
#include <string.h>

/* Darknet's rand_uniform: uniform in [min, max] (the bounds in either order). */
static float uniform(dt_rng *r, float lo, float hi) {
    if (hi < lo) {
        float t = lo;
        lo = hi;
        hi = t;
    }
    return lo + dt_rng_uniform(r) * (hi - lo);
}

/* Darknet's rand_scale: a factor in [1, s], or its inverse, each half the time. */
static float random_scale(dt_rng *r, float s) {
    float f = uniform(r, 1.0f, s);
    return dt_rng_next(r) >> 63 ? f : 1.0f / f;
}

/* Darknet's rand_int: uniform integer in [lo, hi] (either order). */
static int random_int(dt_rng *r, int lo, int hi) {
    if (hi < lo) {
        int t = lo;
        lo = hi;
        hi = t;
    }
    return lo + (int)dt_rng_below(r, (uint32_t)(hi - lo) + 1u);
}

/* Pixel (x, y) of plane p (h, w); 0 outside (Darknet's get_pixel_extend). */
static float pixel_or_zero(const float *p, int h, int w, int x, int y) {
    return x < 0 || x >= w || y < 0 || y >= h ? 0.0f : p[(size_t)y * (size_t)w + (size_t)x];
}

/* Darknet's bilinear_interpolate on plane p (h, w) at (x, y). A point
 * beyond a pixel of the border reads only zeros, so (x, y) is first clamped
 * to [-2, w + 1] x [-2, h + 1]: the cast to int stays defined for any
 * stretch or rotation. */
static float bilinear(const float *p, int h, int w, float x, float y) {
    x = fminf(fmaxf(x, -2.0f), (float)w + 1.0f);
    y = fminf(fmaxf(y, -2.0f), (float)h + 1.0f);
    int ix = (int)floorf(x), iy = (int)floorf(y);
    float dx = x - (float)ix, dy = y - (float)iy;
    return (1 - dy) * (1 - dx) * pixel_or_zero(p, h, w, ix, iy) + dy * (1 - dx) * pixel_or_zero(p, h, w, ix, iy + 1) +
           (1 - dy) * dx * pixel_or_zero(p, h, w, ix + 1, iy) + dy * dx * pixel_or_zero(p, h, w, ix + 1, iy + 1);
}

void dt_augment_crop(float *out, dt_shape os, const float *im, dt_shape is, const dt_augment *a, dt_rng *r) {
    /* random_augment_image: the draws in Darknet's order. */
    float aspect = random_scale(r, a->aspect);
    int side = random_int(r, a->min_crop, a->max_crop);
    int shorter = (float)is.h < (float)is.w * aspect ? is.h : (int)((float)is.w * aspect); /* an int there */
    if (shorter < 1) shorter = 1; /* a stretch below one pixel (Darknet divides by 0) */
    float s = (float)side / (float)shorter;
    float rad = uniform(r, -a->angle, a->angle) * 6.2831853f / 360.0f;
    /* Darknet computes both slacks against the output's width. */
    float dx = ((float)is.w * s / aspect - (float)os.w) / 2.0f;
    float dy = ((float)is.h * s - (float)os.w) / 2.0f;
    dx = uniform(r, -dx, dx);
    dy = uniform(r, -dy, dy);
    /* rotate_crop_image: output (x, y) reads input (rx, ry). */
    const float cs = cosf(rad), sn = sinf(rad), cx = (float)is.w / 2.0f, cy = (float)is.h / 2.0f;
    const size_t iplane = (size_t)is.h * (size_t)is.w, oplane = (size_t)os.h * (size_t)os.w;
    for (int c = 0; c < os.c; c++)
        for (int y = 0; y < os.h; y++)
            for (int x = 0; x < os.w; x++) {
                float u = ((float)x - (float)os.w / 2.0f) / s * aspect + dx / s * aspect;
                float v = ((float)y - (float)os.h / 2.0f) / s + dy / s;
                float rx = cs * u - sn * v + cx, ry = sn * u + cs * v + cy;
                out[(size_t)c * oplane + (size_t)y * (size_t)os.w + (size_t)x] =
                    bilinear(im + (size_t)c * iplane, is.h, is.w, rx, ry);
            }
}

static float max3(float a, float b, float c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
static float min3(float a, float b, float c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

void dt_augment_rgb_to_hsv(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float r = x[i], g = x[n + i], b = x[2 * n + i];
        float mx = max3(r, g, b), delta = mx - min3(r, g, b), h = 0, s = 0;
        /* Darknet divides by delta for a grey pixel too (0/0); its hue is 0 here. */
        if (mx > 0 && delta > 0) {
            s = delta / mx;
            h = r == mx ? (g - b) / delta : g == mx ? 2 + (b - r) / delta : 4 + (r - g) / delta;
            if (h < 0) h += 6;
            h /= 6;
        }
        x[i] = h;
        x[n + i] = s;
        x[2 * n + i] = mx;
    }
}

void dt_augment_hsv_to_rgb(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float h = 6 * x[i], s = x[n + i], v = x[2 * n + i], r = v, g = v, b = v;
        if (s != 0) {
            int sector = (int)floorf(h);
            float f = h - (float)sector;
            float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
            switch (sector) {
            case 0: r = v, g = t, b = p; break;
            case 1: r = q, g = v, b = p; break;
            case 2: r = p, g = v, b = t; break;
            case 3: r = p, g = q, b = v; break;
            case 4: r = t, g = p, b = v; break;
            default: r = v, g = p, b = q; break;
            }
        }
        x[i] = r;
        x[n + i] = g;
        x[2 * n + i] = b;
    }
}

/* NaN (never made from valid keys) becomes 0 rather than passing through. */
static float clamp01(float v) { return v > 1 ? 1 : v >= 0 ? v : 0; }

void dt_augment_distort(float *x, int channels, size_t n, const dt_augment *a, dt_rng *r) {
    /* random_distort_image's draws, then distort_image. */
    float dhue = uniform(r, -a->hue, a->hue);
    float dsat = random_scale(r, a->saturation);
    float dexp = random_scale(r, a->exposure);
    if (channels == 3) {
        dt_augment_rgb_to_hsv(x, n);
        for (size_t i = 0; i < n; i++) {
            float h = x[i] + dhue;
            x[i] = h > 1 ? h - 1 : h < 0 ? h + 1 : h;
            x[n + i] *= dsat;
            x[2 * n + i] *= dexp;
        }
        dt_augment_hsv_to_rgb(x, n);
    } else {
        for (size_t i = 0; i < (size_t)channels * n; i++) x[i] *= dexp;
    }
    for (size_t i = 0; i < (size_t)channels * n; i++) x[i] = clamp01(x[i]);
}

void dt_augment_erase(float *x, dt_shape s, float p, dt_rng *r) {
    if (dt_rng_uniform(r) >= p) return;
    const float area = (float)s.h * (float)s.w, log_lo = logf(0.3f), log_hi = logf(3.3f);
    for (int attempt = 0; attempt < 10; attempt++) {
        float share = uniform(r, 0.02f, 0.33f), aspect = expf(uniform(r, log_lo, log_hi));
        int h = (int)lroundf(sqrtf(area * share * aspect)), w = (int)lroundf(sqrtf(area * share / aspect));
        if (h >= s.h || w >= s.w) continue;
        int top = (int)dt_rng_below(r, (uint32_t)(s.h - h + 1)), left = (int)dt_rng_below(r, (uint32_t)(s.w - w + 1));
        for (int c = 0; c < s.c; c++)
            for (int y = top; y < top + h; y++) memset(x + ((size_t)c * s.h + y) * s.w + left, 0, sizeof(float) * (size_t)w);
        return;
    }
}

/* Python's round(): halves to even (nearbyint in the default rounding mode). */
static int round_even(double v) { return (int)nearbyint(v); }

dt_rect dt_augment_rrc_pick(int h, int w, const dt_augment *a, dt_rng *r) {
    const double area = (double)h * (double)w, lo = log(a->ratio[0]), hi = log(a->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (a->scale[0] + (double)dt_rng_uniform(r) * (a->scale[1] - a->scale[0]));
        double ratio = exp(lo + (double)dt_rng_uniform(r) * (hi - lo));
        int cw = round_even(sqrt(target * ratio)), ch = round_even(sqrt(target / ratio));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            int y = (int)dt_rng_below(r, (uint32_t)(h - ch + 1));
            int x = (int)dt_rng_below(r, (uint32_t)(w - cw + 1));
            return (dt_rect){y, x, ch, cw};
        }
    }
    /* The fallback: the whole image, cut to the nearest allowed ratio. */
    const double in_ratio = (double)w / (double)h;
    int cw = w, ch = h;
    if (in_ratio < a->ratio[0])
        ch = round_even(cw / (double)a->ratio[0]);
    else if (in_ratio > a->ratio[1])
        cw = round_even(ch * (double)a->ratio[1]);
    /* Rounding can give 0 (a 1-pixel side) or one more than the side (a
     * ratio bound that rounds up): torchvision's would then crop nothing or
     * pad; here the region stays inside the image. */
    ch = ch < 1 ? 1 : ch > h ? h : ch;
    cw = cw < 1 ? 1 : cw > w ? w : cw;
    return (dt_rect){(h - ch) / 2, (w - cw) / 2, ch, cw};
}

/* One axis of upsample_bilinear2d (PyTorch 1.13,
 * compute_source_index_and_lambda with align_corners=False): output i
 * reads inputs i0[i] and i0[i] + step[i] with weights l0[i], l1[i]. The
 * scale is float(in) / out in float; the source index scale x (i + 0.5) -
 * 0.5, clamped at 0, and its fraction are kept in double, the fraction
 * then rounded to float (checked weight for weight against PyTorch's, whose
 * index arithmetic is not float throughout). */
static void axis_weights(int in, int out, int *i0, int *step, float *l0, float *l1) {
    const float scale = (float)in / (float)out;
    for (int i = 0; i < out; i++) {
        if (in == out) {
            i0[i] = i, step[i] = 0, l0[i] = 1.0f, l1[i] = 0.0f;
            continue;
        }
        double real = (double)scale * (i + 0.5) - 0.5;
        if (real < 0) real = 0;
        i0[i] = (int)real;
        step[i] = i0[i] < in - 1 ? 1 : 0;
        double lam = real - i0[i];
        l1[i] = (float)(lam < 0 ? 0 : lam > 1 ? 1 : lam);
        l0[i] = 1.0f - l1[i];
    }
}

_Static_assert(sizeof(int) == sizeof(float), "the resize's index tables live in its float workspace");

size_t dt_augment_resize_floats(dt_shape os) {
    /* x: i0, step (ints stored in floats' room), l0, l1; y likewise; two
     * horizontally resized rows (C, os.w) each. */
    return 4 * (size_t)os.w + 4 * (size_t)os.h + 2 * (size_t)os.c * (size_t)os.w;
}

/* row (C, ow) <- source row y of the region resized horizontally: each
 * output the x-weighted sum of its two taps (the inner sum of PyTorch's
 * Interpolate<1>). */
static void resize_row(float *row, int C, int ow, const uint8_t *src, size_t sy, size_t sx, size_t sc, dt_rect r, int y,
                       const int *xi, const int *xs, const float *x0, const float *x1, const float *val) {
    for (int c = 0; c < C; c++) {
        const uint8_t *p = src + (size_t)(r.y + y) * sy + (size_t)c * sc + (size_t)r.x * sx;
        float *o = row + (size_t)c * (size_t)ow;
        for (int x = 0; x < ow; x++) {
            const uint8_t *t = p + (size_t)xi[x] * sx;
            o[x] = val[t[0]] * x0[x] + val[t[(size_t)xs[x] * sx]] * x1[x];
        }
    }
}

void dt_augment_resize_region(float *out, dt_shape os, const uint8_t *src, size_t sy, size_t sx, size_t sc, dt_rect r,
                              float *ws) {
    const int C = os.c, oh = os.h, ow = os.w;
    int *xi = (int *)(void *)ws, *xs = xi + ow, *yi = xs + ow, *ys = yi + oh;
    float *x0 = (float *)(ys + oh), *x1 = x0 + ow, *y0 = x1 + ow, *y1 = y0 + oh;
    float *rows[2] = {y1 + oh, y1 + oh + (size_t)C * (size_t)ow}; /* (C, ow) each */
    int have[2] = {-1, -1}; /* the region's rows in rows[] */
    axis_weights(r.w, ow, xi, xs, x0, x1);
    axis_weights(r.h, oh, yi, ys, y0, y1);
    float val[256]; /* ToTensor's byte / 255, in float as torch divides */
    for (int v = 0; v < 256; v++) val[v] = (float)v / 255.0f;
    const size_t plane = (size_t)oh * (size_t)ow;
    for (int y = 0; y < oh; y++) {
        const int want[2] = {yi[y], yi[y] + ys[y]};
        /* Consecutive output rows share source rows: keep what is there. */
        if (have[0] != want[0] && have[1] == want[0]) {
            float *t = rows[0];
            rows[0] = rows[1], rows[1] = t, have[0] = have[1], have[1] = -1;
        }
        for (int k = 0; k < 2; k++)
            if (have[k] != want[k]) {
                resize_row(rows[k], C, ow, src, sy, sx, sc, r, want[k], xi, xs, x0, x1, val);
                have[k] = want[k];
            }
        for (int c = 0; c < C; c++) {
            const float *a = rows[0] + (size_t)c * (size_t)ow, *b = rows[1] + (size_t)c * (size_t)ow;
            float *o = out + (size_t)c * plane + (size_t)y * (size_t)ow;
            for (int x = 0; x < ow; x++) o[x] = a[x] * y0[y] + b[x] * y1[y];
        }
    }
}

static int min_int(int a, int b) { return a < b ? a : b; }

size_t dt_augment_eval_floats(dt_shape os, dt_shape is) {
    size_t m = (size_t)min_int(is.h, is.w);
    return (size_t)is.c * m * (m + (size_t)os.w);
}

/* Darknet's resize_image: res (C, rs.h, rs.w) <- im (C, is.h, is.w), rows
 * then columns, through part (C, is.h, rs.w); the last row/column maps to
 * the last. (Darknet weights its last row by 1 - dy, where dy, rounded in
 * float, can be nearly 1: 256 -> 224 gives a nearly black last row there;
 * here it is the last input row.) */
static void resize(float *res, dt_shape rs, const float *im, dt_shape is, float *part) {
    const float ws = rs.w > 1 ? (float)(is.w - 1) / (float)(rs.w - 1) : 0;
    const float hs = rs.h > 1 ? (float)(is.h - 1) / (float)(rs.h - 1) : 0;
    for (int c = 0; c < is.c; c++)
        for (int y = 0; y < is.h; y++) {
            const float *row = im + ((size_t)c * (size_t)is.h + (size_t)y) * (size_t)is.w;
            float *o = part + ((size_t)c * (size_t)is.h + (size_t)y) * (size_t)rs.w;
            for (int x = 0; x < rs.w; x++) {
                if (x == rs.w - 1 || is.w == 1) {
                    o[x] = row[is.w - 1];
                    continue;
                }
                float sx = (float)x * ws;
                int ix = (int)sx;
                float d = sx - (float)ix;
                o[x] = (1 - d) * row[ix] + d * row[ix + 1];
            }
        }
    for (int c = 0; c < is.c; c++)
        for (int y = 0; y < rs.h; y++) {
            int last = y == rs.h - 1 || is.h == 1;
            float sy = (float)y * hs;
            int iy = last ? is.h - 1 : (int)sy;
            float d = last ? 0.0f : sy - (float)iy;
            const float *p0 = part + ((size_t)c * (size_t)is.h + (size_t)iy) * (size_t)rs.w;
            float *o = res + ((size_t)c * (size_t)rs.h + (size_t)y) * (size_t)rs.w;
            for (int x = 0; x < rs.w; x++) o[x] = (1 - d) * p0[x] + (last ? 0.0f : d * p0[(size_t)rs.w + (size_t)x]);
        }
}

void dt_augment_eval(float *out, dt_shape os, const float *im, dt_shape is, float *ws) {
    /* center_crop_image: the centre square of side min(H, W), resized. */
    const int m = min_int(is.h, is.w), x0 = (is.w - m) / 2, y0 = (is.h - m) / 2;
    dt_shape sq = {is.c, m, m};
    float *square = ws, *part = ws + (size_t)is.c * (size_t)m * (size_t)m;
    for (int c = 0; c < is.c; c++)
        for (int y = 0; y < m; y++)
            memcpy(square + ((size_t)c * (size_t)m + (size_t)y) * (size_t)m,
                   im + ((size_t)c * (size_t)is.h + (size_t)(y + y0)) * (size_t)is.w + (size_t)x0, sizeof(float) * (size_t)m);
    resize(out, os, square, sq, part);
}
