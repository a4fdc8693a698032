#include "shm.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/mem.h"
#include "ring.h"

/* Makes this worker's stores visible, waits for every worker to arrive,
 * and makes theirs visible to this worker. */
static dt_status barrier(dt_shm *s, dt_group *g) {
    MPI_Request req;
    DT_TRY(dt_group_enter(g, s->what));
    DT_TRY(dt_mpi_check(MPI_Win_sync(s->win), "MPI_Win_sync"));
    DT_TRY(dt_mpi_check(MPI_Ibarrier(g->comm.workers, &req), s->what));
    DT_TRY(dt_group_wait(g, &req, 1));
    return dt_mpi_check(MPI_Win_sync(s->win), "MPI_Win_sync");
}

dt_status dt_shm_create(dt_shm *s, dt_group *g, dt_group *cross, dt_gc_kind wire, const dt_optim *o, size_t n,
                        const float *params, const float *opt_state) {
    memset(s, 0, sizeof *s);
    s->optim = o;
    s->cross = cross;
    s->wire = wire;
    size_t nstate = (size_t)dt_optim_nslots(o) * n;
    s->member = g->member;
    s->members = g->members;
    s->n = n;
    s->stride = (n + 15) / 16 * 16;
    double bytes = ((double)(s->members + 1) * (double)s->stride + (double)nstate) * sizeof(float);
    if (bytes > (double)PTRDIFF_MAX / 2)
        return dt_fail(DT_ERR_USAGE, "shared-memory allreduce: %zu parameters make too large a window", n);
    MPI_Aint mine = s->member == 0 ? (MPI_Aint)bytes : 0, size;
    int disp;
    void *base;
    DT_TRY(dt_mpi_check(MPI_Win_allocate_shared(mine, sizeof(float), MPI_INFO_NULL, g->comm.workers, &base, &s->win),
                        "mapping the shared gradient window (MPI_Win_allocate_shared; "
                        "--allreduce-algo ring avoids it)"));
    s->have_win = 1;
    /* A window does not inherit the communicator's handler: errors must
     * come back to dt_mpi_check, not abort with MPI's own text. */
    DT_TRY(dt_mpi_check(MPI_Win_set_errhandler(s->win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler"));
    DT_TRY(dt_mpi_check(MPI_Win_shared_query(s->win, 0, &size, &disp, &base), "MPI_Win_shared_query"));
    if ((double)size < bytes) return dt_fail(DT_ERR_INTERNAL, "shared gradient window smaller than asked");
    s->base = base;
    s->params = s->base + (size_t)s->members * s->stride;
    s->opt_state = s->params + s->stride;
    /* A passive epoch for the whole run: MPI_Win_sync orders the workers'
     * loads and stores around the barriers. */
    DT_TRY(dt_mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win), "MPI_Win_lock_all"));
    s->locked = 1;
    dt_shard_range(s->n, s->members, s->member, &s->lo, &s->hi);
    s->lo = dt_optim_align(o, s->lo);
    s->hi = dt_optim_align(o, s->hi);
    if (cross) /* + 1: a shard may be empty */
        DT_TRY(dt_alloc_floats(&s->ring_tmp, dt_ring_scratch_floats(s->hi - s->lo, cross->members) + 1,
                               "hierarchical allreduce scratch"));
    if (s->member == 0) {
        memcpy(s->params, params, sizeof(float) * n);
        memcpy(s->opt_state, opt_state, sizeof(float) * nstate);
    }
    snprintf(s->what, sizeof s->what, "shared-memory window set-up");
    return barrier(s, g);
}

float *dt_shm_slot(const dt_shm *s) { return s->base + (size_t)s->member * s->stride; }

dt_status dt_shm_update(dt_shm *s, dt_group *g, float lr, float scale, long step) {
    snprintf(s->what, sizeof s->what, "shared-memory gradients of step %ld", step);
    DT_TRY(barrier(s, g));
    size_t lo = s->lo, hi = s->hi;
    /* LARS and LAMB need each tensor's sums whole before its step, and the
     * hosts' sums must meet first: the sums go to this worker's own slot,
     * over its shard, which no peer reads (each reads its own shard of the
     * slots), and the optimiser runs once on the whole shard. */
    int whole = dt_optim_needs_norms(dt_optim_config(s->optim)->kind) || s->cross;
    float *own = dt_shm_slot(s);
    float local_scale = s->cross ? 1.0f : scale; /* across hosts the ring scales */
    dt_optim_vec v = {s->params, own, s->opt_state, s->n, 0};
    enum { BLOCK = 1024 }; /* 4 KiB of sums: they stay in L1 while the slots stream by */
    float sum[BLOCK];
    for (size_t i0 = lo; i0 < hi; i0 += BLOCK) {
        size_t m = hi - i0 < BLOCK ? hi - i0 : BLOCK;
        memcpy(sum, s->base + i0, sizeof(float) * m);
        for (int q = 1; q < s->members; q++) {
            const float *x = s->base + (size_t)q * s->stride + i0;
            for (size_t i = 0; i < m; i++) sum[i] += x[i];
        }
        for (size_t i = 0; i < m; i++) sum[i] *= local_scale;
        if (whole) {
            memcpy(own + i0, sum, sizeof(float) * m);
        } else {
            dt_optim_vec block = {s->params + i0, sum, s->opt_state + i0, s->n, i0};
            dt_optim_update(s->optim, lr, step, block, 0, m);
        }
    }
    if (s->cross) {
        snprintf(s->what, sizeof s->what, "gradients of step %ld across hosts", step);
        DT_TRY(dt_group_enter(s->cross, s->what));
        DT_TRY(dt_ring_allreduce(s->cross, own + lo, hi - lo, s->ring_tmp, scale, s->wire));
    }
    if (whole) dt_optim_update(s->optim, lr, step, v, lo, hi);
    snprintf(s->what, sizeof s->what, "shared-memory update of step %ld", step);
    return barrier(s, g);
}

void dt_shm_free(dt_shm *s, int collective) {
    dt_free(s->ring_tmp);
    s->ring_tmp = NULL;
    if (!s->have_win || !collective) return;
    /* Teardown: a failure here cannot change the run's result; say it. */
    if (s->locked && MPI_Win_unlock_all(s->win) != MPI_SUCCESS)
        fprintf(stderr, "dtrain: warning: MPI_Win_unlock_all of the gradient window failed\n");
    if (MPI_Win_free(&s->win) != MPI_SUCCESS)
        fprintf(stderr, "dtrain: warning: MPI_Win_free of the gradient window failed\n");
    s->have_win = 0;
}
