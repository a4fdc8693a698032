/* Sufficient-factor broadcasting (Poseidon, Project Adam) for the fully
 * connected layers a dt_comm_plan marks sfb.
 *
 * Per SFB layer (M outputs, N inputs) and step, every worker:
 *   capture  (in grad_ready, before the layer below overwrites them) copies
 *            its output gradients u (B, M) and inputs v (B, N) into rows of
 *            K = max batch, rows past B zero (so they add nothing);
 *   start    allgathers u and v over the workers: all_u (P K, M), all_v
 *            (P K, N), worker-major, as messages to and from each other
 *            worker in segments under the eager limit (segments.h: an
 *            MPI_Iallgather's rendezvous handshakes had the two directions
 *            take turns on a TCP link);
 *   rebuild  dw = all_u^T all_v (one GEMM) and db = column sums of all_u:
 *            the sum over workers of their local gradients, exactly what an
 *            allreduce of dw, db would give (up to float summation order).
 * The layer's own backward skips its dw GEMM (dt_net_leave_weight_grad). */
#ifndef DTRAIN_COMM_SFB_H
#define DTRAIN_COMM_SFB_H

#include "dtrain/dist.h"

typedef struct {
    int layer, M, N;
    float *u, *v;          /* (K, M), (K, N) this worker's factors */
    float *all_u, *all_v;  /* (P K, M), (P K, N) every worker's */
} dt_sfb_layer;

typedef struct {
    int n, K, P;
    dt_sfb_layer *layers;  /* (n) */
    int *index;            /* (nlayers) position in layers, -1 for other layers */
} dt_sfb;

/* Buffers for plan's SFB layers of net, whose weight gradients the net then
 * leaves to dt_sfb_rebuild (dt_net_leave_weight_grad). */
dt_status dt_sfb_create(dt_sfb *f, dt_net *net, const dt_comm_plan *plan, int P);
void dt_sfb_free(dt_sfb *f);
/* Copies layer's factors from the net's backward (call inside grad_ready). */
void dt_sfb_capture(dt_sfb *f, const dt_net *net, int layer);
/* Requests dt_sfb_start posts for every SFB layer: room for all of a
 * step's exchanges in flight at once. */
int dt_sfb_requests(const dt_sfb *f);
/* Starts the exchange of layer's factors among comm's P workers (ranks 0 ..
 * P - 1, this worker's own block copied in): *nreqs requests posted into
 * reqs (room for the layer's part of dt_sfb_requests). On failure none is
 * left pending. */
dt_status dt_sfb_start(dt_sfb *f, int layer, MPI_Comm comm, MPI_Request *reqs, int *nreqs);
/* After the allgathers: scale times the layer's summed dw and db into
 * net->grads (scale 1/P: the average). */
void dt_sfb_rebuild(const dt_sfb *f, int layer, dt_net *net, float scale);
/* Bytes one worker sends (= receives) per step for SFB layer `layer`, and
 * for all of them: half of dt_sfb_bytes, the plan's sent + received. */
double dt_sfb_layer_bytes_each_way(const dt_sfb *f, int layer);
double dt_sfb_bytes_each_way(const dt_sfb *f);

/* A worker strategy's start: the communication plan for cfg's mode with
 * c's workers at cfg's batch, the factor buffers, the plan written by
 * worker 0 to cfg->plan_out, and with SFB on its predicted bytes in
 * s->plan_bytes. */
dt_status dt_sfb_setup(dt_sync *s, dt_comm_plan *plan, dt_sfb *f, dt_net *net, const dt_dist_cfg *cfg,
                       const dt_comm *c);

#endif
