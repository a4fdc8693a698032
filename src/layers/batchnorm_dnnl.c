/* [batchnorm] on bf16 activations (l->in_bf16: the net keeps the input and
 * output in bf16, nChw16c, between bf16 convolutions), by oneDNN's batch
 * normalisation primitive (declared in dnnl_layer.h).
 *
 * Same meaning as batchnorm.c's fp32 passes: batch statistics in f32 (mean
 * and biased variance over B*H*W, accumulated in f32 by oneDNN), gamma and
 * beta f32 (use_scale, use_shift), their gradients f32, the running
 * statistics updated here (the unbiased variance, as PyTorch), a folded
 * ReLU by oneDNN's fuse_norm_relu (its mask kept in the primitive's
 * workspace between forward and backward). Only the data and its gradients
 * are bf16. saved: mean (C) then variance (C) of the training forward (the
 * fp32 path keeps 1/std there; each path reads only its own).
 *
 * A fixed plan per batch size (dnnl_layer.h): primitives for the training
 * forward, the evaluation forward and backward, memory objects whose
 * handles are set on each call, and the workspace. */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/mem.h"
#include "layers/dnnl_layer.h"

/* Passes, and the memory objects of their arguments. */
enum { P_TRAIN, P_EVAL, P_BWD, P_COUNT };
enum { M_SRC, M_DST, M_DDST, M_DSRC, M_MEAN, M_VAR, M_SCALE, M_SHIFT, M_DSCALE, M_DSHIFT, M_WS, M_COUNT };

_Static_assert(P_COUNT <= DT_DNNL_PASSES && M_COUNT <= DT_DNNL_MEMS, "a fixed plan holds batch norm's");

/* The three primitives and the memory objects of l at `batch`. */
static dt_status bn_build(const dt_dnnl_ctx *d, dt_dnnl_fixed_plan *p, const dt_layer *l, int batch) {
    dnnl_memory_desc_t data, stat;
    dnnl_dims_t dims = {batch, l->in.c, l->in.h, l->in.w}, cdims = {l->in.c};
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&data, 4, dims, dnnl_bf16,
                                          l->in_layout == DT_LAYOUT_NCHW16C ? dnnl_nChw16c : dnnl_nChw8c));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&stat, 1, cdims, dnnl_f32, dnnl_a));
    unsigned relu = l->relu_out ? (unsigned)dnnl_fuse_norm_relu : 0u;
    unsigned flags = (unsigned)dnnl_use_scale | (unsigned)dnnl_use_shift | relu;
    float eps = l->spec.bn.eps;
    dnnl_batch_normalization_desc_t od;
    dnnl_primitive_desc_t train = NULL, pd = NULL;
    DT_DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&od, dnnl_forward_training, &data, eps, flags));
    DT_DNNL_TRY(dnnl_primitive_desc_create(&train, &od, d->attr, d->engine, NULL));
    dt_status s = dt_dnnl_fixed_prim(d, p, P_TRAIN, train);
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(train, dnnl_query_workspace_md, 0);
    if (s == DT_OK && relu && ws && dnnl_memory_desc_get_size(ws) > 0 &&
        dnnl_memory_create(&p->mem[M_WS], ws, d->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        s = dt_fail(DT_ERR_NOMEM, "oneDNN batch norm: workspace");
    if (s == DT_OK &&
        dnnl_batch_normalization_backward_desc_init(&od, dnnl_backward, &data, &data, eps, flags) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &od, d->attr, d->engine, train) == dnnl_success) {
        s = dt_dnnl_fixed_prim(d, p, P_BWD, pd);
        (void)dnnl_primitive_desc_destroy(pd);
    } else if (s == DT_OK) {
        s = dt_fail(DT_ERR_INTERNAL, "oneDNN batch norm: no backward primitive");
    }
    (void)dnnl_primitive_desc_destroy(train);
    DT_TRY(s);
    DT_DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&od, dnnl_forward_inference, &data, eps,
                                                        flags | (unsigned)dnnl_use_global_stats));
    DT_DNNL_TRY(dnnl_primitive_desc_create(&pd, &od, d->attr, d->engine, NULL));
    s = dt_dnnl_fixed_prim(d, p, P_EVAL, pd);
    (void)dnnl_primitive_desc_destroy(pd);
    DT_TRY(s);
    for (int i = 0; i < M_WS; i++)
        DT_DNNL_TRY(dnnl_memory_create(&p->mem[i], i <= M_DSRC ? &data : &stat, d->engine, DNNL_MEMORY_NONE));
    return DT_OK;
}

int dt_bn_dnnl_supported(const dt_layer *l) { return dt_dnnl_fixed_supported(l, bn_build); }

dt_status dt_bn_dnnl_forward(dt_layer *l, float *out, const float *in, int batch, int train) {
    dt_dnnl_fixed_plan *p;
    DT_TRY(dt_dnnl_fixed_get(l, batch, bn_build, "oneDNN batch norm", &p));
    int C = l->in.c;
    float *mean = train ? l->saved : l->state, *var = mean + C;
    DT_TRY(dt_dnnl_fixed_bind(p, M_SRC, in));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DST, out));
    DT_TRY(dt_dnnl_fixed_bind(p, M_MEAN, mean));
    DT_TRY(dt_dnnl_fixed_bind(p, M_VAR, var));
    DT_TRY(dt_dnnl_fixed_bind(p, M_SCALE, l->w));
    DT_TRY(dt_dnnl_fixed_bind(p, M_SHIFT, l->b));
    int args[] = {DNNL_ARG_SRC, M_SRC, DNNL_ARG_DST, M_DST, DNNL_ARG_MEAN, M_MEAN, DNNL_ARG_VARIANCE, M_VAR,
                  DNNL_ARG_SCALE, M_SCALE, DNNL_ARG_SHIFT, M_SHIFT, DNNL_ARG_WORKSPACE, M_WS};
    int n = train && p->mem[M_WS] ? 7 : 6;
    DT_TRY(dt_dnnl_fixed_run(l, p, train ? P_TRAIN : P_EVAL, n, args));
    if (!train) return DT_OK;
    float *rmean = l->state, *rvar = l->state + C, m = l->spec.bn.momentum;
    double count = (double)batch * (double)l->in.h * (double)l->in.w;
    float unbias = count > 1 ? (float)(count / (count - 1)) : 1.0f;
    for (int c = 0; c < C; c++) {
        rmean[c] = (1.0f - m) * rmean[c] + m * mean[c];
        rvar[c] = (1.0f - m) * rvar[c] + m * var[c] * unbias;
    }
    return DT_OK;
}

dt_status dt_bn_dnnl_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch) {
    dt_dnnl_fixed_plan *p;
    DT_TRY(dt_dnnl_fixed_get(l, batch, bn_build, "oneDNN batch norm", &p));
    int C = l->in.c;
    DT_TRY(dt_dnnl_fixed_bind(p, M_SRC, in));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DDST, dout));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DSRC, din));
    DT_TRY(dt_dnnl_fixed_bind(p, M_MEAN, l->saved));
    DT_TRY(dt_dnnl_fixed_bind(p, M_VAR, l->saved + C));
    DT_TRY(dt_dnnl_fixed_bind(p, M_SCALE, l->w));
    DT_TRY(dt_dnnl_fixed_bind(p, M_SHIFT, l->b)); /* not read, but oneDNN asks for it with use_shift */
    DT_TRY(dt_dnnl_fixed_bind(p, M_DSCALE, l->dw));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DSHIFT, l->db));
    int args[] = {DNNL_ARG_SRC,        M_SRC,   DNNL_ARG_DIFF_DST,   M_DDST,   DNNL_ARG_DIFF_SRC,   M_DSRC,
                  DNNL_ARG_MEAN,       M_MEAN,  DNNL_ARG_VARIANCE,   M_VAR,    DNNL_ARG_SCALE,      M_SCALE,
                  DNNL_ARG_SHIFT,      M_SHIFT, DNNL_ARG_DIFF_SCALE, M_DSCALE, DNNL_ARG_DIFF_SHIFT, M_DSHIFT,
                  DNNL_ARG_WORKSPACE,  M_WS};
    return dt_dnnl_fixed_run(l, p, P_BWD, p->mem[M_WS] ? 10 : 9, args);
}
