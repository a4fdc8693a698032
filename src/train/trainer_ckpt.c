/* A run's checkpoints: when one is written and what it holds, resuming
 * from one and starting from another run's weights (see trainer_impl.h). */
#include <math.h>

#include "dtrain/checkpoint.h"
#include "dtrain/ckptdir.h"
#include "dtrain/mem.h"
#include "trainer_impl.h"
#include "trainset.h"

/* What a checkpoint holds: the arrays, and the train set's class names (a
 * folder's; none otherwise). */
static dt_ckpt_arrays ckpt_arrays(dt_trainer *t) {
    dt_ckpt_arrays a = {t->net->params, t->net->nparams, t->net->state, t->net->nstate,
                        t->opt_state, dt_trainer_opt_floats(t), t->spec->optim.kind, &t->train_ds->class_names,
                        NULL, 0, 0, 0, /* the worker state: set by the caller where it applies */
                        &t->arch};
    return a;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Two smoothed training losses, exponential moving averages of each
 * step's mean loss, bias-corrected as Adam's moments are: a fast one over
 * about 50 steps judges a checkpoint (one batch's loss is too noisy), and
 * the lowest value of a slow one over about 500 steps is the run's best
 * (the fast one's minimum is not: on easy data a run of lucky batches
 * takes it near 0, and a healthy run would look 100x worse than its best). */
#define LOSS_FAST_BETA 0.98
#define LOSS_SLOW_BETA 0.998
#define LOSS_MIN_STEPS 10  /* before this many steps the fast one says nothing */
#define LOSS_BEST_STEPS 50 /* ... and the slow one */

static double debias(double ema, double beta, long n, long min_n) {
    return n >= min_n ? ema / (1 - pow(beta, (double)n)) : 0;
}

/* The samples of one optimiser step over all workers (checkpoints say it). */
static long step_samples(const dt_trainer *t) { return (long)dt_model_step_batch(t->spec) * t->opts->workers; }

static double smoothed_loss(const dt_trainer *t) { return debias(t->ema, LOSS_FAST_BETA, t->ema_n, LOSS_MIN_STEPS); }

void dt_trainer_track_loss(dt_trainer *t, double step_loss) {
    t->ema = LOSS_FAST_BETA * t->ema + (1 - LOSS_FAST_BETA) * step_loss;
    t->ema_slow = LOSS_SLOW_BETA * t->ema_slow + (1 - LOSS_SLOW_BETA) * step_loss;
    t->ema_n++;
    double l = debias(t->ema_slow, LOSS_SLOW_BETA, t->ema_n, LOSS_BEST_STEPS);
    if (l > 0 && isfinite(l) && (t->best_loss <= 0 || l < t->best_loss)) t->best_loss = l;
}

/* Both averages go on from a checkpoint's smoothed loss, as if it had held
 * for LOSS_BEST_STEPS steps. */
static void resume_loss(dt_trainer *t, double loss) {
    if (loss <= 0) return;
    t->ema_n = LOSS_BEST_STEPS;
    t->ema = loss * (1 - pow(LOSS_FAST_BETA, LOSS_BEST_STEPS));
    t->ema_slow = loss * (1 - pow(LOSS_SLOW_BETA, LOSS_BEST_STEPS));
}

/* A checkpoint that must not replace good ones although its numbers are
 * finite: the smoothed loss above --max-loss-ratio x the run's best (a run
 * exploding, like one at test loss 1e35). Says why in why. */
static int exploding(const dt_trainer *t, char *why, size_t cap) {
    double l = smoothed_loss(t), r = t->opts->max_loss_ratio;
    if (r <= 0 || l <= 0 || t->best_loss <= 0 || l <= r * t->best_loss) return 0;
    snprintf(why, cap, "its smoothed training loss %.4g is over %g x the run's best %.4g (--max-loss-ratio)", l, r,
             t->best_loss);
    return 1;
}

/* Where a checkpoint of this step goes: --checkpoint F, D/step-N.ckpt or
 * D/best.ckpt. */
static dt_status ckpt_target(const dt_trainer *t, int best, char *buf, size_t cap) {
    const char *dir = t->opts->checkpoint_dir;
    if (best) return dt_ckptdir_best_path(buf, cap, dir);
    if (dir) return dt_ckptdir_step_path(buf, cap, dir, t->step);
    snprintf(buf, cap, "%s", t->opts->checkpoint_path);
    return DT_OK;
}

/* Worker 0 writes the file. here DT_PACE_LOCKSTEP: collective over the
 * workers (and servers, through gather), every worker calls it at the same
 * step; DT_PACE_APART: an apart worker's own checkpoint (only worker 0's is
 * written). best: D/best.ckpt (after an evaluation that beat the best
 * accuracy). */
static dt_status write_checkpoint(dt_trainer *t, dt_pace here, int best) {
    /* What will be written: the parameters pulled from any servers, their
     * optimiser state fetched by worker 0. */
    if (t->sync->sync_state) DT_TRY(t->sync->sync_state(t->sync, t, here));
    if (t->sync->gather) DT_TRY(t->sync->gather(t->sync, t));
    /* A step can overflow them before any loss shows it (the next forward
     * would): a checkpoint of them could not be resumed, so they count as
     * a divergence, agreed on like one. */
    dt_ckpt_arrays a = ckpt_arrays(t);
    if (!all_finite(a.params, a.nparams) || !all_finite(a.state, a.nstate) ||
        !all_finite(a.opt_state, a.nopt_state)) {
        int epoch, pos;
        dt_loader_position(t->loader, &epoch, &pos);
        dt_coord_note_divergence(&t->coord, "the parameters or their optimiser state became NaN or infinite",
                                 t->step, epoch + 1);
    }
    dt_verdict v; /* a stop request waits for the next step's agreement */
    DT_TRY(dt_coord_agree(&t->coord, here, &v));
    if (v == DT_LEAVE) return DT_OK; /* the last checkpoint stays as it was */
    if (t->opts->worker != 0) return DT_OK;
    char why[256], path[4096], line[4096];
    DT_TRY(ckpt_target(t, best, path, sizeof path));
    dt_rec r;
    if (!best && exploding(t, why, sizeof why)) {
        t->skipped_step = t->step;
        snprintf(line, sizeof line, "checkpoint at step %ld not written: %s; the last good one (step %ld) stays",
                 t->step, why, t->good_step);
        dt_report_line(&t->rep, line);
        dt_rec_begin(&r, "checkpoint_skipped");
        dt_rec_int(&r, "step", t->step);
        dt_rec_str(&r, "path", path);
        dt_rec_num(&r, "loss", smoothed_loss(t), 6);
        dt_rec_num(&r, "best_loss", t->best_loss, 6);
        dt_rec_int(&r, "last_good_step", t->good_step);
        return dt_report_record(&t->rep, &r);
    }
    int epoch, step_in_epoch;
    dt_loader_position(t->loader, &epoch, &step_in_epoch);
    dt_ckpt_meta m = {t->net->shape_hash, t->opts->seed, (uint64_t)t->step, t->net->step, epoch, step_in_epoch,
                      smoothed_loss(t), t->best_loss, t->best_acc, t->spec->optim.kind, (uint64_t)step_samples(t),
                      0, 0, t->loss_sum, (uint64_t)t->loss_count, t->last_epoch_loss, t->evaluated_step,
                      (uint64_t)t->step * (uint64_t)step_samples(t), 0};
    a.worker_state = t->all_residuals; /* gathered by the strategy (NULL: none kept) */
    a.worker_floats = t->net->nparams;
    a.nworkers = t->opts->workers;
    double t0 = dt_now();
    DT_TRY(dt_checkpoint_save(path, &m, &a));
    if (!best) {
        if (t->opts->checkpoint_dir) DT_TRY(dt_ckptdir_commit(t->opts->checkpoint_dir, t->step, t->keep));
        t->good_step = t->step;
        t->skipped_step = -1;
    }
    dt_rec_begin(&r, "checkpoint");
    dt_rec_int(&r, "step", t->step);
    dt_rec_str(&r, "path", path);
    dt_rec_fixed(&r, "write_s", dt_now() - t0, 3);
    if (best) dt_rec_true(&r, "best");
    return dt_report_record(&t->rep, &r);
}

dt_status dt_trainer_check_ckpt_room(dt_trainer *t) {
    t->keep = t->opts->keep;
    if (!t->opts->checkpoint_dir || t->opts->worker != 0) return DT_OK;
    dt_ckpt_arrays a = ckpt_arrays(t);
    if (t->sync->keeps_residual) { /* every worker's, as write_checkpoint gathers them */
        a.worker_state = t->residual;
        a.worker_floats = t->net->nparams;
        a.nworkers = t->opts->workers;
    }
    DT_TRY(dt_ckptdir_check_space(t->opts->checkpoint_dir, dt_checkpoint_bytes(&a), &t->keep, t->opts->keep_fewer));
    if (t->keep < t->opts->keep) {
        char line[256];
        snprintf(line, sizeof line, "--checkpoint-dir %s: room for %d checkpoint%s, not --keep %d: keeping %d "
                 "(--keep-fewer)", t->opts->checkpoint_dir, t->keep, t->keep == 1 ? "" : "s", t->opts->keep, t->keep);
        dt_report_line(&t->rep, line);
    }
    return DT_OK;
}

dt_status dt_trainer_save_checkpoint(dt_trainer *t, dt_pace here, int best) {
    if (!t->opts->checkpoint_path && !t->opts->checkpoint_dir) return DT_OK;
    if (!best && t->saved_step == t->step) return DT_OK; /* a run that ends or stops right after one */
    if (!best) t->saved_step = t->step;
    double t0 = dt_now();
    DT_TRY(write_checkpoint(t, here, best));
    dt_timeline_span(t->opts->timeline, DT_TL_MAIN, DT_TL_CAT_CHECKPOINT, best ? "best checkpoint" : "checkpoint",
                     t0, dt_now(), (dt_tl_arg[]){{"step", t->step}}, 1);
    /* A run killed later leaves this rank's events up to here in its part. */
    t0 = dt_now();
    DT_TRY(dt_timeline_flush(t->opts->timeline));
    dt_timeline_span(t->opts->timeline, DT_TL_MAIN, DT_TL_CAT_CHECKPOINT, "timeline flush", t0, dt_now(),
                     NULL, 0);
    return DT_OK;
}

typedef struct {
    dt_trainer *t;
    dt_ckpt_meta *m;
    dt_class_names *classes; /* the loaded checkpoint's */
} resume_try;

static dt_status load_into(const char *path, void *ctx) {
    resume_try *r = ctx;
    dt_ckpt_arrays a = ckpt_arrays(r->t);
    dt_class_names_free(r->classes); /* an older checkpoint tried before this one */
    a.classes = r->classes;
    a.worker_state = r->t->residual; /* this worker's part, when written by as many */
    a.worker_floats = r->t->net->nparams;
    a.nworkers = r->t->opts->workers;
    a.worker = r->t->opts->worker;
    return dt_checkpoint_load(path, r->t->net->shape_hash, r->m, &a);
}

static void report_skipped(const char *path, const char *why, void *ctx) {
    char line[1024];
    snprintf(line, sizeof line, "not resuming from %s: %s", path, why);
    dt_report_line(&((resume_try *)ctx)->t->rep, line);
}

/* The checkpoint dt_resume_find chooses, loaded into *m, *classes and the
 * net, named in path ("" when starting fresh). */
static dt_status load_resume(dt_trainer *t, dt_ckpt_meta *m, dt_class_names *classes, char *path, size_t cap) {
    resume_try r = {t, m, classes};
    DT_TRY(dt_resume_find(t->opts, load_into, report_skipped, &r, path, cap));
    if (!path[0])
        dt_report_line(&t->rep, t->opts->weights_path
                                    ? "--resume auto: no checkpoint yet; starting from --weights"
                                    : "--resume auto: no checkpoint yet; starting from the beginning");
    return DT_OK;
}

/* *resumed: whether a checkpoint was found (--resume auto may find none). */
dt_status dt_trainer_resume(dt_trainer *t, int *resumed) {
    dt_ckpt_meta m;
    char from[4096], line[4352];
    dt_class_names classes = {0, NULL};
    dt_status s = load_resume(t, &m, &classes, from, sizeof from);
    if (s == DT_OK && from[0]) s = dt_trainset_check_classes(t->train_ds, &classes, "--resume", from);
    dt_class_names_free(&classes);
    *resumed = from[0] != '\0';
    if (s != DT_OK || !from[0]) return s;
    DT_TRY(dt_resume_check_run(from, &m, t->opts->seed, step_samples(t)));
    t->step = t->good_step = (long)m.step;
    t->net->step = m.net_step;
    t->best_loss = m.best_loss;
    t->best_acc = m.best_accuracy;
    resume_loss(t, m.loss);
    /* The epoch goes on as if uninterrupted: its train_loss counts the
     * steps before the checkpoint, and an evaluation logged at the
     * checkpoint's step is not repeated. */
    t->loss_sum = m.epoch_loss_sum;
    t->loss_count = (long)m.epoch_loss_count;
    t->last_epoch_loss = m.last_epoch_loss;
    t->evaluated_step = m.evaluated_step;
    /* Batch size and data set are not part of the model's shape hash. */
    if (dt_loader_seek(t->loader, m.epoch, m.step_in_epoch) != DT_OK)
        return dt_fail(DT_ERR_USAGE, "--resume %s: the checkpoint stopped at step %d of an epoch, "
                       "this run's epochs have %d steps (%s)", from, m.step_in_epoch, t->steps_per_epoch,
                       m.step_samples ? "another data set?" : "another --batch, number of workers or data set?");
    DT_TRY(dt_resume_check_end(from, t->step, t->total_steps));
    snprintf(line, sizeof line, "resumed from %s at step %ld (epoch %d, step %d of the epoch)", from, t->step,
             m.epoch + 1, m.step_in_epoch);
    dt_report_line(&t->rep, line);
    if (t->residual && (m.file_nworkers != (uint64_t)t->opts->workers || m.file_worker_floats != t->net->nparams)) {
        if (m.file_nworkers == 0)
            snprintf(line, sizeof line, "the checkpoint holds no top-k residuals (written without top-k or before "
                     "dtrain kept them): error feedback starts from zero");
        else
            snprintf(line, sizeof line, "the checkpoint's top-k residuals are those of %llu workers x %llu floats, "
                     "this run has %d x %zu: error feedback starts from zero", (unsigned long long)m.file_nworkers,
                     (unsigned long long)m.file_worker_floats, t->opts->workers, t->net->nparams);
        dt_report_line(&t->rep, line);
    }
    dt_rec r;
    dt_rec_begin(&r, "resume");
    dt_rec_int(&r, "step", t->step);
    dt_rec_str(&r, "checkpoint", from);
    dt_rec_fixed(&r, "elapsed_s", dt_now() - t->rep.start, 4);
    return dt_report_record(&t->rep, &r);
}

/* --weights: the parameters and batch-norm statistics of a checkpoint of
 * this model (its optimiser state, step and place are not read: the run
 * starts afresh from them, at any batch). */
dt_status dt_trainer_warm_start(dt_trainer *t) {
    const char *from = t->opts->weights_path;
    dt_ckpt_meta m;
    dt_class_names classes = {0, NULL};
    dt_ckpt_arrays a = {.classes = &classes};
    dt_status s = dt_checkpoint_load_net(from, t->net, &m, &a);
    if (s == DT_OK) s = dt_trainset_check_classes(t->train_ds, &classes, "--weights", from);
    dt_class_names_free(&classes);
    if (s != DT_OK) return s;
    char line[4352], its[64];
    if (m.darknet) snprintf(its, sizeof its, "Darknet weights, %llu images seen", (unsigned long long)m.seen);
    else snprintf(its, sizeof its, "step %llu of its run", (unsigned long long)m.step);
    snprintf(line, sizeof line, "starting from the weights of %s (%s); the optimiser, the step and the schedule "
             "start afresh", from, its);
    dt_report_line(&t->rep, line);
    dt_rec r;
    dt_rec_begin(&r, "weights");
    dt_rec_str(&r, "checkpoint", from);
    dt_rec_uint(&r, "its_step", m.step);
    if (m.darknet) dt_rec_true(&r, "darknet");
    return dt_report_record(&t->rep, &r);
}
