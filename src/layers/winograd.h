/* Internal to src/layers: [convolutional]'s Winograd path, F(4x4, 3x3)
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
 * 2016), for the 3x3 convolutions of stride 1 and padding 1 that make up
 * most of a ResNet, with AVX2's 256-bit FMAs: on CPUs whose activations are
 * nChw8c (AVX2 without AVX-512: there oneDNN 2.6 has no Winograd kernels of
 * its own and its direct kernels run at 75-90 % of the FMA peak, so only
 * fewer multiplications make them faster), and on nChw16c where 256-bit
 * FMAs reach the CPU's peak (Zen 4, whose 512-bit FMAs are two halves;
 * there they beat oneDNN's AVX-512 Winograd). A kernel works on 8 channels
 * at a time, one or two of them to a cell of the layout's block.
 *
 * Each 4x4 output tile is A^T [(G g G^T) . (B^T d B)] A for the 6x6 input
 * tile d around it: 36 products per tile and channel pair instead of 144
 * (F(2x2, 3x3), which this replaced, needs 64 for the same 16 outputs), a
 * batched matrix product over the 36 positions of the tile, done here a
 * block of tiles at a time so that the transformed tiles stay in cache.
 * Backward-data is the same product with the kernel flipped and its
 * channels swapped; backward-weights multiplies the transformed inputs by
 * the transformed output gradients and brings the 6x6 sums back to 3x3
 * through G^T . G. Results differ from the direct convolution's by
 * rounding: some ten times a direct sum's, as the transforms scale values
 * by up to 8 and 1/24 (a few 1e-6 of the output's scale, 1e-5 over 256
 * channels; tests/test_layers_ref.c bounds them).
 *
 * Every function computes the whole result with the contracts of
 * ops->forward and ops->backward (src/layers/layer_impl.h): out, din, dw
 * and db overwritten; din may be NULL. They return DT_OK, or an error
 * when scratch memory cannot be had, with the outputs unspecified: the
 * caller then runs another path, which overwrites them all. */
#ifndef DT_LAYERS_WINOGRAD_H
#define DT_LAYERS_WINOGRAD_H

#include "dtrain/layer.h"
#include "dtrain/status.h"

/* Which layers run here: dt_layer_winograd (include/dtrain/layer.h). */

/* out (B, F, H, W) <- in (B, C, H, W), both in l->in_layout (nChw8c or
 * nChw16c), weights l->w (F, C, 3, 3) and bias l->b (F) when l->nb. */
dt_status dt_winograd_forward(const dt_layer *l, float *out, const float *in, int batch);

/* l->dw (F, C, 3, 3), l->db and, unless NULL, din (B, C, H, W) <- dout
 * (B, F, H, W), given the forward's in; l->in_layout as forward. */
dt_status dt_winograd_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch);

#endif
