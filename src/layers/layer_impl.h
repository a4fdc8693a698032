/* Internal to src/layers: the helpers the layer files share (setup
 * validation, init, vectorisable reductions). */
#ifndef DT_LAYERS_LAYER_IMPL_H
#define DT_LAYERS_LAYER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/layer.h"
#include "dtrain/rng.h"
#include "dtrain/status.h"

/* Records DT_ERR_CONFIG "line N: [section] <message>" and returns it. */
dt_status dt_layer_config_error(const dt_layer *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Every dimension of s is >= 1 and the per-sample size fits in an int (so
 * offsets inside one sample and BLAS dimensions never overflow). `what`
 * names the shape ("input", "output") in the message. */
dt_status dt_layer_check_shape(const dt_layer *l, dt_shape s, const char *what);

/* *out = a * b with the overflow reported as a config error. */
dt_status dt_layer_mul(const dt_layer *l, size_t *out, size_t a, size_t b, const char *what);

/* Validates spec size/stride/pad of a square sliding window over l->in and
 * gives the output height and width floor((n + 2p + e - k) / s) + 1 (e:
 * spec.pad_extra). */
dt_status dt_layer_window_setup(const dt_layer *l, int *oh, int *ow);

/* Setup of a layer whose output shape is its input shape, without
 * parameters or state. */
dt_status dt_layer_setup_same(dt_layer *l);

/* For ops tables: no saved values / workspace / parameters; flops = size. */
size_t dt_layer_no_floats(const dt_layer *l, int batch);
void dt_layer_init_none(dt_layer *l, dt_rng *rng);
uint64_t dt_layer_flops_elems(const dt_layer *l);

/* x[i] ~ U(-bound, bound), PyTorch's default init for conv and linear. */
void dt_layer_fill_uniform(float *x, size_t n, float bound, dt_rng *rng);

/* The memory-bound passes (activations, batch norm, pooling, shortcut) run
 * as OpenMP loops on the threads oneDNN uses (the CLI's --threads), split by
 * element, plane or channel so that every value is computed by one thread in
 * the same order whatever the thread count. Loops over fewer floats than
 * this stay on one thread: starting the team would cost more than it saves. */
enum { DT_LAYER_PAR_FLOATS = 1 << 15 };

/* dst (B, s) in layout `to` <- src (B, s) in layout `from` (a blocked
 * layout's k dividing s.c); a copy when they agree. */
void dt_layout_convert(float *dst, dt_layout to, const float *src, dt_layout from, int batch, dt_shape s);

/* Offset of value (b, c, h, w) of a (B, s) tensor in a blocked layout of
 * k channels a block. */
static inline size_t dt_blocked_at(dt_shape s, int k, int b, int c, int h, int w) {
    size_t cb = (size_t)b * (size_t)(s.c / k) + (size_t)(c / k);
    return ((cb * (size_t)s.h + (size_t)h) * (size_t)s.w + (size_t)w) * (size_t)k + (size_t)(c % k);
}

/* Blocked passes are written once for a block width k, as DT_BLOCK_PASS
 * functions, and specialised by calling them with a constant:
 * DT_BLOCK_DISPATCH(k, f(args, K)) runs f with K = 8 or 16 (each call is
 * inlined, so its lane loops are fixed-length and vectorise). */
#define DT_BLOCK_PASS static inline __attribute__((always_inline)) void
#define DT_BLOCK_DISPATCH(k, call_with_K) \
    do {                                   \
        if ((k) == 8) {                    \
            enum { K = 8 };                \
            call_with_K;                   \
        } else {                           \
            enum { K = 16 };               \
            call_with_K;                   \
        }                                  \
    } while (0)

/* [convolutional]'s sgemm path, which it falls back to where oneDNN cannot
 * run (exposed so that tests reach it: oneDNN runs every shape they make).
 * The contracts of ops->forward and ops->backward (ws: workspace_floats). */
void dt_conv_forward_gemm(dt_layer *l, float *out, const float *in, int batch, float *ws);
void dt_conv_backward_gemm(dt_layer *l, float *din, const float *dout, const float *in, int batch, float *ws);

/* Rules of ops->layouts that do not depend on the layer. */
dt_layout_rule dt_layout_follow(const dt_layer *l);
dt_layout_rule dt_layout_any(const dt_layer *l);

/* Activations the net keeps in bf16 (l->in_bf16, out_bf16): value i of a
 * float buffer holding bf16 values (2 bytes each, upper half of an f32),
 * read as f32 and written rounded to nearest even (NaN stays NaN). */
static inline float dt_bf16_get(const float *buf, size_t i) {
    union { uint32_t u; float f; } v = {(uint32_t)((const uint16_t *)(const void *)buf)[i] << 16};
    return v.f;
}
static inline uint16_t dt_bf16_of(float x) {
    union { float f; uint32_t u; } v = {x};
    uint32_t rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1)) >> 16, nan = (v.u >> 16) | 0x40;
    return (uint16_t)((v.u & 0x7fffffffu) > 0x7f800000u ? nan : rounded); /* a select: vectorises */
}
static inline void dt_bf16_set(float *buf, size_t i, float x) { ((uint16_t *)(void *)buf)[i] = dt_bf16_of(x); }

/* dst (n) <- src (n), threaded as the passes above. */
void dt_layer_copy(float *dst, const float *src, size_t n);

/* Sum of n floats: float partial sums in independent lanes (so the
 * compiler vectorises them) folded into a double. */
double dt_layer_sum(const float *x, size_t n);
/* The same for sum (x - mean)^2. */
double dt_layer_centred_sq(const float *x, float mean, size_t n);
/* *sum_dy += sum g and *sum_dyx += sum g (x - mean), g = dy where mask > 0
 * and 0 elsewhere (mask NULL: g = dy): batch norm's backward sums, the
 * mask a fused ReLU's output. */
void dt_layer_grad_sums(const float *dy, const float *mask, const float *x, float mean, size_t n,
                        double *sum_dy, double *sum_dyx);

#endif
