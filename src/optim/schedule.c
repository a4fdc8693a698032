#include <math.h>
#include <string.h>

#include "dtrain/schedule.h"

#define PI 3.14159265358979323846

static const char *const schedule_names[] = {"constant", "step", "multistep", "cosine",
                                             "steps",    "poly", "exp",       "sigmoid"};
static const char *const scaling_names[] = {"none", "linear"};
#define COUNT(a) ((int)(sizeof a / sizeof *a))

/* Index of name in names[0..n), -1 if absent. */
static int name_index(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int dt_schedule_kind_from_name(const char *name) {
    return name_index(schedule_names, COUNT(schedule_names), name);
}

const char *dt_schedule_kind_name(dt_schedule_kind kind) { return schedule_names[kind]; }

int dt_lr_scaling_from_name(const char *name) { return name_index(scaling_names, COUNT(scaling_names), name); }

dt_status dt_lr_scale(dt_lr_schedule *s, dt_lr_scaling rule, int base_batch, int global_batch) {
    if (base_batch < 1 || global_batch < 1)
        return dt_fail(DT_ERR_USAGE, "learning-rate scaling: batches must be >= 1 (base %d, global %d)",
                       base_batch, global_batch);
    if (rule == DT_LR_SCALING_NONE) return DT_OK;
    double k = (double)global_batch / (double)base_batch;
    s->base_lr *= k;
    s->min_lr *= k;
    s->lr_scale *= k;
    s->warmup_start_factor = k > 1 ? 1.0 / k : 1.0;
    return DT_OK;
}

/* The configured schedule alone, at step `step`, fractional epoch `epoch`. */
static double schedule_at(const dt_lr_schedule *s, long step, double epoch) {
    double b = (double)step + 1; /* Darknet's batch number at this update */
    switch (s->kind) {
    case DT_SCHED_CONSTANT: return s->base_lr;
    case DT_SCHED_STEP:
        if (s->step_epochs > 0) return s->base_lr * pow(s->gamma, floor(epoch / s->step_epochs));
        return s->base_lr * pow(s->step_scale, floor(b / s->step_batches)); /* Darknet's batch_num / step */
    case DT_SCHED_MULTISTEP: {
        int passed = 0;
        while (passed < s->nmilestones && epoch >= s->milestones[passed]) passed++;
        return s->base_lr * pow(s->gamma, passed);
    }
    case DT_SCHED_COSINE: {
        double t = s->max_batches > 0    ? fmin((double)step / s->max_batches, 1.0)
                   : s->total_epochs > 0 ? fmin(epoch / s->total_epochs, 1.0)
                                         : 1.0;
        return s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(PI * t));
    }
    case DT_SCHED_STEPS: {
        double rate = s->base_lr;
        for (int i = 0; i < s->nsteps && s->steps[i] <= b; i++) rate *= s->scales[i];
        return rate;
    }
    case DT_SCHED_POLY: return s->base_lr * pow(fmax(1.0 - b / s->max_batches, 0.0), s->power);
    case DT_SCHED_EXP: return s->base_lr * pow(s->gamma, b);
    case DT_SCHED_SIGMOID: return s->base_lr / (1.0 + exp(s->gamma * (b - s->step_batches)));
    }
    return s->base_lr;
}

double dt_lr_at(const dt_lr_schedule *s, long step, long steps_per_epoch) {
    double spe = steps_per_epoch > 0 ? (double)steps_per_epoch : 1.0;
    double epoch = (double)step / spe;
    if (step + 1 < s->burn_in) return s->base_lr * pow((double)(step + 1) / s->burn_in, s->power);
    long warmup_steps = (long)llround(s->warmup_epochs * spe);
    if (step >= warmup_steps) return schedule_at(s, step, epoch);
    /* Linear ramp from start to the schedule's value where warmup ends; the
     * ramp reaches that value exactly at step == warmup_steps. */
    double start = s->warmup_start_factor * s->base_lr;
    double end = schedule_at(s, warmup_steps, (double)warmup_steps / spe);
    return start + (end - start) * (double)step / (double)warmup_steps;
}
