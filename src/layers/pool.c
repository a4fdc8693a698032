/* [maxpool] and [avgpool]: torch.nn.MaxPool2d / AvgPool2d (floor mode) with
 * a square window of size K, stride S and padding P < K, per channel:
 * in (C, H, W) -> out (C, OH, OW), OH = floor((H + 2P + E - K) / S) + 1,
 * where E (maxpool only) pads one more cell at the end: Darknet's maxpool
 * with total padding T = 2P + E, P = T/2 before.
 * Max: padded cells never win (as if -inf); the first maximum of a window
 * wins ties, NaN propagates (as in PyTorch); saved holds the winner's index in its plane.
 * Max reads and writes NCHW or the net's blocked layout (channel c of
 * (B, C/k, H, W, k) at lane c%k: a plane is every k-th float), fp32 here
 * and bf16 by oneDNN (pool_dnnl.c).
 * Avg: count_include_pad=True, i.e. the window sum over K*K always (in floor
 * mode a window never leaves the padded area). An [avgpool] without size
 * (size 0, Darknet's only kind) is global: in (C, H, W) -> out (C, 1, 1),
 * each plane's mean (torch.nn.AdaptiveAvgPool2d(1)). */
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "layers/dnnl_layer.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

_Static_assert(sizeof(int32_t) == sizeof(float), "maxpool stores int32 argmaxes in saved floats");

typedef struct {
    size_t planes; /* B*C */
    int H, W, K, S, P, OH, OW;
} pool_dims;

static pool_dims dims_of(const dt_layer *l, int batch) {
    pool_dims d = {(size_t)batch * (size_t)l->in.c,
                   l->in.h,
                   l->in.w,
                   l->spec.size,
                   l->spec.stride,
                   l->spec.pad,
                   l->out.h,
                   l->out.w};
    return d;
}

/* Clipped window of output (oh, ow): rows [*h0, *h1), columns [*w0, *w1). */
static inline void window(const pool_dims *d, int oh, int ow, int *h0, int *h1, int *w0, int *w1) {
    int hs = oh * d->S - d->P, wst = ow * d->S - d->P;
    *h0 = hs < 0 ? 0 : hs;
    *h1 = hs + d->K < d->H ? hs + d->K : d->H;
    *w0 = wst < 0 ? 0 : wst;
    *w1 = wst + d->K < d->W ? wst + d->K : d->W;
}

static dt_status pool_setup(dt_layer *l) {
    int oh, ow;
    DT_TRY(dt_layer_window_setup(l, &oh, &ow));
    /* pad + pad_extra < size keeps every window on at least one real cell. */
    if (l->spec.pad + l->spec.pad_extra >= l->spec.size)
        return dt_layer_config_error(l, "padding %d before and %d after must be smaller than size %d",
                                     l->spec.pad, l->spec.pad + l->spec.pad_extra, l->spec.size);
    l->out = (dt_shape){l->in.c, oh, ow};
    DT_TRY(dt_layer_check_shape(l, l->out, "output"));
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

static int is_global(const dt_layer *l) { return l->spec.size == 0; }

/* The global pool reads either layout (its output (C, 1, 1) is NCHW). */
static dt_layout_rule avgpool_layouts(const dt_layer *l) {
    return is_global(l) ? DT_LAYOUTS_READS_ANY : DT_LAYOUTS_NCHW;
}

static dt_status avgpool_setup(dt_layer *l) {
    if (l->spec.pad_extra) return dt_layer_config_error(l, "pad_extra is for [maxpool] only");
    if (!is_global(l)) return pool_setup(l);
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    l->out = (dt_shape){l->in.c, 1, 1};
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

static size_t maxpool_saved_floats(const dt_layer *l, int batch) {
    return dt_shape_size(l->out) * (size_t)batch;
}

static uint64_t pool_flops(const dt_layer *l) {
    if (is_global(l)) return dt_shape_size(l->in);
    return dt_shape_size(l->out) * (uint64_t)l->spec.size * (uint64_t)l->spec.size;
}

/* A window holding a NaN (rare): PyTorch's max is the last NaN, and its
 * index the argmax. x: one plane, every k-th float. */
static void window_nan(const pool_dims *d, const float *x, int k, int h0, int h1, int w0, int w1, float *m,
                       int32_t *best) {
    for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) {
            float v = x[(size_t)(h * d->W + w) * k];
            if (v != v) *m = v, *best = h * d->W + w;
        }
}

/* Output row oh of one plane, any window: y (OW) and a (OW) <- x (H, W).
 * The first maximum of a window wins ties; a NaN is PyTorch's max and the
 * last NaN's index its argmax. */
static void maxpool_row(const pool_dims *d, const float *x, float *y, int32_t *a, int oh) {
    for (int ow = 0; ow < d->OW; ow++) {
        int h0, h1, w0, w1;
        window(d, oh, ow, &h0, &h1, &w0, &w1);
        int best = h0 * d->W + w0, nan = 0;
        float m = x[best];
        /* Selects instead of branches (random data would mispredict). */
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                int i = h * d->W + w;
                float v = x[i];
                best += (i - best) & -(v > m);
                m = v > m ? v : m;
                nan |= v != v;
            }
        if (nan) window_nan(d, x, 1, h0, h1, w0, w1, &m, &best);
        y[ow] = m;
        a[ow] = best;
    }
}

/* Output row oh of a block of K planes in the blocked layout, the same
 * choices as maxpool_row per lane, the K lanes of a cell side by side so
 * the compares vectorise: y (OW, K) <- x (H, W, K), and the argmaxes a
 * (OW, K) beside them (saved is blocked like the output, so these stores
 * and backward's reads are contiguous). */
DT_BLOCK_PASS maxpool_row_lanes(const pool_dims *d, const float *x, int K, float *y, int32_t *a, int oh) {
    for (int ow = 0; ow < d->OW; ow++) {
        int h0, h1, w0, w1;
        window(d, oh, ow, &h0, &h1, &w0, &w1);
        float m[DT_LAYOUT_MAX_BLOCK];
        int32_t best[DT_LAYOUT_MAX_BLOCK], nan[DT_LAYOUT_MAX_BLOCK];
        const float *first = x + (size_t)(h0 * d->W + w0) * K;
        for (int j = 0; j < K; j++) m[j] = first[j], best[j] = h0 * d->W + w0, nan[j] = 0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                int32_t i = h * d->W + w;
                const float *v = x + (size_t)i * K;
                for (int j = 0; j < K; j++) {
                    int gt = v[j] > m[j];
                    best[j] = gt ? i : best[j];
                    m[j] = gt ? v[j] : m[j];
                    nan[j] |= v[j] != v[j];
                }
            }
        for (int j = 0; j < K; j++) {
            if (nan[j]) window_nan(d, x + j, K, h0, h1, w0, w1, &m[j], &best[j]);
            y[(size_t)ow * K + j] = m[j];
            a[(size_t)ow * K + j] = best[j];
        }
    }
}

/* Output row oh of the 2x2 stride-2 unpadded window (nearly every CNN's
 * pool): the four cells of each window compared as two pairs, then the pair
 * winners (ties to the earlier cell, as above), four windows at a time with
 * SSE2 and the rest one by one. NaN-free rows only: returns nonzero, and
 * the caller redoes the row with maxpool_row, if the row holds a NaN.
 * cnn's first pool (64x32x28x28, one core) went from 2.2 to about 0.4 ms;
 * gcc's own vectorisation of the one-by-one loop with -march=native was
 * slower than the generic loop here, because rows of 14 or 7 windows are
 * shorter than an AVX-512 vector. */
static int maxpool_row_2x2(const pool_dims *d, const float *x, float *y, int32_t *a, int oh) {
    const float *r0 = x + (size_t)(2 * oh) * d->W, *r1 = r0 + d->W;
    int32_t W = d->W, row = 2 * oh * W;
    int ow = 0, nan = 0;
#ifdef __SSE2__
    __m128i vW = _mm_set1_epi32(W), base = _mm_add_epi32(_mm_set1_epi32(row), _mm_set_epi32(6, 4, 2, 0));
    __m128 vnan = _mm_setzero_ps();
    for (; ow + 4 <= d->OW; ow += 4) {
        /* a0 a1 / b0 b1: the windows' top-left, top-right, bottom-left, bottom-right cells. */
        __m128 p = _mm_loadu_ps(r0 + 2 * ow), q = _mm_loadu_ps(r0 + 2 * ow + 4);
        __m128 a0 = _mm_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 a1 = _mm_shuffle_ps(p, q, _MM_SHUFFLE(3, 1, 3, 1));
        p = _mm_loadu_ps(r1 + 2 * ow), q = _mm_loadu_ps(r1 + 2 * ow + 4);
        __m128 b0 = _mm_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 b1 = _mm_shuffle_ps(p, q, _MM_SHUFFLE(3, 1, 3, 1));
        /* _mm_max_ps(u, v) is u > v ? u : v, the same choice as the masks. */
        __m128 ma = _mm_max_ps(a1, a0), mb = _mm_max_ps(b1, b0);
        __m128i ka = _mm_srli_epi32(_mm_castps_si128(_mm_cmpgt_ps(a1, a0)), 31);
        __m128i kb = _mm_add_epi32(vW, _mm_srli_epi32(_mm_castps_si128(_mm_cmpgt_ps(b1, b0)), 31));
        __m128i t = _mm_castps_si128(_mm_cmpgt_ps(mb, ma));
        __m128i k = _mm_or_si128(_mm_and_si128(t, kb), _mm_andnot_si128(t, ka));
        vnan = _mm_or_ps(vnan, _mm_or_ps(_mm_cmpunord_ps(a0, a1), _mm_cmpunord_ps(b0, b1)));
        _mm_storeu_ps(y + ow, _mm_max_ps(mb, ma));
        _mm_storeu_si128((__m128i *)(a + ow),
                         _mm_add_epi32(_mm_add_epi32(base, _mm_set1_epi32(2 * ow)), k));
    }
    nan = _mm_movemask_ps(vnan);
#endif
    for (; ow < d->OW; ow++) {
        float a0 = r0[2 * ow], a1 = r0[2 * ow + 1], b0 = r1[2 * ow], b1 = r1[2 * ow + 1];
        float ma = a1 > a0 ? a1 : a0, mb = b1 > b0 ? b1 : b0;
        int32_t ka = a1 > a0, kb = W + (b1 > b0), t = mb > ma;
        nan |= (a0 != a0) | (a1 != a1) | (b0 != b0) | (b1 != b1);
        y[ow] = mb > ma ? mb : ma;
        a[ow] = row + 2 * ow + (ka + ((kb - ka) & -t));
    }
    return nan;
}

/* out (B, C, OH, OW) <- in (B, C, H, W), in l's layout; saved (B, C, OH,
 * OW), in the same layout, holds the argmax as int32 (h*W + w within its
 * plane; a plane index fits in an int, see dt_layer_check_shape). bf16
 * activations: oneDNN. */
static void maxpool_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                            float *ws) {
    (void)ws;
    if (l->in_bf16) {
        dt_dnnl_fixed_check(dt_pool_dnnl_forward(l, out, in, batch, train), "max pooling");
        return;
    }
    pool_dims d = dims_of(l, batch);
    int32_t *arg = (int32_t *)l->saved;
    size_t k = (size_t)dt_layout_block(l->in_layout), in_plane = (size_t)d.H * d.W, out_plane = (size_t)d.OH * d.OW;
    if (k > 1) { /* blocks of k planes (b, c/k): (H, W, k) -> (OH, OW, k) */
#pragma omp parallel for schedule(static) if (in_plane * d.planes >= DT_LAYER_PAR_FLOATS)
        for (size_t blk = 0; blk < d.planes / k; blk++)
            for (int oh = 0; oh < d.OH; oh++)
                DT_BLOCK_DISPATCH(k, maxpool_row_lanes(&d, in + blk * in_plane * K, K,
                                                       out + (blk * out_plane + (size_t)oh * d.OW) * K,
                                                       arg + (blk * out_plane + (size_t)oh * d.OW) * K, oh));
        return;
    }
    /* The 2x2 path reads whole windows: none may reach the end padding. */
    int fast = d.K == 2 && d.S == 2 && d.P == 0 && 2 * d.OH <= d.H && 2 * d.OW <= d.W;
#pragma omp parallel for schedule(static) if (in_plane * d.planes >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < d.planes; p++) {
        const float *x = in + p * in_plane;
        for (int oh = 0; oh < d.OH; oh++) {
            float *y = out + p * out_plane + (size_t)oh * d.OW;
            int32_t *a = arg + p * out_plane + (size_t)oh * d.OW;
            if (!fast || maxpool_row_2x2(&d, x, y, a, oh)) maxpool_row(&d, x, y, a, oh);
        }
    }
}

/* din (B, C, H, W) <- dout (B, C, OH, OW) routed to each window's argmax,
 * in l's layout. */
static void maxpool_backward(dt_layer *l, float *din, const float *dout, const float *in,
                             const float *out, int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    if (l->in_bf16) {
        dt_dnnl_fixed_check(dt_pool_dnnl_backward(l, din, dout, batch), "max pooling");
        return;
    }
    pool_dims d = dims_of(l, batch);
    const int32_t *arg = (const int32_t *)l->saved;
    size_t k = (size_t)dt_layout_block(l->in_layout), in_plane = (size_t)d.H * d.W, out_plane = (size_t)d.OH * d.OW;
    /* Blocks of k planes, (H, W, k), and dout and the argmaxes (OH, OW, k)
     * (NCHW: k = 1, a plane); each lane's sums in the order of its outputs. */
#pragma omp parallel for schedule(static) if (in_plane * d.planes >= DT_LAYER_PAR_FLOATS)
    for (size_t blk = 0; blk < d.planes / k; blk++) {
        float *dx = din + blk * in_plane * k;
        const float *dy = dout + blk * out_plane * k;
        const int32_t *a = arg + blk * out_plane * k;
        memset(dx, 0, sizeof(float) * in_plane * k);
        for (size_t i = 0; i < out_plane * k; i += k)
            for (size_t j = 0; j < k; j++) dx[(size_t)a[i + j] * k + j] += dy[i + j];
    }
}

/* One block x (hw cells of K lanes): each lane's mean into out[K]. */
DT_BLOCK_PASS block_means(float *out, const float *x, size_t hw, int K) {
    double sum[DT_LAYOUT_MAX_BLOCK] = {0};
    for (size_t i = 0; i < hw; i++)
        for (int c = 0; c < K; c++) sum[c] += x[i * (size_t)K + (size_t)c];
    for (int c = 0; c < K; c++) out[c] = (float)(sum[c] / (double)hw);
}

/* Global: out (B, C) <- the mean of each plane of in (B, C, H, W); in a
 * blocked layout, of each lane of a block (B, C/k, H, W, k). */
static void global_forward(const dt_layer *l, float *out, const float *in, int batch) {
    size_t planes = (size_t)batch * (size_t)l->in.c, hw = (size_t)l->in.h * (size_t)l->in.w;
    const size_t k = (size_t)dt_layout_block(l->in_layout);
    if (l->in_bf16) { /* bf16 values, blocked; sums in double as below */
#pragma omp parallel for schedule(static) if (planes * hw >= DT_LAYER_PAR_FLOATS)
        for (size_t blk = 0; blk < planes / k; blk++) {
            double sum[DT_LAYOUT_MAX_BLOCK] = {0};
            for (size_t i = 0; i < hw; i++)
                for (size_t c = 0; c < k; c++) sum[c] += dt_bf16_get(in, (blk * hw + i) * k + c);
            for (size_t c = 0; c < k; c++) out[blk * k + c] = (float)(sum[c] / (double)hw);
        }
        return;
    }
    if (k > 1) {
#pragma omp parallel for schedule(static) if (planes * hw >= DT_LAYER_PAR_FLOATS)
        for (size_t blk = 0; blk < planes / k; blk++)
            DT_BLOCK_DISPATCH(k, block_means(out + blk * K, in + blk * hw * K, hw, K));
        return;
    }
#pragma omp parallel for schedule(static) if (planes * hw >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < planes; p++) out[p] = (float)(dt_layer_sum(in + p * hw, hw) / (double)hw);
}

/* Global: din (B, C, H, W) <- dout (B, C) / (H*W) over each plane (lane). */
static void global_backward(const dt_layer *l, float *din, const float *dout, int batch) {
    size_t planes = (size_t)batch * (size_t)l->in.c, hw = (size_t)l->in.h * (size_t)l->in.w;
    const size_t k = (size_t)dt_layout_block(l->in_layout); /* plane p: lane p % k of block p / k */
#pragma omp parallel for schedule(static) if (planes * hw >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < planes; p++) {
        float g = dout[p] / (float)hw, *dx = din + (p / k) * hw * k + p % k;
        if (l->in_bf16) {
            uint16_t g16 = dt_bf16_of(g), *dx16 = (uint16_t *)(void *)din + (p / k) * hw * k + p % k;
            for (size_t i = 0; i < hw; i++) dx16[i * k] = g16;
            continue;
        }
        for (size_t i = 0; i < hw; i++) dx[i * k] = g;
    }
}

/* The global pool reads bf16 activations in a blocked layout (its output
 * is fp32). */
/* In a bf16 net, oneDNN's max pooling (pool_dnnl.c) reads and writes bf16
 * activations in a blocked layout, where oneDNN has the primitives. */
static int maxpool_bf16_acts(const dt_layer *l) {
    return l->precision == DT_PRECISION_BF16 && l->in_layout != DT_LAYOUT_NCHW && dt_pool_dnnl_supported(l);
}

static int avgpool_bf16_acts(const dt_layer *l) { return is_global(l) && l->in_layout != DT_LAYOUT_NCHW; }

/* out (B, C, OH, OW) <- window sums of in (B, C, H, W) / (K*K). */
static void avgpool_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                            float *ws) {
    (void)train, (void)ws;
    if (is_global(l)) {
        global_forward(l, out, in, batch);
        return;
    }
    pool_dims d = dims_of(l, batch);
    float inv = 1.0f / (float)(d.K * d.K);
    size_t in_plane = (size_t)d.H * d.W, out_plane = (size_t)d.OH * d.OW;
#pragma omp parallel for schedule(static) if (in_plane * d.planes >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < d.planes; p++) {
        const float *x = in + p * in_plane;
        float *y = out + p * out_plane;
        for (int oh = 0; oh < d.OH; oh++)
            for (int ow = 0; ow < d.OW; ow++) {
                int h0, h1, w0, w1;
                window(&d, oh, ow, &h0, &h1, &w0, &w1);
                float s = 0;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) s += x[h * d.W + w];
                y[oh * d.OW + ow] = s * inv;
            }
    }
}

/* din (B, C, H, W) <- dout (B, C, OH, OW) / (K*K) spread over each window. */
static void avgpool_backward(dt_layer *l, float *din, const float *dout, const float *in,
                             const float *out, int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    if (is_global(l)) {
        global_backward(l, din, dout, batch);
        return;
    }
    pool_dims d = dims_of(l, batch);
    float inv = 1.0f / (float)(d.K * d.K);
    size_t in_plane = (size_t)d.H * d.W, out_plane = (size_t)d.OH * d.OW;
#pragma omp parallel for schedule(static) if (in_plane * d.planes >= DT_LAYER_PAR_FLOATS)
    for (size_t p = 0; p < d.planes; p++) {
        float *dx = din + p * in_plane;
        const float *dy = dout + p * out_plane;
        memset(dx, 0, sizeof(float) * in_plane);
        for (int oh = 0; oh < d.OH; oh++)
            for (int ow = 0; ow < d.OW; ow++) {
                int h0, h1, w0, w1;
                window(&d, oh, ow, &h0, &h1, &w0, &w1);
                float g = dy[oh * d.OW + ow] * inv;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) dx[h * d.W + w] += g;
            }
    }
}

/* ---- model-file keys ---------------------------------------------------- */

typedef struct {
    int padding; /* Darknet's maxpool padding: the total, before and after */
} maxpool_own_keys;
DT_OWN_FITS(maxpool_own_keys);

/* Darknet's [maxpool]: size defaults to stride, stride to 1, padding to
 * size - 1 (see maxpool_end_section). */
static const dt_key_def maxpool_keys[] = {
    {"size", DT_KEY_INT, DT_SPEC_KEY(size), 0, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"stride", DT_KEY_INT, DT_SPEC_KEY(stride), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"padding", DT_KEY_INT, DT_OWN_KEY(maxpool_own_keys, padding), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {0}};

/* Darknet's maxpool: size defaults to stride, padding to size - 1 in all,
 * of which padding/2 before (output (H + padding - size) / stride + 1). */
static dt_status maxpool_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    if (!dt_section_key_line(s, "size")) layer->size = layer->stride;
    int padding_line = dt_section_key_line(s, "padding");
    int total = padding_line ? ((const maxpool_own_keys *)(const void *)&v->own)->padding : layer->size - 1;
    if (total > 2 * (layer->size - 1))
        return dt_section_error(s, padding_line,
                                "padding=%d leaves windows without an input cell (at most %d for size %d)", total,
                                2 * (layer->size - 1), layer->size);
    layer->pad = total / 2;
    layer->pad_extra = total % 2;
    return DT_OK;
}

/* Darknet's [avgpool] has no keys and is global (size 0); size= makes it a
 * window (a dtrain extension): stride defaults to size, pad is per side. */
static const dt_key_def avgpool_keys[] = {
    {"size", DT_KEY_INT, DT_SPEC_KEY(size), 0, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"stride", DT_KEY_INT, DT_SPEC_KEY(stride), 0, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"pad", DT_KEY_INT, DT_SPEC_KEY(pad), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {0}};

static dt_status avgpool_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    (void)v;
    int stride = dt_section_key_line(s, "stride"), pad = dt_section_key_line(s, "pad");
    if (layer->size == 0 && (stride || pad))
        return dt_section_error(s, stride ? stride : pad,
                                "[avgpool] without size= is global; stride= and pad= need size=");
    if (!stride) layer->stride = layer->size;
    return DT_OK;
}

const dt_layer_ops dt_maxpool_ops = {
    .name = "maxpool",
    .keys = maxpool_keys,
    .end_section = maxpool_end_section,
    .setup = pool_setup,
    .saved_floats = maxpool_saved_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .layouts = dt_layout_follow, /* per channel, in either layout */
    .bf16_acts = maxpool_bf16_acts,
    .flops = pool_flops,
    .destroy = dt_dnnl_fixed_destroy,
};

const dt_layer_ops dt_avgpool_ops = {
    .name = "avgpool",
    .keys = avgpool_keys,
    .end_section = avgpool_end_section,
    .setup = avgpool_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .layouts = avgpool_layouts,
    .bf16_acts = avgpool_bf16_acts,
    .flops = pool_flops,
};
