/* [scale]: out = factor x in, elementwise (an example kind: ARCHITECTURE.md's
 * count of the files a layer kind touches). */
#include <math.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status scale_setup(dt_layer *l) {
    if (!isfinite(l->spec.scale.factor))
        return dt_layer_config_error(l, "factor must be finite, got %g", (double)l->spec.scale.factor);
    return dt_layer_setup_same(l);
}

/* out (B, in) <- factor x in (B, in). */
static void scale_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)train, (void)ws;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    for (size_t i = 0; i < n; i++) out[i] = l->spec.scale.factor * in[i];
}

/* din (B, in) <- factor x dout (B, in). */
static void scale_backward(dt_layer *l, float *din, const float *dout, const float *in, const float *out,
                           int batch, float *ws) {
    (void)in, (void)out, (void)ws;
    if (!din) return;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    for (size_t i = 0; i < n; i++) din[i] = l->spec.scale.factor * dout[i];
}

static const dt_key_def scale_keys[] = {
    {"factor", DT_KEY_FLOAT, DT_SPEC_KEY(scale.factor), 1, -1e6, 1e6, 0, NULL},
    {0}};

const dt_layer_ops dt_scale_ops = {
    .name = "scale",
    .keys = scale_keys,
    .setup = scale_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = scale_forward,
    .backward = scale_backward,
    .flops = dt_layer_flops_elems,
};
