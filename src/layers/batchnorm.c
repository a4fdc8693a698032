/* [batchnorm]: torch.nn.BatchNorm2d (BatchNorm1d for (C, 1, 1) inputs), per
 * channel c over the N = B*H*W values of the batch:
 *   train: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch
 *          mean and biased var; running = (1-m) running + m batch, the
 *          running variance taking the unbiased var (var * N / (N-1)).
 *   eval:  the same with the running mean and var.
 * w = gamma (C), b = beta (C), state = running mean (C), running var (C).
 * saved: mean (C) and invstd (C) of the training forward; backward
 * recomputes xhat = (x - mean) invstd from its input, which the net keeps
 * (storing xhat would double the forward's writes and hold another
 * (B, C, H, W) block per layer):
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd (dy - dbeta/N - xhat dgamma/N).
 * Channels are independent, so both passes split them over OpenMP's
 * threads (those oneDNN uses); each channel's sums run on one thread in one
 * order, so the result does not depend on the thread count. A channel
 * (B x H x W values, 200 KB for 64 x 28 x 28) stays in the core's cache
 * between its passes. With l->relu_out (a ReLU folded in by the net) the
 * output is max(0, y) and backward first masks dy by out > 0, in the same
 * passes. Where the net keeps the activations in bf16 (l->in_bf16), oneDNN
 * runs both passes instead (batchnorm_dnnl.c). */
#include <math.h>
#include <stdio.h>

#include "layers/dnnl_layer.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status bn_setup(dt_layer *l) {
    float m = l->spec.bn.momentum, eps = l->spec.bn.eps;
    if (!(m >= 0.0f && m <= 1.0f))
        return dt_layer_config_error(l, "momentum must be in [0, 1], got %g", (double)m);
    if (!(eps > 0.0f && isfinite(eps)))
        return dt_layer_config_error(l, "eps must be > 0, got %g", (double)eps);
    DT_TRY(dt_layer_setup_same(l));
    l->nw = l->nb = (size_t)l->in.c;
    l->nstate = 2 * (size_t)l->in.c;
    return DT_OK;
}

static size_t bn_saved_floats(const dt_layer *l, int batch) {
    (void)batch;
    return 2 * (size_t)l->in.c;
}

static void bn_init(dt_layer *l, dt_rng *rng) {
    (void)rng;
    int C = l->in.c;
    for (int c = 0; c < C; c++) {
        l->w[c] = 1.0f;
        l->b[c] = 0.0f;
        l->state[c] = 0.0f;
        l->state[C + c] = 1.0f;
    }
}

static uint64_t bn_flops(const dt_layer *l) { return 2 * (uint64_t)dt_shape_size(l->in); }

/* Channel c's training statistics, from its mean and sum of squared
 * deviations over count values: the saved mean and 1/std, the running ones
 * updated, and the output's *scale (gamma invstd) and *shift (beta - mean
 * scale). Both layouts' forwards share it. */
static void bn_train_channel(dt_layer *l, int c, float mean, double sq, double count, float *scale, float *shift) {
    int C = l->in.c;
    float *rmean = l->state, *rvar = l->state + C, m = l->spec.bn.momentum;
    double var = sq / count;
    l->saved[c] = mean;
    l->saved[C + c] = (float)(1.0 / sqrt(var + l->spec.bn.eps));
    rmean[c] = (1.0f - m) * rmean[c] + m * mean;
    rvar[c] = (1.0f - m) * rvar[c] + m * (float)(count > 1 ? sq / (count - 1) : var);
    *scale = l->w[c] * l->saved[C + c];
    *shift = l->b[c] - mean * *scale;
}

/* The same from the running statistics (evaluation). */
static void bn_eval_channel(const dt_layer *l, int c, float *scale, float *shift) {
    const float *rmean = l->state, *rvar = l->state + l->in.c;
    *scale = l->w[c] / sqrtf(rvar[c] + l->spec.bn.eps);
    *shift = l->b[c] - rmean[c] * *scale;
}

/* Channel c's input gradient is dx = (g - mean_dy - (x - mean) proj) gk,
 * with g the (masked) output gradient. */
typedef struct {
    float gk, mean_dy, proj;
} bn_dx;

/* Channel c's dgamma and dbeta from sum g and sum g (x - mean) over count
 * values, and the coefficients of its dx. Both layouts' backwards share it. */
static bn_dx bn_grad_channel(dt_layer *l, int c, double dbeta, double dyx, double count) {
    float is = l->saved[l->in.c + c];
    l->db[c] = (float)dbeta;
    l->dw[c] = (float)(dyx * is);
    return (bn_dx){l->w[c] * is, (float)(dbeta / count), (float)(dyx * is * is / count)};
}

/* out <- in * scale + shift over channel c's B planes of hw values, then
 * max(0, .) when relu. */
static void bn_apply(float *out, const float *in, int batch, size_t n, size_t hw, int c,
                     float scale, float shift, int relu) {
    for (int b = 0; b < batch; b++) {
        size_t o = (size_t)b * n + (size_t)c * hw;
        if (relu) /* each branch its own loop, so both vectorise */
            for (size_t i = o; i < o + hw; i++) out[i] = in[i] * scale + shift > 0 ? in[i] * scale + shift : 0.0f;
        else
            for (size_t i = o; i < o + hw; i++) out[i] = in[i] * scale + shift;
    }
}

/* Training statistics of channel c: its mean, and its sum of squared
 * deviations in two passes (centre, then square), which stay accurate when
 * the mean is large against the spread. */
static float bn_channel_stats(const float *in, int batch, size_t n, size_t hw, int c, double *sq) {
    double sum = 0;
    for (int b = 0; b < batch; b++) sum += dt_layer_sum(in + (size_t)b * n + (size_t)c * hw, hw);
    float mean = (float)(sum / ((double)batch * (double)hw));
    *sq = 0;
    for (int b = 0; b < batch; b++) *sq += dt_layer_centred_sq(in + (size_t)b * n + (size_t)c * hw, mean, hw);
    return mean;
}

/* Blocked layouts, (B, C/k, H, W, k): channel c is lane c%k of block c/k.
 * Sums run per item (image, block), each on one thread, into (B, C)
 * doubles in the workspace, and are combined over the images in order: the
 * same bits on any thread count, B x C/k items to share even when C is k,
 * and an item (H x W x k floats, 50 KB at 28 x 28 x 16) stays in cache
 * between its passes, where the tensor (3.2 MB) does not. The per-item
 * passes take k as K (DT_BLOCK_DISPATCH), so their lane loops are fixed,
 * and mark them `omp simd`: with K = 8 (one AVX2 vector) GCC's own
 * vectoriser left the loops of a masked or summing pass scalar (a
 * backward with a folded ReLU ran 6.4 ms where it now runs 0.5, 64 x 16 x
 * 28 x 28 on an AVX2 EPYC). */
static size_t blocked_items(int batch, dt_shape s, int k) { return (size_t)batch * (size_t)(s.c / k); }

/* Lanes add in float over at most CHUNK cells, then into doubles, so a
 * sum over a large map (112 x 112) keeps the NCHW path's accuracy. */
enum { CHUNK = 256 };

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* One item xb (hw cells of K lanes): each lane's mean and sum of squared
 * deviations from it into mean[K], m2[K]. */
DT_BLOCK_PASS item_moments(const float *xb, size_t hw, int K, double *mean, double *m2) {
    const size_t end = hw * (size_t)K;
    double sum[DT_LAYOUT_MAX_BLOCK] = {0}, sq[DT_LAYOUT_MAX_BLOCK] = {0};
    float m[DT_LAYOUT_MAX_BLOCK];
    for (size_t i0 = 0; i0 < end; i0 += CHUNK * (size_t)K) {
        float acc[DT_LAYOUT_MAX_BLOCK] = {0};
        for (size_t i = i0; i < min_size(end, i0 + CHUNK * (size_t)K); i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) acc[c] += xb[i + c];
        for (int c = 0; c < K; c++) sum[c] += acc[c];
    }
    for (int c = 0; c < K; c++) m[c] = (float)(sum[c] / (double)hw);
    for (size_t i0 = 0; i0 < end; i0 += CHUNK * (size_t)K) {
        float acc[DT_LAYOUT_MAX_BLOCK] = {0};
        for (size_t i = i0; i < min_size(end, i0 + CHUNK * (size_t)K); i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) acc[c] += (xb[i + c] - m[c]) * (xb[i + c] - m[c]);
        for (int c = 0; c < K; c++) sq[c] += acc[c];
    }
    for (int c = 0; c < K; c++) mean[c] = m[c], m2[c] = sq[c];
}

/* Per item and lane: its mean and sum of squared deviations from it. */
static void blocked_moments(const float *x, int batch, dt_shape s, int k, double *imean, double *im2) {
    size_t hw = (size_t)s.h * (size_t)s.w, end = hw * (size_t)k, items = blocked_items(batch, s, k);
#pragma omp parallel for schedule(static) if (items * end >= DT_LAYER_PAR_FLOATS)
    for (size_t it = 0; it < items; it++)
        DT_BLOCK_DISPATCH(k, item_moments(x + it * end, hw, K, imean + it * K, im2 + it * K));
}

/* One item's sum g and sum g (x - mean) per lane into sdy[K], sdyx[K], g =
 * dy masked by mask > 0 (mb NULL: g = dy); m: the lanes' means. */
DT_BLOCK_PASS item_grad_sums(const float *dyb, const float *mb, const float *xb, const float *m, size_t hw, int K,
                              double *sdy, double *sdyx) {
    const size_t end = hw * (size_t)K;
    double sa[DT_LAYOUT_MAX_BLOCK] = {0}, sd[DT_LAYOUT_MAX_BLOCK] = {0};
    for (size_t i0 = 0; i0 < end; i0 += CHUNK * (size_t)K) {
        float a[DT_LAYOUT_MAX_BLOCK] = {0}, d[DT_LAYOUT_MAX_BLOCK] = {0};
        size_t i1 = min_size(end, i0 + CHUNK * (size_t)K);
        if (mb) /* each branch its own loop, so both vectorise */
            for (size_t i = i0; i < i1; i += (size_t)K)
#pragma omp simd
                for (int c = 0; c < K; c++) {
                    float dy = dyb[i + c], g = mb[i + c] > 0 ? dy : 0.0f;
                    a[c] += g;
                    d[c] += g * (xb[i + c] - m[c]);
                }
        else
            for (size_t i = i0; i < i1; i += (size_t)K)
#pragma omp simd
                for (int c = 0; c < K; c++) {
                    a[c] += dyb[i + c];
                    d[c] += dyb[i + c] * (xb[i + c] - m[c]);
                }
        for (int c = 0; c < K; c++) sa[c] += a[c], sd[c] += d[c];
    }
    for (int c = 0; c < K; c++) sdy[c] = sa[c], sdyx[c] = sd[c];
}

/* Per item and lane: sum g and sum g (x - mean), g = dy masked by mask > 0
 * (mask NULL: g = dy). */
static void blocked_grad_sums(const float *dy, const float *mask, const float *x, const float *mean,
                              int batch, dt_shape s, int k, double *sdy, double *sdyx) {
    size_t hw = (size_t)s.h * (size_t)s.w, end = hw * (size_t)k, items = blocked_items(batch, s, k);
#pragma omp parallel for schedule(static) if (items * end >= DT_LAYER_PAR_FLOATS)
    for (size_t it = 0; it < items; it++) {
        const float *m = mean + (it % (size_t)(s.c / k)) * (size_t)k;
        const float *mb = mask ? mask + it * end : NULL;
        DT_BLOCK_DISPATCH(k, item_grad_sums(dy + it * end, mb, x + it * end, m, hw, K, sdy + it * K, sdyx + it * K));
    }
}

/* One item: y = x * a[c] + z[c] per lane, then max(0, .) when relu. */
DT_BLOCK_PASS item_affine(float *restrict y, const float *restrict x, const float *a, const float *z, size_t hw,
                           int K, int relu) {
    const size_t end = hw * (size_t)K;
    float sc[DT_LAYOUT_MAX_BLOCK], sh[DT_LAYOUT_MAX_BLOCK];
    for (int c = 0; c < K; c++) sc[c] = a[c], sh[c] = z[c];
    if (relu) /* each branch its own loop, so both vectorise */
        for (size_t i = 0; i < end; i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) {
                float v = x[i + c] * sc[c] + sh[c];
                y[i + c] = v > 0 ? v : 0.0f;
            }
    else
        for (size_t i = 0; i < end; i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) y[i + c] = x[i + c] * sc[c] + sh[c];
}

/* out <- in * scale[c] + shift[c] over a (B, s) blocked tensor of k lanes,
 * then max(0, .) when relu. */
static void blocked_apply(float *out, const float *in, const float *scale, const float *shift, int batch,
                          dt_shape s, int k, int relu) {
    size_t hw = (size_t)s.h * (size_t)s.w, end = hw * (size_t)k, items = blocked_items(batch, s, k);
#pragma omp parallel for schedule(static) if (items * end >= DT_LAYER_PAR_FLOATS)
    for (size_t it = 0; it < items; it++) {
        size_t c0 = (it % (size_t)(s.c / k)) * (size_t)k;
        DT_BLOCK_DISPATCH(k, item_affine(out + it * end, in + it * end, scale + c0, shift + c0, hw, K, relu));
    }
}

/* One item of the input gradient: dx = g * gk[c] + (x * k2[c] + k3[c]),
 * g = dy masked by mb > 0 (mb NULL: g = dy). */
DT_BLOCK_PASS item_dx(float *restrict dx, const float *restrict dy, const float *restrict mb,
                       const float *restrict x, const float *gk, const float *k2, const float *k3, size_t hw, int K) {
    const size_t end = hw * (size_t)K;
    float g[DT_LAYOUT_MAX_BLOCK], a[DT_LAYOUT_MAX_BLOCK], z[DT_LAYOUT_MAX_BLOCK];
    for (int c = 0; c < K; c++) g[c] = gk[c], a[c] = k2[c], z[c] = k3[c];
    /* Each branch its own loop, so both vectorise. */
    if (mb)
        for (size_t i = 0; i < end; i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) {
                float d = dy[i + c];
                dx[i + c] = (mb[i + c] > 0 ? d : 0.0f) * g[c] + (x[i + c] * a[c] + z[c]);
            }
    else
        for (size_t i = 0; i < end; i += (size_t)K)
#pragma omp simd
            for (int c = 0; c < K; c++) dx[i + c] = dy[i + c] * g[c] + (x[i + c] * a[c] + z[c]);
}

/* Blocked forward: the batch statistics (training: each channel's mean of
 * the items' means, and its squared deviations combined as Chan et al.'s
 * parallel variance, M2 = sum M2_i + hw sum (mean_i - mean)^2) or the
 * running ones, then out = in * scale + shift. ws: item means and M2s (B, C)
 * doubles each, then scale and shift (C). */
static void bn_forward_blocked(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    int C = l->in.c, k = dt_layout_block(l->in_layout);
    size_t hw = (size_t)l->in.h * l->in.w, bc = (size_t)batch * (size_t)C;
    double *imean = (double *)ws, *im2 = imean + bc;
    float *scale = (float *)(im2 + bc), *shift = scale + C;
    double count = (double)batch * (double)hw;
    if (train && batch > 0) blocked_moments(in, batch, l->in, k, imean, im2);
    for (int c = 0; c < C; c++) {
        if (!train || batch == 0) {
            bn_eval_channel(l, c, &scale[c], &shift[c]);
            continue;
        }
        double mu = 0, sq = 0;
        for (int b = 0; b < batch; b++) mu += imean[(size_t)b * (size_t)C + (size_t)c];
        mu /= batch;
        for (int b = 0; b < batch; b++) {
            double dm = imean[(size_t)b * (size_t)C + (size_t)c] - mu;
            sq += im2[(size_t)b * (size_t)C + (size_t)c] + (double)hw * dm * dm;
        }
        bn_train_channel(l, c, (float)mu, sq, count, &scale[c], &shift[c]);
    }
    blocked_apply(out, in, scale, shift, batch, l->in, k, l->relu_out);
}

/* Blocked backward, as bn_backward: din = dout * gk + (in * k2 + k3) with
 * gk = gamma invstd, k2 = -proj gk, k3 = (mean proj - mean_dy) gk. ws: the
 * items' sum dy and sum dy (x - mean) (B, C) doubles each, then gk, k2, k3
 * (C). */
static void bn_backward_blocked(dt_layer *l, float *din, const float *dout, const float *mask,
                                const float *in, int batch, float *ws) {
    int C = l->in.c, k = dt_layout_block(l->in_layout);
    size_t hw = (size_t)l->in.h * l->in.w, bc = (size_t)batch * (size_t)C;
    double *sdy = (double *)ws, *sdyx = sdy + bc;
    float *gk = (float *)(sdyx + bc), *k2 = gk + C, *k3 = k2 + C;
    const float *mean = l->saved;
    double count = (double)batch * (double)hw;
    blocked_grad_sums(dout, mask, in, mean, batch, l->in, k, sdy, sdyx);
    for (int c = 0; c < C; c++) {
        double dbeta = 0, dyx = 0;
        for (int b = 0; b < batch; b++) {
            dbeta += sdy[(size_t)b * (size_t)C + (size_t)c];
            dyx += sdyx[(size_t)b * (size_t)C + (size_t)c];
        }
        bn_dx g = bn_grad_channel(l, c, dbeta, dyx, count);
        gk[c] = g.gk;
        k2[c] = -g.proj * g.gk;
        k3[c] = (mean[c] * g.proj - g.mean_dy) * g.gk;
    }
    if (!din) return;
    size_t end = hw * (size_t)k, items = blocked_items(batch, l->in, k);
#pragma omp parallel for schedule(static) if (items * end >= DT_LAYER_PAR_FLOATS)
    for (size_t it = 0; it < items; it++) {
        size_t c0 = (it % (size_t)(C / k)) * (size_t)k, o = it * end;
        const float *mb = mask ? mask + o : NULL;
        DT_BLOCK_DISPATCH(k, item_dx(din + o, dout + o, mb, in + o, gk + c0, k2 + c0, k3 + c0, hw, K));
    }
}

/* The workspace of a blocked layout: two (B, C) blocks of doubles and
 * three (C) floats. */
static size_t bn_workspace_floats(const dt_layer *l, int batch) {
    size_t C = (size_t)l->in.c;
    return l->in_layout != DT_LAYOUT_NCHW ? 4 * (size_t)batch * C + 3 * C : 0;
}

/* out (B, C, H, W) <- in (B, C, H, W). */
static void bn_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    if (l->in_bf16) {
        dt_dnnl_fixed_check(dt_bn_dnnl_forward(l, out, in, batch, train && batch > 0), "batch norm");
        return;
    }
    if (l->in_layout != DT_LAYOUT_NCHW) {
        bn_forward_blocked(l, out, in, batch, train, ws);
        return;
    }
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    double count = (double)batch * (double)hw;
    int stats = train && batch > 0;
#pragma omp parallel for schedule(static) if (n * (size_t)batch >= DT_LAYER_PAR_FLOATS)
    for (int c = 0; c < C; c++) {
        float scale, shift;
        if (stats) {
            double sq;
            float mean = bn_channel_stats(in, batch, n, hw, c, &sq);
            bn_train_channel(l, c, mean, sq, count, &scale, &shift);
        } else {
            bn_eval_channel(l, c, &scale, &shift);
        }
        bn_apply(out, in, batch, n, hw, c, scale, shift, l->relu_out);
    }
}

/* din (B, C, H, W) (may be NULL), dgamma (C), dbeta (C) <- dout, after a
 * training forward on the same in. */
static void bn_backward(dt_layer *l, float *din, const float *dout, const float *in,
                        const float *out, int batch, float *ws) {
    const float *mask = l->relu_out ? out : NULL; /* a fused ReLU's output */
    if (l->in_bf16) {
        DT_ASSERT(din); /* a bf16 input is a layer's, never the data */
        dt_dnnl_fixed_check(dt_bn_dnnl_backward(l, din, dout, in, batch), "batch norm");
        return;
    }
    if (l->in_layout != DT_LAYOUT_NCHW) {
        bn_backward_blocked(l, din, dout, mask, in, batch, ws);
        return;
    }
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    const float *mean = l->saved;
    double count = (double)batch * (double)hw;
#pragma omp parallel for schedule(static) if (n * (size_t)batch >= DT_LAYER_PAR_FLOATS)
    for (int c = 0; c < C; c++) {
        double dbeta = 0, dyx = 0; /* dyx: sum dy (x - mean) */
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            dt_layer_grad_sums(dout + o, mask ? mask + o : NULL, in + o, mean[c], hw, &dbeta, &dyx);
        }
        bn_dx k = bn_grad_channel(l, c, dbeta, dyx, count);
        if (!din) continue;
        float mu = mean[c], gk = k.gk, mean_dy = k.mean_dy, proj = k.proj;
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            if (mask) /* each branch its own loop, so both vectorise; dout loaded either way (item_dx) */
                for (size_t i = o; i < o + hw; i++) {
                    float d = dout[i];
                    din[i] = ((mask[i] > 0 ? d : 0.0f) - mean_dy - (in[i] - mu) * proj) * gk;
                }
            else
                for (size_t i = o; i < o + hw; i++) din[i] = (dout[i] - mean_dy - (in[i] - mu) * proj) * gk;
        }
    }
}

/* In a bf16 net, oneDNN's batch norm (batchnorm_dnnl.c) reads and writes
 * bf16 activations in a blocked layout, where oneDNN has the primitives
 * (else the net keeps them fp32 and the passes above run). */
static int bn_bf16_acts(const dt_layer *l) {
    return l->precision == DT_PRECISION_BF16 && l->in_layout != DT_LAYOUT_NCHW && dt_bn_dnnl_supported(l);
}

/* Also the settings of the batch norm that batch_normalize=1 adds. */
static const dt_key_def batchnorm_keys[] = {
    {"momentum", DT_KEY_FLOAT, DT_SPEC_KEY(bn.momentum), 0.1, 0, 1, 0, NULL},
    {"eps", DT_KEY_FLOAT, DT_SPEC_KEY(bn.eps), 1e-5, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {0}};

const dt_layer_ops dt_batchnorm_ops = {
    .name = "batchnorm",
    .keys = batchnorm_keys,
    .setup = bn_setup,
    .saved_floats = bn_saved_floats,
    .workspace_floats = bn_workspace_floats,
    .init = bn_init,
    .forward = bn_forward,
    .backward = bn_backward,
    .fuses_relu = 1,
    .layouts = dt_layout_follow, /* per channel, in either layout */
    .bf16_acts = bn_bf16_acts,
    .destroy = dt_dnnl_fixed_destroy,
    .flops = bn_flops,
    .caps = DT_LAYER_CAP_SCALES,
};
