/* Parameter servers, every ps-* mode: a server owns one shard of the flat
 * parameters and its optimiser state, and serves each worker's clocks.
 *   clocked modes (ps-sync, ps-ssp --staleness s; ps-sync is s = 0): a
 *     clock is committed (every worker's gradient for it averaged in worker
 *     order, one SGD step) as soon as all have arrived, clocks in order; a
 *     worker that finished clock c gets parameters once clocks up to c - s
 *     are committed, so the fastest worker is at most s clocks ahead.
 *   ps-async: each worker's gradient is applied the moment it is complete
 *     (with lr / W, less when it is staler than usual: async_lr), and that
 *     worker alone gets the fresh shard; nobody waits for anybody.
 *   ps-async-nowait / ps-hogwild (deferred): the worker gets the latest
 *     shard the moment its gradient is complete, and the gradient is queued
 *     for applier threads: one applying under the shard's lock (nowait), or
 *     two applying at once without it (hogwild; see hogwild_* below).
 * Segmented replies (all but the deferred modes, ps_proto.h): the shard is
 * cut where the layers meet; a worker's gradient arrives segment by
 * segment, top layer first, as backprop frees them. ps-async applies each
 * segment and sends it back at once; the clocked modes commit each segment
 * clock by clock as soon as every worker has delivered it, and send a
 * worker each segment as soon as it holds the clocks that worker may read.
 * So the top layers' parameters travel while the worker still runs the
 * lower layers' backward. Per-element arithmetic is the same as applying
 * the whole shard at once.
 * --grad-compression bf16/fp16: a clock's gradient segments arrive in
 * 16-bit words and are decoded into their fp32 slot as each arrives; its
 * replies are encoded from the shard (a snapshot, in effect) as they are
 * sent. The sums, the shard and the optimiser state stay fp32; pulls, the
 * start and checkpoints move fp32.
 * All MPI calls are made by the server's main thread; appliers only compute.
 * Waits by polling with a growing sleep, so an idle server takes no core. */
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/timer.h"
#include "codec.h"
#include "ps_proto.h"

enum { HOGWILD_APPLIERS = 2 };

/* A queued gradient: worker w's clock, its lr and the version it read. */
typedef struct {
    int w;
    long clock;
    float lr;
    long v_read;
} apply_job;

typedef struct {
    const dt_comm *comm;
    const dt_dist_cfg *cfg;
    const dt_model_spec *spec;
    dt_net *net;             /* layout only; built at batch 1 */
    dt_comm_plan plan;       /* which layers the servers hold (not SFB), where */
    size_t lo, hi, n;        /* this shard [lo, hi) of the servers' vector */
    int W;
    int clocked;             /* ps-sync/ps-ssp (else ps-async) */
    int staleness;           /* clocked: s */
    int nslots;              /* gradient slots per worker: s + 2 clocked, 1 async */
    int nseg;                /* segments of the shard: its pieces of each held layer */
    size_t *seg_lo, *seg_hi; /* (nseg) in arrival order (layers last to first), from lo */
    int nreply;              /* reply requests per worker: header, then shard or segments */
    dt_optim *optim;         /* over the servers' vector */
    float *params;           /* (n) */
    float *state;            /* (nslots of the optimiser, n) its state, slot-major */
    float *recv;             /* (W, nslots, n) gradients of each worker's clocks */
    float *lr;               /* (W, nslots) the learning rate each clock came with */
    float *sum;              /* (n) */
    float *reply;            /* (W, n) snapshot being sent to each worker */
    dt_gc_kind wire;         /* bf16/fp16: a clock's messages in 16-bit words; else DT_GC_NONE */
    uint16_t *wire_recv;     /* wire: (W, n) w's gradient segments as they arrive */
    uint16_t *wire_reply;    /* wire: (W, n) w's reply, encoded */
    int hdr_len;             /* PS_HDR_LEN + nseg */
    double *hdr;             /* (W, hdr_len) reply headers */
    double (*ctrl)[PS_CTRL_LEN]; /* (W) control receive buffers */
    MPI_Request *ctrl_req;   /* (W) */
    MPI_Request *grad_req;   /* (W, nlayers) */
    MPI_Request *reply_req;  /* (W, nreply) header, then the shard or its segments */
    int *ngrad;              /* (W) gradient receives posted for the clock */
    int *seg_done;           /* (W) of those, completed (tested in the order they match) */
    long *seg_committed;     /* (nseg) clocked: clocks committed on each segment */
    int *seg_sent;           /* (W) clocked: segments of w's reply sent this clock */
    float *seg_lr;           /* (W) ps-async: the step of the gradient arriving */
    long *seg_lag;           /* (W) ps-async: its lag */
    long *seg_version;       /* (W) ps-async: the version w reads in the reply being sent */
    int *receiving;          /* (W) gradients of clock wclock[w] on their way */
    int *awaiting;           /* (W) finished wclock[w], waiting for its reply */
    int *stopped;            /* (W) */
    int *pulling;            /* (W) asked for the current shard (PULL) */
    long *wclock;            /* (W) the clock w is in (from its STEP message), -1 before */
    long *arrived;           /* (W) clocks of w whose gradients are complete */
    long *v_read;            /* (W) version of the shard last sent to w */
    double *grad_posted;     /* (W) when w's gradient receives were posted (timeline) */
    long committed;          /* clocked: clocks committed */
    long first_clock;        /* the clock the run started at (a resumed step, else 0) */
    long t_offset;           /* async: optimiser updates done before the run started, less first_clock
                              * (versions count from first_clock; Adam's t must go on from the total) */
    long version;            /* updates applied to the shard */
    long applied;            /* gradients applied (async) or averaged in (clocked) */
    long budget;             /* ps-async: gradients to apply before replies say done */
    long max_gap;            /* largest clock gap seen between running workers */
    /* Deferred modes (nowait, hogwild). version, applied, the queue and
     * slot_busy are shared with the appliers under qmu; params under pmu
     * (nowait) or no lock at all (hogwild). */
    int deferred, hogwild, nappliers, quit, inflight;
    int applier_tracks;      /* appliers started: each takes the next timeline track */
    pthread_t appliers[HOGWILD_APPLIERS];
    pthread_mutex_t qmu, pmu;
    pthread_cond_t queued, drained;
    apply_job *queue;        /* (W * nslots) ring */
    int qhead, qlen;
    int *slot_busy;          /* (W, nslots) gradient queued, not yet applied */
    int *post_pending;       /* (W) STEP arrived while its slot was still queued */
} server;

/* The servers' worker w is the leader of worker group w (a worker itself
 * when groups are of 1). */
static int world_rank_of(const server *sv, int w) { return sv->comm->nservers + w * sv->cfg->group_size; }
static float *slot_of(const server *sv, int w, long clock) {
    return sv->recv + ((size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots)) * sv->n;
}
static int *busy_of(const server *sv, int w, long clock) {
    return sv->slot_busy + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}
static float *lr_of(const server *sv, int w, long clock) {
    return sv->lr + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}

static dt_status post_ctrl(server *sv, int w) {
    return dt_mpi_check(MPI_Irecv(sv->ctrl[w], PS_CTRL_LEN, MPI_DOUBLE, world_rank_of(sv, w), PS_TAG_CTRL,
                                  sv->comm->world, &sv->ctrl_req[w]),
                        "control receive (MPI_Irecv)");
}

/* Posts receives for worker w's gradient segments of this shard, in the
 * order the worker sends them: layers last to first. */
static dt_status post_grads(server *sv, int w) {
    MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
    float *dst = slot_of(sv, w, sv->wclock[w]);
    uint16_t *words = sv->wire ? sv->wire_recv + (size_t)w * sv->n : NULL;
    for (int k = 0; k < sv->nseg; k++) {
        size_t lo = sv->seg_lo[k];
        DT_TRY(dt_mpi_check(MPI_Irecv(words ? (void *)(words + lo) : dst + lo, (int)(sv->seg_hi[k] - lo),
                                      words ? MPI_UINT16_T : MPI_FLOAT, world_rank_of(sv, w), PS_TAG_GRAD,
                                      sv->comm->world, &r[k]),
                            "gradient receive (MPI_Irecv)"));
    }
    sv->ngrad[w] = sv->nseg;
    sv->seg_done[w] = sv->seg_sent[w] = 0;
    sv->receiving[w] = 1;
    sv->grad_posted[w] = dt_now();
    return DT_OK;
}

static int slot_queued(server *sv, int w, long clock) {
    pthread_mutex_lock(&sv->qmu);
    int busy = *busy_of(sv, w, clock);
    pthread_mutex_unlock(&sv->qmu);
    return busy;
}

/* As a worker starts `clock`: how far ahead it is of the slowest running
 * worker, whose current clock is the count of clocks it has delivered. SSP
 * bounds this by s (0 in ps-sync); ps-async does not bound it. */
static void note_gap(server *sv, long clock) {
    long slowest = clock;
    for (int w = 0; w < sv->W; w++)
        if (!sv->stopped[w] && sv->arrived[w] < slowest) slowest = sv->arrived[w];
    if (clock - slowest > sv->max_gap) sv->max_gap = clock - slowest;
}

static dt_status handle_ctrl(server *sv, int w) {
    int kind = (int)sv->ctrl[w][0];
    long clock = (long)sv->ctrl[w][1];
    if (kind == PS_CTRL_STOP) {
        /* Count the gradients: a worker that ran `clock` steps sent exactly
         * that many, and every one arrived. */
        if (sv->arrived[w] != clock || sv->receiving[w])
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: worker rank %d stopped after %ld steps but "
                           "%ld of its gradients arrived", sv->comm->rank, world_rank_of(sv, w), clock,
                           sv->arrived[w]);
        sv->stopped[w] = 1;
        return DT_OK;
    }
    if (kind == PS_CTRL_PULL) {
        sv->pulling[w] = 1;
    } else if (kind == PS_CTRL_CKPT) {
        /* Flushed before worker 0 can go on: a stop after this checkpoint
         * merges this server's part as it is now. */
        DT_TRY(dt_timeline_flush(sv->cfg->timeline));
        for (int k = 0; k < dt_optim_nslots(sv->optim); k++)
            DT_TRY(dt_mpi_check(MPI_Send(sv->state + (size_t)k * sv->n, (int)sv->n, MPI_FLOAT, world_rank_of(sv, w),
                                         PS_TAG_MOM, sv->comm->world),
                                "optimiser state for checkpoint (MPI_Send)"));
    } else if (kind == PS_CTRL_STEP) {
        if (sv->receiving[w] || sv->awaiting[w] || clock != sv->arrived[w])
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: worker rank %d started clock %ld out of turn",
                           sv->comm->rank, world_rank_of(sv, w), clock + 1);
        sv->wclock[w] = clock;
        *lr_of(sv, w, clock) = (float)sv->ctrl[w][2];
        note_gap(sv, clock);
        if (sv->deferred && slot_queued(sv, w, clock))
            sv->post_pending[w] = 1; /* posted once an applier frees the slot */
        else
            DT_TRY(post_grads(sv, w));
    } else {
        return dt_fail(DT_ERR_MPI, "server rank %d: unknown control message %d from rank %d",
                       sv->comm->rank, kind, world_rank_of(sv, w));
    }
    return post_ctrl(sv, w);
}

/* One optimiser step, the t-th, with gradient g (n floats, as the shard)
 * on [lo, hi) of the shard. */
static void apply(server *sv, float lr, long t, const float *g, size_t lo, size_t hi) {
    dt_optim_vec v = {sv->params, g, sv->state, sv->n, sv->lo};
    dt_optim_update(sv->optim, lr, t, v, lo, hi);
}

/* ps-hogwild's racy parts, kept in functions of their own so the TSan
 * suppression (tests/tsan.supp) names exactly them: two appliers update the
 * shard and its optimiser state at once, and replies copy it while they do. Each
 * float is read and written whole (aligned 32-bit accesses are atomic on
 * every CPU dtrain runs on), so a race can lose or mix an update of one
 * element, never tear a float, write out of bounds or make a NaN from
 * finite values; versions and counts stay exact (they are under qmu). */
/* Applier k of K sweeps the shard from k/K of the way along and wraps
 * round: two gradients arriving together (workers run symmetric steps, so
 * they often do) would otherwise be swept side by side, element for
 * element, and race on nearly every one. Started apart at equal speed, two
 * sweeps meet only if one is slowed; the race stays possible, not
 * systematic. The start is moved to a tensor boundary where the optimiser
 * needs whole tensors (LARS, LAMB). */
__attribute__((noinline)) static void hogwild_apply(server *sv, float lr, long t, const float *g, int k) {
    size_t start = dt_optim_align(sv->optim, sv->lo + sv->n / HOGWILD_APPLIERS * (size_t)k) - sv->lo;
    apply(sv, lr, t, g, start, sv->n);
    apply(sv, lr, t, g, 0, start);
}
__attribute__((noinline)) static void hogwild_snapshot(const server *sv, float *snap, size_t lo, size_t hi) {
    memcpy(snap + lo, sv->params + lo, sizeof(float) * (hi - lo));
}

/* Copies [lo, hi) of the shard into the same place of w's reply buffer,
 * which it returns (the snapshot to send from). */
static const float *take_snapshot(server *sv, int w, size_t lo, size_t hi) {
    float *snap = sv->reply + (size_t)w * sv->n;
    if (sv->hogwild) {
        hogwild_snapshot(sv, snap, lo, hi);
        return snap;
    }
    /* Only nowait's applier changes params concurrently; elsewhere pmu is
     * uncontended. */
    pthread_mutex_lock(&sv->pmu);
    memcpy(snap + lo, sv->params + lo, sizeof(float) * (hi - lo));
    pthread_mutex_unlock(&sv->pmu);
    return snap;
}

/* The step of one gradient in the asynchronous modes. Its share of a
 * synchronous update, lr / W, so one --lr means the same step size per
 * sample in every mode. Staleness-aware beyond the normal (Zhang et al.
 * 2016): with W workers a gradient normally finds the W - 1 others' updates
 * applied since it read, plus in the deferred modes the worker's own
 * previous gradient (it read before that was applied); the share already
 * accounts for those. A staler one gets lr / (1 + lag). */
static float async_lr(const server *sv, float lr, long lag) {
    long normal = sv->W - 1 + sv->deferred;
    return lag <= normal ? lr / (float)sv->W : lr / (float)(1 + lag);
}

static void *applier(void *arg) {
    server *sv = arg;
    pthread_mutex_lock(&sv->qmu);
    int k = sv->applier_tracks++, track = DT_TL_APPLIER + k;
    for (;;) {
        while (!sv->quit && sv->qlen == 0) pthread_cond_wait(&sv->queued, &sv->qmu);
        if (sv->qlen == 0) break; /* quit, and nothing left */
        apply_job j = sv->queue[sv->qhead];
        sv->qhead = (sv->qhead + 1) % (sv->W * sv->nslots);
        sv->qlen--;
        sv->inflight++;
        long lag = sv->version - j.v_read, count = sv->version + sv->inflight + sv->t_offset; /* this update's number */
        pthread_mutex_unlock(&sv->qmu);
        float lr = async_lr(sv, j.lr, lag);
        const float *g = slot_of(sv, j.w, j.clock);
        double t0 = dt_now();
        if (sv->hogwild) {
            hogwild_apply(sv, lr, count, g, k);
        } else {
            pthread_mutex_lock(&sv->pmu);
            apply(sv, lr, count, g, 0, sv->n);
            pthread_mutex_unlock(&sv->pmu);
        }
        dt_timeline_span(sv->cfg->timeline, track, DT_TL_CAT_UPDATE, "apply", t0, dt_now(),
                         (dt_tl_arg[]){{"worker", world_rank_of(sv, j.w)}, {"clock", j.clock}, {"lag", lag}}, 3);
        pthread_mutex_lock(&sv->qmu);
        sv->version++;
        sv->applied++;
        sv->inflight--;
        *busy_of(sv, j.w, j.clock) = 0;
        pthread_cond_broadcast(&sv->drained);
    }
    pthread_mutex_unlock(&sv->qmu);
    return NULL;
}

/* Deferred modes: hand w's completed gradient to the appliers. */
static void enqueue(server *sv, int w, long c) {
    pthread_mutex_lock(&sv->qmu);
    int cap = sv->W * sv->nslots;
    sv->queue[(sv->qhead + sv->qlen) % cap] = (apply_job){w, c, *lr_of(sv, w, c), sv->v_read[w]};
    sv->qlen++;
    *busy_of(sv, w, c) = 1;
    pthread_cond_signal(&sv->queued);
    pthread_mutex_unlock(&sv->qmu);
}

/* Blocks until the appliers have applied everything queued. */
static void drain_queue(server *sv) {
    pthread_mutex_lock(&sv->qmu);
    while (sv->qlen > 0 || sv->inflight > 0) pthread_cond_wait(&sv->drained, &sv->qmu);
    pthread_mutex_unlock(&sv->qmu);
}

static MPI_Request *reply_reqs(const server *sv, int w) { return sv->reply_req + (size_t)w * (size_t)sv->nreply; }

/* w received our previous reply before it could start this clock: its
 * buffers are free (these complete at once). */
static dt_status wait_replies(server *sv, int w) {
    return dt_mpi_check(MPI_Waitall(sv->nreply, reply_reqs(sv, w), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

static long current_version(server *sv) {
    pthread_mutex_lock(&sv->qmu);
    long v = sv->version;
    pthread_mutex_unlock(&sv->qmu);
    return v;
}

/* Sends w the header of its reply: the shard's version and w's lag; w's
 * next gradient will be computed on version *v_read (NULL: the version in
 * this header, read under the same lock). */
/* SIGINT/SIGTERM on this server's rank: passed on in every reply header. */
static int signalled(const server *sv) { return sv->cfg->stop && atomic_load(sv->cfg->stop); }

static dt_status send_header(server *sv, int w, long lag, const long *v_read) {
    MPI_Request *r = reply_reqs(sv, w);
    DT_TRY(dt_mpi_check(MPI_Wait(&r[0], MPI_STATUS_IGNORE), "MPI_Wait"));
    double *h = sv->hdr + (size_t)w * (size_t)sv->hdr_len;
    pthread_mutex_lock(&sv->qmu);
    h[0] = (double)sv->version;
    h[1] = (double)lag;
    h[2] = (double)sv->committed;
    /* Queued gradients count as spent: they will be applied. */
    h[3] = sv->budget > 0 && sv->applied + sv->qlen + sv->inflight >= sv->budget;
    h[4] = signalled(sv);
    sv->v_read[w] = v_read ? *v_read : sv->version;
    pthread_mutex_unlock(&sv->qmu);
    sv->awaiting[w] = 0;
    return dt_mpi_check(MPI_Isend(h, sv->hdr_len, MPI_DOUBLE, world_rank_of(sv, w), PS_TAG_HDR, sv->comm->world,
                                  &r[0]),
                        "parameter reply (MPI_Isend)");
}

/* Sends w floats [lo, hi) of src (the shard, or a snapshot of it) as
 * request `slot` of its reply; a clock's reply (clock) goes encoded when
 * the wire is 16-bit. */
static dt_status send_params(server *sv, int w, const float *src, size_t lo, size_t hi, int slot, int clock) {
    double t0 = dt_now();
    int to = world_rank_of(sv, w);
    const void *data = src + lo;
    MPI_Datatype type = MPI_FLOAT;
    if (clock && sv->wire) {
        uint16_t *words = sv->wire_reply + (size_t)w * sv->n + lo;
        dt_half_encode(sv->wire, src + lo, words, hi - lo);
        data = words;
        type = MPI_UINT16_T;
    }
    DT_TRY(dt_mpi_check(MPI_Isend(data, (int)(hi - lo), type, to, PS_TAG_PARAM, sv->comm->world,
                                  &reply_reqs(sv, w)[slot]),
                        "parameter reply (MPI_Isend)"));
    double bytes = (double)(hi - lo) * (type == MPI_FLOAT ? sizeof(float) : sizeof(uint16_t));
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_COMM, "reply", t0, dt_now(),
                     (dt_tl_arg[]){{"worker", to}, {"bytes", bytes}}, 2);
    return DT_OK;
}

/* Sends w a snapshot of the whole shard with its header: a clock's reply
 * (clock), or a pull's. */
static dt_status reply(server *sv, int w, long lag, int clock) {
    DT_TRY(wait_replies(sv, w));
    const float *snap = take_snapshot(sv, w, 0, sv->n);
    DT_TRY(send_header(sv, w, lag, NULL));
    return send_params(sv, w, snap, 0, sv->n, 1, clock);
}

/* ps-async: the first segment of w's gradient is here (or, on a shard
 * without segments, all of it): its previous reply has gone; this
 * gradient's lag and step are fixed, and the version w will read is the
 * shard's now plus this gradient (later segments may carry more). */
static dt_status async_reply_begins(server *sv, int w) {
    DT_TRY(wait_replies(sv, w));
    sv->seg_lag[w] = sv->version - sv->v_read[w]; /* others' updates since w read */
    sv->seg_lr[w] = async_lr(sv, *lr_of(sv, w, sv->wclock[w]), sv->seg_lag[w]);
    sv->seg_version[w] = sv->version + 1;
    return DT_OK;
}

/* ps-async: w's gradient segment k is here; applied, it goes straight back
 * (a snapshot: another worker's update may change the shard while this
 * reply is still being read). */
static dt_status async_segment(server *sv, int w, int k) {
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    if (k == 0) DT_TRY(async_reply_begins(sv, w));
    double t0 = dt_now();
    const float *g = slot_of(sv, w, sv->wclock[w]);
    apply(sv, sv->seg_lr[w], sv->seg_version[w] + sv->t_offset, g, lo, hi);
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply", t0, dt_now(),
                     (dt_tl_arg[]){{"worker", world_rank_of(sv, w)}, {"clock", sv->wclock[w]}, {"segment", k}},
                     3);
    return send_params(sv, w, take_snapshot(sv, w, lo, hi), lo, hi, 1 + k, 1);
}

/* Clock c's step on segment k of the shard: every worker's gradient
 * averaged in worker order, one optimiser step (so ps-sync and ps-ssp
 * --staleness 0 give serial's numbers). */
static void average_and_apply(server *sv, long c, int k) {
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    double t0 = dt_now();
    memcpy(sv->sum + lo, slot_of(sv, 0, c) + lo, sizeof(float) * (hi - lo));
    for (int w = 1; w < sv->W; w++) {
        const float *g = slot_of(sv, w, c);
        for (size_t i = lo; i < hi; i++) sv->sum[i] += g[i];
    }
    float inv = 1.0f / (float)sv->W;
    for (size_t i = lo; i < hi; i++) sv->sum[i] *= inv;
    apply(sv, *lr_of(sv, 0, c), c + 1, sv->sum, lo, hi);
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply clock", t0, dt_now(),
                     (dt_tl_arg[]){{"clock", c}, {"segment", k}}, 2);
}

/* Has worker v delivered segment k of clock c? */
static int delivered(const server *sv, int v, int k, long c) {
    return sv->arrived[v] > c || (sv->receiving[v] && sv->wclock[v] == c && sv->seg_done[v] > k);
}

/* Commits segment k clock by clock while every worker has delivered it.
 * ps-sync sends segments straight from the shard (below): MPI wants those
 * sends complete before it changes, and they are, since every worker
 * received the last clock before it could deliver this one. */
static dt_status commit_segment(server *sv, int k) {
    for (;;) {
        long c = sv->seg_committed[k];
        for (int v = 0; v < sv->W; v++)
            if (!delivered(sv, v, k, c)) return DT_OK;
        for (int v = 0; sv->staleness == 0 && v < sv->W; v++)
            DT_TRY(dt_mpi_check(MPI_Wait(&reply_reqs(sv, v)[1 + k], MPI_STATUS_IGNORE), "MPI_Wait"));
        average_and_apply(sv, c, k);
        sv->seg_committed[k]++;
    }
}

/* Sends w what its next clock may read: segment by segment, each once w
 * has delivered it and it holds every clock up to (w's clock - s); then,
 * once w's gradient is complete, the header with each segment's committed
 * clocks (for w's read-my-writes). With s = 0 nothing changes a segment
 * before every worker has it, so it goes straight from the shard; with
 * s > 0 a faster worker's clock may commit on it meanwhile: a snapshot. */
static dt_status advance_reply(server *sv, int w) {
    if (!sv->receiving[w] && !sv->awaiting[w]) return DT_OK;
    long c = sv->wclock[w];
    double *h = sv->hdr + (size_t)w * (size_t)sv->hdr_len;
    for (int k; (k = sv->seg_sent[w]) < sv->nseg; sv->seg_sent[w]++) {
        if (!delivered(sv, w, k, c) || sv->seg_committed[k] < c + 1 - sv->staleness) return DT_OK;
        if (k == 0) DT_TRY(wait_replies(sv, w));
        const float *src = sv->staleness > 0 ? take_snapshot(sv, w, sv->seg_lo[k], sv->seg_hi[k]) : sv->params;
        h[PS_HDR_LEN + k] = (double)sv->seg_committed[k];
        DT_TRY(send_params(sv, w, src, sv->seg_lo[k], sv->seg_hi[k], 1 + k, 1));
    }
    /* (With segments all sent the whole clocks are there too; an empty
     * shard has only them to wait for.) */
    if (!sv->awaiting[w] || sv->committed < c + 1 - sv->staleness) return DT_OK;
    return send_header(sv, w, c + 1 - sv->committed, NULL);
}

/* The clocked modes after a segment or a gradient arrived: commit what
 * every worker has delivered, count whole clocks, send what may be read. */
static dt_status clocked_progress(server *sv) {
    for (int k = 0; k < sv->nseg; k++) DT_TRY(commit_segment(sv, k));
    for (;;) { /* a clock is whole once all its segments are (or all gradients, on an empty shard) */
        int whole = 1;
        for (int k = 0; k < sv->nseg; k++) whole &= sv->seg_committed[k] > sv->committed;
        for (int v = 0; sv->nseg == 0 && v < sv->W; v++) whole &= sv->arrived[v] > sv->committed;
        if (!whole) break;
        sv->committed++;
        sv->version++;
        sv->applied += sv->W;
    }
    for (int w = 0; w < sv->W; w++) DT_TRY(advance_reply(sv, w));
    return DT_OK;
}

/* Worker w's gradients for its clock are all here. */
static dt_status gradient_complete(server *sv, int w) {
    long c = sv->wclock[w];
    sv->receiving[w] = 0;
    sv->arrived[w] = c + 1;
    dt_timeline_span(sv->cfg->timeline, DT_TL_RECV + w, DT_TL_CAT_COMM, "receive gradients", sv->grad_posted[w],
                     dt_now(), (dt_tl_arg[]){{"clock", c}, {"bytes", dt_ps_bytes_each_way(&sv->cfg->codec, sv->n)}}, 2);
    if (sv->deferred) {
        long lag = current_version(sv) - sv->v_read[w];
        enqueue(sv, w, c);
        return reply(sv, w, lag, 1);
    }
    if (!sv->clocked) { /* ps-async: its segments have all gone back */
        if (sv->nseg == 0) DT_TRY(async_reply_begins(sv, w));
        sv->version++;
        sv->applied++;
        return send_header(sv, w, sv->seg_lag[w], &sv->seg_version[w]);
    }
    sv->awaiting[w] = 1;
    return clocked_progress(sv);
}

/* A PULL is answered with every clock the pulling worker delivered
 * applied: at once in ps-async; in the clocked modes once those clocks are
 * committed (the state evaluation and checkpoints must see). Not more:
 * another worker may already be sending its next clock, which cannot
 * commit before the pulling worker's. */
static dt_status serve_pulls(server *sv, int *progressed) {
    int any = 0;
    for (int w = 0; w < sv->W; w++) any |= sv->pulling[w];
    if (!any) return DT_OK;
    if (sv->deferred) drain_queue(sv);
    for (int w = 0; w < sv->W; w++) {
        if (!sv->pulling[w]) continue;
        if (sv->clocked && (sv->committed < sv->arrived[w] || sv->receiving[w])) continue;
        sv->pulling[w] = 0;
        *progressed = 1;
        DT_TRY(reply(sv, w, 0, 0));
    }
    return DT_OK;
}

/* Takes in w's gradient segments that have arrived, tested in the order
 * they were sent (the order MPI matches them in), and the gradient once all
 * are here. */
static dt_status take_segments(server *sv, int w, int *progressed) {
    MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
    while (sv->seg_done[w] < sv->ngrad[w]) {
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Test(&r[sv->seg_done[w]], &done, MPI_STATUS_IGNORE), "MPI_Test"));
        if (!done) return DT_OK;
        int k = sv->seg_done[w]++;
        *progressed = 1;
        if (sv->wire) {
            size_t lo = sv->seg_lo[k];
            dt_half_decode(sv->wire, sv->wire_recv + (size_t)w * sv->n + lo, slot_of(sv, w, sv->wclock[w]) + lo,
                           sv->seg_hi[k] - lo);
        }
        if (ps_segmented(sv->cfg->mode)) DT_TRY(sv->clocked ? clocked_progress(sv) : async_segment(sv, w, k));
    }
    *progressed = 1;
    return gradient_complete(sv, w);
}

/* Takes in control messages and gradient segments; 1 in *progressed if
 * anything happened, 0 in *active once every worker has stopped. */
static dt_status poll_once(server *sv, int *progressed, int *active) {
    *progressed = *active = 0;
    for (int w = 0; w < sv->W; w++) {
        if (sv->stopped[w]) continue;
        (*active)++;
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Test(&sv->ctrl_req[w], &done, MPI_STATUS_IGNORE), "MPI_Test"));
        if (done) {
            DT_TRY(handle_ctrl(sv, w));
            *progressed = 1;
        }
        if (sv->post_pending[w] && !slot_queued(sv, w, sv->wclock[w])) {
            sv->post_pending[w] = 0;
            DT_TRY(post_grads(sv, w));
            *progressed = 1;
        }
        if (sv->receiving[w]) DT_TRY(take_segments(sv, w, progressed));
    }
    return serve_pulls(sv, progressed);
}

static void report_stall(server *sv, double waited) {
    char missing[256] = "";
    size_t used = 0;
    for (int w = 0; w < sv->W && used + 1 < sizeof missing; w++)
        if (!sv->stopped[w] && !sv->awaiting[w])
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "",
                                     world_rank_of(sv, w));
    fprintf(stderr, "dtrain: server rank %d: clock %ld has waited %.0f s for gradients from worker rank(s) %s\n",
            sv->comm->rank, sv->committed + 1, waited, missing);
}

/* At the end: every delivered gradient was applied exactly once (each
 * worker's count was checked against its steps at STOP), and the replies
 * have left. */
static dt_status check_counts(server *sv) {
    if (sv->deferred) drain_queue(sv);
    long delivered = 0;
    for (int w = 0; w < sv->W; w++) delivered += sv->arrived[w] - sv->first_clock;
    if (sv->applied != delivered || (sv->clocked && sv->committed * sv->W - sv->first_clock * sv->W != delivered))
        return dt_fail(DT_ERR_INTERNAL, "server rank %d: %ld gradients delivered but %ld applied",
                       sv->comm->rank, delivered, sv->applied);
    return dt_mpi_check(MPI_Waitall(sv->nreply * sv->W, sv->reply_req, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

static dt_status serve(server *sv) {
    for (int w = 0; w < sv->W; w++) DT_TRY(post_ctrl(sv, w));
    long sleep_ns = 1000;
    double idle_since = dt_now(), next_report = idle_since + sv->cfg->stall_timeout;
    for (;;) {
        int progressed, active;
        DT_TRY(poll_once(sv, &progressed, &active));
        if (!active) return check_counts(sv);
        double now = dt_now();
        if (progressed) {
            sleep_ns = 1000;
            idle_since = now;
            next_report = now + sv->cfg->stall_timeout;
            continue;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
        if (sv->cfg->stall_timeout > 0 && now >= next_report) {
            report_stall(sv, now - idle_since);
            next_report = now + sv->cfg->stall_timeout;
        }
    }
}

static dt_status setup(server *sv) {
    DT_TRY(dt_net_create(&sv->net, sv->spec, 1, 1));
    sv->W = sv->comm->nworkers / sv->cfg->group_size;
    const dt_mode_info *mode = dt_mode_info_of(sv->cfg->mode);
    sv->clocked = mode->ps == DT_PS_CLOCKED;
    sv->deferred = mode->ps == DT_PS_DEFERRED;
    sv->hogwild = mode->racy;
    sv->staleness = mode->flags & DT_MF_STALENESS ? sv->cfg->staleness : 0;
    /* Deferred: two slots, so a worker's next clock can arrive while its
     * last gradient still waits in the queue. */
    sv->nslots = sv->clocked ? sv->staleness + 2 : sv->deferred ? 2 : 1;
    DT_TRY(dt_comm_plan_create(&sv->plan, sv->net, sv->cfg->mode, sv->cfg->sfb, sv->W, sv->cfg->batch,
                               &sv->cfg->codec));
    DT_TRY(dt_optim_create(&sv->optim, &sv->spec->optim, sv->net, sv->plan.ps_offset));
    ps_shard(sv->optim, sv->plan.ps_n, sv->comm->nservers, sv->comm->rank, &sv->lo, &sv->hi);
    sv->n = sv->hi - sv->lo;
    size_t W = (size_t)sv->W, L = (size_t)sv->net->nlayers, S = (size_t)sv->nslots, rn, wn, sn;
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_lo, L * sizeof(size_t), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_hi, L * sizeof(size_t), "server"));
    sv->nseg = ps_segments(sv->plan.ps_offset, sv->net->nlayers, sv->lo, sv->hi, sv->lo, sv->seg_lo, sv->seg_hi);
    sv->nreply = sv->nseg + 1 > 2 ? sv->nseg + 1 : 2;
    sv->hdr_len = PS_HDR_LEN + sv->nseg;
    DT_TRY(dt_mul_size(&wn, W, sv->n, "server buffers"));
    DT_TRY(dt_mul_size(&rn, wn, S, "server buffers"));
    DT_TRY(dt_alloc_floats(&sv->params, sv->n, "server shard"));
    DT_TRY(dt_mul_size(&sn, (size_t)dt_optim_nslots(sv->optim), sv->n, "server optimiser state"));
    DT_TRY(dt_alloc_floats(&sv->state, sn, "server optimiser state"));
    DT_TRY(dt_alloc_floats(&sv->sum, sv->n, "server shard"));
    DT_TRY(dt_alloc_floats(&sv->recv, rn, "server gradients"));
    DT_TRY(dt_alloc_floats(&sv->reply, wn, "server replies"));
    sv->wire = dt_gc_is_half(sv->cfg->codec.kind) ? sv->cfg->codec.kind : DT_GC_NONE;
    if (sv->wire) {
        DT_TRY(dt_alloc_bytes((void **)&sv->wire_recv, wn * sizeof(uint16_t), "server gradients"));
        DT_TRY(dt_alloc_bytes((void **)&sv->wire_reply, wn * sizeof(uint16_t), "server replies"));
    }
    DT_TRY(dt_alloc_floats(&sv->lr, W * S, "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->hdr, W * (size_t)sv->hdr_len * sizeof(double), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_committed, L * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_sent, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ctrl, W * sizeof *sv->ctrl, "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ctrl_req, W * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->reply_req, (size_t)sv->nreply * W * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->grad_req, W * L * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->ngrad, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_done, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_lr, W * sizeof(float), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_lag, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_version, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->receiving, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->awaiting, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->stopped, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->pulling, W * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->wclock, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->arrived, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->v_read, W * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->grad_posted, W * sizeof(double), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->queue, W * S * sizeof(apply_job), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->slot_busy, W * S * sizeof(int), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->post_pending, W * sizeof(int), "server"));
    for (size_t i = 0; i < (size_t)sv->nreply * W; i++) sv->reply_req[i] = MPI_REQUEST_NULL;
    for (size_t w = 0; w < W; w++) sv->wclock[w] = -1;
    /* Worker 0 sends this shard's parameters and optimiser state, the budget
     * of gradients (ps-async), the clock the run starts at (resume) and the
     * optimiser's updates done. */
    int w0 = world_rank_of(sv, 0);
    double run[3];
    DT_TRY(dt_mpi_check(MPI_Recv(sv->params, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT, sv->comm->world,
                                 MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)"));
    for (int k = 0; k < dt_optim_nslots(sv->optim); k++)
        DT_TRY(dt_mpi_check(MPI_Recv(sv->state + (size_t)k * sv->n, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT,
                                     sv->comm->world, MPI_STATUS_IGNORE),
                            "server initialisation (MPI_Recv)"));
    DT_TRY(dt_mpi_check(MPI_Recv(run, 3, MPI_DOUBLE, w0, PS_TAG_INIT, sv->comm->world, MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)"));
    sv->budget = (long)run[0];
    sv->t_offset = (long)run[2] - (long)run[1];
    sv->first_clock = sv->committed = sv->version = (long)run[1];
    for (size_t w = 0; w < W; w++) sv->arrived[w] = sv->v_read[w] = sv->seg_version[w] = sv->committed;
    for (int k = 0; k < sv->nseg; k++) sv->seg_committed[k] = sv->committed;
    for (int i = 0; sv->deferred && i < (sv->hogwild ? HOGWILD_APPLIERS : 1); i++) {
        if (pthread_create(&sv->appliers[i], NULL, applier, sv) != 0)
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: cannot start an applier thread", sv->comm->rank);
        sv->nappliers++;
    }
    return DT_OK;
}

static void teardown(server *sv) {
    pthread_mutex_lock(&sv->qmu);
    sv->quit = 1;
    pthread_cond_broadcast(&sv->queued);
    pthread_mutex_unlock(&sv->qmu);
    for (int i = 0; i < sv->nappliers; i++) pthread_join(sv->appliers[i], NULL);
    pthread_mutex_destroy(&sv->qmu);
    pthread_mutex_destroy(&sv->pmu);
    pthread_cond_destroy(&sv->queued);
    pthread_cond_destroy(&sv->drained);
    dt_net_free(sv->net);
    dt_comm_plan_free(&sv->plan);
    dt_optim_free(sv->optim);
    void *bufs[] = {sv->params, sv->state, sv->sum, sv->recv, sv->reply, sv->lr, sv->hdr, sv->ctrl,
                    sv->ctrl_req, sv->reply_req, sv->grad_req, sv->ngrad, sv->receiving, sv->awaiting,
                    sv->stopped, sv->pulling, sv->wclock, sv->arrived, sv->v_read, sv->queue,
                    sv->slot_busy, sv->post_pending, sv->grad_posted, sv->seg_lo, sv->seg_hi, sv->seg_done,
                    sv->seg_lr, sv->seg_lag, sv->seg_version, sv->seg_committed, sv->seg_sent,
                    sv->wire_recv, sv->wire_reply};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
}

dt_status dt_server_run(const dt_comm *c, const dt_dist_cfg *cfg, const dt_model_spec *spec) {
    server sv;
    memset(&sv, 0, sizeof sv);
    pthread_mutex_init(&sv.qmu, NULL);
    pthread_mutex_init(&sv.pmu, NULL);
    pthread_cond_init(&sv.queued, NULL);
    pthread_cond_init(&sv.drained, NULL);
    sv.comm = c;
    sv.cfg = cfg;
    sv.spec = spec;
    double t0 = dt_now();
    dt_status s = setup(&sv);
    if (s == DT_OK) s = serve(&sv);
    if (s == DT_OK) {
        /* CPU time against wall time: how much of a core the server took. */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double st[PS_STATS_LEN] = {(double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                                       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec,
                                   dt_now() - t0, (double)sv.version, (double)sv.max_gap,
                                   (double)sv.applied};
        s = dt_mpi_check(MPI_Send(st, PS_STATS_LEN, MPI_DOUBLE, world_rank_of(&sv, 0), PS_TAG_STATS, c->world),
                         "server statistics (MPI_Send)");
    }
    /* The workers stopped at an agreed step because of it (they say where). */
    if (s == DT_OK && signalled(&sv)) s = dt_fail(DT_ERR_INTERRUPTED, "server rank %d: interrupted", c->rank);
    teardown(&sv);
    return s;
}
