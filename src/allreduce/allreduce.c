/* --mode allreduce (Horovod / PyTorch DDP): the strategy. Every worker
 * starts from worker 0's parameters and optimiser state (a broadcast),
 * then sums each step's gradients by the first path of allreduce.h that is
 * enabled for the job (the window on one host or per host, else fusion
 * buckets) and updates alike on every worker.
 * --grad-compression (codec.h) changes what the buckets and the hierarchy's
 * ring across hosts carry; it never picks the one-host window, since it is
 * asked for to change what the wire carries. */
#include <limits.h>

#include "dtrain/mem.h"
#include "comm/group.h"
#include "allreduce.h"

/* In order of preference: the first enabled runs the job. */
static const ar_path *const paths[] = {&ar_window_path, &ar_bucket_path};

static dt_status ar_start(dt_sync *s, dt_trainer *t) {
    ar_ctx *a = s->ctx;
    a->net = dt_trainer_net(t);
    a->step = dt_trainer_step(t);
    DT_TRY(dt_sfb_setup(s, &a->plan, &a->sfb, a->net, &a->cfg, &a->comm));
    DT_TRY(dt_group_create(&a->group, &a->comm, &a->cfg.stall));
    /* First the broadcast, whose wait names a worker missing at start-up. */
    DT_TRY(dt_group_bcast_start(&a->group, a->net, dt_trainer_opt_state(t), dt_trainer_opt_floats(t)));
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        int yes = 0;
        DT_TRY(paths[i]->enabled(a, &yes));
        if (!yes) continue;
        a->path = paths[i];
        DT_TRY(a->path->start(a, s, t));
        if (a->cfg.plan_out && a->comm.worker == 0) a->path->describe(a, a->cfg.plan_out);
        return DT_OK;
    }
    return dt_fail(DT_ERR_INTERNAL, "allreduce: no way of summing the gradients is enabled");
}

static dt_status ar_begin_step(dt_sync *s, dt_trainer *t, float lr) {
    (void)lr;
    ar_ctx *a = s->ctx;
    a->step = dt_trainer_step(t);
    return DT_OK;
}

static dt_status ar_end_step(dt_sync *s, dt_trainer *t, float lr) {
    ar_ctx *a = s->ctx;
    /* As counted at the start; an SFB allgather sends this worker's factors
     * to, and receives from, W-1. */
    double bytes = a->bytes_per_step + dt_sfb_bytes_each_way(&a->sfb), comm = 0, waited = 0;
    DT_TRY(a->path->end_step(a, t, lr, bytes, &comm, &waited));
    s->stats.comm_s += comm;
    s->stats.wait_s += waited;
    s->stats.bytes_sent += (uint64_t)bytes;
    s->stats.bytes_recv += (uint64_t)bytes;
    return DT_OK;
}

/* Top-k: every worker's residual to worker 0 for its checkpoint (between
 * steps: the communication thread is idle). */
static dt_status ar_gather(dt_sync *s, dt_trainer *t) {
    ar_ctx *a = s->ctx;
    size_t n = dt_trainer_net(t)->nparams;
    if (n > INT_MAX) return dt_fail(DT_ERR_USAGE, "%zu top-k residuals exceed an MPI count", n);
    float *all = NULL;
    if (a->comm.worker == 0) DT_TRY(dt_trainer_all_residuals(t, &all));
    MPI_Request req;
    DT_TRY(dt_group_enter(&a->group, "top-k residual gather for a checkpoint"));
    DT_TRY(dt_mpi_check(MPI_Igather(dt_trainer_residual(t), (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0,
                                    a->comm.workers, &req),
                        "top-k residual gather (MPI_Igather)"));
    return dt_group_wait(&a->group, &req, 1);
}

static void ar_free(dt_sync *s) {
    if (!s) return;
    ar_ctx *a = s->ctx;
    if (a->path) a->path->free(a, s->ended_together);
    dt_sfb_free(&a->sfb);
    dt_comm_plan_free(&a->plan);
    dt_group_sync_free(s);
}

dt_status dt_sync_allreduce_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg) {
    dt_sync *s;
    *out = NULL;
    DT_TRY(dt_dist_cfg_check(cfg, c->nworkers));
    DT_TRY(dt_group_sync_alloc(out, sizeof(ar_ctx)));
    s = *out;
    ar_ctx *a = s->ctx;
    a->comm = *c;
    a->cfg = *cfg;
    s->name = "allreduce";
    s->start = ar_start;
    s->begin_step = ar_begin_step;
    s->end_step = ar_end_step;
    s->free = ar_free;
    if (cfg->codec.kind == DT_GC_TOPK) {
        s->keeps_residual = 1;
        s->gather = ar_gather;
    }
    return DT_OK;
}
