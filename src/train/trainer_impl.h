/* The trainer's state, shared by the training loop (trainer.c) and its
 * checkpoints (trainer_ckpt.c: when one is written and what it holds,
 * resuming from one, starting from another run's weights). Private to
 * src/train; the public face is dtrain/train.h. */
#ifndef DTRAIN_TRAIN_TRAINER_IMPL_H
#define DTRAIN_TRAIN_TRAINER_IMPL_H

#include "dtrain/checkpoint.h"
#include "coord.h"
#include "dtrain/train.h"
#include "report.h"

struct dt_trainer {
    const dt_model_spec *spec;
    const dt_train_opts *opts;
    dt_net *net;
    dt_optim *optim;          /* the optimiser over the net's parameter vector */
    float *opt_state;         /* (nslots, nparams) its state, for strategies that update locally */
    float *own_opt_state;     /* the block the trainer allocated; NULL once a strategy bound another */
    float *acc;               /* (nparams) --accumulate N > 1: the step's earlier passes' gradients, weighted */
    float acc_weight;         /* the last pass's weight: its samples / the step's */
    float *residual;          /* sync->keeps_residual: (nparams) this worker's */
    float *all_residuals;     /* worker 0 of a run that checkpoints: (workers, nparams) */
    dt_dataset *train_ds, *test_ds;
    dt_loader *loader;
    dt_sync *sync;
    dt_report rep;
    long step;                /* optimiser steps done */
    int steps_per_epoch;
    long total_steps;         /* epochs * steps_per_epoch (or max_batches), capped by max_steps */
    int epochs;               /* the run's epochs: the file's, or those max_batches steps reach */
    double loss_sum;          /* current epoch's summed per-sample loss and count */
    long loss_count;
    double last_epoch_loss;   /* mean loss of the last finished (or current) epoch */
    long evaluated_step;      /* step of the last evaluation logged (-1: none); carried by checkpoints */
    int ckpt_after_eval;      /* --checkpoint-every's checkpoint of an epoch's last step, due after its evaluation */
    dt_ckpt_arch arch;        /* the net's, for checkpoints (a resume from another model's names the layer) */
    long images;              /* images trained on by this worker since start/resume */
    double train_time;        /* seconds spent in training steps */
    long steps_run;           /* steps run since start/resume */
    float lr;                 /* learning rate of the last step */
    dt_sync_stats comm;       /* communication totals over steps_run */
    double lag_sum, lag_max;  /* ps modes: version lag of the parameters each step used */
    int done;                 /* the strategy ended the run (ps-async budget) */
    dt_coord coord;           /* stop and divergence agreement, the run's end */
    /* Checkpoints (--checkpoint, --checkpoint-dir): */
    double ema, ema_slow;     /* the running averages behind smoothed_loss and best_loss, over ema_n steps */
    long ema_n;
    double best_loss;         /* lowest slow smoothed loss of the run (0: none yet) */
    double best_acc;          /* best test accuracy of the run (-1: none yet) */
    long good_step;           /* step of the last checkpoint written (or resumed from) */
    long skipped_step;        /* step of a checkpoint refused as exploding, if the last one was (-1) */
    long saved_step;          /* step of the last (periodic) checkpoint, on every worker (-1: none) */
    int keep;                 /* --checkpoint-dir: step files kept (--keep, or fewer that fit) */
};

/* trainer_ckpt.c */

/* Adds a step's mean loss to the smoothed losses a checkpoint is judged by. */
void dt_trainer_track_loss(dt_trainer *t, double step_loss);

/* A checkpoint of this step, when --checkpoint or --checkpoint-dir asks for
 * one (written by worker 0; here DT_PACE_LOCKSTEP: collective over every
 * worker, DT_PACE_APART: an apart worker's own); best: D/best.ckpt. Not
 * written when the workers diverged, nor (logged) when the loss is
 * exploding. */
dt_status dt_trainer_save_checkpoint(dt_trainer *t, dt_pace here, int best);

/* --resume: the run continues from the checkpoint dt_resume_find chooses,
 * at its step and place in the data; *resumed: whether one was found
 * (--resume auto may find none). */
dt_status dt_trainer_resume(dt_trainer *t, int *resumed);

/* --checkpoint-dir on worker 0: room for what the directory must keep
 * (dt_ckptdir_check_space), before any training; sets t->keep. */
dt_status dt_trainer_check_ckpt_room(dt_trainer *t);

/* --weights: the run starts afresh from another checkpoint's parameters. */
dt_status dt_trainer_warm_start(dt_trainer *t);

/* partial.c */

/* --weights --partial: the layers the checkpoint shares with the model, in
 * place, loaded; a table of what was loaded and skipped printed. */
dt_status dt_trainer_warm_start_partial(dt_trainer *t);

#endif
