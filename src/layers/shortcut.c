/* [shortcut]: Darknet's residual sum. ins[0] is the previous layer's output
 * (C2, H2, W2), ins[1] the `from` layer's (C1, H1, W1); out (C2, H2, W2) is
 * ins[0] plus ins[1] over the channels they share (min(C1, C2)). Between
 * different spatial sizes the `from` map is read with stride H1/H2 when it
 * is larger (ResNet's "option A" identity shortcut: a stride-2 subsample,
 * the extra channels of the block left as they are, i.e. the identity's
 * missing channels count as zero) or written every H2/H1 cells when it is
 * smaller, exactly as Darknet's shortcut_cpu (which also uses the integer
 * ratios when the sizes do not divide). On bf16 activations (l->in_bf16)
 * each sum is rounded to bf16 once. */
#include <math.h>
#include <string.h>

#include "dtrain/model.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

/* Geometry of the sum: out index of cell (k, j, i) of the shared block is
 * i*sample + W2*(j*sample + H2*k), the add index i*stride + W1*(j*stride + H1*k). */
typedef struct {
    int stride, sample, minc, minh, minw;
} shortcut_dims;

static int min_int(int a, int b) { return a < b ? a : b; }

static shortcut_dims dims_of(const dt_layer *l) {
    dt_shape add = l->ins[1], out = l->ins[0];
    shortcut_dims d = {add.w / out.w, out.w / add.w, min_int(add.c, out.c), min_int(add.h, out.h),
                       min_int(add.w, out.w)};
    if (d.stride < 1) d.stride = 1;
    if (d.sample < 1) d.sample = 1;
    return d;
}

static dt_status shortcut_setup(dt_layer *l) {
    if (l->ninputs != 2)
        return dt_layer_config_error(l, "takes 2 inputs (the previous layer and from=), got %d",
                                     l->ninputs);
    dt_shape add = l->ins[1], out = l->ins[0];
    DT_TRY(dt_layer_check_shape(l, out, "input"));
    DT_TRY(dt_layer_check_shape(l, add, "from= layer's output"));
    /* Darknet asserts that both dimensions scale by the same integer ratio. */
    if (add.w / out.w != add.h / out.h || out.w / add.w != out.h / add.h)
        return dt_layer_config_error(l,
                                     "from= layer's output %dx%dx%d and the previous layer's "
                                     "%dx%dx%d differ in height and width by different ratios",
                                     add.c, add.h, add.w, out.c, out.h, out.w);
    l->out = out;
    l->nw = l->nb = l->nstate = 0;
    return DT_OK;
}

static int same_shape(dt_shape a, dt_shape b) { return a.c == b.c && a.h == b.h && a.w == b.w; }

/* The shared block in a blocked layout of K channels a block (every
 * channel count is a multiple of K), K channels a cell: forward out += x
 * (x: in[1]), or backward dx = dout (dx: din[1]); the other pair is NULL. */
DT_BLOCK_PASS blocked_sum(const dt_layer *l, float *out, const float *x, float *dx, const float *dout, int batch,
                          int K) {
    shortcut_dims d = dims_of(l);
    dt_shape o = l->ins[0], a = l->ins[1];
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < d.minc; k += K)
            for (int j = 0; j < d.minh; j++)
                for (int i = 0; i < d.minw; i++) {
                    size_t oc = dt_blocked_at(o, K, b, k, j * d.sample, i * d.sample);
                    size_t ac = dt_blocked_at(a, K, b, k, j * d.stride, i * d.stride);
                    for (int c = 0; c < K; c++) {
                        if (out)
                            out[oc + c] += x[ac + c];
                        else
                            dx[ac + c] = dout[oc + c];
                    }
                }
}

/* bf16 activations (l->in_bf16, blocked): the same sums, each rounded to
 * bf16 once; the gradients are copies of bf16 values. The shared block's
 * cells: out[o] += x[a] (forward) or dx[a] = dy[o] (backward), 16-bit
 * words. */
static void blocked_sum_bf16(const dt_layer *l, float *out, const float *x, uint16_t *dx, const uint16_t *dy,
                             int batch) {
    shortcut_dims d = dims_of(l);
    dt_shape o = l->ins[0], a = l->ins[1];
    int K = dt_layout_block(l->in_layout);
    for (int b = 0; b < batch; b++)
        for (int k = 0; k < d.minc; k += K)
            for (int j = 0; j < d.minh; j++)
                for (int i = 0; i < d.minw; i++) {
                    size_t oc = dt_blocked_at(o, K, b, k, j * d.sample, i * d.sample);
                    size_t ac = dt_blocked_at(a, K, b, k, j * d.stride, i * d.stride);
                    for (int c = 0; c < K; c++) {
                        if (out)
                            dt_bf16_set(out, oc + c, dt_bf16_get(out, oc + c) + dt_bf16_get(x, ac + c));
                        else
                            dx[ac + c] = dy[oc + c];
                    }
                }
}

static void forward_bf16(dt_layer *l, float *out, const float *const *in, int batch) {
    size_t n = dt_shape_size(l->ins[0]) * (size_t)batch;
    int relu = l->relu_out;
    if (same_shape(l->ins[0], l->ins[1])) {
        const float *restrict x0 = in[0], *restrict x1 = in[1];
        uint16_t *restrict y = (uint16_t *)(void *)out;
        float lo = relu ? 0.0f : -INFINITY;
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) {
            float v = dt_bf16_get(x0, i) + dt_bf16_get(x1, i);
            y[i] = dt_bf16_of(v > lo ? v : 0.0f);
        }
        return;
    }
    memcpy(out, in[0], sizeof(uint16_t) * n);
    blocked_sum_bf16(l, out, in[1], NULL, NULL, batch);
    if (relu) {
        uint16_t *y = (uint16_t *)(void *)out;
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) y[i] = dt_bf16_get(out, i) > 0 ? y[i] : 0;
    }
}

static void backward_bf16(dt_layer *l, float *const *din, const float *dout, const float *out, int batch) {
    size_t n = dt_shape_size(l->ins[0]) * (size_t)batch, an = dt_shape_size(l->ins[1]) * (size_t)batch;
    const uint16_t *dy = (const uint16_t *)(const void *)dout;
    if (l->relu_out) {
        uint16_t *dx = (uint16_t *)(void *)din[0];
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) dx[i] = dt_bf16_get(out, i) > 0 ? dy[i] : 0;
        dy = dx;
    } else if (din[0]) {
        memcpy(din[0], dy, sizeof(uint16_t) * n);
    }
    if (!din[1]) return;
    if (same_shape(l->ins[0], l->ins[1])) {
        memcpy(din[1], dy, sizeof(uint16_t) * n);
        return;
    }
    memset(din[1], 0, sizeof(uint16_t) * an);
    blocked_sum_bf16(l, NULL, NULL, (uint16_t *)(void *)din[1], dy, batch);
}

/* out (B, ins[0]) <- in[0] + the shared block of in[1] (B, ins[1]). */
static void shortcut_forward(dt_layer *l, float *out, const float *const *in, int batch) {
    if (l->in_bf16) {
        forward_bf16(l, out, in, batch);
        return;
    }
    shortcut_dims d = dims_of(l);
    dt_shape o = l->ins[0], a = l->ins[1];
    size_t osz = dt_shape_size(o), asz = dt_shape_size(a);
    size_t n = osz * (size_t)batch;
    int relu = l->relu_out;
    if (same_shape(o, a)) { /* a ResNet's identity: one vectorised pass */
        const float *restrict x0 = in[0], *restrict x1 = in[1];
        float *restrict y = out;
        if (relu)
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
            for (size_t i = 0; i < n; i++) y[i] = x0[i] + x1[i] > 0 ? x0[i] + x1[i] : 0.0f;
        else
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
            for (size_t i = 0; i < n; i++) y[i] = x0[i] + x1[i];
        return;
    }
    dt_layer_copy(out, in[0], osz * (size_t)batch);
    if (l->in_layout != DT_LAYOUT_NCHW)
        DT_BLOCK_DISPATCH(dt_layout_block(l->in_layout), blocked_sum(l, out, in[1], NULL, NULL, batch, K));
    else
        for (int b = 0; b < batch; b++) {
            float *y = out + (size_t)b * osz;
            const float *x = in[1] + (size_t)b * asz;
            for (int k = 0; k < d.minc; k++)
                for (int j = 0; j < d.minh; j++) {
                    float *yr = y + ((size_t)k * o.h + (size_t)j * d.sample) * o.w;
                    const float *xr = x + ((size_t)k * a.h + (size_t)j * d.stride) * a.w;
                    for (int i = 0; i < d.minw; i++) yr[i * d.sample] += xr[i * d.stride];
                }
        }
    if (relu)
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) out[i] = out[i] > 0 ? out[i] : 0.0f;
}

/* din[0] <- dout; din[1] <- dout at the shared block's cells, 0 elsewhere. */
static void shortcut_backward(dt_layer *l, float *const *din, const float *dout, const float *out,
                              int batch) {
    if (l->in_bf16) {
        backward_bf16(l, din, dout, out, batch);
        return;
    }
    shortcut_dims d = dims_of(l);
    dt_shape o = l->ins[0], a = l->ins[1];
    size_t osz = dt_shape_size(o), asz = dt_shape_size(a);
    size_t n = osz * (size_t)batch;
    if (l->relu_out) { /* din[0] = dout masked by out > 0 (the net gives din[0] here) */
        const float *restrict dy = dout, *restrict y = out;
        float *restrict dx = din[0];
#pragma omp parallel for simd schedule(static) if (n >= DT_LAYER_PAR_FLOATS)
        for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0.0f;
        dout = din[0]; /* the masked gradient is what din[1] takes from */
    } else if (din[0]) {
        dt_layer_copy(din[0], dout, n);
    }
    if (!din[1]) return;
    if (same_shape(o, a)) {
        dt_layer_copy(din[1], dout, n);
        return;
    }
    memset(din[1], 0, sizeof(float) * asz * (size_t)batch);
    if (l->in_layout != DT_LAYOUT_NCHW) {
        DT_BLOCK_DISPATCH(dt_layout_block(l->in_layout), blocked_sum(l, NULL, NULL, din[1], dout, batch, K));
        return;
    }
    for (int b = 0; b < batch; b++) {
        const float *dy = dout + (size_t)b * osz;
        float *dx = din[1] + (size_t)b * asz;
        for (int k = 0; k < d.minc; k++)
            for (int j = 0; j < d.minh; j++) {
                const float *dyr = dy + ((size_t)k * o.h + (size_t)j * d.sample) * o.w;
                float *dxr = dx + ((size_t)k * a.h + (size_t)j * d.stride) * a.w;
                for (int i = 0; i < d.minw; i++) dxr[i * d.stride] = dyr[i * d.sample];
            }
    }
}

/* ---- model-file keys ---------------------------------------------------- */

typedef struct {
    int from; /* Darknet section index (negative: relative) */
} shortcut_own_keys;
DT_OWN_FITS(shortcut_own_keys);

static const dt_key_def shortcut_keys[] = {
    {"from", DT_KEY_INT, DT_OWN_KEY(shortcut_own_keys, from), 0, -DT_MAX_LAYERS, DT_MAX_LAYERS, DT_KEY_REQUIRED,
     NULL},
    DT_ACT_KEYS,
    {0}};

/* Inputs: the previous section's output, then from='s. */
static dt_status shortcut_end_section(const dt_section *s, const dt_section_vals *v, dt_layer_spec *layer) {
    layer->ninputs = 2;
    DT_TRY(dt_section_layer(s, NULL, -1, &layer->inputs[0]));
    return dt_section_layer(s, "from", ((const shortcut_own_keys *)(const void *)&v->own)->from, &layer->inputs[1]);
}

/* In a bf16 net the sum reads and writes bf16 in a blocked layout. */
static int shortcut_bf16_acts(const dt_layer *l) { return l->in_layout != DT_LAYOUT_NCHW; }

const dt_layer_ops dt_shortcut_ops = {
    .name = "shortcut",
    .keys = shortcut_keys,
    .end_section = shortcut_end_section,
    .setup = shortcut_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dt_layer_no_floats,
    .init = dt_layer_init_none,
    .forward_n = shortcut_forward,
    .backward_n = shortcut_backward,
    .fuses_relu = 1, /* the forward writes max(0, sum); backward masks dout by the output */
    .layouts = dt_layout_follow, /* elementwise, or k channels a cell in a blocked layout */
    .bf16_acts = shortcut_bf16_acts,
    .flops = dt_layer_flops_elems,
};
