/* [dropout]: inverted dropout (torch.nn.Dropout). In training each element
 * is dropped with probability p and kept ones are scaled by 1/(1-p); in
 * evaluation it is the identity. Element i of the batch (flat index over
 * (B, in)) is dropped when U(dt_hash3(seed, step, i)) < p, so a mask is
 * reproducible from (seed, step) on any rank and resume. saved (B, in) keeps
 * the multiplier (0 or 1/(1-p)) so backward is one multiply. */
#include <math.h>
#include <string.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status dropout_setup(dt_layer *l) {
    float p = l->spec.dropout.p;
    if (!(p >= 0.0f && p < 1.0f))
        return dt_layer_config_error(l, "probability must be in [0, 1), got %g", (double)p);
    return dt_layer_setup_same(l);
}

static size_t dropout_saved_floats(const dt_layer *l, int batch) {
    return dt_shape_size(l->in) * (size_t)batch;
}

/* out (B, in) <- in (B, in) * mask; saved (B, in) <- mask. */
static void dropout_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                            float *ws) {
    (void)ws;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    if (!train) {
        if (out != in) memcpy(out, in, sizeof(float) * n);
        return;
    }
    float scale = 1.0f / (1.0f - l->spec.dropout.p);
    /* Dropped iff u = (top 24 bits) / 2^24 < p, i.e. top 24 bits < ceil(p 2^24). */
    uint64_t threshold = (uint64_t)ceil((double)l->spec.dropout.p * 16777216.0);
    float *mask = l->saved;
    const uint64_t first = l->sample_base * dt_shape_size(l->in); /* element 0's index in the global batch */
    for (size_t i = 0; i < n; i++) {
        mask[i] = (dt_hash3(l->seed, l->step, first + i) >> 40) < threshold ? 0.0f : scale;
        out[i] = in[i] * mask[i];
    }
}

/* din (B, in) <- dout (B, in) * mask from the training forward. */
static void dropout_backward(dt_layer *l, float *din, const float *dout, const float *in,
                             const float *out, int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * l->saved[i];
}

static const dt_key_def dropout_keys[] = {
    {"probability", DT_KEY_FLOAT, DT_SPEC_KEY(dropout.p), 0.5, 0, 1, DT_KEY_HI_OPEN, NULL},
    {0}};

const dt_layer_ops dt_dropout_ops = {
    .name = "dropout",
    .keys = dropout_keys,
    .setup = dropout_setup,
    .saved_floats = dropout_saved_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .flops = dt_layer_flops_elems,
};
