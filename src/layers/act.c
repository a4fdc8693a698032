/* [activation]: elementwise linear, relu, leaky (max(x, slope*x) for slope
 * in [0, 1], i.e. x > 0 ? x : slope*x), tanh, sigmoid, ramp (Darknet's
 * x (x > 0) + 0.1 x, gradient (x > 0) + 0.1). Shapes unchanged.
 * Each kind has its own loop, so no function pointer or branch on the kind
 * per element. Backward uses the input for relu/leaky (like PyTorch) and
 * the output for tanh (1 - y^2) and sigmoid (y (1 - y)). Every loop runs on
 * OpenMP's threads (layer_impl.h); being elementwise, in either layout. */
#include <math.h>

#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status act_setup(dt_layer *l) {
    if ((int)l->spec.act.fn < DT_ACT_LINEAR || l->spec.act.fn >= DT_ACT_COUNT)
        return dt_layer_config_error(l, "unknown activation %d", (int)l->spec.act.fn);
    if (l->spec.act.fn == DT_ACT_LEAKY && !(isfinite(l->spec.act.slope)))
        return dt_layer_config_error(l, "leaky slope must be finite");
    return dt_layer_setup_same(l);
}

/* out (B, in) <- act(in (B, in)). */
static void act_forward(dt_layer *l, float *out, const float *in, int batch, int train, float *ws) {
    (void)train, (void)ws;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    float slope = l->spec.act.slope;
    switch (l->spec.act.fn) {
    case DT_ACT_LINEAR:
        dt_layer_copy(out, in, n);
        break;
    case DT_ACT_RELU:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = in[i] > 0 ? in[i] : 0.0f;
        break;
    case DT_ACT_LEAKY:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = in[i] > 0 ? in[i] : slope * in[i];
        break;
    case DT_ACT_TANH:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
        break;
    case DT_ACT_SIGMOID:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-in[i]));
        break;
    case DT_ACT_RAMP:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = (in[i] > 0 ? in[i] : 0.0f) + 0.1f * in[i];
        break;
    case DT_ACT_COUNT: break;
    }
}

/* din (B, in) <- dout (B, in) * act'(in). */
static void act_backward(dt_layer *l, float *din, const float *dout, const float *in,
                         const float *out, int batch, float *ws) {
    (void)ws;
    if (!din) return;
    size_t n = dt_shape_size(l->in) * (size_t)batch;
    float slope = l->spec.act.slope;
    switch (l->spec.act.fn) {
    case DT_ACT_LINEAR:
        dt_layer_copy(din, dout, n);
        break;
    case DT_ACT_RELU:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) din[i] = in[i] > 0 ? dout[i] : 0.0f;
        break;
    case DT_ACT_LEAKY:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) din[i] = in[i] > 0 ? dout[i] : slope * dout[i];
        break;
    case DT_ACT_TANH:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) din[i] = dout[i] * (1.0f - out[i] * out[i]);
        break;
    case DT_ACT_SIGMOID:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) din[i] = dout[i] * out[i] * (1.0f - out[i]);
        break;
    case DT_ACT_RAMP:
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) din[i] = dout[i] * ((in[i] > 0 ? 1.0f : 0.0f) + 0.1f);
        break;
    case DT_ACT_COUNT: break;
    }
}

static const dt_key_def act_keys[] = {
    {"activation", DT_KEY_ENUM, DT_SPEC_KEY(act.fn), 0, 0, 0, DT_KEY_REQUIRED, &dt_activation_choices},
    {"slope", DT_KEY_FLOAT, DT_SPEC_KEY(act.slope), 0.1, 0, 1, 0, NULL},
    {0}};

/* A folded ReLU runs nothing: its output is its input's buffer, in bf16
 * when the layer that fuses it keeps that in bf16. */
static int act_bf16_acts(const dt_layer *l) { return l->folded; }

const dt_layer_ops dt_act_ops = {
    .name = "activation",
    .keys = act_keys,
    .setup = act_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward = act_forward,
    .backward = act_backward,
    .layouts = dt_layout_follow, /* elementwise */
    .bf16_acts = act_bf16_acts,
    .flops = dt_layer_flops_elems,
    .caps = DT_LAYER_CAP_FOLDS,
};
