/* Internal to src/layers/conv.c: [convolutional] forward and backward run by
 * oneDNN's JIT convolutions (see conv_dnnl.c for why and how).
 *
 * Each call computes the whole result, with the same contract as the layer's
 * forward/backward (NCHW buffers owned by the net, dw/db overwritten, din may
 * be NULL), and returns DT_OK; or it returns an error (oneDNN cannot run this
 * shape, or creating its objects failed) and the caller computes the result
 * its own way, which overwrites every output. A failure for a batch size is
 * remembered, so the fallback costs nothing more on later calls.
 *
 * The oneDNN objects live in l->impl, created by the first call for a batch
 * size and freed by dt_conv_dnnl_destroy. oneDNN uses OpenMP with
 * omp_get_max_threads() threads; the CLI sets that with OpenBLAS's count. */
#ifndef DT_LAYERS_CONV_DNNL_H
#define DT_LAYERS_CONV_DNNL_H

#include "dtrain/layer.h"
#include "dtrain/status.h"

/* out (B, F, OH, OW) <- in (B, C, H, W), weights l->w (F, C, K, K), bias l->b (F). */
dt_status dt_conv_dnnl_forward(dt_layer *l, float *out, const float *in, int batch);

/* l->dw (F, C, K, K), l->db (F) and, unless NULL, din (B, C, H, W) <- dout
 * (B, F, OH, OW), given the forward's input in (B, C, H, W). */
dt_status dt_conv_dnnl_backward(dt_layer *l, float *din, const float *dout, const float *in,
                                int batch);

/* Frees l->impl and sets it to NULL; no-op when it is NULL. */
void dt_conv_dnnl_destroy(dt_layer *l);

#endif
