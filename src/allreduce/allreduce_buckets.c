/* --mode allreduce, the bucket path (allreduce.h): gradients are packed
 * into fusion buckets in backward order; a bucket's allreduce starts the
 * moment its last layer's gradients are final (wait-free backprop), on a
 * communication thread, so it runs while lower layers still compute.
 * end_step waits, rebuilds the SFB layers and runs the update on every
 * worker. A bucket is a ring (ring.h) or an MPI_Iallreduce, by size
 * (dt_ring_pays) or --allreduce-algo; bf16 and fp16 send every bucket
 * through the ring in 16-bit words (MPI_Iallreduce cannot sum them in
 * fp32); top-k allgathers each bucket's pairs and sums them in rank order,
 * keeping the rest in a residual the size of the gradients. Fully
 * connected layers the plan marks SFB (--sfb, --sacp) are a bucket of
 * their own: their sufficient factors are captured in grad_ready and
 * allgathered by the thread (sfb.h).
 * Threads: the trainer's thread enqueues buckets (grad_ready) and waits
 * (end_step); the communication thread makes every MPI call of a step. The
 * trainer's own MPI calls (metrics, evaluation) happen between steps, when
 * the communication thread is idle. */
#include <limits.h>
#include <pthread.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "allreduce.h"
#include "plan/codec.h"
#include "comm/ring.h"
#include "comm/threads.h"

#define MAX_BUCKETS 4096

typedef struct {
    ar_ctx *a;                /* the strategy's (group, net, SFB, configuration) */
    dt_bucket *buckets;
    int nbuckets;
    float *ring_tmp;          /* scratch of the largest ring-reduced bucket */
    MPI_Request *sfb_reqs;    /* (dt_sfb_requests) a factor bucket's exchange */
    float *residual;          /* (nparams) top-k: gradients not sent yet (the trainer's block) */
    uint32_t *pairs;          /* (2 k) top-k: this worker's pairs of the largest bucket */
    uint32_t *gathered;       /* (W 2 k) top-k: every worker's, rank by rank */
    /* Shared between the trainer and the bucket thread, under mu. */
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
} bucketed;

static int uses_ring(const ar_ctx *a, size_t n) {
    return a->cfg.ar_algo == DT_AR_RING || dt_gc_is_half(a->cfg.codec.kind) ||
           (a->cfg.ar_algo == DT_AR_AUTO && dt_ring_pays(n, a->comm.nworkers));
}

/* Top-k: this worker's pairs (after error feedback) to every worker, and
 * every worker's, scaled, added into the bucket (zeroed by the encode) in
 * rank order, so all end on the same bits. */
static dt_status topk_bucket(bucketed *p, size_t lo, size_t n, float scale) {
    ar_ctx *a = p->a;
    float *g = a->net->grads + lo;
    size_t k = dt_topk_count(a->cfg.codec.ratio, n);
    dt_topk_encode(g, p->residual + lo, n, k, p->pairs);
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Iallgather(p->pairs, (int)(2 * k), MPI_UINT32_T, p->gathered, (int)(2 * k),
                                       MPI_UINT32_T, a->comm.workers, &req),
                        "top-k gradient allgather (MPI_Iallgather)"));
    DT_TRY(dt_group_wait(&a->group, &req, 1));
    dt_topk_add(p->gathered, k * (size_t)a->comm.nworkers, scale, g);
    return DT_OK;
}

/* Averages one bucket in place over the workers. The step's first bucket
 * enters the group (announces the step to the stall inspector). */
static dt_status reduce_bucket(bucketed *p, int k) {
    ar_ctx *a = p->a;
    const dt_bucket *b = &p->buckets[k];
    if (k == 0) {
        snprintf(p->what, sizeof p->what, "gradient allreduce of step %ld", a->step + 1);
        DT_TRY(dt_group_enter(&a->group, p->what));
    }
    if (b->sfb) {
        int n;
        DT_TRY(dt_sfb_start(&a->sfb, b->ready_layer, a->comm.workers, p->sfb_reqs, &n));
        return dt_group_wait(&a->group, p->sfb_reqs, n);
    }
    float *g = a->net->grads + b->lo;
    size_t n = b->hi - b->lo;
    float inv = 1.0f / (float)a->comm.nworkers;
    if (a->cfg.codec.kind == DT_GC_TOPK) return topk_bucket(p, b->lo, n, inv);
    if (uses_ring(a, n)) return dt_ring_allreduce(&a->group, g, n, p->ring_tmp, inv, a->cfg.codec.kind);
    MPI_Request req;
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, a->comm.workers, &req),
                        "gradient allreduce (MPI_Iallreduce)"));
    DT_TRY(dt_group_wait(&a->group, &req, 1));
    for (size_t i = 0; i < n; i++) g[i] *= inv;
    return DT_OK;
}

static void *comm_thread(void *arg) {
    bucketed *p = arg;
    ar_ctx *a = p->a;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->started == p->queued) pthread_cond_wait(&p->cv, &p->mu);
        if (p->quit) break;
        int k = p->started++, failed = p->err != DT_OK;
        pthread_mutex_unlock(&p->mu);
        double t0 = dt_now();
        /* After a failed bucket the ranks are out of step: no more messages. */
        dt_status s = failed ? DT_OK : reduce_bucket(p, k);
        double t1 = dt_now();
        const dt_bucket *b = &p->buckets[k];
        if (b->sfb) {
            double bytes = dt_sfb_layer_bytes_each_way(&a->sfb, b->ready_layer);
            dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "sfb allgather", t0, t1,
                             (dt_tl_arg[]){{"layer", b->ready_layer}, {"bytes", bytes}}, 2);
        } else {
            dt_timeline_span(a->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "allreduce bucket", t0, t1,
                             (dt_tl_arg[]){{"bucket", k}, {"bytes", (double)((b->hi - b->lo) * sizeof(float))}},
                             2);
        }
        pthread_mutex_lock(&p->mu);
        if (k == 0) p->first_start = t0;
        p->last_end = t1;
        if (s != DT_OK && p->err == DT_OK) {
            p->err = s;
            snprintf(p->errmsg, sizeof p->errmsg, "%s", dt_last_error());
        }
        p->done++;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Hands every bucket whose lowest layer is at or above `layer` to the thread. */
static void enqueue_ready(bucketed *p, int layer) {
    pthread_mutex_lock(&p->mu);
    int q = p->queued;
    while (q < p->nbuckets && p->buckets[q].ready_layer >= layer) q++;
    if (q != p->queued) {
        p->queued = q;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

static void ar_grad_ready(void *ctx, int layer) {
    ar_ctx *a = ctx;
    if (a->sfb.index[layer] >= 0) dt_sfb_capture(&a->sfb, a->net, layer);
    enqueue_ready(a->path_state, layer);
}

/* Scratch for the largest ring chunk or top-k pairs, the factor buckets'
 * requests, and the bytes per step; every message must fit an MPI count. */
static dt_status bucket_scratch(bucketed *p, dt_trainer *t) {
    ar_ctx *a = p->a;
    size_t scratch = 0, pairs = 0, W = (size_t)a->comm.nworkers;
    int topk = a->cfg.codec.kind == DT_GC_TOPK;
    for (int k = 0; k < p->nbuckets; k++) {
        if (p->buckets[k].sfb) continue;
        size_t n = p->buckets[k].hi - p->buckets[k].lo, k_n = dt_topk_count(a->cfg.codec.ratio, n);
        size_t message = topk ? 2 * k_n * W : uses_ring(a, n) ? dt_ring_scratch_floats(n, a->comm.nworkers) : n;
        if (message > INT_MAX)
            return dt_fail(DT_ERR_USAGE, "a gradient bucket of %zu floats exceeds an MPI count; use --fusion-mb "
                                         "below 8192 (or the ring)", n);
        if (topk && k_n > pairs) pairs = k_n;
        if (!topk && uses_ring(a, n) && message > scratch) scratch = message;
        a->bytes_per_step += dt_allreduce_bytes_each_way(&a->cfg.codec, n, a->comm.nworkers);
    }
    if (scratch) DT_TRY(dt_alloc_floats(&p->ring_tmp, scratch, "ring allreduce scratch"));
    if (a->sfb.n)
        DT_TRY(dt_alloc_bytes((void **)&p->sfb_reqs, sizeof(MPI_Request) * (size_t)dt_sfb_requests(&a->sfb),
                              "sufficient factor requests"));
    if (!topk) return DT_OK;
    p->residual = dt_trainer_residual(t); /* the trainer's: checkpoints carry it */
    DT_TRY(dt_alloc_bytes((void **)&p->pairs, 2 * pairs * sizeof(uint32_t), "top-k pairs"));
    return dt_alloc_bytes((void **)&p->gathered, 2 * pairs * W * sizeof(uint32_t), "top-k pairs");
}

/* Every worker takes the buckets: enabled whenever the window is not. */
static dt_status bucket_enabled(ar_ctx *a, int *yes) {
    (void)a;
    *yes = 1;
    return DT_OK;
}

static dt_status bucket_start(ar_ctx *a, dt_sync *s, dt_trainer *t) {
    bucketed *p;
    DT_TRY(dt_alloc_bytes((void **)&p, sizeof *p, "allreduce buckets"));
    p->a = a;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    a->path_state = p;
    DT_TRY(dt_alloc_bytes((void **)&p->buckets, sizeof(dt_bucket) * MAX_BUCKETS, "buckets"));
    size_t bucket_floats = (size_t)(a->cfg.fusion_mb * 1048576.0 / sizeof(float));
    p->nbuckets = dt_bucket_plan(p->buckets, MAX_BUCKETS, a->net, &a->plan, bucket_floats);
    if (p->nbuckets < 0)
        return dt_fail(DT_ERR_USAGE, "--fusion-mb %g makes more than %d buckets; use a larger value",
                       a->cfg.fusion_mb, MAX_BUCKETS);
    DT_TRY(bucket_scratch(p, t));
    if (pthread_create(&p->thread, NULL, comm_thread, p) != 0)
        return dt_fail(DT_ERR_INTERNAL, "cannot start the communication thread");
    p->thread_started = 1;
    s->grad_ready = ar_grad_ready;
    return DT_OK;
}

static dt_status bucket_end_step(ar_ctx *a, dt_trainer *t, float lr, double bytes, double *comm, double *waited) {
    (void)bytes;
    bucketed *p = a->path_state;
    enqueue_ready(p, 0); /* buckets of layers that reported nothing (none today) */
    double t0 = dt_now();
    atomic_store(&a->group.hurry, 1);
    pthread_mutex_lock(&p->mu);
    while (p->done < p->nbuckets) pthread_cond_wait(&p->cv, &p->mu);
    atomic_store(&a->group.hurry, 0);
    p->queued = p->started = p->done = 0;
    dt_status err = p->err;
    *comm += p->last_end - p->first_start;
    pthread_mutex_unlock(&p->mu);
    if (err != DT_OK) return dt_fail(err, "%s", p->errmsg);
    double w = dt_now() - t0;
    *waited += w;
    dt_timeline_span(a->cfg.timeline, DT_TL_MAIN, DT_TL_CAT_WAIT, "wait allreduce", t0, t0 + w, NULL, 0);
    /* SFB layers are averaged as they are rebuilt; ring and MPI buckets
     * arrived averaged. */
    float inv = 1.0f / (float)a->comm.nworkers;
    for (int k = 0; k < a->sfb.n; k++) dt_sfb_rebuild(&a->sfb, a->sfb.layers[k].layer, a->net, inv);
    dt_trainer_update(t, lr, 0, a->net->nparams);
    return DT_OK;
}

static void bucket_free(ar_ctx *a, int together) {
    (void)together;
    bucketed *p = a->path_state;
    if (!p) return;
    dt_threads_stop(&p->mu, &p->cv, &p->quit, &p->thread, p->thread_started);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    dt_free(p->buckets);
    dt_free(p->ring_tmp);
    dt_free(p->sfb_reqs);
    dt_free(p->pairs);
    dt_free(p->gathered);
    dt_free(p);
}

static void bucket_describe(const ar_ctx *a, FILE *out) {
    const bucketed *p = a->path_state;
    int ring = 0, sfb = 0, n = 0;
    for (int k = 0; k < p->nbuckets; k++) {
        const dt_bucket *b = &p->buckets[k];
        if (b->sfb) {
            sfb++;
            continue;
        }
        n++;
        ring += uses_ring(a, b->hi - b->lo);
    }
    char codec[32];
    dt_grad_codec_name(&a->cfg.codec, codec, sizeof codec);
    fprintf(out, "allreduce: %d fusion bucket%s (--fusion-mb %g), ", n, n == 1 ? "" : "s", a->cfg.fusion_mb);
    if (a->cfg.codec.kind == DT_GC_TOPK)
        fprintf(out, "%s pairs allgathered", codec);
    else
        fprintf(out, "%d by dtrain's ring, %d by MPI_Iallreduce (%s)", ring, n - ring, codec);
    if (sfb) fprintf(out, ", %d layer%s by sufficient factors", sfb, sfb == 1 ? "" : "s");
    fprintf(out, "; %.0f bytes sent per step (and as many received)\n",
            a->bytes_per_step + dt_sfb_bytes_each_way(&a->sfb));
}

const ar_path ar_bucket_path = {"buckets", bucket_enabled, bucket_start, bucket_end_step, bucket_free,
                                bucket_describe};
