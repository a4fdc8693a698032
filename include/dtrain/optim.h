/* SGD and learning-rate schedules.
 *
 * The update works on any flat range of parameters, so the same code serves a
 * serial run (whole net), allreduce workers (whole net) and parameter servers
 * (their shard). PyTorch's torch.optim.SGD semantics:
 *   g = grad + decay * w
 *   v = momentum * v + g
 *   w -= lr * (nesterov ? g + momentum * v : v)
 */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include <stddef.h>

#define DT_MAX_MILESTONES 16

typedef enum {
    DT_SCHED_CONSTANT = 0,
    DT_SCHED_STEP,      /* lr * gamma^floor(epoch / step_epochs) */
    DT_SCHED_MULTISTEP, /* lr * gamma^(milestones passed) */
    DT_SCHED_COSINE     /* min_lr + (lr - min_lr) * (1 + cos(pi * epoch / total)) / 2 */
} dt_schedule_kind;

typedef struct {
    dt_schedule_kind kind;
    double base_lr;
    double gamma;                          /* step, multistep; default 0.1 */
    double step_epochs;                    /* step */
    int nmilestones;                       /* multistep, epochs ascending */
    double milestones[DT_MAX_MILESTONES];
    double min_lr;                         /* cosine floor; default 0 */
    double total_epochs;                   /* cosine horizon (the run's epochs) */
    /* Linear warmup in front of any schedule: over the first warmup_epochs
     * (counted per step), lr ramps linearly from warmup_start_factor * base_lr
     * to the schedule's value at the end of the warmup. */
    double warmup_epochs;
    double warmup_start_factor;            /* default 0.1 */
} dt_lr_schedule;

typedef struct {
    double momentum;
    double decay;
    int nesterov;
} dt_sgd_cfg;

/* "constant" | "step" | "multistep" | "cosine" -> kind, -1 if unknown. */
int dt_schedule_kind_from_name(const char *name);
const char *dt_schedule_kind_name(dt_schedule_kind kind);

/* Learning rate for global step `step` (0-based) with `steps_per_epoch`
 * steps per epoch; epochs are fractional (step / steps_per_epoch). */
double dt_lr_at(const dt_lr_schedule *s, long step, long steps_per_epoch);

/* One SGD step on n parameters: w, v (momentum buffer), g (gradient). */
void dt_sgd_update(const dt_sgd_cfg *cfg, float lr, float *w, float *v, const float *g, size_t n);

#endif
