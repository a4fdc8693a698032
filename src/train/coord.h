/* The coordinator: how the workers of a run agree on a stop request
 * (SIGINT/SIGTERM, or a server passing one on) and on divergence, and how
 * they end the run together, by the strategy's pace (dt_sync.pace) over
 * its agreement hooks (reduce_sum, reduce_sum_start/finish, agree_stop).
 *
 * Workers must stop together: one that stopped alone would leave the others
 * waiting in the next collective for ever. So a stop request and a
 * divergence on any worker are agreed on in one small reduction: lockstep
 * workers every 10 steps (off the hot path), and every worker before every
 * evaluation and checkpoint (so none holds diverged parameters). Apart
 * workers (ps-async and kin on 2+ workers) step on their own, so a request
 * or a divergence on one is not seen by the others at once: each decides
 * alone at every step, or with the peers of its worker group (agree_stop;
 * a divergence wins over a stop request), and one that saw either trains
 * no more and meets the others after their last step (dt_coord_meet),
 * where they stop together; after a divergence they follow soon, as their
 * next parameters hold its non-finite gradient. Private to src/train. */
#ifndef DTRAIN_TRAIN_COORD_H
#define DTRAIN_TRAIN_COORD_H

#include <stdatomic.h>

#include "dtrain/train.h"

/* What the workers agreed. */
typedef enum {
    DT_GO,    /* train on */
    DT_STOP,  /* a stop was asked: every worker stops here (checkpoint, servers told, DT_ERR_INTERRUPTED) */
    DT_LEAVE, /* an apart worker trains no more; it meets the others after the loop (dt_coord_meet) */
    DT_FINISH, /* the caller asked to end early: every worker ends here as after the last step */
} dt_verdict;

typedef struct {
    dt_sync *sync;            /* the strategy: its pace and agreement hooks */
    dt_trainer *trainer;      /* what sync->finish is given */
    const atomic_int *signal; /* set by SIGINT/SIGTERM (may be NULL) */
    const atomic_int *finish; /* set by the caller to end the run early, as finished (may be NULL) */
    int workers;
    long due;                 /* sync->lead > 0: the step the started periodic agreement finishes at (-1: none open) */
    int leaving;              /* an apart worker saw a divergence: it trains no more */
    /* The first sign of divergence here, until agreed on: the step of a
     * non-finite loss or of parameters or momentum found non-finite before
     * a checkpoint (0: none), its epoch (1-based), what ("loss is NaN"). */
    long bad_step;
    int bad_epoch;
    const char *bad_what;
} dt_coord;

void dt_coord_init(dt_coord *c, dt_sync *sync, dt_trainer *t, const atomic_int *signal, const atomic_int *finish,
                   int workers);

/* Before each step (step: optimiser steps done): lockstep workers agree
 * every 10 steps, apart ones at every step. An agreed divergence ends the
 * run: the servers told to stop, DT_ERR_NUMERIC. A finish request (the
 * job API's record callback) makes lockstep workers end together as at
 * the run's last step (DT_FINISH) and an apart worker leave (the others
 * finish the run's budget); a stop request wins over it. */
dt_status dt_coord_step(dt_coord *c, long step, dt_verdict *v);

/* At a point of the run where here says how closely the workers are:
 * DT_PACE_LOCKSTEP, every worker is at this point (an evaluation, a
 * collective checkpoint); the run's pace, as the workers step (an apart
 * worker's own checkpoint). A periodic agreement still open is finished
 * first and counts. A divergence ends the run as in dt_coord_step (or
 * makes an apart worker leave); a stop request may be left to the next
 * dt_coord_step (the flag stays set). */
dt_status dt_coord_agree(dt_coord *c, dt_pace here, dt_verdict *v);

/* After the loop, every worker: an agreement still open is finished, and
 * apart workers meet, to stop together (DT_STOP) or end the run (DT_GO). */
dt_status dt_coord_meet(dt_coord *c, dt_verdict *v);

/* Every worker ended the run at the same point (the end, or an agreed
 * stop): the servers are told to stop, and the strategy's free may then
 * run collectives (dt_sync.ended_together). */
dt_status dt_coord_end(dt_coord *c);

/* Keeps the first sign of divergence here (what, step, 1-based epoch)
 * until the workers agree on it. */
void dt_coord_note_divergence(dt_coord *c, const char *what, long step, int epoch);

/* A non-finite loss in this step: DT_ERR_NUMERIC at once when no peer or
 * server expects the step finished; else kept as dt_coord_note_divergence
 * does (the step goes on: the non-finite gradient reaches every worker's
 * parameters, so apart workers diverge too). */
dt_status dt_coord_loss_diverged(dt_coord *c, const char *what, long step, int epoch);

#endif
