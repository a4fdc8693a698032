/* Internal to src/layers: a layer's forward and backward run by oneDNN
 * primitives (see dnnl_layer.c for why and how). [convolutional] always runs
 * here; [connected] does in bf16 (its fp32 path is one sgemm each way).
 *
 * A kind describes itself by a dt_dnnl_kind: the dimensions of its source,
 * weights and destination, and oneDNN's op descriptor of each pass. Each
 * call computes the whole result, with the same contract as the layer's
 * forward/backward (buffers owned by the net in its layouts, dw/db
 * overwritten, din may be NULL), and returns DT_OK; or it returns an error
 * (oneDNN cannot run this shape or precision, or creating its objects
 * failed) and the caller computes the result its own way (in fp32), which
 * overwrites every output. A failure for a batch size is remembered, so the
 * fallback costs nothing more on later calls.
 *
 * Precision (l->precision): fp32 runs every tensor in f32. bf16 runs the
 * source, weights and destination (and their gradients in backward-data) in
 * bf16 and accumulates in f32; the weight and bias gradients are f32. The
 * net's buffers are f32, and reorders convert at the layer's edges, except
 * activations the net keeps in bf16 (l->in_bf16, l->out_bf16): those are
 * read and written as they are.
 *
 * The oneDNN objects live in l->impl, created by the first call for a batch
 * size and freed by dt_dnnl_destroy. oneDNN uses OpenMP with
 * omp_get_max_threads() threads; the CLI sets that with OpenBLAS's count. */
#ifndef DT_LAYERS_DNNL_LAYER_H
#define DT_LAYERS_DNNL_LAYER_H

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>

#include "dtrain/layer.h"
#include "dtrain/status.h"

/* Returns the dt_status of a failed oneDNN call (DT_ERR_NOMEM when it ran
 * out of memory, else DT_ERR_INTERNAL) with a message naming the call. */
dt_status dt_dnnl_failed(dnnl_status_t s, const char *call);

/* Returns a failed oneDNN call's dt_status from the caller. */
#define DT_DNNL_TRY(call)                                                       \
    do {                                                                        \
        dnnl_status_t dt_dnnl_s_ = (call);                                      \
        if (dt_dnnl_s_ != dnnl_success) return dt_dnnl_failed(dt_dnnl_s_, #call); \
    } while (0)

/* The handles every oneDNN layer holds: a CPU engine, its stream and the
 * attribute every primitive is created with (a user-mode scratchpad,
 * because oneDNN's library mode allocates one on every execution). */
typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_attr_t attr;
    dt_status failed; /* creation failed: every later call of the layer fails so */
} dt_dnnl_ctx;

/* Creates c's handles (c zeroed before); returns and records the status. */
dt_status dt_dnnl_ctx_init(dt_dnnl_ctx *c);
/* Frees the handles c holds (any may be NULL). */
void dt_dnnl_ctx_free(dt_dnnl_ctx *c);

/* The three passes a kind describes. */
typedef enum { DT_DNNL_FORWARD, DT_DNNL_BACKWARD_WEIGHTS, DT_DNNL_BACKWARD_DATA } dt_dnnl_pass;

/* One layer at one batch size, as dt_dnnl_kind.describe gives it: the
 * plain dims of source (B, ...), weights and destination, each of `ndims`
 * (4: NCHW and OIHW; 2: NC and OI), and a convolution's geometry. */
typedef struct {
    int ndims;
    int wei_ndims; /* 0: ndims; 5: a grouped convolution's (G, F/G, C/G, K, K) */
    dnnl_dims_t src, wei, dst;
    dnnl_dims_t strides, dilates, pad_l, pad_r; /* convolutions only (dilates: 0 = adjacent taps) */
    /* Convolutions: try oneDNN's Winograd for every pass first (direct where
     * it has none for the shape); set by the kind's describe. */
    int winograd;
} dt_dnnl_dims;

/* The descriptors a kind builds its op descriptors from: layout "any" in
 * the compute type (src, wei, dst) or f32 (the weight gradient diff_wei);
 * bias is the plain f32 (F), or NULL when the layer has none. */
typedef struct {
    const dnnl_memory_desc_t *src, *wei, *dst, *diff_wei, *bias;
    const dt_dnnl_dims *dims;
} dt_dnnl_descs;

/* oneDNN's op descriptors of the kinds that run here. */
typedef union {
    dnnl_convolution_desc_t conv;
    dnnl_inner_product_desc_t ip;
} dt_dnnl_op_desc;

typedef struct {
    const char *what; /* names the kind in allocation errors */
    int plain_weights; /* weights and their gradient in the plain layout, not "any" */
    void (*describe)(const dt_layer *l, int batch, dt_dnnl_dims *dims);
    /* Initialises *desc for pass from d (a oneDNN *_desc_init call). */
    dnnl_status_t (*op_desc)(dt_dnnl_op_desc *desc, dt_dnnl_pass pass, const dt_dnnl_descs *d);
} dt_dnnl_kind;

/* out (B, dst) <- in (B, src), weights l->w, bias l->b. */
dt_status dt_dnnl_forward(dt_layer *l, const dt_dnnl_kind *k, float *out, const float *in,
                          int batch);

/* l->dw and l->db (when `weights`) and, unless NULL, din (B, src) <- dout
 * (B, dst), given the forward's input `in` (B, src). */
dt_status dt_dnnl_backward(dt_layer *l, const dt_dnnl_kind *k, float *din, const float *dout,
                           const float *in, int batch, int weights);

/* A forward of l ran another way (a convolution's Winograd path): the next
 * backward must not reuse the input and weight copies of oneDNN's last
 * forward, which may be a step old. No-op when l->impl is NULL. */
void dt_dnnl_forget_forward(dt_layer *l);

/* Frees l->impl and sets it to NULL; no-op when it is NULL. */
void dt_dnnl_destroy(dt_layer *l);

/* Layers whose oneDNN primitives take no weights to reorder (batch norm,
 * max pooling): per batch size a "fixed plan" of up to DT_DNNL_PASSES
 * primitives (training forward, evaluation forward, backward), each with
 * its scratchpad, and up to DT_DNNL_MEMS memory objects, which the kind's
 * build function creates (handles set on each call, or allocated: a
 * workspace). Planned per batch size like dnnl_layer.c's plans: NPLANS
 * kept, the least recently used one rebuilt. l->impl is a dt_dnnl_fixed. */
#define DT_DNNL_PASSES 3
#define DT_DNNL_MEMS 12

typedef struct {
    int batch; /* 0: unused */
    uint64_t used;
    dnnl_primitive_t prim[DT_DNNL_PASSES];
    dnnl_memory_t scratch[DT_DNNL_PASSES];
    dnnl_memory_t mem[DT_DNNL_MEMS];
} dt_dnnl_fixed_plan;

/* Creates p's primitives and memory objects for l at `batch`; on an error
 * the caller frees what it created. */
typedef dt_status (*dt_dnnl_fixed_build)(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, const dt_layer *l,
                                         int batch);

/* The plan of l at `batch` (built by `build` if there is none), l->impl
 * created on first use; `what` names the kind in allocation errors. */
dt_status dt_dnnl_fixed_get(dt_layer *l, int batch, dt_dnnl_fixed_build build, const char *what,
                            dt_dnnl_fixed_plan **pp);
/* For build functions: p->prim[pass] and its scratchpad from pd. */
dt_status dt_dnnl_fixed_prim(const dt_dnnl_ctx *c, dt_dnnl_fixed_plan *p, int pass, const_dnnl_primitive_desc_t pd);
/* Points p->mem[m] at x (oneDNN takes void *; inputs are only read). */
dt_status dt_dnnl_fixed_bind(dt_dnnl_fixed_plan *p, int m, const void *x);
/* Runs p->prim[pass] of l with n arguments: args[2i] a DNNL_ARG_*,
 * args[2i+1] the index of its memory object in p->mem; waits for it. */
dt_status dt_dnnl_fixed_run(dt_layer *l, dt_dnnl_fixed_plan *p, int pass, int n, const int *args);
/* 1 when `build` can build l's plan on this CPU (at batch 1): the kind's
 * bf16_acts asks, so the net keeps the activations fp32 where oneDNN has
 * no primitive for the shape instead of failing in a step. */
int dt_dnnl_fixed_supported(const dt_layer *l, dt_dnnl_fixed_build build);
/* Frees l->impl and sets it to NULL; no-op when it is NULL. */
void dt_dnnl_fixed_destroy(dt_layer *l);
/* Layers do not fail at run time: a bf16 pass whose objects could not be
 * created at a new batch size (out of memory; bf16 data has no other path)
 * stops the run with the error on stderr. */
void dt_dnnl_fixed_check(dt_status s, const char *what);

/* [batchnorm] on bf16 activations (l->in_bf16), by oneDNN's batch
 * normalisation (batchnorm_dnnl.c), with batchnorm.c's contract: out <- in
 * (train: batch statistics into l->saved, running ones updated; else the
 * running ones); din, dw, db <- dout after a training forward of the same
 * batch. dt_bn_dnnl_supported: oneDNN can (the kind's bf16_acts). */
dt_status dt_bn_dnnl_forward(dt_layer *l, float *out, const float *in, int batch, int train);
dt_status dt_bn_dnnl_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch);
int dt_bn_dnnl_supported(const dt_layer *l);

/* [maxpool] on bf16 activations (l->in_bf16), by oneDNN's max pooling
 * (pool_dnnl.c), with pool.c's contract: out (B, C, OH, OW) <- in (B, C,
 * H, W), both bf16 in l's blocked layout; din <- dout routed to each
 * window's maximum, after a training forward of the same batch (the
 * positions in the plan's workspace, not l->saved). */
dt_status dt_pool_dnnl_forward(dt_layer *l, float *out, const float *in, int batch, int train);
dt_status dt_pool_dnnl_backward(dt_layer *l, float *din, const float *dout, int batch);
int dt_pool_dnnl_supported(const dt_layer *l);

#endif
