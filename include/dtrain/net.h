/* A network: a graph of layers over flat parameter, gradient and state blocks.
 *
 * Layers are in topological order: each reads the outputs of earlier layers
 * (spec.inputs; by default the previous one), an output may feed several
 * later layers, and the last layer is the softmax. Backward runs the layers
 * last to first and sums the gradients of an output that feeds several.
 *
 * Memory (all owned by the net, allocated once at create for max_batch):
 *   params (nparams)   every layer's w then b, in layer order
 *   grads  (nparams)   same layout; backward overwrites it
 *   state  (nstate)    non-trainable buffers (BN running stats)
 *   act[i] (max_batch, layer i out)  forward outputs, in layer i's out_layout
 *          (blocked between a ResNet's convolutions; the logits and probs
 *          are NCHW); a ReLU folded into the layer it reads (`folded`)
 *          shares that layer's buffer; act[nlayers-1] = probs
 *   gbuf[s] (max_batch, largest activation), ngbuf of them: the gradients
 *          of outputs while backward needs them; which layer uses which is
 *          planned at create (a chain needs 2, a residual block 3)
 *   saved / workspace  per-layer saved values and one shared scratch area
 * Layers hold views into these blocks. Allreduce, parameter-server sharding,
 * optimisers and checkpoints all work on the flat blocks. */
#ifndef DTRAIN_NET_H
#define DTRAIN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/layer.h"
#include "dtrain/model.h"
#include "dtrain/status.h"
#include "dtrain/timeline.h"

/* Called by dt_net_backward as soon as layer i's gradients are final (its
 * dw/db written), from the last layer to the first: the wait-free backprop
 * hook where a sync strategy starts communicating layer i. */
typedef void (*dt_grad_ready_fn)(void *ctx, int layer);

/* Backward's gradient buffers for layer i: its output gradient is in
 * gbuf[out]; input k's gradient is written to gbuf[in[k]] (-1: the input is
 * the data, no gradient), which is then added into that input layer's out
 * buffer when add[k] (the layer is not the first consumer to write it). */
typedef struct {
    int out;
    int in[DT_LAYER_MAX_INPUTS];
    unsigned char add[DT_LAYER_MAX_INPUTS];
} dt_grad_route;

typedef struct dt_net {
    int nlayers;
    dt_layer *layers;       /* (nlayers) */
    size_t *param_offset;   /* (nlayers + 1): layer i's w starts at params[param_offset[i]] */
    dt_shape input;
    int classes;            /* outputs of the final [softmax]; 0: none, a feature extractor */
    int max_batch;
    float *params, *grads;  /* (nparams); may be bound elsewhere (dt_net_bind_blocks) */
    float *own_params, *own_grads; /* (nparams) the blocks the net allocated (NULL once bound) */
    size_t nparams;
    float *state;           /* (nstate) */
    size_t nstate;
    float **act;            /* (nlayers) views, each (max_batch, out_i) */
    float **gbuf;           /* (ngbuf) views, each (max_batch, max activation) */
    int ngbuf;
    dt_grad_route *groute;  /* (nlayers) */
    unsigned char *caller_wgrad; /* (nlayers) 1: layer i's dw is NULL (dt_net_leave_weight_grad) */
    float *ws;              /* shared scratch (nws floats) */
    size_t nws;
    size_t bytes;           /* dt_net_bytes */
    uint64_t shape_hash;    /* identifies the architecture (checkpoints, ranks) */
    dt_precision precision; /* of the conv and connected layers' products */
    uint64_t step;          /* forward calls in training mode; drives dropout masks */
    uint64_t sample_base;   /* set by the caller before a training forward: the position of
                               the batch's first sample in the step's global batch (worker r
                               of step batch B: r x B, plus B' per earlier pass of B'), so
                               that ranks draw different dropout masks and crop windows, and
                               W workers draw those of one serial run of the global batch */
    /* During a grad_ready(i) call: layer i's input (batch, in_i) and output
     * gradient (batch, out_i), which the next layer down overwrites, in
     * layer i's in_layout and out_layout (NCHW for connected layers; bf16
     * where in_bf16/out_bf16, never for connected layers); for a
     * layer with a folded ReLU (relu_out) the gradient of the ReLU's output,
     * before the mask. */
    const float *bwd_in, *bwd_dout;
    int bwd_batch;
    dt_timeline *timeline;  /* each layer's training forward/backward span goes here (NULL: off) */
    void *blocks[5];        /* allocations behind act, gbuf, saved (freed at dt_net_free) */
    float *scores;          /* (max_batch, classes) with a [softmax] tree= only: the last forward's
                               leaf probabilities (dt_net_scores); NULL otherwise */
} dt_net;

/* Builds the layers of spec for batches up to max_batch, initialises the
 * parameters from seed (PyTorch's default init). Shape errors are
 * DT_ERR_CONFIG "FILE:LINE: ..."; a net whose dt_net_bytes is over 90% of
 * the machine's physical memory is refused with the estimate before
 * anything big is allocated (DT_ERR_NOMEM). */
dt_status dt_net_create(dt_net **out, const dt_model_spec *spec, int max_batch, uint64_t seed);

/* *bytes = dt_net_bytes of the net dt_net_create would build, found by shape
 * inference alone (nothing big is allocated; no memory check). Errors as
 * dt_net_create's. */
dt_status dt_net_estimate(size_t *bytes, const dt_model_spec *spec, int max_batch);
void dt_net_free(dt_net *net);

/* Runs the convolutions and connected layers in p from the next pass on
 * (spec->precision at create), and in bf16 keeps in bf16 the blocked
 * activations between layers that all handle it (dt_layer.in_bf16,
 * out_bf16: conv -> batch norm -> ReLU -> conv). Parameters are fp32 in
 * either, so a net switches freely between passes (not between a forward
 * and its backward). Errors: dt_precision_check's (the net is unchanged). */
dt_status dt_net_set_precision(dt_net *net, dt_precision p);

/* From now on, for the net's life, layer i's backward leaves its weight
 * gradient (at grads + param_offset[i], nw floats) to the caller, who
 * writes it after the backward (SFB rebuilds it from sufficient factors);
 * its other gradients stay the layer's. DT_ERR_USAGE for kinds that always
 * compute it and for i outside [0, nlayers). */
dt_status dt_net_leave_weight_grad(dt_net *net, int i);

/* The output of layer `from` (-1: the data x) in the last forward, in that
 * layer's out_layout. */
const float *dt_net_output(const dt_net *net, int from, const float *x);

/* Forward pass of x (batch, input) -> returns probabilities (batch, classes). */
const float *dt_net_forward(dt_net *net, const float *x, int batch, int train);

/* Cross-entropy of the last forward's probabilities against labels: returns
 * the summed loss and prepares the loss gradient for dt_net_backward. */
double dt_net_loss(dt_net *net, const dt_label *labels, int batch);

/* Backward pass after dt_net_loss: fills grads; calls ready(ctx, i) after
 * each layer i with parameters, last to first (ready may be NULL). */
void dt_net_backward(dt_net *net, const float *x, int batch, dt_grad_ready_fn ready, void *ctx);

/* Points the parameter and gradient blocks, and every layer's views into
 * them, at params and grads (nparams floats each) and frees the net's own
 * blocks. The parameters are taken as they are in params (copy them there
 * first); gradients are undefined until the next backward. A strategy binds
 * memory its peers share (the shared-memory allreduce); the buffers must
 * outlive the net's last pass (the net never frees them). */
void dt_net_bind_blocks(dt_net *net, float *params, float *grads);
/* The same for the gradient block alone (cheap: a strategy may move it
 * every step, as ps-ssp does through its ring of recent gradients). */
void dt_net_bind_grads(dt_net *net, float *grads);
/* Undoes the binding: blocks of the net's own again, the parameters copied
 * over (a net that outlives the strategy that bound it: the job API's
 * trained model). Gradients are undefined until the next backward. */
dt_status dt_net_own_blocks(dt_net *net);

/* Per-layer cost of one training step: a forward pass, the loss and a
 * backward pass of x (batch, input) with labels (batch), timing every layer
 * on its own, into fwd_s and bwd_s (seconds, nlayers each; the loss counts
 * as the softmax layer's backward, and the softmax layer's forward is its
 * own). Overwrites the activations and gradients like a training step.
 * Call it after a few warm-up steps: the first pass at a batch size builds
 * oneDNN's kernels. DT_ERR_USAGE for a batch outside [1, max batch]. */
dt_status dt_net_time_step(dt_net *net, const float *x, const dt_label *labels, int batch, double *fwd_s,
                           double *bwd_s);

/* The last forward's class scores (batch, classes), what accuracy, top-k
 * and predict rank: the softmax's probabilities; with [softmax] tree=
 * Darknet's hierarchy_predictions over the leaves (a node's probability is
 * its group's softmax times its parent's; inner nodes 0). */
const float *dt_net_scores(const dt_net *net);

/* Samples among the last forward's batch whose argmax of dt_net_scores
 * equals the label. */
int dt_net_count_correct(const dt_net *net, const dt_label *labels, int batch);

/* Forward FLOPs of one sample (sum of the layers'). */
uint64_t dt_net_flops(const dt_net *net);

/* Bytes the net and its optimiser allocate for max_batch: parameters,
 * gradients and momentum (3 x nparams), state, activations, the
 * gradient buffers, saved values and the shared workspace (im2col
 * columns). Not counted: oneDNN's own blocked-layout copies and scratchpads
 * of convolutions, the data set and the loader's batch buffers. */
size_t dt_net_bytes(const dt_net *net);

#endif
