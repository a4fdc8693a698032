/* The coordinator (coord.h): stop and divergence agreement, and the end of
 * a run, by the strategy's pace. */
#include "coord.h"

void dt_coord_init(dt_coord *c, dt_sync *sync, dt_trainer *t, const atomic_int *signal, const atomic_int *finish,
                   int workers) {
    *c = (dt_coord){.sync = sync, .trainer = t, .signal = signal, .finish = finish, .workers = workers, .due = -1};
}

/* Workers that run every step together (allreduce, ps-sync, ps-ssp on 2+). */
static int lockstep(const dt_coord *c) { return c->workers > 1 && c->sync->pace == DT_PACE_LOCKSTEP; }

/* Apart workers with peers: they meet after their last step. */
static int apart(const dt_coord *c) { return c->workers > 1 && c->sync->pace == DT_PACE_APART; }

static dt_status diverged(const char *what, long step, int epoch) {
    return dt_fail(DT_ERR_NUMERIC,
                   "training diverged: %s at step %ld (epoch %d); the last checkpoint was "
                   "left as it was; try a lower --lr",
                   what, step, epoch);
}

void dt_coord_note_divergence(dt_coord *c, const char *what, long step, int epoch) {
    if (c->bad_step) return;
    c->bad_step = step;
    c->bad_epoch = epoch;
    c->bad_what = what;
}

/* Peers or servers expect every step this worker starts to be finished:
 * lockstep workers, and any worker of parameter servers (a server waits
 * for the gradients of a step it was told of, and for each worker's stop). */
dt_status dt_coord_loss_diverged(dt_coord *c, const char *what, long step, int epoch) {
    if (!lockstep(c) && !c->sync->finish) return diverged(what, step, epoch);
    dt_coord_note_divergence(c, what, step, epoch);
    return DT_OK;
}

/* A divergence seen here (this worker's or, agreed, another's): the
 * servers are told to stop like at the end of a run, so that they end and
 * the job (or the sweep's next trial) is not left waiting for them. Every
 * worker returns here together, so the job can end without MPI_Abort. */
static dt_status end_diverged(dt_coord *c) {
    if (c->sync->finish) DT_TRY(c->sync->finish(c->sync, c->trainer));
    if (c->bad_step) return diverged(c->bad_what, c->bad_step, c->bad_epoch);
    return dt_fail(DT_ERR_NUMERIC,
                   "training diverged: another worker's loss or parameters became NaN or infinite by step %ld; "
                   "the last checkpoint was left as it was; try a lower --lr", dt_trainer_step(c->trainer));
}

/* This worker's flags for an agreement: v[0] a stop was asked
 * (SIGINT/SIGTERM, or a server passed one on), v[1] a divergence seen,
 * v[2] the caller asked to finish early. */
enum { NFLAGS = 3 };
static void local_flags(const dt_coord *c, double v[NFLAGS]) {
    v[0] = (c->signal && atomic_load(c->signal)) || c->sync->stop_requested;
    v[1] = c->bad_step > 0 || c->leaving;
    v[2] = c->finish && atomic_load(c->finish);
}

/* Acts on agreed flags v (summed, or a group's maximum) of workers that
 * are together or not: a divergence ends the run (or an apart worker's
 * training); *stop says whether a stop was asked, *finish whether an early
 * finish was (a stop wins). */
static dt_status act(dt_coord *c, const double v[NFLAGS], int together, int *stop, int *finish) {
    if (v[1] > 0 && !together && apart(c)) {
        c->leaving = 1;
    } else if (v[1] > 0) {
        /* A divergence is seen by every worker of the reduction here, at once. */
        if (together) c->sync->ended_together = 1;
        return end_diverged(c);
    }
    *stop = v[0] > 0;
    *finish = !*stop && v[2] > 0;
    return DT_OK;
}

/* The agreement at a point where the workers are as close as here says:
 * over every worker when they are together, else this worker's own flags
 * or its group's (agree_stop). An agreement still open counts. */
static dt_status agree(dt_coord *c, dt_pace here, int *stop, int *finish) {
    double v[NFLAGS], open[NFLAGS] = {0, 0, 0};
    local_flags(c, v);
    int together = lockstep(c) || (here == DT_PACE_LOCKSTEP && c->workers > 1);
    if (c->due >= 0) { /* the started one first, as every worker does */
        DT_TRY(c->sync->reduce_sum_finish(c->sync, open, NFLAGS));
        c->due = -1;
    }
    if (together) {
        DT_TRY(c->sync->reduce_sum(c->sync, v, NFLAGS));
    } else if (c->sync->agree_stop) {
        /* Reduced by MAX, so by priority: a divergence (4..7) over a stop
         * (2, 3) over a finish (1). */
        int flags = (v[2] > 0) | (v[0] > 0) << 1 | (v[1] > 0) << 2;
        DT_TRY(c->sync->agree_stop(c->sync, &flags));
        v[0] = (flags & 2) != 0;
        v[1] = flags >= 4;
        v[2] = flags == 1;
    }
    for (int i = 0; i < NFLAGS; i++) v[i] += open[i];
    return act(c, v, together, stop, finish);
}

dt_status dt_coord_agree(dt_coord *c, dt_pace here, dt_verdict *v) {
    int stop = 0, finish = 0; /* a finish waits for the next step's agreement (its flag stays set) */
    DT_TRY(agree(c, here, &stop, &finish));
    *v = c->leaving ? DT_LEAVE : stop ? DT_STOP : DT_GO;
    return DT_OK;
}

/* Lockstep workers up to sync->lead steps apart (ps-ssp) agree every 10
 * steps without waiting for each other: each starts the sum at step 10k
 * and finishes it min(lead + 1, 10) steps later. With lead < 10 the
 * staleness bound has made every worker start it by then (a worker's reply
 * for clock c needs every worker's clock c - lead delivered); with more, a
 * worker over 10 steps ahead waits there for the others to reach 10k.
 * Every worker acts on it at that same step. A blocking sum pulled
 * ps-ssp's workers back into step every 10 steps. An evaluation or
 * checkpoint before then finishes it in agree, which counts a divergence
 * at once and a stop request at the next agreement (the flag stays set). */
static dt_status agree_periodically(dt_coord *c, long step, int *stop, int *finish) {
    if (c->sync->lead == 0 || !c->sync->reduce_sum_start)
        return step % 10 == 0 ? agree(c, DT_PACE_LOCKSTEP, stop, finish) : DT_OK;
    if (c->due == step) {
        double v[NFLAGS];
        DT_TRY(c->sync->reduce_sum_finish(c->sync, v, NFLAGS));
        c->due = -1;
        DT_TRY(act(c, v, 1, stop, finish));
        if (*stop || *finish) return DT_OK;
    }
    if (step % 10 != 0) return DT_OK;
    double v[NFLAGS];
    local_flags(c, v);
    DT_TRY(c->sync->reduce_sum_start(c->sync, v, NFLAGS));
    c->due = step + (c->sync->lead < 9 ? c->sync->lead + 1 : 10);
    return DT_OK;
}

dt_status dt_coord_step(dt_coord *c, long step, dt_verdict *v) {
    int stop = 0, finish = 0;
    *v = DT_LEAVE;
    if (c->leaving) return DT_OK; /* no agreement more: it meets the others at the end */
    DT_TRY(lockstep(c) ? agree_periodically(c, step, &stop, &finish) : agree(c, c->sync->pace, &stop, &finish));
    *v = c->leaving || ((stop || finish) && apart(c)) ? DT_LEAVE : stop ? DT_STOP : finish ? DT_FINISH : DT_GO;
    return DT_OK;
}

dt_status dt_coord_meet(dt_coord *c, dt_verdict *v) {
    int stop = 0, finish = 0; /* at the end, a finish request is the end */
    *v = DT_GO;
    if (c->due >= 0) DT_TRY(agree(c, DT_PACE_LOCKSTEP, &stop, &finish)); /* no request left open (one asked waits) */
    if (!apart(c)) return DT_OK;
    /* A divergence, a stop request or the end: all of them together. */
    DT_TRY(agree(c, DT_PACE_LOCKSTEP, &stop, &finish));
    if (stop) *v = DT_STOP;
    return DT_OK;
}

dt_status dt_coord_end(dt_coord *c) {
    if (c->sync->finish) DT_TRY(c->sync->finish(c->sync, c->trainer));
    c->sync->ended_together = 1;
    return DT_OK;
}
