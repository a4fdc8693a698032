/* [convolutional]: torch.nn.Conv2d with a square kernel.
 *   weight (F, C/G, K, K), bias (F; none with spec.no_bias), in (C, H, W) -> out (F, OH, OW),
 *   OH = floor((H + 2P - D (K-1) - 1) / S) + 1, zero padding P, stride S, dilation D
 *   (taps D cells apart); G groups: filters [g F/G, (g+1) F/G) read input channels
 *   [g C/G, (g+1) C/G) (PyTorch's groups and dilation).
 * Fast paths, in order: Winograd's F(4x4, 3x3) for 3x3 stride-1 convolutions
 * on AVX2 CPUs and Zen 4 (winograd.h, dt_layer_winograd); oneDNN's convolutions
 * (dnnl_layer.c), about twice as fast as sgemm on im2col columns, in the
 * layer's precision (fp32 or bf16).
 * Fallback, when oneDNN cannot run a shape (always in fp32): each
 * image is lowered to columns (im2col, (C*K*K, OH*OW)) and multiplied by the
 * weight matrix (F, C*K*K) with OpenBLAS sgemm; a 1x1, stride-1, unpadded
 * conv uses the image itself as the column matrix.
 * Backward: dW accumulates dout_b (F, OH*OW) . cols_bᵀ over images, dX is
 * Wᵀ . dout_b into columns scattered back with col2im. With groups each
 * product is G products of a group's rows (weights, columns, outputs). The workspace holds
 * one image's columns, then, where a side is blocked (the fallback computes
 * in NCHW), one image's NCHW copies of in and din (C, H, W) and of out/dout
 * (F, OH, OW). Input and output may each be NCHW or blocked. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "layers/dnnl_layer.h"
#include "layers/gemm.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"
#include "layers/winograd.h"

typedef struct {
    int C, H, W, F, K, S, P, OH, OW;
    int D;         /* dilation: tap k reads input offset k D */
    int G, Cg, Fg; /* groups, and input channels and filters per group */
    int kk;        /* Cg*K*K: a filter's weights, a group's rows of the column matrix */
    int n;         /* OH*OW: columns */
} conv_dims;

static int groups_of(const dt_layer *l) { return dt_layer_groups(&l->spec); }

static conv_dims dims_of(const dt_layer *l) {
    conv_dims d = {l->in.c,  l->in.h,  l->in.w, l->out.c, l->spec.size, l->spec.stride, l->spec.pad,
                   l->out.h, l->out.w, dt_layer_dilation(&l->spec), groups_of(l), 0, 0, 0, 0};
    d.Cg = d.C / d.G;
    d.Fg = d.F / d.G;
    d.kk = d.Cg * d.K * d.K;
    d.n = d.OH * d.OW;
    return d;
}

/* The image itself is the column matrix (a 1x1 kernel has one tap: no dilation). */
static int is_pointwise(const conv_dims *d) { return d->K == 1 && d->S == 1 && d->P == 0; }

static dt_status conv_setup(dt_layer *l) {
    int oh, ow;
    if (l->spec.pad_extra) return dt_layer_config_error(l, "pad_extra is for [maxpool] only");
    DT_TRY(dt_layer_window_setup(l, &oh, &ow));
    if (l->spec.conv.filters < 1)
        return dt_layer_config_error(l, "filters must be >= 1, got %d", l->spec.conv.filters);
    int G = groups_of(l);
    if (l->in.c % G || l->spec.conv.filters % G)
        return dt_layer_config_error(l, "groups=%d must divide the %d input channels and the %d filters", G, l->in.c,
                                     l->spec.conv.filters);
    l->out = (dt_shape){l->spec.conv.filters, oh, ow};
    DT_TRY(dt_layer_check_shape(l, l->out, "output"));
    size_t k2, kk;
    DT_TRY(dt_layer_mul(l, &k2, (size_t)l->spec.size, (size_t)l->spec.size, "kernel"));
    DT_TRY(dt_layer_mul(l, &kk, k2, (size_t)l->in.c, "kernel"));
    /* kk (C*K*K, the column matrix's rows) <= INT_MAX and OH*OW <= INT_MAX:
     * BLAS sizes and the im2col workspace (kk * OH*OW) cannot overflow. */
    if (kk > INT_MAX)
        return dt_layer_config_error(l, "kernel of %zu values per filter is too large", kk);
    DT_TRY(dt_layer_mul(l, &l->nw, kk / (size_t)G, (size_t)l->spec.conv.filters, "weight"));
    l->nb = l->spec.no_bias ? 0 : (size_t)l->spec.conv.filters;
    l->nstate = 0;
    return DT_OK;
}

static size_t cols_floats(const dt_layer *l) {
    conv_dims d = dims_of(l);
    return is_pointwise(&d) ? 0 : (size_t)d.kk * (size_t)d.G * (size_t)d.n;
}

static size_t conv_workspace_floats(const dt_layer *l, int batch) {
    (void)batch;
    size_t in = l->in_layout == DT_LAYOUT_NCHW ? 0 : 2 * dt_shape_size(l->in);
    return cols_floats(l) + in + (l->out_layout == DT_LAYOUT_NCHW ? 0 : dt_shape_size(l->out));
}

/* The sgemm path computes in NCHW. Where a side is blocked, image b goes
 * through NCHW copies in the workspace, after the columns: in, then din
 * (C, H, W), then out or dout (F, OH, OW). */
static float *in_copy(const dt_layer *l, float *ws) { return ws + cols_floats(l); }

static float *out_copy(const dt_layer *l, float *ws) {
    return in_copy(l, ws) + (l->in_layout == DT_LAYOUT_NCHW ? 0 : 2 * dt_shape_size(l->in));
}

/* Image b of buf (B, s) in `layout`, in NCHW: in place, or converted into copy. */
static const float *nchw_image(const float *buf, dt_layout layout, dt_shape s, int b, float *copy) {
    const float *x = buf + (size_t)b * dt_shape_size(s);
    if (layout == DT_LAYOUT_NCHW) return x;
    dt_layout_convert(copy, DT_LAYOUT_NCHW, x, layout, 1, s);
    return copy;
}

/* Where the sgemm path writes image b of buf (B, s) in `layout`: in place,
 * or the copy that store_image moves into buf. */
static float *nchw_target(float *buf, dt_layout layout, dt_shape s, int b, float *copy) {
    return layout == DT_LAYOUT_NCHW ? buf + (size_t)b * dt_shape_size(s) : copy;
}

static void store_image(float *buf, dt_layout layout, dt_shape s, int b, const float *copy) {
    if (layout != DT_LAYOUT_NCHW) dt_layout_convert(buf + (size_t)b * dt_shape_size(s), layout, copy, DT_LAYOUT_NCHW, 1, s);
}

static void conv_init(dt_layer *l, dt_rng *rng) {
    conv_dims d = dims_of(l);
    float bound = 1.0f / sqrtf((float)d.kk);
    dt_layer_fill_uniform(l->w, l->nw, bound, rng);
    dt_layer_fill_uniform(l->b, l->nb, bound, rng);
}

/* Outputs [*lo, *hi) of a dimension whose input index o*S - P + k lies in
 * [0, n); the other nout - (hi - lo) outputs read padding. */
static void valid_range(int k, int S, int P, int n, int nout, int *lo, int *hi) {
    int first = P - k > 0 ? (P - k + S - 1) / S : 0;
    int end = n + P - k > 0 ? (n + P - k + S - 1) / S : 0;
    *hi = end < nout ? end : nout;
    *lo = first < *hi ? first : *hi;
}

/* Row (c, kh, kw) of the column matrix (C*K*K, OH*OW) holds, at column
 * (oh, ow), x[c][oh*S-P+kh*D][ow*S-P+kw*D] or 0 in the padding. Real cells are
 * rows [oh0, oh1) x columns [lo, hi) of the (OH, OW) grid, the first of them
 * at input offset `first` within the channel. When S == 1 and OW == W (a
 * "same" conv, the common case) output o reads input o + const, so the whole
 * block is one contiguous run from grid index `run0` to `run1`: one long copy
 * or add, the wrapped columns outside [lo, hi) being fixed up separately. */
typedef struct {
    int oh0, oh1, lo, hi;
    size_t first;      /* input offset of grid cell (oh0, lo) */
    size_t run0, run1; /* contiguous run: grid cells [run0, run1) */
    int contiguous;
} row_span;

static int span_of(const conv_dims *d, int kh, int kw, row_span *s) {
    int dy = kh * d->D, dx = kw * d->D; /* the tap's input offsets */
    valid_range(dy, d->S, d->P, d->H, d->OH, &s->oh0, &s->oh1);
    valid_range(dx, d->S, d->P, d->W, d->OW, &s->lo, &s->hi);
    if (s->oh0 >= s->oh1 || s->lo >= s->hi) return 0;
    s->first =
        (size_t)(s->oh0 * d->S - d->P + dy) * (size_t)d->W + (size_t)(s->lo * d->S - d->P + dx);
    s->contiguous = d->S == 1 && d->OW == d->W;
    s->run0 = (size_t)s->oh0 * d->OW + (size_t)s->lo;
    s->run1 = (size_t)(s->oh1 - 1) * d->OW + (size_t)s->hi;
    return 1;
}

static void zero(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.0f;
}

/* Zeroes columns outside [lo, hi) of grid rows [oh0, oh1) of one matrix row. */
static void zero_margins(const conv_dims *d, const row_span *s, float *row) {
    for (int oh = s->oh0; oh < s->oh1; oh++) {
        zero(row + (size_t)oh * d->OW, (size_t)s->lo);
        zero(row + (size_t)oh * d->OW + s->hi, (size_t)(d->OW - s->hi));
    }
}

/* cols (C*K*K, OH*OW) <- x (C, H, W): group g's rows are [g kk, (g+1) kk). */
static void im2col(const conv_dims *d, const float *x, float *cols) {
    size_t plane = (size_t)d->H * d->W;
    for (int c = 0; c < d->C; c++)
        for (int kh = 0; kh < d->K; kh++)
            for (int kw = 0; kw < d->K; kw++) {
                float *row = cols + (size_t)((c * d->K + kh) * d->K + kw) * (size_t)d->n;
                row_span s;
                if (!span_of(d, kh, kw, &s)) {
                    zero(row, (size_t)d->n);
                    continue;
                }
                const float *src = x + (size_t)c * plane + s.first;
                zero(row, (size_t)s.oh0 * d->OW);
                zero(row + (size_t)s.oh1 * d->OW, (size_t)(d->OH - s.oh1) * d->OW);
                if (s.contiguous) {
                    memcpy(row + s.run0, src, sizeof(float) * (s.run1 - s.run0));
                    zero_margins(d, &s, row);
                    continue;
                }
                for (int oh = s.oh0; oh < s.oh1; oh++) {
                    float *r = row + (size_t)oh * d->OW;
                    const float *xr = src + (size_t)(oh - s.oh0) * d->S * d->W;
                    zero(r, (size_t)s.lo);
                    for (int ow = s.lo; ow < s.hi; ow++) r[ow] = xr[(ow - s.lo) * d->S];
                    zero(r + s.hi, (size_t)(d->OW - s.hi));
                }
            }
}

/* dst[i] += src[i]: restrict lets the compiler vectorise without overlap checks. */
static void add_to(float *restrict dst, const float *restrict src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

/* x (C, H, W) += cols (C*K*K, OH*OW) scattered back (the adjoint of
 * im2col). cols is scratch: its padding columns are zeroed on the way. */
static void col2im(const conv_dims *d, float *cols, float *x) {
    size_t plane = (size_t)d->H * d->W;
    for (int c = 0; c < d->C; c++)
        for (int kh = 0; kh < d->K; kh++)
            for (int kw = 0; kw < d->K; kw++) {
                float *row = cols + (size_t)((c * d->K + kh) * d->K + kw) * (size_t)d->n;
                row_span s;
                if (!span_of(d, kh, kw, &s)) continue;
                float *dst = x + (size_t)c * plane + s.first;
                if (s.contiguous) {
                    zero_margins(d, &s, row); /* their cells would wrap onto other rows */
                    add_to(dst, row + s.run0, s.run1 - s.run0);
                    continue;
                }
                for (int oh = s.oh0; oh < s.oh1; oh++) {
                    const float *r = row + (size_t)oh * d->OW;
                    float *xr = dst + (size_t)(oh - s.oh0) * d->S * d->W;
                    for (int ow = s.lo; ow < s.hi; ow++) xr[(ow - s.lo) * d->S] += r[ow];
                }
            }
}

/* out (B, F, OH, OW) <- in (B, C, H, W), with sgemm. */
void dt_conv_forward_gemm(dt_layer *l, float *out, const float *in, int batch, float *ws) {
    conv_dims d = dims_of(l);
    for (int b = 0; b < batch; b++) {
        const float *x = nchw_image(in, l->in_layout, l->in, b, in_copy(l, ws));
        float *y = nchw_target(out, l->out_layout, l->out, b, out_copy(l, ws));
        const float *cols = x;
        if (!is_pointwise(&d)) {
            im2col(&d, x, ws);
            cols = ws;
        }
        for (int f = 0; f < d.F; f++)
            for (int i = 0; i < d.n; i++) y[(size_t)f * d.n + i] = l->nb ? l->b[f] : 0.0f;
        for (int g = 0; g < d.G; g++) /* y_g (Fg, n) += W_g (Fg, kk) . cols_g (kk, n) */
            dt_sgemm('N', 'N', d.Fg, d.n, d.kk, 1.0f, l->w + (size_t)g * d.Fg * d.kk, d.kk,
                     cols + (size_t)g * d.kk * d.n, d.n, 1.0f, y + (size_t)g * d.Fg * d.n, d.n);
        store_image(out, l->out_layout, l->out, b, y);
    }
}

/* din (B, C, H, W) (may be NULL), dw (F, C*K*K), db (F) <- dout (B, F, OH, OW),
 * with sgemm. */
void dt_conv_backward_gemm(dt_layer *l, float *din, const float *dout, const float *in,
                               int batch, float *ws) {
    conv_dims d = dims_of(l);
    size_t in_sz = dt_shape_size(l->in);
    int pointwise = is_pointwise(&d);
    memset(l->db, 0, sizeof(float) * l->nb);
    for (int b = 0; b < batch; b++) {
        const float *x = nchw_image(in, l->in_layout, l->in, b, in_copy(l, ws));
        const float *dy = nchw_image(dout, l->out_layout, l->out, b, out_copy(l, ws));
        for (int f = 0; f < (int)l->nb; f++)
            l->db[f] += (float)dt_layer_sum(dy + (size_t)f * d.n, (size_t)d.n);
        const float *cols = x;
        if (!pointwise) {
            im2col(&d, x, ws);
            cols = ws;
        }
        for (int g = 0; g < d.G; g++) /* dW_g (Fg, kk) += dy_g (Fg, n) . cols_gᵀ */
            dt_sgemm('N', 'T', d.Fg, d.kk, d.n, 1.0f, dy + (size_t)g * d.Fg * d.n, d.n,
                     cols + (size_t)g * d.kk * d.n, d.n, b == 0 ? 0.0f : 1.0f, l->dw + (size_t)g * d.Fg * d.kk,
                     d.kk);
        if (!din) continue;
        float *dx = nchw_target(din, l->in_layout, l->in, b, in_copy(l, ws) + in_sz);
        /* dcols (C*K*K, OH*OW) = Wᵀ . dy, by group; for the pointwise conv dcols is dx. */
        float *dcols = pointwise ? dx : ws;
        for (int g = 0; g < d.G; g++)
            dt_sgemm('T', 'N', d.kk, d.n, d.Fg, 1.0f, l->w + (size_t)g * d.Fg * d.kk, d.kk,
                     dy + (size_t)g * d.Fg * d.n, d.n, 0.0f, dcols + (size_t)g * d.kk * d.n, d.n);
        if (!pointwise) {
            memset(dx, 0, sizeof(float) * in_sz);
            col2im(&d, ws, dx);
        }
        store_image(din, l->in_layout, l->in, b, dx);
    }
    if (batch == 0) memset(l->dw, 0, sizeof(float) * l->nw);
}

/* The convolution as oneDNN sees it. Right padding makes
 * (H + P + pad_r - E) / S + 1 == OH exactly, E = (K - 1) D + 1 the
 * kernel's extent, as oneDNN requires; with PyTorch's floor it may be
 * below P (or < 0). oneDNN counts dilation from 0 (adjacent taps). */
static void conv_describe(const dt_layer *l, int batch, dt_dnnl_dims *g) {
    conv_dims d = dims_of(l);
    *g = (dt_dnnl_dims){.ndims = 4,
                        .wei_ndims = d.G > 1 ? 5 : 4,
                        .src = {batch, d.C, d.H, d.W},
                        .wei = {d.F, d.C, d.K, d.K},
                        .dst = {batch, d.F, d.OH, d.OW},
                        .strides = {d.S, d.S},
                        .pad_l = {d.P, d.P},
                        .dilates = {d.D - 1, d.D - 1},
                        .pad_r = {(d.OH - 1) * d.S + (d.K - 1) * d.D + 1 - d.H - d.P,
                                  (d.OW - 1) * d.S + (d.K - 1) * d.D + 1 - d.W - d.P}};
    if (d.G > 1) /* goihw: the same floats as (F, C/G, K, K) */
        memcpy(g->wei, (dnnl_dims_t){d.G, d.Fg, d.Cg, d.K, d.K}, sizeof(dnnl_dim_t) * 5);
    g->winograd = dt_layer_dnnl_winograd(l);
}

int dt_layer_dnnl_winograd(const dt_layer *l) {
    if (l->spec.kind != DT_LAYER_CONV) return 0;
    conv_dims d = dims_of(l);
    return l->winograd && !dt_layer_winograd(l) && d.K == 3 && d.S == 1 && d.D == 1 && d.G == 1 &&
           l->precision == DT_PRECISION_FP32 && l->in_layout == DT_LAYOUT_NCHW16C &&
           l->out_layout == DT_LAYOUT_NCHW16C;
}

static dnnl_status_t conv_op_desc(dt_dnnl_op_desc *od, dt_dnnl_pass pass, const dt_dnnl_descs *d) {
    const dt_dnnl_dims *g = d->dims;
    dnnl_convolution_desc_t *c = &od->conv;
    dnnl_alg_kind_t alg = g->winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
    switch (pass) {
    case DT_DNNL_FORWARD:
        return dnnl_dilated_convolution_forward_desc_init(c, dnnl_forward_training, alg, d->src, d->wei, d->bias,
                                                          d->dst, g->strides, g->dilates, g->pad_l, g->pad_r);
    case DT_DNNL_BACKWARD_WEIGHTS:
        return dnnl_dilated_convolution_backward_weights_desc_init(c, alg, d->src, d->diff_wei, d->bias, d->dst,
                                                                   g->strides, g->dilates, g->pad_l, g->pad_r);
    case DT_DNNL_BACKWARD_DATA:
        return dnnl_dilated_convolution_backward_data_desc_init(c, alg, d->src, d->wei, d->dst, g->strides,
                                                                g->dilates, g->pad_l, g->pad_r);
    }
    return dnnl_invalid_arguments;
}

static const dt_dnnl_kind conv_dnnl = {"oneDNN convolution", 0, conv_describe, conv_op_desc};

/* The first path that runs the layer at this batch size: Winograd where it
 * applies (winograd.h), oneDNN, else sgemm; each overwrites everything a
 * failed one may have half written. */
static void conv_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                         float *ws) {
    (void)train;
    if (batch >= 1 && dt_layer_winograd(l) && dt_winograd_forward(l, out, in, batch) == DT_OK) {
        dt_dnnl_forget_forward(l); /* a failed Winograd backward falls back to oneDNN */
        return;
    }
    if (batch >= 1 && dt_dnnl_forward(l, &conv_dnnl, out, in, batch) == DT_OK) return;
    /* bf16 activations have no other path; oneDNN's reference kernels run
     * every bf16 convolution, so only a failed allocation gets here. */
    DT_ASSERT(batch < 1 || (!l->in_bf16 && !l->out_bf16));
    dt_conv_forward_gemm(l, out, in, batch, ws);
}

static void conv_backward(dt_layer *l, float *din, const float *dout, const float *in,
                          const float *out, int batch, float *ws) {
    (void)out;
    if (batch >= 1 && dt_layer_winograd(l) && dt_winograd_backward(l, din, dout, in, batch) == DT_OK) return;
    if (batch >= 1 && dt_dnnl_backward(l, &conv_dnnl, din, dout, in, batch, 1) == DT_OK) return;
    DT_ASSERT(batch < 1 || (!l->in_bf16 && !l->out_bf16));
    dt_conv_backward_gemm(l, din, dout, in, batch, ws);
}

/* oneDNN's convolutions read and write bf16 activations on either side: a
 * bf16 one as they are, an fp32 one (a first layer of 1 or 2 channels,
 * dt_layer_precision) through a reorder at that edge. Winograd's
 * path is fp32 only. */
static int conv_bf16_acts(const dt_layer *l) { return !dt_layer_winograd(l); }

/* Reference: direct loops over (b, f, oh, ow, c, kh, kw), NCHW only. */
static void conv_forward_ref(dt_layer *l, float *out, const float *in, int batch, int train,
                             float *ws) {
    (void)train, (void)ws;
    conv_dims d = dims_of(l);
    for (int b = 0; b < batch; b++)
        for (int f = 0; f < d.F; f++)
            for (int oh = 0; oh < d.OH; oh++)
                for (int ow = 0; ow < d.OW; ow++) {
                    double acc = l->nb ? l->b[f] : 0.0;
                    for (int c = 0; c < d.Cg; c++) /* of filter f's group */
                        for (int kh = 0; kh < d.K; kh++)
                            for (int kw = 0; kw < d.K; kw++) {
                                int ih = oh * d.S - d.P + kh * d.D, iw = ow * d.S - d.P + kw * d.D;
                                int ci = f / d.Fg * d.Cg + c;
                                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                                acc += (double)l->w[(((size_t)f * d.Cg + c) * d.K + kh) * d.K + kw] *
                                       in[(((size_t)b * d.C + ci) * d.H + ih) * d.W + iw];
                            }
                    out[(((size_t)b * d.F + f) * d.OH + oh) * d.OW + ow] = (float)acc;
                }
}

static void conv_backward_ref(dt_layer *l, float *din, const float *dout, const float *in,
                              const float *out, int batch, float *ws) {
    (void)out, (void)ws;
    conv_dims d = dims_of(l);
    memset(l->dw, 0, sizeof(float) * l->nw);
    memset(l->db, 0, sizeof(float) * l->nb);
    if (din) memset(din, 0, sizeof(float) * dt_shape_size(l->in) * (size_t)batch);
    for (int b = 0; b < batch; b++)
        for (int f = 0; f < d.F; f++)
            for (int oh = 0; oh < d.OH; oh++)
                for (int ow = 0; ow < d.OW; ow++) {
                    float g = dout[(((size_t)b * d.F + f) * d.OH + oh) * d.OW + ow];
                    if (l->nb) l->db[f] += g;
                    for (int c = 0; c < d.Cg; c++)
                        for (int kh = 0; kh < d.K; kh++)
                            for (int kw = 0; kw < d.K; kw++) {
                                int ih = oh * d.S - d.P + kh * d.D, iw = ow * d.S - d.P + kw * d.D;
                                int ci = f / d.Fg * d.Cg + c;
                                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                                size_t wi = (((size_t)f * d.Cg + c) * d.K + kh) * d.K + kw;
                                size_t xi = (((size_t)b * d.C + ci) * d.H + ih) * d.W + iw;
                                l->dw[wi] += g * in[xi];
                                if (din) din[xi] += g * l->w[wi];
                            }
                }
}

static uint64_t conv_flops(const dt_layer *l) { /* dilation spreads the taps, not their count */
    return 2ULL * l->nw * (uint64_t)l->out.h * (uint64_t)l->out.w;
}

/* ---- model-file keys ---------------------------------------------------- */

/* Darknet's padding keys. */
typedef struct {
    int pad_flag; /* pad: a flag meaning size/2 pixels per side */
    int padding;  /* padding: pixels per side */
} conv_own_keys;
DT_OWN_FITS(conv_own_keys);

static const dt_key_def conv_keys[] = {
    {"filters", DT_KEY_INT, DT_SPEC_KEY(conv.filters), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"size", DT_KEY_INT, DT_SPEC_KEY(size), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"stride", DT_KEY_INT, DT_SPEC_KEY(stride), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"pad", DT_KEY_INT, DT_OWN_KEY(conv_own_keys, pad_flag), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {"padding", DT_KEY_INT, DT_OWN_KEY(conv_own_keys, padding), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {"groups", DT_KEY_INT, DT_SPEC_KEY(conv.groups), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"dilation", DT_KEY_INT, DT_SPEC_KEY(conv.dilation), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    DT_FUSED_KEYS,
    {0}};

/* Darknet's convolution padding: pad=1 pads size/2 pixels per side,
 * padding=N pads N. pad is a flag there (any non-zero value); values other
 * than 0 and 1, and both keys together, are refused rather than guessed. */
static dt_status conv_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    const conv_own_keys *k = (const conv_own_keys *)(const void *)&v->own;
    if (k->pad_flag > 1)
        return dt_section_error(s, dt_section_key_line(s, "pad"),
                                "pad=%d: pad is Darknet's flag (pad=1 pads size/2 = %d pixels per side); "
                                "for N pixels write padding=N",
                                k->pad_flag, layer->size / 2);
    if (k->pad_flag && dt_section_key_line(s, "padding"))
        return dt_section_error(s, dt_section_key_line(s, "padding"),
                                "padding= with pad=1 (pad=1 already means size/2 pixels); give one of them");
    layer->pad = k->pad_flag ? layer->size / 2 : k->padding;
    return DT_OK;
}

static int conv_weight_dims(const dt_layer *l, size_t dims[4]) {
    dims[0] = (size_t)l->spec.conv.filters;
    dims[1] = (size_t)(l->in.c / groups_of(l));
    dims[2] = dims[3] = (size_t)l->spec.size;
    return 4;
}

const dt_layer_ops dt_conv_ops = {
    .name = "convolutional",
    .keys = conv_keys,
    .end_section = conv_end_section,
    .setup = conv_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = conv_workspace_floats,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .forward_ref = conv_forward_ref,
    .backward_ref = conv_backward_ref,
    .layouts = dt_layout_any,
    .bf16_acts = conv_bf16_acts,
    .flops = conv_flops,
    .destroy = dt_dnnl_destroy,
    .weight_dims = conv_weight_dims,
};
