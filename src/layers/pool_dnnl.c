/* [maxpool] on bf16 activations (l->in_bf16: the net keeps the input and
 * output in bf16, nChw16c or nChw8c, between bf16 layers), by oneDNN's max
 * pooling primitive (declared in dnnl_layer.h).
 *
 * Same windows as pool.c: size K, stride S, P padded cells before and P + E
 * after (E = pad_extra, Darknet's odd total padding), so OH = (H + 2P + E -
 * K) / S + 1 is oneDNN's own output size for padding_l P, padding_r P + E;
 * oneDNN's max pooling never picks a padded cell, and pool_setup keeps
 * every window on a real one. The maximum of bf16 values is exact. The
 * training forward records each window's winner in the plan's workspace
 * (oneDNN's layout; pool.c's l->saved is unused here), which backward reads
 * to route dout to it.
 *
 * A fixed plan per batch size (dnnl_layer.h): the training forward, the
 * evaluation forward (no workspace) and backward. */
#include <oneapi/dnnl/dnnl.h>

#include "layers/dnnl_layer.h"

/* Passes, and the memory objects of their arguments. */
enum { P_TRAIN, P_EVAL, P_BWD, P_COUNT };
enum { M_SRC, M_DST, M_DDST, M_DSRC, M_WS, M_COUNT };

_Static_assert(P_COUNT <= DT_DNNL_PASSES && M_COUNT <= DT_DNNL_MEMS, "a fixed plan holds max pooling's");

/* The pooling descriptor of l for prop (forward_training, _inference, or
 * backward) over src (B, C, H, W) and dst (B, C, OH, OW). */
static dnnl_status_t pool_desc(dnnl_pooling_v2_desc_t *od, dnnl_prop_kind_t prop, const dt_layer *l,
                               const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst) {
    const dt_layer_spec *s = &l->spec;
    dnnl_dims_t strides = {s->stride, s->stride}, kernel = {s->size, s->size}, dilation = {0, 0};
    dnnl_dims_t pad_l = {s->pad, s->pad}, pad_r = {s->pad + s->pad_extra, s->pad + s->pad_extra};
    if (prop == dnnl_backward)
        return dnnl_pooling_v2_backward_desc_init(od, dnnl_pooling_max, src, dst, strides, kernel, dilation,
                                                  pad_l, pad_r);
    return dnnl_pooling_v2_forward_desc_init(od, prop, dnnl_pooling_max, src, dst, strides, kernel, dilation,
                                             pad_l, pad_r);
}

/* p->prim[pass] from the descriptor of prop (hint: the training forward's). */
static dt_status pool_prim(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, int pass, dnnl_prop_kind_t prop,
                           const dt_layer *l, const dnnl_memory_desc_t *md, const_dnnl_primitive_desc_t hint,
                           dnnl_primitive_desc_t *keep) {
    dnnl_pooling_v2_desc_t od;
    dnnl_primitive_desc_t pd;
    DT_DNNL_TRY(pool_desc(&od, prop, l, &md[0], &md[1]));
    DT_DNNL_TRY(dnnl_primitive_desc_create(&pd, &od, c->attr, c->engine, hint));
    dt_status s = dt_dnnl_fixed_prim(c, p, pass, pd);
    if (keep && s == DT_OK)
        *keep = pd;
    else
        (void)dnnl_primitive_desc_destroy(pd);
    return s;
}

/* The three primitives, the workspace and the memory objects of l at `batch`. */
static dt_status pool_build(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, const dt_layer *l, int batch) {
    dnnl_memory_desc_t md[2]; /* src (B, C, H, W), dst (B, C, OH, OW): bf16, l's blocked layout */
    dnnl_dims_t src = {batch, l->in.c, l->in.h, l->in.w}, dst = {batch, l->out.c, l->out.h, l->out.w};
    dnnl_format_tag_t tag = l->in_layout == DT_LAYOUT_NCHW16C ? dnnl_nChw16c : dnnl_nChw8c;
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&md[0], 4, src, dnnl_bf16, tag));
    DT_DNNL_TRY(dnnl_memory_desc_init_by_tag(&md[1], 4, dst, dnnl_bf16, tag));
    dnnl_primitive_desc_t train = NULL;
    DT_TRY(pool_prim(c, p, P_TRAIN, dnnl_forward_training, l, md, NULL, &train));
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(train, dnnl_query_workspace_md, 0);
    dt_status s = DT_OK;
    if (!ws || dnnl_memory_desc_get_size(ws) == 0)
        s = dt_fail(DT_ERR_INTERNAL, "oneDNN max pooling: no workspace");
    else if (dnnl_memory_create(&p->mem[M_WS], ws, c->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        s = dt_fail(DT_ERR_NOMEM, "oneDNN max pooling: workspace");
    if (s == DT_OK) s = pool_prim(c, p, P_BWD, dnnl_backward, l, md, train, NULL);
    (void)dnnl_primitive_desc_destroy(train);
    DT_TRY(s);
    DT_TRY(pool_prim(c, p, P_EVAL, dnnl_forward_inference, l, md, NULL, NULL));
    for (int i = 0; i < M_WS; i++)
        DT_DNNL_TRY(dnnl_memory_create(&p->mem[i], &md[i == M_SRC || i == M_DSRC ? 0 : 1], c->engine,
                                       DNNL_MEMORY_NONE));
    return DT_OK;
}

int dt_pool_dnnl_supported(const dt_layer *l) { return dt_dnnl_fixed_supported(l, pool_build); }

dt_status dt_pool_dnnl_forward(dt_layer *l, float *out, const float *in, int batch, int train) {
    dt_dnnl_fixed_plan *p;
    DT_TRY(dt_dnnl_fixed_get(l, batch, pool_build, "oneDNN max pooling", &p));
    DT_TRY(dt_dnnl_fixed_bind(p, M_SRC, in));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DST, out));
    int args[] = {DNNL_ARG_SRC, M_SRC, DNNL_ARG_DST, M_DST, DNNL_ARG_WORKSPACE, M_WS};
    return dt_dnnl_fixed_run(l, p, train ? P_TRAIN : P_EVAL, train ? 3 : 2, args);
}

dt_status dt_pool_dnnl_backward(dt_layer *l, float *din, const float *dout, int batch) {
    dt_dnnl_fixed_plan *p;
    DT_TRY(dt_dnnl_fixed_get(l, batch, pool_build, "oneDNN max pooling", &p));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DDST, dout));
    DT_TRY(dt_dnnl_fixed_bind(p, M_DSRC, din));
    int args[] = {DNNL_ARG_DIFF_DST, M_DDST, DNNL_ARG_DIFF_SRC, M_DSRC, DNNL_ARG_WORKSPACE, M_WS};
    return dt_dnnl_fixed_run(l, p, P_BWD, 3, args);
}
