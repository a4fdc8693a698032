/* [connected]: torch.nn.Linear. in (any shape, flattened to I values) ->
 * out (O, 1, 1) = W . in + b with W (O, I), b (O) (none with spec.no_bias). The whole batch is one
 * sgemm each way (I = ni, O = no in the code, as <complex.h> from cblas.h
 * defines I): out (B, O) = in (B, I) . Wᵀ, dW (O, I) = doutᵀ . in,
 * din (B, I) = dout . W. In bf16 the three products are oneDNN's inner
 * products instead (dnnl_layer.c; bf16 operands, f32 accumulation, f32 dW
 * and db), falling back to the sgemms where oneDNN cannot run them. */
#include <math.h>
#include <string.h>

#include "layers/dnnl_layer.h"
#include "layers/gemm.h"
#include "layers/layer_impl.h"
#include "layers/layer_keys.h"

static dt_status dense_setup(dt_layer *l) {
    DT_TRY(dt_layer_check_shape(l, l->in, "input"));
    if (l->spec.dense.outputs < 1)
        return dt_layer_config_error(l, "output must be >= 1, got %d", l->spec.dense.outputs);
    l->out = (dt_shape){l->spec.dense.outputs, 1, 1};
    DT_TRY(dt_layer_mul(l, &l->nw, dt_shape_size(l->in), (size_t)l->spec.dense.outputs, "weight"));
    l->nb = l->spec.no_bias ? 0 : (size_t)l->spec.dense.outputs;
    l->nstate = 0;
    return DT_OK;
}

static void dense_init(dt_layer *l, dt_rng *rng) {
    float bound = 1.0f / sqrtf((float)dt_shape_size(l->in));
    dt_layer_fill_uniform(l->w, l->nw, bound, rng);
    dt_layer_fill_uniform(l->b, l->nb, bound, rng);
}

/* Whether the forward GEMM computes outᵀ (O, B) = W . inᵀ into the workspace
 * and transposes, rather than out = in . Wᵀ directly. Same products, other
 * blocking: oneDNN's sgemm (2.6, one thread, AVX-512) ran cnn's fc
 * (B 64, I 3136, O 1024) in 4.9 ms instead of 6.8, and was 1.03-1.9x faster
 * for I >= 1024 and O >= 512 at B >= 32, but 0.5-0.97x for I = 784, B = 8
 * or cifar's 2304 -> 384. The choice depends on the shape only, so every
 * run and rank computes the same bits. */
static int forward_transposed(const dt_layer *l, int batch) {
    return batch >= 32 && dt_shape_size(l->in) >= 1024 && l->out.c >= 512;
}

static size_t dense_workspace_floats(const dt_layer *l, int batch) {
    return forward_transposed(l, batch) ? (size_t)l->out.c * (size_t)batch : 0;
}

/* The layer as oneDNN's inner product: src (B, I), weights (O, I), dst (B, O). */
static void dense_describe(const dt_layer *l, int batch, dt_dnnl_dims *g) {
    *g = (dt_dnnl_dims){.ndims = 2,
                        .src = {batch, (int64_t)dt_shape_size(l->in)},
                        .wei = {l->out.c, (int64_t)dt_shape_size(l->in)},
                        .dst = {batch, l->out.c}};
}

static dnnl_status_t dense_op_desc(dt_dnnl_op_desc *od, dt_dnnl_pass pass,
                                   const dt_dnnl_descs *d) {
    dnnl_inner_product_desc_t *ip = &od->ip;
    switch (pass) {
    case DT_DNNL_FORWARD:
        return dnnl_inner_product_forward_desc_init(ip, dnnl_forward_training, d->src, d->wei,
                                                    d->bias, d->dst);
    case DT_DNNL_BACKWARD_WEIGHTS:
        return dnnl_inner_product_backward_weights_desc_init(ip, d->src, d->diff_wei, d->bias,
                                                             d->dst);
    case DT_DNNL_BACKWARD_DATA:
        return dnnl_inner_product_backward_data_desc_init(ip, d->src, d->wei, d->dst);
    }
    return dnnl_invalid_arguments;
}

static const dt_dnnl_kind dense_dnnl = {"oneDNN inner product", 1, dense_describe, dense_op_desc};

static int runs_in_dnnl(const dt_layer *l, int batch) {
    return l->precision == DT_PRECISION_BF16 && batch >= 1;
}

/* out (B, O) <- in (B, I); ws (O, B) when transposed. */
static void dense_forward(dt_layer *l, float *out, const float *in, int batch, int train,
                          float *ws) {
    (void)train;
    int ni = (int)dt_shape_size(l->in), no = l->out.c;
    if (batch == 0) return;
    if (runs_in_dnnl(l, batch) && dt_dnnl_forward(l, &dense_dnnl, out, in, batch) == DT_OK)
        return;
    if (forward_transposed(l, batch)) {
        dt_sgemm('N', 'T', no, batch, ni, 1.0f, l->w, ni, in, ni, 0.0f, ws, batch);
        for (int b = 0; b < batch; b++)
            for (int o = 0; o < no; o++)
                out[(size_t)b * no + o] = ws[(size_t)o * batch + b] + (l->nb ? l->b[o] : 0.0f);
        return;
    }
    for (int b = 0; b < batch; b++)
        if (l->nb)
            memcpy(out + (size_t)b * no, l->b, sizeof(float) * (size_t)no);
        else
            memset(out + (size_t)b * no, 0, sizeof(float) * (size_t)no);
    dt_sgemm('N', 'T', batch, no, ni, 1.0f, in, ni, l->w, ni, 1.0f, out, no);
}

/* din (B, I) (may be NULL), dw (O, I) (may be NULL), db (O) <- dout (B, O). */
static void dense_backward(dt_layer *l, float *din, const float *dout, const float *in,
                           const float *out, int batch, float *ws) {
    (void)out, (void)ws;
    int ni = (int)dt_shape_size(l->in), no = l->out.c;
    /* oneDNN's backward-weights writes dw and db together; without dw only
     * din is taken from it. */
    int weights = l->dw != NULL;
    if (runs_in_dnnl(l, batch) &&
        dt_dnnl_backward(l, &dense_dnnl, din, dout, in, batch, weights) == DT_OK) {
        if (weights) return;
        din = NULL;
    }
    memset(l->db, 0, sizeof(float) * l->nb);
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < (int)l->nb; o++) l->db[o] += dout[(size_t)b * no + o];
    if (batch == 0) {
        if (weights) memset(l->dw, 0, sizeof(float) * l->nw);
        return;
    }
    if (weights)
        dt_sgemm('T', 'N', no, ni, batch, 1.0f, dout, no, in, ni, 0.0f, l->dw, ni);
    if (din)
        dt_sgemm('N', 'N', batch, ni, no, 1.0f, dout, no, l->w,
                    ni, 0.0f, din, ni);
}

static void dense_forward_ref(dt_layer *l, float *out, const float *in, int batch, int train,
                              float *ws) {
    (void)train, (void)ws;
    size_t ni = dt_shape_size(l->in), no = (size_t)l->out.c;
    for (size_t b = 0; b < (size_t)batch; b++)
        for (size_t o = 0; o < no; o++) {
            double acc = l->nb ? l->b[o] : 0.0;
            for (size_t i = 0; i < ni; i++) acc += (double)l->w[o * ni + i] * in[b * ni + i];
            out[b * no + o] = (float)acc;
        }
}

static void dense_backward_ref(dt_layer *l, float *din, const float *dout, const float *in,
                               const float *out, int batch, float *ws) {
    (void)out, (void)ws;
    size_t ni = dt_shape_size(l->in), no = (size_t)l->out.c;
    for (size_t o = 0; o < no; o++) {
        double gb = 0;
        for (size_t b = 0; b < (size_t)batch; b++) gb += dout[b * no + o];
        if (l->nb) l->db[o] = (float)gb;
        for (size_t i = 0; l->dw && i < ni; i++) {
            double gw = 0;
            for (size_t b = 0; b < (size_t)batch; b++)
                gw += (double)dout[b * no + o] * in[b * ni + i];
            l->dw[o * ni + i] = (float)gw;
        }
    }
    if (!din) return;
    for (size_t b = 0; b < (size_t)batch; b++)
        for (size_t i = 0; i < ni; i++) {
            double gx = 0;
            for (size_t o = 0; o < no; o++) gx += (double)dout[b * no + o] * l->w[o * ni + i];
            din[b * ni + i] = (float)gx;
        }
}

static uint64_t dense_flops(const dt_layer *l) { return 2ULL * l->nw; }

static const dt_key_def dense_keys[] = {
    {"output", DT_KEY_INT, DT_SPEC_KEY(dense.outputs), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    DT_FUSED_KEYS,
    {0}};

static int dense_weight_dims(const dt_layer *l, size_t dims[4]) {
    dims[0] = (size_t)l->spec.dense.outputs;
    dims[1] = dt_shape_size(l->in);
    return 2;
}

const dt_layer_ops dt_dense_ops = {
    .name = "connected",
    .keys = dense_keys,
    .setup = dense_setup,
    .saved_floats = dt_layer_no_floats,
    .workspace_floats = dense_workspace_floats,
    .init = dense_init,
    .forward = dense_forward,
    .backward = dense_backward,
    .forward_ref = dense_forward_ref,
    .backward_ref = dense_backward_ref,
    .flops = dense_flops,
    .destroy = dt_dnnl_destroy,
    .optional_wgrad = 1,
    .caps = DT_LAYER_CAP_FACTORS,
    .weight_dims = dense_weight_dims,
};
