/* Parameter servers, the deferred policy (ps-async-nowait, ps-hogwild):
 * a worker gets the latest shard the moment its gradient is complete, and
 * the gradient is queued for applier threads: one applying under the
 * shard's lock (nowait), or two at once without it (hogwild). */
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "comm/threads.h"
#include "ps_server.h"

enum { HOGWILD_APPLIERS = 2 };

/* A queued gradient: worker w's clock, its lr and the version it read. */
typedef struct {
    int w;
    long clock;
    float lr;
    long v_read;
} apply_job;

/* The queue, its slots and inflight are shared with the appliers under
 * the core's mu (with the version and applied counts they update); the
 * shard under pmu (nowait) or no lock at all (hogwild). */
typedef struct {
    int hogwild;         /* the mode's racy: two appliers, no lock on the shard */
    int nappliers, quit, inflight;
    int applier_tracks;  /* appliers started: each takes the next timeline track */
    pthread_t appliers[HOGWILD_APPLIERS];
    pthread_mutex_t pmu;
    pthread_cond_t queued, drained;
    apply_job *queue;    /* (W * nslots) ring */
    int qhead, qlen;
    int *slot_busy;      /* (W, nslots) gradient queued, not yet applied */
} deferred;

static int *busy_of(const server *sv, int w, long clock) {
    const deferred *p = sv->pol;
    return p->slot_busy + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}

static int deferred_slot_busy(server *sv, int w, long clock) {
    pthread_mutex_lock(&sv->mu);
    int busy = *busy_of(sv, w, clock);
    pthread_mutex_unlock(&sv->mu);
    return busy;
}

/* ps-hogwild's racy parts, kept in functions of their own so the TSan
 * suppression (tests/tsan.supp) names exactly them: two appliers update
 * the shard and its optimiser state at once, and replies copy it while
 * they do. Each float is read and written whole (aligned 32-bit accesses
 * are atomic on every CPU dtrain runs on), so a race can lose or mix an
 * update of one element, never tear a float, write out of bounds or make a
 * NaN from finite values; versions and counts stay exact (they are under
 * mu). */
__attribute__((noinline)) static void hogwild_snapshot(const server *sv, float *snap, size_t lo, size_t hi) {
    memcpy(snap + lo, sv->params + lo, sizeof(float) * (hi - lo));
}

/* Applier k of K sweeps the shard from k/K of the way along and wraps
 * round: two gradients arriving together (workers run symmetric steps, so
 * they often do) would otherwise be swept side by side, element for
 * element, and race on nearly every one. Started apart at equal speed, two
 * sweeps meet only if one is slowed; the race stays possible, not
 * systematic. The start is moved to a tensor boundary where the optimiser
 * needs whole tensors (LARS, LAMB). */
__attribute__((noinline)) static void hogwild_apply(server *sv, float lr, long t, const float *g, int k) {
    size_t start = dt_optim_align(sv->optim, sv->lo + sv->n / HOGWILD_APPLIERS * (size_t)k) - sv->lo;
    ps_apply(sv, lr, t, g, start, sv->n);
    ps_apply(sv, lr, t, g, 0, start);
}

/* A reply's copy of the shard while the appliers update it. */
static void deferred_copy(server *sv, float *dst, size_t lo, size_t hi) {
    deferred *p = sv->pol;
    if (p->hogwild) {
        hogwild_snapshot(sv, dst, lo, hi);
        return;
    }
    pthread_mutex_lock(&p->pmu);
    memcpy(dst + lo, sv->params + lo, sizeof(float) * (hi - lo));
    pthread_mutex_unlock(&p->pmu);
}

static void *applier(void *arg) {
    server *sv = arg;
    deferred *p = sv->pol;
    pthread_mutex_lock(&sv->mu);
    int k = p->applier_tracks++, track = DT_TL_APPLIER + k;
    for (;;) {
        while (!p->quit && p->qlen == 0) pthread_cond_wait(&p->queued, &sv->mu);
        if (p->qlen == 0) break; /* quit, and nothing left */
        apply_job j = p->queue[p->qhead];
        p->qhead = (p->qhead + 1) % (sv->W * sv->nslots);
        p->qlen--;
        p->inflight++;
        long lag = sv->version - j.v_read;
        long count = sv->version + p->inflight + sv->t_offset; /* this update's number */
        pthread_mutex_unlock(&sv->mu);
        /* Normally W updates since it read: the W - 1 others' and the
         * worker's own previous gradient (it read before that was applied). */
        float lr = ps_async_lr(sv, j.lr, lag, sv->W);
        const float *g = slot_of(sv, j.w, j.clock);
        double t0 = dt_now();
        if (p->hogwild) {
            hogwild_apply(sv, lr, count, g, k);
        } else {
            pthread_mutex_lock(&p->pmu);
            ps_apply(sv, lr, count, g, 0, sv->n);
            pthread_mutex_unlock(&p->pmu);
        }
        dt_timeline_span(sv->cfg->timeline, track, DT_TL_CAT_UPDATE, "apply", t0, dt_now(),
                         (dt_tl_arg[]){{"worker", world_rank_of(sv, j.w)}, {"clock", j.clock}, {"lag", lag}}, 3);
        pthread_mutex_lock(&sv->mu);
        sv->version++;
        sv->applied++;
        p->inflight--;
        *busy_of(sv, j.w, j.clock) = 0;
        pthread_cond_broadcast(&p->drained);
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/* Hands w's completed gradient to the appliers. */
static void enqueue(server *sv, int w, long c) {
    deferred *p = sv->pol;
    pthread_mutex_lock(&sv->mu);
    int cap = sv->W * sv->nslots;
    p->queue[(p->qhead + p->qlen) % cap] = (apply_job){w, c, *lr_of(sv, w, c), sv->peer[w].v_read};
    p->qlen++;
    *busy_of(sv, w, c) = 1;
    pthread_cond_signal(&p->queued);
    pthread_mutex_unlock(&sv->mu);
}

/* Blocks until the appliers have applied everything queued. */
static void drain(server *sv) {
    deferred *p = sv->pol;
    pthread_mutex_lock(&sv->mu);
    while (p->qlen > 0 || p->inflight > 0) pthread_cond_wait(&p->drained, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
}

static int deferred_pull_ready(server *sv, int w) {
    (void)w;
    drain(sv);
    return 1;
}

static dt_status deferred_finish(server *sv) {
    drain(sv);
    return DT_OK;
}

static dt_status deferred_complete(server *sv, int w) {
    long c = sv->peer[w].wclock, lag = ps_current_version(sv) - sv->peer[w].v_read;
    enqueue(sv, w, c);
    return ps_reply(sv, w, lag, 1);
}

/* Two, so a worker's next clock can arrive while its last gradient still
 * waits in the queue. */
static int deferred_slots(const dt_dist_cfg *cfg) {
    (void)cfg;
    return 2;
}

static dt_status deferred_setup(server *sv, ps_traits *tr) {
    deferred *p;
    size_t WS = (size_t)sv->W * (size_t)sv->nslots;
    DT_TRY(dt_alloc_bytes((void **)&p, sizeof *p, "server"));
    pthread_mutex_init(&p->pmu, NULL);
    pthread_cond_init(&p->queued, NULL);
    pthread_cond_init(&p->drained, NULL);
    sv->pol = p;
    p->hogwild = dt_mode_info_of(sv->cfg->mode)->racy;
    tr->turns = 1;
    tr->decodes = 0;
    DT_TRY(dt_alloc_bytes((void **)&p->queue, WS * sizeof(apply_job), "server"));
    DT_TRY(dt_alloc_bytes((void **)&p->slot_busy, WS * sizeof(int), "server"));
    for (int i = 0; i < (p->hogwild ? HOGWILD_APPLIERS : 1); i++) {
        if (pthread_create(&p->appliers[i], NULL, applier, sv) != 0)
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: cannot start an applier thread", sv->comm->rank);
        p->nappliers++;
    }
    return DT_OK;
}

/* The appliers apply what is queued, then end. */
static void deferred_free(server *sv) {
    deferred *p = sv->pol;
    if (!p) return;
    dt_threads_stop(&sv->mu, &p->queued, &p->quit, p->appliers, p->nappliers);
    pthread_mutex_destroy(&p->pmu);
    pthread_cond_destroy(&p->queued);
    pthread_cond_destroy(&p->drained);
    dt_free(p->queue);
    dt_free(p->slot_busy);
    dt_free(p);
}

const ps_policy ps_deferred_policy = {
    .slots = deferred_slots,
    .setup = deferred_setup,
    .complete = deferred_complete,
    .slot_busy = deferred_slot_busy,
    .copy = deferred_copy,
    .pull_ready = deferred_pull_ready,
    .finish = deferred_finish,
    .free = deferred_free,
};
