/* Shared-memory allreduce among workers on one machine (MPI-3 shared
 * windows, MPI_Win_allocate_shared), fused with the optimiser step.
 *
 * One window holds every worker's gradient slot and a single copy of the
 * parameters and the optimiser's state, bound as the workers' own blocks
 * (dt_net_bind_blocks, dt_trainer_bind_opt_state): the backward pass writes
 * a worker's gradients straight into its slot. At the end of a step, once
 * every slot is final, worker r takes shard r of the parameters
 * (dt_shard_range; cut at tensor boundaries for LARS and LAMB, whose
 * trust ratios need whole tensors: dt_optim_align): it sums the shard over
 * the W slots block by block into its own slot's part of the shard, which
 * no peer reads (scaled to the average), and runs the optimiser on each
 * block of the shared parameters and state, or once on the whole shard for
 * LARS and LAMB. Nothing is copied: a worker reads (W-1)/W of
 * the gradients from its peers' slots and updates 1/W of the parameters,
 * where the ring sends and receives 2 (W-1)/W of them through MPI (a copy
 * into and out of the transport each) and then every worker updates all
 * of them.
 *
 * Across hosts (the hierarchical allreduce, Horovod's): the window is one
 * host's, and between the sums and the update worker r runs a ring
 * allreduce of its shard's sums with worker r of every other host (the
 * cross group: every host has the same workers, so the same shards), so
 * each host's link carries 2 (H-1)/H of the gradients once, split over its
 * W workers, instead of every worker's ring crossing it.
 *
 * Synchronisation is MPI's: a barrier before the update (every slot final)
 * and one after it (every chunk updated, so the next forward reads whole
 * parameters and no slot is read again until the next step's update). The
 * barriers wait through dt_group_wait, so a missing worker is named.
 *
 * The sums are plain CPU work: run beside backprop on a machine whose
 * cores all compute, they would take a core from it, so they wait for the
 * end of the step rather than start with each fusion bucket.
 *
 * Layout of the window (floats; stride = nparams rounded up to a cache
 * line): slot q at q * stride for q < W, then the parameters, then the
 * optimiser's nslots x n state (slot-major, as the trainer's). */
#ifndef DTRAIN_COMM_SHM_H
#define DTRAIN_COMM_SHM_H

#include <stddef.h>

#include "dtrain/optim.h"
#include "group.h"

typedef struct {
    MPI_Win win;
    int have_win, locked;
    int member, members; /* this worker's index among the host's workers (its slot), and their
                            count: dt_group's, copied */
    size_t n, stride;    /* floats per block, floats between blocks */
    float *base;         /* slot 0 */
    float *params;       /* (n) shared parameters */
    float *opt_state;    /* (nslots, n) shared optimiser state */
    size_t lo, hi;       /* this worker's shard */
    dt_group *cross;     /* this shard's workers on the other hosts, or NULL (not owned) */
    dt_gc_kind wire;     /* how cross's ring sends (ring.h) */
    float *ring_tmp;     /* cross's ring scratch */
    const dt_optim *optim;
    char what[96];       /* the barrier waited for (stall messages) */
} dt_shm;

/* Maps the window for n-float blocks and fills its parameters and state
 * from worker 0's params and opt_state (collective over g's workers, who
 * must all be on one host: topo.h). cross: NULL, or the group of this
 * worker's local index on every host (all hosts with g's size; kept, must
 * outlive s); wire: DT_GC_BF16 or DT_GC_FP16 to send cross's ring in 16-bit
 * words. o: the optimiser over the net's vector (kept; must outlive s). */
dt_status dt_shm_create(dt_shm *s, dt_group *g, dt_group *cross, dt_gc_kind wire, const dt_optim *o, size_t n,
                        const float *params, const float *opt_state);

/* This worker's gradient slot (n floats). */
float *dt_shm_slot(const dt_shm *s);

/* The step's update: waits for every worker's slot, runs the optimiser
 * with scale * the sum over the slots (and, with cross, over the hosts) on
 * this worker's shard, then waits for every worker's shard. Enters the group's collectives itself; step
 * (1-based) names them and is the optimiser's step count. */
dt_status dt_shm_update(dt_shm *s, dt_group *g, float lr, float scale, long step);

/* Unmaps the window. The free is collective: pass collective = 0 unless
 * every worker ended the run at the same point (dt_sync.ended_together);
 * otherwise a peer may never join it, and the window stays mapped until
 * the process ends. */
void dt_shm_free(dt_shm *s, int collective);

#endif
