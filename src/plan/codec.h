/* Gradient compression on the wire (--grad-compression; the kinds are in
 * dtrain/dist.h): the arithmetic, no MPI.
 *
 * Halves (bf16, fp16): a float buffer is encoded into 16-bit words before
 * it is sent and decoded (or decoded and added, into an fp32 sum) where it
 * is received. Both round to nearest, ties to even, so encoding a decoded
 * value gives the same word back: a value forwarded unchanged (the ring's
 * allgather) keeps its bits on every worker.
 *
 * Top-k with error feedback (Stich et al., Lin et al.'s deep gradient
 * compression without its momentum correction): per bucket of n floats
 * the worker adds its residual (what it kept back before) to the gradient,
 * sends the k = dt_topk_count(R, n) largest magnitudes as (index, value)
 * pairs, and keeps the rest as the next residual. Nothing is dropped, only
 * delayed. The pairs are words of a uint32 array: pair j is
 * (pairs[2j] = index, pairs[2j + 1] = the float's bits). */
#ifndef DTRAIN_PLAN_CODEC_H
#define DTRAIN_PLAN_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/plan.h"

/* Whether the kind is a 16-bit encoding (bf16, fp16). */
static inline int dt_gc_is_half(dt_gc_kind k) { return k == DT_GC_BF16 || k == DT_GC_FP16; }

/* One float to / from kind's 16-bit word (kind bf16 or fp16). */
uint16_t dt_half_from_float(dt_gc_kind kind, float x);
float dt_half_to_float(dt_gc_kind kind, uint16_t h);

/* h (n) <- x (n) encoded; x (n) <- h (n) decoded; acc (n) += h (n) decoded;
 * x (n) <- x rounded to the kind (decode of encode, in place). */
void dt_half_encode(dt_gc_kind kind, const float *x, uint16_t *h, size_t n);
void dt_half_decode(dt_gc_kind kind, const uint16_t *h, float *x, size_t n);
void dt_half_add(dt_gc_kind kind, const uint16_t *h, float *acc, size_t n);
void dt_half_round(dt_gc_kind kind, float *x, size_t n);

/* Error feedback and selection for one bucket: g (n) += residual (n); the
 * k largest |g| (ties: lower index first) go to pairs (2k words) in index
 * order; residual <- g with those k zeroed; g is left zeroed, ready for
 * the gathered pairs (dt_topk_add; zeroed in the same pass, not one of
 * its own). k <= n. */
void dt_topk_encode(float *g, float *residual, size_t n, size_t k, uint32_t *pairs);

/* x (n) += scale x the values of npairs pairs at their indices (each < n):
 * the average scaled pair by pair, not by a pass over x of its own. */
void dt_topk_add(const uint32_t *pairs, size_t npairs, float scale, float *x);

#endif
