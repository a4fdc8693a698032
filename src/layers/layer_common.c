/* Helpers shared by the layer files (declared in layer_impl.h): setup
 * validation with "line N: [section]" messages, init, reductions. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "layers/layer_impl.h"

dt_status dt_layer_config_error(const dt_layer *l, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const dt_layer_ops *ops = dt_layer_ops_of(l->spec.kind);
    return dt_fail(DT_ERR_CONFIG, "line %d: [%s] %s", l->spec.line, ops ? ops->name : "?", msg);
}

dt_status dt_layer_mul(const dt_layer *l, size_t *out, size_t a, size_t b, const char *what) {
    if (a != 0 && b > SIZE_MAX / a)
        return dt_layer_config_error(l, "%s size %zu x %zu overflows", what, a, b);
    *out = a * b;
    return DT_OK;
}

dt_status dt_layer_check_shape(const dt_layer *l, dt_shape s, const char *what) {
    if (s.c < 1 || s.h < 1 || s.w < 1)
        return dt_layer_config_error(l, "%s shape %dx%dx%d has a dimension < 1", what, s.c, s.h,
                                     s.w);
    size_t hw = 0, n = 0;
    DT_TRY(dt_layer_mul(l, &hw, (size_t)s.h, (size_t)s.w, what));
    DT_TRY(dt_layer_mul(l, &n, hw, (size_t)s.c, what));
    if (n > INT_MAX)
        return dt_layer_config_error(l, "%s shape %dx%dx%d is too large (%zu values per sample)",
                                     what, s.c, s.h, s.w, n);
    return DT_OK;
}

/* One spatial dimension of a window: n input cells -> *out positions. The
 * window spans (size - 1) x dilation + 1 cells (a dilated convolution's). */
static dt_status window_dim(const dt_layer *l, int n, const char *dim, int *out) {
    const dt_layer_spec *s = &l->spec;
    long long padded = (long long)n + 2LL * s->pad + s->pad_extra;
    long long span = (long long)(s->size - 1) * dt_layer_dilation(s) + 1;
    if (span > padded) {
        if (span == s->size)
            return dt_layer_config_error(l, "size %d is larger than the padded input %s %lld (%d + %d)", s->size,
                                         dim, padded, n, 2 * s->pad + s->pad_extra);
        return dt_layer_config_error(l, "size %d dilated by %d spans %lld cells, more than the padded input %s %lld "
                                     "(%d + %d)", s->size, dt_layer_dilation(s), span, dim, padded, n,
                                     2 * s->pad + s->pad_extra);
    }
    *out = (int)((padded - span) / s->stride + 1);
    return DT_OK;
}

dt_status dt_layer_window_setup(const dt_layer *l, int *oh, int *ow) {
    const dt_layer_spec *s = &l->spec;
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    if (s->size < 1) return dt_layer_config_error(l, "size must be >= 1, got %d", s->size);
    if (s->stride < 1) return dt_layer_config_error(l, "stride must be >= 1, got %d", s->stride);
    if (s->pad < 0) return dt_layer_config_error(l, "pad must be >= 0, got %d", s->pad);
    if (s->pad_extra < 0 || s->pad_extra > 1)
        return dt_layer_config_error(l, "pad_extra must be 0 or 1, got %d", s->pad_extra);
    DT_TRY(window_dim(l, l->in.h, "height", oh));
    return window_dim(l, l->in.w, "width", ow);
}

dt_status dt_layer_setup_same(dt_layer *l) {
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    l->out = l->in;
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

size_t dt_layer_no_floats(const dt_layer *l, int batch) {
    (void)l, (void)batch;
    return 0;
}

void dt_layer_init_none(dt_layer *l, dt_rng *rng) { (void)l, (void)rng; }

uint64_t dt_layer_flops_elems(const dt_layer *l) { return dt_shape_size(l->out); }

void dt_layer_fill_uniform(float *x, size_t n, float bound, dt_rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (2.0f * dt_rng_uniform(rng) - 1.0f) * bound;
}

void dt_layer_copy(float *dst, const float *src, size_t n) {
    if (dst == src) return;
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

void dt_layer_add_acts(float *dst, const float *src, size_t n, int bf16) {
    if (!bf16) {
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t j = 0; j < n; j++) dst[j] += src[j];
        return;
    }
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
    for (size_t j = 0; j < n; j++) dt_bf16_set(dst, j, dt_bf16_get(dst, j) + dt_bf16_get(src, j));
}

void dt_layout_convert(float *dst, dt_layout to, const float *src, dt_layout from, int batch, dt_shape s) {
    size_t n = dt_shape_size(s) * (size_t)batch, hw = (size_t)s.h * (size_t)s.w;
    if (to == from) {
        dt_layer_copy(dst, src, n);
        return;
    }
    /* Plane p = (b, c) is lane p % k of block p / k in a layout of k
     * channels a block (k divides C), with stride k; in NCHW (k = 1) it is
     * contiguous. */
    size_t planes = (size_t)batch * (size_t)s.c, kx = (size_t)dt_layout_block(from), ky = (size_t)dt_layout_block(to);
#pragma omp parallel for schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < planes; p++) {
        const float *x = src + (p / kx) * hw * kx + p % kx;
        float *y = dst + (p / ky) * hw * ky + p % ky;
        for (size_t i = 0; i < hw; i++) y[i * ky] = x[i * kx];
    }
}

const char *dt_layout_name(dt_layout t) {
    return t == DT_LAYOUT_NCHW16C ? "nChw16c" : t == DT_LAYOUT_NCHW8C ? "nChw8c" : "nchw";
}

dt_layout_rule dt_layout_follow(const dt_layer *l) {
    (void)l;
    return DT_LAYOUTS_FOLLOW;
}

dt_layout_rule dt_layout_any(const dt_layer *l) {
    (void)l;
    return DT_LAYOUTS_ANY;
}

/* The sums below keep LANES independent float partial sums (`omp simd`
 * on the lane loops: GCC left some of them scalar on AVX2). */
enum { LANES = 16 };

double dt_layer_sum(const float *x, size_t n) {
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
#pragma omp simd
        for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
    double s = 0;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

double dt_layer_centred_sq(const float *x, float mean, size_t n) {
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
#pragma omp simd
        for (int j = 0; j < LANES; j++) {
            float d = x[i + j] - mean;
            acc[j] += d * d;
        }
    double s = 0;
    for (; i < n; i++) {
        float d = x[i] - mean;
        s += (double)d * d;
    }
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

void dt_layer_grad_sums(const float *dy, const float *mask, const float *x, float mean, size_t n,
                        double *sum_dy, double *sum_dyx) {
    float a[LANES] = {0}, d[LANES] = {0};
    size_t i = 0;
    if (mask) /* each branch its own loop, so both vectorise */
        for (; i + LANES <= n; i += LANES)
#pragma omp simd
            for (int j = 0; j < LANES; j++) {
                float v = dy[i + j], g = mask[i + j] > 0 ? v : 0.0f; /* loaded either way: vectorises */
                a[j] += g;
                d[j] += (x[i + j] - mean) * g;
            }
    else
        for (; i + LANES <= n; i += LANES)
#pragma omp simd
            for (int j = 0; j < LANES; j++) {
                a[j] += dy[i + j];
                d[j] += (x[i + j] - mean) * dy[i + j];
            }
    double sa = 0, sd = 0;
    for (; i < n; i++) {
        float g = mask && !(mask[i] > 0) ? 0.0f : dy[i];
        sa += g;
        sd += (double)(x[i] - mean) * g;
    }
    for (int j = 0; j < LANES; j++) sa += a[j], sd += d[j];
    *sum_dy += sa;
    *sum_dyx += sd;
}
