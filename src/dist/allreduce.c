/* --mode allreduce (Horovod / PyTorch DDP): gradients are packed into fusion
 * buckets in backward order; a bucket's allreduce starts the moment its last
 * layer's gradients are final (wait-free backprop), on a communication
 * thread, so it runs while lower layers still compute. end_step waits,
 * averages and runs SGD on every worker.
 *
 * When every worker is on this machine (--allreduce-algo auto or shm) the
 * gradients never travel: the workers share one window of gradient slots,
 * parameters and velocity, and end_step sums and updates a 1/W shard of
 * the parameters per worker (shm.h). There are no buckets and no thread
 * then: on a machine whose cores all compute, a sum run beside backprop
 * only takes the core from it (docs/PERFORMANCE.md).
 *
 * Fully connected layers the plan marks SFB (--sfb, --sacp) are a bucket of
 * their own: their sufficient factors are captured in grad_ready and
 * allgathered by the thread; end_step rebuilds their gradients (sfb.h).
 *
 * Across hosts with the same number of workers on each, several on some
 * (--allreduce-algo auto or hier), each host has its window and worker r
 * of each host sums its shard with worker r of the others by a ring at the
 * end of the step (shm.h, topo.h: Horovod's hierarchical allreduce).
 *
 * Otherwise (or --allreduce-algo ring / mpi) a bucket is a ring
 * (ring.h) or an MPI_Iallreduce, by size (dt_ring_pays).
 *
 * --grad-compression (codec.h): bf16 and fp16 send every bucket through the
 * ring in 16-bit words (MPI_Iallreduce cannot sum them in fp32), and the
 * hierarchy's ring across hosts likewise; top-k allgathers each bucket's
 * pairs and sums them in rank order, keeping the rest in a residual the
 * size of the gradients. Compression never picks the one-host window: it
 * is asked for to change what the wire carries.
 *
 * Threads: the trainer's thread enqueues buckets (grad_ready) and waits
 * (end_step); the communication thread makes every MPI call of a step. The
 * trainer's own MPI calls (metrics, evaluation) happen between steps, when
 * the communication thread is idle. */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/timer.h"
#include "codec.h"
#include "group.h"
#include "ring.h"
#include "sfb.h"
#include "shm.h"
#include "topo.h"

#define MAX_BUCKETS 4096

typedef struct {
    dt_group group;           /* first (dt_group_sync_alloc); the thread's during a step */
    dt_comm comm;
    dt_dist_cfg cfg;
    dt_net *net;
    dt_comm_plan plan;
    dt_sfb sfb;
    dt_bucket *buckets;
    int nbuckets;
    float *ring_tmp;          /* scratch of the largest ring-reduced bucket */
    float *residual;          /* (nparams) top-k: gradients not sent yet */
    uint32_t *pairs;          /* (2 k) top-k: this worker's pairs of the largest bucket */
    uint32_t *gathered;       /* (W 2 k) top-k: every worker's, rank by rank */
    double bytes_per_step;    /* sent (as many received) by this worker per step, but SFB */
    int use_shm;              /* no buckets: end_step sums and updates in the window */
    dt_shm shm;
    dt_topology topo;         /* hosts (when use_shm or algo could be) */
    int have_topo, hier;      /* hier: several hosts; then node and cross exist */
    dt_group node, cross;     /* the workers on this host; this shard's on every host */
    long step;                /* clock of the step in flight */
    /* Shared between the threads, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started;
    int queued;               /* buckets handed to the thread this step */
    int started;              /* buckets the thread has taken */
    int done;                 /* buckets reduced */
    int quit;
    dt_status err;            /* the thread's first error, message in errmsg */
    char errmsg[512];
    double first_start, last_end;
    char what[64];            /* the step's collective, for stall messages */
} ar_ctx;

static int uses_ring(const ar_ctx *a, size_t n) {
    return a->cfg.ar_algo == DT_AR_RING || dt_gc_is_half(a->cfg.codec.kind) ||
           (a->cfg.ar_algo == DT_AR_AUTO && dt_ring_pays(n, a->comm.nworkers));
}

/* Top-k: this worker's pairs (after error feedback) to every worker, and
 * every worker's added into the zeroed bucket in rank order, so all end on
 * the same bits; then scaled. */
static dt_status topk_bucket(ar_ctx *a, size_t lo, size_t n, float scale) {
    float *g = a->net->grads + lo;
    size_t k = dt_topk_count(a->cfg.codec.ratio, n);
    dt_topk_encode(g, a->residual + lo, n, k, a->pairs);
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Iallgather(a->pairs, (int)(2 * k), MPI_UINT32_T, a->gathered, (int)(2 * k),
                                       MPI_UINT32_T, a->comm.workers, &req),
                        "top-k gradient allgather (MPI_Iallgather)"));
    DT_TRY(dt_group_wait(&a->group, &req, 1));
    memset(g, 0, n * sizeof *g);
    dt_topk_add(a->gathered, k * (size_t)a->comm.nworkers, g);
    for (size_t i = 0; i < n; i++) g[i] *= scale;
    return DT_OK;
}

/* Averages one bucket in place over the workers. The step's first bucket
 * enters the group (announces the step to the stall inspector). */
static dt_status reduce_bucket(ar_ctx *a, int k) {
    const dt_bucket *b = &a->buckets[k];
    if (k == 0) {
        snprintf(a->what, sizeof a->what, "gradient allreduce of step %ld", a->step + 1);
        DT_TRY(dt_group_enter(&a->group, a->what));
    }
    MPI_Request req[2];
    if (b->sfb) {
        DT_TRY(dt_sfb_start(&a->sfb, b->ready_layer, a->comm.workers, req));
        return dt_group_wait(&a->group, req, 2);
    }
    float *g = a->net->grads + b->lo;
    size_t n = b->hi - b->lo;
    float inv = 1.0f / (float)a->comm.nworkers;
    if (a->cfg.codec.kind == DT_GC_TOPK) return topk_bucket(a, b->lo, n, inv);
    if (uses_ring(a, n)) return dt_ring_allreduce(&a->group, g, n, a->ring_tmp, inv, a->cfg.codec.kind);
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, a->comm.workers, &req[0]),
                        "gradient allreduce (MPI_Iallreduce)"));
    DT_TRY(dt_group_wait(&a->group, req, 1));
    for (size_t i = 0; i < n; i++) g[i] *= inv;
    return DT_OK;
}

static void *comm_thread(void *arg) {
    ar_ctx *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->quit && a->started == a->queued) pthread_cond_wait(&a->cv, &a->mu);
        if (a->quit) break;
        int k = a->started++, failed = a->err != DT_OK;
        pthread_mutex_unlock(&a->mu);
        double t0 = dt_now();
        /* After a failed bucket the ranks are out of step: no more messages. */
        dt_status s = failed ? DT_OK : reduce_bucket(a, k);
        double t1 = dt_now();
        const dt_bucket *b = &a->buckets[k];
        if (b->sfb) {
            double bytes = dt_sfb_layer_bytes_each_way(&a->sfb, b->ready_layer);
            dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "sfb allgather", t0, t1,
                             (dt_tl_arg[]){{"layer", b->ready_layer}, {"bytes", bytes}}, 2);
        } else {
            dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "allreduce bucket", t0, t1,
                             (dt_tl_arg[]){{"bucket", k}, {"bytes", (double)((b->hi - b->lo) * sizeof(float))}},
                             2);
        }
        pthread_mutex_lock(&a->mu);
        if (k == 0) a->first_start = t0;
        a->last_end = t1;
        if (s != DT_OK && a->err == DT_OK) {
            a->err = s;
            snprintf(a->errmsg, sizeof a->errmsg, "%s", dt_last_error());
        }
        a->done++;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Hands every bucket whose lowest layer is at or above `layer` to the thread. */
static void enqueue_ready(ar_ctx *a, int layer) {
    pthread_mutex_lock(&a->mu);
    int q = a->queued;
    while (q < a->nbuckets && a->buckets[q].ready_layer >= layer) q++;
    if (q != a->queued) {
        a->queued = q;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

static void ar_grad_ready(void *ctx, int layer) {
    ar_ctx *a = ctx;
    if (a->sfb.index[layer] >= 0) dt_sfb_capture(&a->sfb, a->net, layer);
    enqueue_ready(a, layer);
}

/* Whether the step ends in shared-memory windows (use_shm), one per host
 * with a ring across hosts (hier): --allreduce-algo shm or hier, or auto
 * when no flag asked for network savings (--sfb/--sacp plan bytes on the
 * wire; top-k works on buckets) and the hosts allow it. bf16/fp16 leave
 * auto the hierarchy (its ring across hosts is compressed), not the
 * one-host window (no wire). */
static dt_status choose_window(ar_ctx *a) {
    dt_ar_algo algo = a->cfg.ar_algo;
    dt_gc_kind gc = a->cfg.codec.kind;
    if (algo == DT_AR_RING || algo == DT_AR_MPI ||
        (algo == DT_AR_AUTO && (a->cfg.sfb != DT_SFB_OFF || gc == DT_GC_TOPK)))
        return DT_OK;
    DT_TRY(dt_topology_create(&a->topo, &a->comm));
    a->have_topo = 1;
    const dt_topology *h = &a->topo;
    if (algo == DT_AR_SHM && h->hosts > 1)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo shm needs every worker on one host (here %d hosts); use "
                                     "hier, ring or mpi across hosts", h->hosts);
    if (algo == DT_AR_HIER && !h->uniform)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo hier needs the same number of workers on every host (the "
                                     "%d hosts here differ); use ring or mpi", h->hosts);
    /* Across hosts, auto takes the hierarchy only when hosts have several
     * workers: with one each, it would only give up the buckets' overlap
     * with backprop. */
    a->hier = h->hosts > 1 && h->uniform && (algo == DT_AR_HIER || h->local_size > 1);
    a->use_shm = (h->hosts == 1 && gc == DT_GC_NONE) || a->hier;
    if (a->hier) { /* (L-1)/L of its shard's floats from the host's slots; its shard over the ring */
        double L = h->local_size, n = (double)a->net->nparams;
        a->bytes_per_step = (L - 1) / L * n * sizeof(float) +
                            dt_allreduce_bytes_each_way(&a->cfg.codec, (size_t)(n / L), h->hosts);
    } else if (a->use_shm) { /* a worker reads (W-1)/W of its shard from its peers' slots */
        double W = a->comm.nworkers;
        a->bytes_per_step = (W - 1) / W * (double)a->net->nparams * sizeof(float);
    }
    return DT_OK;
}

/* Scratch for the largest ring chunk or top-k pairs, and the bytes per
 * step; every message must fit an MPI count. */
static dt_status bucket_scratch(ar_ctx *a) {
    size_t scratch = 0, pairs = 0, W = (size_t)a->comm.nworkers;
    int topk = a->cfg.codec.kind == DT_GC_TOPK;
    for (int k = 0; k < a->nbuckets; k++) {
        if (a->buckets[k].sfb) continue;
        size_t n = a->buckets[k].hi - a->buckets[k].lo, k_n = dt_topk_count(a->cfg.codec.ratio, n);
        size_t message = topk ? 2 * k_n * W : uses_ring(a, n) ? dt_ring_scratch_floats(n, a->comm.nworkers) : n;
        if (message > INT_MAX)
            return dt_fail(DT_ERR_USAGE, "a gradient bucket of %zu floats exceeds an MPI count; use --fusion-mb "
                                         "below 8192 (or the ring)", n);
        if (topk && k_n > pairs) pairs = k_n;
        if (!topk && uses_ring(a, n) && message > scratch) scratch = message;
        a->bytes_per_step += dt_allreduce_bytes_each_way(&a->cfg.codec, n, a->comm.nworkers);
    }
    if (scratch) DT_TRY(dt_alloc_floats(&a->ring_tmp, scratch, "ring allreduce scratch"));
    if (!topk) return DT_OK;
    DT_TRY(dt_alloc_floats(&a->residual, a->net->nparams, "top-k residual"));
    DT_TRY(dt_alloc_bytes((void **)&a->pairs, 2 * pairs * sizeof(uint32_t), "top-k pairs"));
    return dt_alloc_bytes((void **)&a->gathered, 2 * pairs * W * sizeof(uint32_t), "top-k pairs");
}

static dt_status ar_start(dt_sync *s, dt_trainer *t) {
    ar_ctx *a = s->ctx;
    a->net = dt_trainer_net(t);
    a->step = dt_trainer_step(t);
    DT_TRY(dt_sfb_setup(s, &a->plan, &a->sfb, a->net, &a->cfg, &a->comm));
    DT_TRY(dt_group_create(&a->group, &a->comm, a->cfg.stall_timeout));
    /* First the broadcast, whose wait names a worker missing at start-up. */
    DT_TRY(dt_group_bcast_start(&a->group, a->net, dt_trainer_opt_state(t), dt_trainer_opt_floats(t)));
    DT_TRY(choose_window(a));
    if (a->use_shm) { /* no buckets, no thread, nothing per layer: end_step does it all */
        dt_group *g = &a->group, *cross = NULL;
        if (a->hier) {
            dt_comm node, across;
            DT_TRY(dt_topology_comm(&a->comm, a->topo.node, &node));
            DT_TRY(dt_topology_comm(&a->comm, a->topo.cross, &across));
            DT_TRY(dt_group_create(&a->node, &node, a->cfg.stall_timeout));
            DT_TRY(dt_group_create(&a->cross, &across, a->cfg.stall_timeout));
            g = &a->node;
            cross = &a->cross;
        }
        DT_TRY(dt_shm_create(&a->shm, g, cross, a->cfg.codec.kind, dt_trainer_optim(t), a->net->nparams,
                             a->net->params, dt_trainer_opt_state(t)));
        dt_net_bind_blocks(a->net, a->shm.params, dt_shm_slot(&a->shm));
        dt_trainer_bind_opt_state(t, a->shm.opt_state);
        s->grad_ready = NULL;
        return DT_OK;
    }
    DT_TRY(dt_alloc_bytes((void **)&a->buckets, sizeof(dt_bucket) * MAX_BUCKETS, "buckets"));
    size_t bucket_floats = (size_t)(a->cfg.fusion_mb * 1048576.0 / sizeof(float));
    a->nbuckets = dt_bucket_plan(a->buckets, MAX_BUCKETS, a->net, &a->plan, bucket_floats);
    if (a->nbuckets < 0)
        return dt_fail(DT_ERR_USAGE, "--fusion-mb %g makes more than %d buckets; use a larger value",
                       a->cfg.fusion_mb, MAX_BUCKETS);
    DT_TRY(bucket_scratch(a));
    if (pthread_create(&a->thread, NULL, comm_thread, a) != 0)
        return dt_fail(DT_ERR_INTERNAL, "cannot start the communication thread");
    a->thread_started = 1;
    return DT_OK;
}

static dt_status ar_begin_step(dt_sync *s, dt_trainer *t, float lr) {
    (void)lr;
    ar_ctx *a = s->ctx;
    a->step = dt_trainer_step(t);
    return DT_OK;
}

static dt_status ar_end_step(dt_sync *s, dt_trainer *t, float lr) {
    ar_ctx *a = s->ctx;
    enqueue_ready(a, 0); /* buckets of layers that reported nothing (none today) */
    double t0 = dt_now();
    atomic_store(&a->group.hurry, 1);
    pthread_mutex_lock(&a->mu);
    while (a->done < a->nbuckets) pthread_cond_wait(&a->cv, &a->mu);
    atomic_store(&a->group.hurry, 0);
    a->queued = a->started = a->done = 0;
    dt_status err = a->err;
    double comm = a->last_end - a->first_start;
    pthread_mutex_unlock(&a->mu);
    if (err != DT_OK) return dt_fail(err, "%s", a->errmsg);
    double waited = dt_now() - t0;
    dt_timeline_span(a->cfg.timeline, DT_TL_MAIN, DT_TL_CAT_WAIT, "wait allreduce", t0, t0 + waited, NULL, 0);
    dt_net *net = a->net;
    /* SFB layers are averaged as they are rebuilt; ring and MPI buckets
     * arrived averaged, window buckets are averaged as they are summed. */
    float inv = 1.0f / (float)a->comm.nworkers;
    for (int k = 0; k < a->sfb.n; k++) dt_sfb_rebuild(&a->sfb, a->sfb.layers[k].layer, net, inv);
    /* Buckets and windows as counted at the start; an allgather sends this
     * worker's factors to, and receives from, W-1. */
    uint64_t bytes = (uint64_t)(a->bytes_per_step + dt_sfb_bytes_each_way(&a->sfb));
    if (a->use_shm) { /* the sums and the update, after backprop: nothing hides them */
        double u0 = dt_now();
        dt_group *g = a->hier ? &a->node : &a->group;
        atomic_store(&g->hurry, 1);
        if (a->hier) atomic_store(&a->cross.hurry, 1);
        dt_status st = dt_shm_update(&a->shm, g, lr, inv, a->step + 1);
        atomic_store(&g->hurry, 0);
        if (a->hier) atomic_store(&a->cross.hurry, 0);
        DT_TRY(st);
        double u1 = dt_now();
        dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "shared-memory allreduce + update", u0, u1,
                         (dt_tl_arg[]){{"bytes", (double)bytes}}, 1);
        comm += u1 - u0;
        waited += u1 - u0;
    } else {
        dt_trainer_update(t, lr, 0, net->nparams);
    }
    s->stats.comm_s += comm;
    s->stats.wait_s += waited;
    s->stats.bytes_sent += bytes;
    s->stats.bytes_recv += bytes;
    return DT_OK;
}

static void ar_free(dt_sync *s) {
    if (!s) return;
    ar_ctx *a = s->ctx;
    if (a->thread_started) {
        pthread_mutex_lock(&a->mu);
        a->quit = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    dt_shm_free(&a->shm, s->ended_together && a->err == DT_OK);
    if (a->hier) {
        dt_group_free(&a->node);
        dt_group_free(&a->cross);
    }
    if (a->have_topo) dt_topology_free(&a->topo);
    dt_free(a->buckets);
    dt_free(a->ring_tmp);
    dt_free(a->residual);
    dt_free(a->pairs);
    dt_free(a->gathered);
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
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    s->name = "allreduce";
    s->start = ar_start;
    s->begin_step = ar_begin_step;
    s->grad_ready = ar_grad_ready;
    s->end_step = ar_end_step;
    s->free = ar_free;
    return DT_OK;
}
