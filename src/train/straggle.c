/* Fault injection as a strategy wrapper: --straggle and --slow-worker sleep
 * at the start of a step, as a slow or interrupted machine would. */
#include <math.h>
#include <time.h>

#include "dtrain/mem.h"
#include "dtrain/rng.h"
#include "dtrain/timer.h"
#include "dtrain/train.h"

/* The wrapper is a copy of the inner strategy's table (so every hook of
 * the inner runs on the wrapper, with the inner's ctx, and what the hooks
 * set, stats, stop_requested, plan_bytes, is set on the wrapper), with its
 * own begin_step and free. */
typedef struct {
    dt_sync sync; /* first: what the trainer holds */
    dt_sync *inner;
    dt_status (*inner_begin_step)(dt_sync *s, dt_trainer *t, float lr);
    dt_straggle_cfg cfg;
} straggler;

/* This rank's sleep at a step in ms; the chance drawn from (seed, rank, step). */
static double sleep_ms(const dt_straggle_cfg *c, long step) {
    double ms = 0;
    if (c->slow_ms > 0 && c->world_rank == c->slow_rank) ms += c->slow_ms;
    if (c->p > 0) {
        dt_rng r = dt_rng_seed(dt_hash3(c->seed, (uint64_t)c->world_rank, (uint64_t)step ^ 0x57a9));
        if (dt_rng_uniform(&r) < c->p) ms += c->ms;
    }
    return ms;
}

static dt_status straggle_begin_step(dt_sync *s, dt_trainer *t, float lr) {
    straggler *w = (straggler *)s;
    double ms = sleep_ms(&w->cfg, dt_trainer_step(t));
    if (ms > 0) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
        double t0 = dt_now();
        nanosleep(&ts, NULL);
        dt_timeline_span(w->cfg.timeline, DT_TL_MAIN, DT_TL_CAT_WAIT, "straggler sleep", t0, dt_now(), NULL, 0);
    }
    return w->inner_begin_step ? w->inner_begin_step(s, t, lr) : DT_OK;
}

static void straggle_free(dt_sync *s) {
    straggler *w = (straggler *)s;
    w->inner->ended_together = s->ended_together; /* what the inner's free reads of the run */
    w->inner->free(w->inner);
    dt_free(w);
}

dt_status dt_sync_straggle_wrap(dt_sync **s, const dt_straggle_cfg *cfg) {
    if (cfg->p <= 0 && !(cfg->slow_ms > 0 && cfg->world_rank == cfg->slow_rank)) return DT_OK;
    straggler *w;
    DT_TRY(dt_alloc_bytes((void **)&w, sizeof *w, "straggler"));
    w->sync = **s;
    w->inner = *s;
    w->inner_begin_step = (*s)->begin_step;
    w->cfg = *cfg;
    w->sync.begin_step = straggle_begin_step;
    w->sync.free = straggle_free;
    *s = &w->sync;
    return DT_OK;
}
