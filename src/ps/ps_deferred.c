/* Parameter servers, the deferred policy (ps-async-nowait, ps-hogwild):
 * a worker gets the latest shard the moment its gradient is complete, and
 * the gradient is queued for applier threads: one applying under the
 * shard's lock (nowait), or two at once without it (hogwild). */
#include "dtrain/timer.h"
#include "ps_server.h"

int ps_slot_queued(server *sv, int w, long clock) {
    pthread_mutex_lock(&sv->qmu);
    int busy = *busy_of(sv, w, clock);
    pthread_mutex_unlock(&sv->qmu);
    return busy;
}

/* ps-hogwild's racy parts (with hogwild_snapshot in ps_server.c), kept in
 * functions of their own so the TSan suppression (tests/tsan.supp) names
 * exactly them: two appliers update the shard and its optimiser state at
 * once, and replies copy it while they do. Each float is read and written
 * whole (aligned 32-bit accesses are atomic on
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
    ps_apply(sv, lr, t, g, start, sv->n);
    ps_apply(sv, lr, t, g, 0, start);
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
        float lr = ps_async_lr(sv, j.lr, lag);
        const float *g = slot_of(sv, j.w, j.clock);
        double t0 = dt_now();
        if (sv->hogwild) {
            hogwild_apply(sv, lr, count, g, k);
        } else {
            pthread_mutex_lock(&sv->pmu);
            ps_apply(sv, lr, count, g, 0, sv->n);
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
void ps_drain_queue(server *sv) {
    pthread_mutex_lock(&sv->qmu);
    while (sv->qlen > 0 || sv->inflight > 0) pthread_cond_wait(&sv->drained, &sv->qmu);
    pthread_mutex_unlock(&sv->qmu);
}

dt_status ps_start_appliers(server *sv) {
    for (int i = 0; i < (sv->hogwild ? HOGWILD_APPLIERS : 1); i++) {
        if (pthread_create(&sv->appliers[i], NULL, applier, sv) != 0)
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: cannot start an applier thread", sv->comm->rank);
        sv->nappliers++;
    }
    return DT_OK;
}

static dt_status deferred_complete(server *sv, int w) {
    long c = sv->wclock[w], lag = ps_current_version(sv) - sv->v_read[w];
    enqueue(sv, w, c);
    return ps_reply(sv, w, lag, 1);
}

const ps_policy ps_deferred_policy = {NULL, deferred_complete};
