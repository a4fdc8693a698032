/* [batchnorm]: torch.nn.BatchNorm2d (BatchNorm1d for (C, 1, 1) inputs), per
 * channel c over the N = B*H*W values of the batch:
 *   train: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch
 *          mean and biased var; running = (1-m) running + m batch, the
 *          running variance taking the unbiased var (var * N / (N-1)).
 *   eval:  the same with the running mean and var.
 * w = gamma (C), b = beta (C), state = running mean (C), running var (C).
 * saved: invstd (C), then xhat (B, C, H, W) of the training forward, which
 * backward needs:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd (dy - dbeta/N - xhat dgamma/N). */
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
    return (size_t)l->in.c + dt_shape_size(l->in) * (size_t)batch;
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

/* out (B, C, H, W) <- in (B, C, H, W). */
static void bn_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)ws;
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    float *rmean = l->state, *rvar = l->state + C;
    if (!train || batch == 0) {
        for (int c = 0; c < C; c++) {
            float scale = l->w[c] / sqrtf(rvar[c] + l->spec.bn_eps);
            float shift = l->b[c] - rmean[c] * scale;
            for (int b = 0; b < batch; b++) {
                size_t o = (size_t)b * n + (size_t)c * hw;
                for (size_t i = o; i < o + hw; i++) out[i] = in[i] * scale + shift;
            }
        }
        return;
    }
    float *invstd = l->saved, *xhat = l->saved + C; /* (C), (B, C, H, W) */
    double count = (double)batch * (double)hw;
    float m = l->spec.bn_momentum;
    for (int c = 0; c < C; c++) {
        double sum = 0;
        for (int b = 0; b < batch; b++)
            sum += dt_layer_sum(in + (size_t)b * n + (size_t)c * hw, hw);
        float mean = (float)(sum / count);
        /* Two passes (centre, then square) keep the variance accurate when
         * the mean is large against the spread. */
        double sq = 0;
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            for (size_t i = o; i < o + hw; i++) xhat[i] = in[i] - mean;
            sq += dt_layer_dot(xhat + o, xhat + o, hw);
        }
        double var = sq / count;
        float is = (float)(1.0 / sqrt(var + l->spec.bn_eps));
        invstd[c] = is;
        rmean[c] = (1.0f - m) * rmean[c] + m * mean;
        rvar[c] = (1.0f - m) * rvar[c] + m * (float)(count > 1 ? sq / (count - 1) : var);
        float gamma = l->w[c], beta = l->b[c];
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            for (size_t i = o; i < o + hw; i++) {
                xhat[i] *= is;
                out[i] = gamma * xhat[i] + beta;
            }
        }
    }
}

/* din (B, C, H, W) (may be NULL), dgamma (C), dbeta (C) <- dout, after a
 * training forward. */
static void bn_backward(dt_layer *l, float *din, const float *dout, const float *in,
                        const float *out, int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    int C = l->in.c;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    const float *invstd = l->saved, *xhat = l->saved + C;
    double count = (double)batch * (double)hw;
    for (int c = 0; c < C; c++) {
        double dbeta = 0, dgamma = 0;
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            dbeta += dt_layer_sum(dout + o, hw);
            dgamma += dt_layer_dot(dout + o, xhat + o, hw);
        }
        l->db[c] = (float)dbeta;
        l->dw[c] = (float)dgamma;
        if (!din) continue;
        float k = l->w[c] * invstd[c];
        float mean_dy = (float)(dbeta / count), mean_dyx = (float)(dgamma / count);
        for (int b = 0; b < batch; b++) {
            size_t o = (size_t)b * n + (size_t)c * hw;
            for (size_t i = o; i < o + hw; i++)
                din[i] = k * (dout[i] - mean_dy - xhat[i] * mean_dyx);
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
