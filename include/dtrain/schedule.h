/* Learning-rate schedules and the large-minibatch scaling rule.
 *
 * A schedule gives the rate of every optimiser step from the step and the
 * steps per epoch (fractional epochs), with an optional linear warmup in
 * front; dt_lr_scale applies Goyal et al.'s linear scaling to it. */
#ifndef DTRAIN_SCHEDULE_H
#define DTRAIN_SCHEDULE_H

#include "dtrain/status.h"

#define DT_MAX_MILESTONES 16

typedef enum {
    DT_SCHED_CONSTANT = 0,
    DT_SCHED_STEP,      /* with step_epochs: lr * gamma^floor(epoch / step_epochs);
                           without (Darknet's): lr * step_scale^floor(b / step_batches) */
    DT_SCHED_MULTISTEP, /* lr * gamma^(milestones passed) */
    DT_SCHED_COSINE,    /* min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2, t = epoch / total
                           (step / max_batches when max_batches is set) */
    /* Darknet's (get_current_rate), in optimiser steps: b = step + 1, the
     * number of batches Darknet has seen at that update. */
    DT_SCHED_STEPS,     /* lr * product of scales[i] over steps[i] <= b */
    DT_SCHED_POLY,      /* lr * (1 - b / max_batches)^power */
    DT_SCHED_EXP,       /* lr * gamma^b */
    DT_SCHED_SIGMOID    /* lr / (1 + exp(gamma * (b - step_batches))) */
} dt_schedule_kind;

typedef struct {
    dt_schedule_kind kind;
    double base_lr;
    double gamma;                          /* step (with step_epochs), multistep, exp, sigmoid;
                                              default 1 (Darknet's) */
    double step_epochs;                    /* step, dtrain's form (0: Darknet's form) */
    int nmilestones;                       /* multistep, epochs ascending */
    double milestones[DT_MAX_MILESTONES];
    double min_lr;                         /* cosine floor; default 0 */
    double total_epochs;                   /* cosine horizon (the run's epochs) */
    int nsteps;                            /* steps: batches ascending, and their scales */
    double steps[DT_MAX_MILESTONES];
    int nscales;
    double scales[DT_MAX_MILESTONES];
    double power;                          /* poly and burn_in; default 4 (Darknet's) */
    int max_batches;                       /* Darknet's run length in steps (0: epochs decide);
                                              poly's and cosine's horizon */
    int step_batches;                      /* Darknet's step=: sigmoid's batch of half the rate,
                                              step's period in batches; default 1 */
    double step_scale;                     /* Darknet's scale=: step's factor; default 1 */
    /* Darknet's warmup: for b < burn_in the rate is lr * (b / burn_in)^power
     * (b = step + 1), in front of any policy; 0: none. */
    int burn_in;
    /* Linear warmup in front of any schedule: over the first warmup_epochs
     * (counted per step), lr ramps linearly from warmup_start_factor * base_lr
     * to the schedule's value at the end of the warmup. */
    double warmup_epochs;
    double warmup_start_factor;            /* default 0.1 */
    /* k by which dt_lr_scale multiplied base_lr and min_lr (1: unscaled;
     * the model parser sets 1). Only reported: base_lr is already scaled. */
    double lr_scale;
} dt_lr_schedule;

/* How the learning rate follows the global batch. */
typedef enum {
    DT_LR_SCALING_NONE = 0,
    DT_LR_SCALING_LINEAR  /* Goyal et al. 2017: lr x (global batch / base batch) */
} dt_lr_scaling;

/* "constant" | "step" | "multistep" | "cosine" | "steps" | "poly" | "exp" |
 * "sigmoid" -> kind, -1 if unknown. */
int dt_schedule_kind_from_name(const char *name);
const char *dt_schedule_kind_name(dt_schedule_kind kind);

/* "none" | "linear" -> rule, -1 if unknown. */
int dt_lr_scaling_from_name(const char *name);

/* The large-minibatch recipe of Goyal et al. 2017 ("Accurate, Large
 * Minibatch SGD"), applied to s in place. LINEAR: with k = global_batch /
 * base_batch, multiplies base_lr and min_lr by k (the whole schedule is k
 * times the small-batch one) and records k in lr_scale; when k > 1 the
 * warmup starts from the unscaled rate (warmup_start_factor = 1 / k), so
 * warmup_epochs w ramp linearly, per step, from the base rate to k times it
 * and the schedule takes over from there ("gradual warmup"). With k <= 1
 * the rate only drops, so no ramp is needed (factor 1). NONE leaves s as it
 * is. DT_ERR_USAGE if a batch is < 1. */
dt_status dt_lr_scale(dt_lr_schedule *s, dt_lr_scaling rule, int base_batch, int global_batch);

/* Learning rate for global step `step` (0-based) with `steps_per_epoch`
 * steps per epoch; epochs are fractional (step / steps_per_epoch). */
double dt_lr_at(const dt_lr_schedule *s, long step, long steps_per_epoch);

#endif
