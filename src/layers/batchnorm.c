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
 * between its passes. */
#include <math.h>

#include "layers/layer_impl.h"

static dt_status bn_setup(dt_layer *l) {
    float m = l->spec.bn_momentum, eps = l->spec.bn_eps;
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

/* out <- in * scale + shift over channel c's B planes of hw values. */
static void bn_apply(float *out, const float *in, int batch, size_t n, size_t hw, int c,
                     float scale, float shift) {
    for (int b = 0; b < batch; b++) {
        size_t o = (size_t)b * n + (size_t)c * hw;
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
    for (int b = 0; b < batch; b++) *sq += dt_layer_centred_dot(in + (size_t)b * n + (size_t)c * hw, mean, NULL, hw);
    return mean;
}

/* out (B, C, H, W) <- in (B, C, H, W). */
static void bn_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)ws;
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    float *rmean = l->state, *rvar = l->state + C, eps = l->spec.bn_eps;
    if (!train || batch == 0) {
#pragma omp parallel for schedule(static) if (n * (size_t)batch >= DT_LAYER_PAR_FLOATS)
        for (int c = 0; c < C; c++) {
            float scale = l->w[c] / sqrtf(rvar[c] + eps);
            bn_apply(out, in, batch, n, hw, c, scale, l->b[c] - rmean[c] * scale);
        }
        return;
    }
    float *mean = l->saved, *invstd = l->saved + C; /* (C), (C) */
    double count = (double)batch * (double)hw;
    float m = l->spec.bn_momentum;
#pragma omp parallel for schedule(static) if (n * (size_t)batch >= DT_LAYER_PAR_FLOATS)
    for (int c = 0; c < C; c++) {
        double sq;
        mean[c] = bn_channel_stats(in, batch, n, hw, c, &sq);
        double var = sq / count;
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        rmean[c] = (1.0f - m) * rmean[c] + m * mean[c];
        rvar[c] = (1.0f - m) * rvar[c] + m * (float)(count > 1 ? sq / (count - 1) : var);
        float scale = l->w[c] * invstd[c];
        bn_apply(out, in, batch, n, hw, c, scale, l->b[c] - mean[c] * scale);
    }
}

/* din (B, C, H, W) (may be NULL), dgamma (C), dbeta (C) <- dout, after a
 * training forward on the same in. */
static void bn_backward(dt_layer *l, float *din, const float *dout, const float *in,
                        const float *out, int batch, float *ws) {
    (void)out, (void)ws;
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    const float *mean = l->saved, *invstd = l->saved + C;
    double count = (double)batch * (double)hw;
#pragma omp parallel for schedule(static) if (n * (size_t)batch >= DT_LAYER_PAR_FLOATS)
    for (int c = 0; c < C; c++) {
        double dbeta = 0, dyx = 0; /* dyx: sum dy (x - mean) */
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            dbeta += dt_layer_sum(dout + o, hw);
            dyx += dt_layer_centred_dot(in + o, mean[c], dout + o, hw);
        }
        float is = invstd[c], mu = mean[c];
        l->db[c] = (float)dbeta;
        l->dw[c] = (float)(dyx * is);
        if (!din) continue;
        /* dx = (dy - dbeta/N - (x - mean) proj) gamma invstd, proj = dgamma invstd / N. */
        float gk = l->w[c] * is, mean_dy = (float)(dbeta / count), proj = (float)(dyx * is * is / count);
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            for (size_t i = o; i < o + hw; i++) din[i] = (dout[i] - mean_dy - (in[i] - mu) * proj) * gk;
        }
    }
}

const dt_layer_ops dt_batchnorm_ops = {
    .name = "batchnorm",
    .setup = bn_setup,
    .saved_floats = bn_saved_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = bn_init,
    .forward = bn_forward,
    .backward = bn_backward,
    .flops = bn_flops,
};
