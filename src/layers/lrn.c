/* [lrn] (Darknet's [normalization]): local response normalisation across
 * channels, per pixel, Darknet's formula:
 *   s_c = kappa + alpha * sum_{c' = c-n/2 .. c+n/2} a_c'^2   (zero outside [0, C))
 *   b_c = a_c * s_c^-beta
 * (torch.nn.LocalResponseNorm's alpha is this alpha x n). n (size) is odd,
 * so the window is symmetric with half-width h = n/2 and channel j lies in
 * the windows of channels j-h .. j+h. Darknet's CPU layer starts channel
 * 0's window without channel h and its backward ignores the dependence of s
 * on the input ("approximate", its source says); dtrain computes the
 * formula and its exact gradient:
 *   da_j = db_j s_j^-beta - 2 alpha beta a_j * sum_{c in win(j)} db_c b_c / s_c
 * saved (B, 2, C, H, W): s^-beta then 1/s. Workspace (C, H, W): squares in
 * forward, db b / s in backward, so both use one windowed channel sum. */
#include <math.h>
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status lrn_setup(dt_layer *l) {
    const dt_layer_spec *s = &l->spec;
    if (s->lrn.size < 1 || s->lrn.size % 2 == 0)
        return dt_layer_config_error(l, "size must be odd and >= 1, got %d", s->lrn.size);
    if (!(s->lrn.alpha >= 0 && s->lrn.beta >= 0 && s->lrn.k > 0 && isfinite(s->lrn.alpha) &&
          isfinite(s->lrn.beta) && isfinite(s->lrn.k)))
        return dt_layer_config_error(l, "alpha and beta must be >= 0 and kappa > 0 (finite)");
    return dt_layer_setup_same(l);
}

static size_t lrn_saved_floats(const dt_layer *l, int batch) {
    return 2 * dt_shape_size(l->in) * (size_t)batch;
}

static size_t lrn_workspace_floats(const dt_layer *l, int batch) {
    (void)batch;
    return dt_shape_size(l->in);
}

static uint64_t lrn_flops(const dt_layer *l) {
    return dt_shape_size(l->in) * (uint64_t)(l->spec.lrn.size + 4);
}

/* dst (hw) = sum of src planes (C, hw) over the channel window of c. */
static void window_sum(float *dst, const float *src, int c, int C, int half, size_t hw) {
    int lo = c - half < 0 ? 0 : c - half, hi = c + half >= C ? C - 1 : c + half;
    memset(dst, 0, sizeof(float) * hw);
    for (int j = lo; j <= hi; j++) {
        const float *p = src + (size_t)j * hw;
        for (size_t i = 0; i < hw; i++) dst[i] += p[i];
    }
}

/* out (B, C, H, W) <- in (B, C, H, W). */
static void lrn_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)train;
    int C = l->in.c, half = l->spec.lrn.size / 2;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    float alpha = l->spec.lrn.alpha, beta = l->spec.lrn.beta;
    float k = l->spec.lrn.k;
    for (int b = 0; b < batch; b++) {
        const float *a = in + (size_t)b * n;
        float *y = out + (size_t)b * n;
        float *pw = l->saved + 2 * (size_t)b * n; /* s^-beta (C, H, W) */
        float *inv = pw + n;                      /* 1/s (C, H, W) */
        for (size_t i = 0; i < n; i++) ws[i] = a[i] * a[i];
        for (int c = 0; c < C; c++) {
            size_t o = (size_t)c * hw;
            window_sum(inv + o, ws, c, C, half, hw);
            for (size_t i = o; i < o + hw; i++) {
                float s = k + alpha * inv[i];
                pw[i] = powf(s, -beta);
                inv[i] = 1.0f / s;
                y[i] = a[i] * pw[i];
            }
        }
    }
}

/* din (B, C, H, W) <- dout (B, C, H, W), given in, out and saved. */
static void lrn_backward(dt_layer *l, float *din, const float *dout, const float *in,
                         const float *out, int batch, float *ws) {
    if (!din) return;
    int C = l->in.c, half = l->spec.lrn.size / 2;
    size_t hw = (size_t)l->in.h * l->in.w, n = dt_shape_size(l->in);
    float coef = 2.0f * l->spec.lrn.alpha * l->spec.lrn.beta;
    for (int b = 0; b < batch; b++) {
        size_t off = (size_t)b * n;
        const float *a = in + off, *dy = dout + off, *y = out + off;
        const float *pw = l->saved + 2 * off, *inv = pw + n;
        float *dx = din + off;
        for (size_t i = 0; i < n; i++) ws[i] = dy[i] * y[i] * inv[i];
        for (int c = 0; c < C; c++) {
            size_t o = (size_t)c * hw;
            window_sum(dx + o, ws, c, C, half, hw);
            for (size_t i = o; i < o + hw; i++) dx[i] = dy[i] * pw[i] - coef * a[i] * dx[i];
        }
    }
}

static const dt_key_def lrn_keys[] = {
    {"size", DT_KEY_INT, DT_SPEC_KEY(lrn.size), 5, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"alpha", DT_KEY_FLOAT, DT_SPEC_KEY(lrn.alpha), 1e-4, 0, INFINITY, 0, NULL},
    {"beta", DT_KEY_FLOAT, DT_SPEC_KEY(lrn.beta), 0.75, 0, INFINITY, 0, NULL},
    {"kappa", DT_KEY_FLOAT, DT_SPEC_KEY(lrn.k), 1.0, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {0}};

const dt_layer_ops dt_lrn_ops = {
    .name = "lrn",
    .keys = lrn_keys,
    .setup = lrn_setup,
    .saved_floats = lrn_saved_floats,
    .workspace_floats = lrn_workspace_floats,
    .init = dt_layer_init_none,
    .forward = lrn_forward,
    .backward = lrn_backward,
    .flops = lrn_flops,
};
