/* The trainer loop and the sync-strategy hook points every mode plugs into.
 *
 * One loop serves every mode:
 *   begin_step -> forward -> loss -> backward (grad_ready(layer) as each
 *   layer's gradients become final, last layer first) -> end_step(lr)
 * end_step owns the update: on return the net's parameters are the ones the
 * next step must use (serial: local SGD; allreduce: averaged gradients then
 * SGD; parameter servers: push/pull). The trainer knows nothing about MPI. */
#ifndef DTRAIN_TRAIN_H
#define DTRAIN_TRAIN_H

#include <stdatomic.h>
#include <stdio.h>

#include "dtrain/checkpoint.h"
#include "dtrain/ckptdir.h"
#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/status.h"

typedef struct dt_trainer dt_trainer;

/* What a strategy measured during the last step (reset by the trainer). */
typedef struct {
    double comm_s;          /* time communication was in flight */
    double wait_s;          /* time end_step waited for it: communication not hidden by compute */
    uint64_t bytes_sent, bytes_recv;
    double server_cpu_share;  /* ps modes, after finish: the busiest server's CPU time / wall time */
    long max_clock_gap;       /* ps modes, after finish: largest gap between workers' clocks */
    int server_nice;          /* ps modes, after finish: the least nice value a server ran at */
    double lag;               /* ps modes: version lag of the parameters the next step uses */
    double version;           /* ps modes: version of server 0's shard received */
    int done;                 /* ps-async: the servers say the run's gradient budget is spent */
} dt_sync_stats;

/* How closely the workers of a run move: the strategy's pace. */
typedef enum {
    /* Every worker runs every step (serial, allreduce, ps-sync; ps-ssp up
     * to dt_sync.lead steps apart): they evaluate after every epoch and
     * checkpoint together. */
    DT_PACE_LOCKSTEP,
    /* Each worker steps on its own (ps-async and kin), sharing the run's
     * budget of steps: the run ends when the strategy reports done; no
     * collective between workers until they meet at the end (no per-epoch
     * evaluation). */
    DT_PACE_APART,
} dt_pace;

typedef struct dt_sync {
    const char *name;
    void *ctx;
    /* The trainer's coordinator (src/train/coord.h) agrees on stop
     * requests and divergence by it, over the hooks reduce_sum,
     * agree_stop and reduce_sum_start/finish. */
    dt_pace pace;
    /* Once, after the net is built (and resumed): e.g. broadcast parameters. */
    dt_status (*start)(struct dt_sync *s, dt_trainer *t);
    /* Before forward; lr is the step's learning rate. */
    dt_status (*begin_step)(struct dt_sync *s, dt_trainer *t, float lr);
    /* Wait-free backprop hook (dt_grad_ready_fn, ctx = s->ctx); NULL if
     * unused. Cannot fail: errors are kept in ctx and returned by end_step. */
    dt_grad_ready_fn grad_ready;
    dt_status (*end_step)(struct dt_sync *s, dt_trainer *t, float lr);
    /* Apart workers that still move in lockstep with some peers (worker
     * groups): replaces *flags by its maximum over them, so that they stop
     * at the same step (the coordinator's flags, ordered by priority: 1 an
     * early finish asked, 2 SIGINT/SIGTERM seen, 4 loss diverged). NULL: no
     * peers. */
    dt_status (*agree_stop)(struct dt_sync *s, int *flags);
    /* Sums vals[0..n) over all workers in place (metrics, evaluation). */
    dt_status (*reduce_sum)(struct dt_sync *s, double *vals, int n);
    /* Lockstep workers that may be up to this many steps apart (ps-ssp:
     * its staleness bound; 0: in step). With lead > 0 the coordinator's
     * periodic stop agreement is a sum in two halves (n <= 4, one at a
     * time): started with vals, finished min(lead + 1, 10) steps later
     * with the sums in vals. */
    int lead;
    dt_status (*reduce_sum_start)(struct dt_sync *s, const double *vals, int n);
    dt_status (*reduce_sum_finish)(struct dt_sync *s, double *vals, int n);
    /* Before evaluation and checkpoints: bring the net's parameters up to
     * date (parameter servers) and, at a point of pace DT_PACE_LOCKSTEP
     * (every worker calls it here), make the non-trainable state (BN
     * running statistics) the same on every worker. DT_PACE_APART: an
     * apart worker's own checkpoint; nothing that needs the other workers.
     * NULL: nothing to do. */
    dt_status (*sync_state)(struct dt_sync *s, dt_trainer *t, dt_pace here);
    /* Before worker 0 writes a checkpoint (every worker calls it): bring
     * the optimiser state worker 0 does not hold (parameter servers'
     * shards) into dt_trainer_opt_state, and with keeps_residual every
     * worker's residual into worker 0's dt_trainer_all_residuals. */
    dt_status (*gather)(struct dt_sync *s, dt_trainer *t);
    /* After the last step: tell the servers to stop, wait for peers. */
    dt_status (*finish)(struct dt_sync *s, dt_trainer *t);
    void (*free)(struct dt_sync *s);
    /* Set by the coordinator when every worker ended the run at the same point
     * (the last step, an agreed stop or an agreed divergence): free may then
     * run collectives (after any other failure a peer may never join). */
    int ended_together;
    /* Set by the strategy when a peer that is not a worker (a parameter
     * server) got SIGINT/SIGTERM: the workers stop as if they had. */
    int stop_requested;
    dt_sync_stats stats;
    /* Set by start: bytes per step (sent + received by one worker) the
     * communication plan predicts; 0 when the strategy predicts none. */
    double plan_bytes;
    /* Set at creation: each worker keeps a residual the size of the
     * gradients (top-k's gradients not sent yet) in dt_trainer_residual,
     * which checkpoints carry for every worker (a resume is exact). */
    int keeps_residual;
} dt_sync;

typedef struct {
    dt_dataset_kind dataset;
    const char *data_dir;        /* NULL: the dataset's default directory */
    const dt_arrays *arrays;     /* dataset DT_DATASET_ARRAYS: the caller's images and labels */
    int epochs;                  /* total epochs (from the model file unless overridden) */
    long max_steps;              /* 0: no limit; otherwise stop after this many steps */
    uint64_t seed;
    const char *log_path;        /* JSONL log, or NULL */
    const char *checkpoint_path; /* written at checkpoint_every steps and at the end */
    long checkpoint_every;       /* 0: only at the end */
    const char *checkpoint_dir;  /* or: D/step-N.ckpt, D/latest, D/best.ckpt (ckptdir.h), or NULL */
    int keep;                    /* checkpoint_dir: step-N.ckpt files kept */
    int keep_fewer;              /* checkpoint_dir without room for keep: keep as many as fit */
    double max_loss_ratio;       /* a checkpoint whose smoothed loss is over this x the run's
                                  * best is not written over good ones (0: no such check) */
    const char *weights_path;    /* checkpoint file whose parameters and batch-norm statistics the
                                  * run starts from (optimiser, step and schedule afresh), or NULL;
                                  * with resume_path "auto" only when that finds no checkpoint */
    int partial;                 /* weights_path: take only the layers that match in place, kind and
                                  * shapes (fine-tuning); the others start as in a fresh run */
    const char *resume_path;     /* checkpoint file, checkpoint directory, "auto" (the newest in
                                  * checkpoint_dir, or a fresh start), or NULL */
    int quiet;                   /* no progress output, only the summary line */
    int progress_tty;            /* 1: redraw a progress bar; 0: periodic plain lines */
    int worker, workers;         /* this worker's index among the workers (not its MPI rank), and their count */
    int prefetch;                /* loader thread */
    int loader_threads;          /* threads building each batch (decoding on-demand images) and
                                  * decoding a folder data set at load (< 1: one) */
    size_t cache_bytes;          /* folder data sets: the decoded train and test sets stay in
                                  * memory while they fit this budget (data.h) */
    int skip_bad;                /* folder data sets: skip unreadable images, counted */
    double val_split;            /* folder data sets without test/: the share of each class of
                                  * train/ held out as the test set, drawn from seed (0: none) */
    const atomic_int *stop;      /* set by SIGINT/SIGTERM: checkpoint and stop; may be NULL */
    const atomic_int *finish;    /* set by the caller (the job API's record callback): the workers end at a
                                  * step they agree on as at the run's last (evaluation, final checkpoint,
                                  * summary; DT_OK); may be NULL */
    atomic_int *progress_request; /* set by SIGUSR1: print a progress line (cleared here); may be NULL */
    FILE *out;                   /* progress and summary (worker 0), NULL for none */
    dt_timeline *timeline;       /* spans of layers, steps, data, eval, checkpoints (NULL: off);
                                  * flushed at every checkpoint */
    /* Called by every worker once its trainer is set up (data loaded,
     * checkpoint resumed), before the strategy starts, with the set-up's
     * status (DT_OK or the failure, its message in dt_last_error); returns
     * the verdict every rank of the job shares (servers included), so that
     * a failure there (a data set that is missing on one host, a checkpoint
     * whose place in an epoch does not fit this batch) ends every rank in
     * order. NULL: none (one process). */
    dt_status (*agree_setup)(void *ctx, dt_status local);
    void *agree_ctx;
    /* Worker 0's records as they are written to the log (config, step,
     * eval, summary: one JSON object each, without the newline), whether
     * or not there is a log. NULL: none. */
    void (*on_record)(void *ctx, const char *json);
    void *record_ctx;
    /* Non-NULL: a run that ends well or by an agreed stop (DT_OK,
     * DT_ERR_INTERRUPTED) hands its net over here (the caller frees it
     * with dt_net_free) instead of freeing it. */
    dt_net **trained;
} dt_train_opts;

typedef struct {
    double test_accuracy, test_loss, train_loss, images_per_sec, wall_s;
    double comm_overlap;         /* share of communication time hidden by compute */
    double bytes_per_step;       /* sent + received by worker 0 */
    long steps;
    double epochs;               /* fractional epochs done */
    int has_staleness;           /* parameter servers: the three below are set */
    double staleness_mean, staleness_max; /* version lag of the parameters each step used */
    long max_clock_gap;          /* largest gap between the workers' clocks */
    int ended_early;             /* the workers agreed to finish early (dt_train_opts.finish) */
} dt_train_summary;

/* Whether a run that returned s ended together on every rank: finished,
 * or stopped by an agreed SIGINT/SIGTERM or divergence, every worker at
 * its end and every server told to stop. Then no rank waits on another,
 * and end-of-run collectives over all ranks are safe. */
static inline int dt_run_ended_together(dt_status s) {
    return s == DT_OK || s == DT_ERR_INTERRUPTED || s == DT_ERR_NUMERIC;
}

/* Trains spec (already resolved: command-line overrides applied) with the
 * given sync strategy. Writes progress, the JSONL log and the summary line.
 * On a NaN/inf loss (or parameters found non-finite before a checkpoint)
 * stops with DT_ERR_NUMERIC naming the step, after telling any servers to
 * stop, and leaves the last checkpoint as it was. */
dt_status dt_train_run(const dt_model_spec *spec, const dt_train_opts *opts, dt_sync *sync,
                       dt_train_summary *summary);

/* The checkpoint o->resume_path names: a file, the newest complete one of a
 * directory, or with "auto" of o->checkpoint_dir, tried with try_one(path,
 * ctx) as dt_ckptdir_newest does (skipped may be NULL). Its path goes to
 * path; "" when "auto" finds no checkpoint (a fresh start). */
dt_status dt_resume_find(const dt_train_opts *o, dt_ckptdir_try_fn try_one, dt_ckptdir_skip_fn skipped, void *ctx,
                         char *path, size_t cap);

/* DT_ERR_USAGE when checkpoint `from` (meta m) was written with another
 * seed than this run's (naming both), or with steps of another number of
 * samples than this run's step_samples (batch x accumulate x workers):
 * steps, the schedule and the place in an epoch are counted in such steps
 * (a file that does not say, before version 6, passes). */
dt_status dt_resume_check_run(const char *from, const dt_ckpt_meta *m, uint64_t seed, long step_samples);

/* DT_ERR_USAGE "nothing left to train" when the checkpoint `from` is at or
 * past the run's last step. */
dt_status dt_resume_check_end(const char *from, long step, long total_steps);

/* Whether the checkpoint to resume from (if any) is whole, of net's model
 * (else the first layer that differs is named), passes dt_resume_check_run, and is before last_step (the
 * run's end where it is known without the data set, else 0): what every
 * worker of a job checks before any mode starts, so that all end together
 * on a wrong one. What needs the data set's size (an end in epochs, a
 * position in an epoch of another data set) the trainer checks. */
dt_status dt_resume_check(const dt_train_opts *o, const dt_net *net, long step_samples, long last_step);

/* Receives each evaluated batch's logits (n, classes): the input of the
 * softmax layer, in this worker's dataset order; for a hierarchical softmax
 * ([softmax] tree=) its leaf probabilities (dt_net_scores) instead, which
 * are what it ranks; for a feature extractor
 * (net->classes 0) its output (n, C H W) instead. */
typedef dt_status (*dt_logits_fn)(void *ctx, const float *logits, int n, int classes);

/* DT_OK when ds's images can feed spec's input: the same channels, and the
 * same size unless spec crops them (Darknet's min_crop=/max_crop=); hue= and
 * saturation= need 3 channels. Else DT_ERR_CONFIG naming spec's file and
 * `kind` (the data set's name). */
dt_status dt_check_input(const dt_model_spec *spec, const dt_dataset *ds, const char *kind);

/* The model file's mean= and std= (per channel) onto ds, which its loader
 * then applies to every sample: x = (byte / 255 - mean) / std. */
void dt_data_normalise(dt_dataset *ds, const dt_model_spec *spec);

/* The size to load a data set of this kind at for spec: its input, except
 * folders under Darknet's crop (min_crop=/max_crop=), decoded as the
 * max_crop x max_crop centre square: Darknet scales the whole image so that
 * its shorter side is drawn in [min_crop, max_crop] and crops the input
 * from that, so decoding at the largest side keeps its resolution (what
 * lies beyond the square's sides is lost; docs/MODEL_FILES.md). */
dt_shape dt_data_load_shape(const dt_model_spec *spec, dt_dataset_kind kind);

/* How dt_evaluate runs. */
typedef struct {
    dt_sync *sync;          /* reduces the workers' sums; NULL: one process */
    int worker, workers;    /* this worker's share of the data set (0, 1: all of it) */
    int batch, threads;     /* batches of `batch` built by `threads` loader threads */
    dt_logits_fn on_logits; /* each batch's logits (dtrain eval --logits-out), or NULL */
    void *ctx;
    /* Set by SIGINT/SIGTERM (NULL: not watched): checked every 8 batches,
     * over the batches every worker has, as one agreement of all workers;
     * DT_ERR_INTERRUPTED when it was set (an ImageNet evaluation takes
     * minutes). */
    const atomic_int *stop;
} dt_eval_cfg;

/* Accuracy and mean loss of net over the whole dataset (the worker's part,
 * reduced through c->sync); each batch's logits also go to c->on_logits. A
 * feature extractor's outputs go to on_logits only (the accuracy and loss
 * are then 0): dtrain predict --features. */
dt_status dt_evaluate(dt_net *net, const dt_dataset *ds, const dt_eval_cfg *c, double *accuracy, double *loss);

/* The serial strategy: local SGD on the whole net. */
dt_status dt_sync_serial_create(dt_sync **out);

/* Fault injection: --straggle P:MS and --slow-worker RANK:MS. */
typedef struct {
    double p, ms;          /* every worker sleeps ms in a step with probability p */
    int slow_rank;         /* world rank slow_rank sleeps slow_ms in every step (slow_ms 0: none) */
    double slow_ms;
    uint64_t seed;         /* the run's: the chance is drawn from (seed, world_rank, step) */
    int world_rank;        /* this process's rank in MPI_COMM_WORLD */
    dt_timeline *timeline; /* the sleeps' spans (NULL: off) */
} dt_straggle_cfg;

/* When cfg makes this rank sleep: *s becomes a strategy that sleeps at the
 * start of each step (before s's begin_step) and is s otherwise; it owns s
 * (its free frees s). Else, and on failure, *s is left as it was. */
dt_status dt_sync_straggle_wrap(dt_sync **s, const dt_straggle_cfg *cfg);

/* What strategies may use of the trainer. */
dt_net *dt_trainer_net(dt_trainer *t);
/* The optimiser over the net's parameter vector, and its state: (nslots,
 * nparams) floats, slot-major (optim.h). */
const dt_optim *dt_trainer_optim(const dt_trainer *t);
float *dt_trainer_opt_state(dt_trainer *t);
size_t dt_trainer_opt_floats(const dt_trainer *t);
/* Points the state at `state` (dt_trainer_opt_floats floats, values taken
 * as they are) and frees the trainer's own block, as dt_net_bind_blocks
 * does for the net's blocks. */
void dt_trainer_bind_opt_state(dt_trainer *t, float *state);
/* The step's optimiser update of the net's parameters [lo, hi) from its
 * gradients (the step count is the step being finished, 1-based). */
void dt_trainer_update(dt_trainer *t, float lr, size_t lo, size_t hi);
/* sync->keeps_residual: this worker's residual, (nparams) floats: zeros,
 * or its part of the resumed checkpoint when that was written by as many
 * workers; NULL otherwise. */
float *dt_trainer_residual(dt_trainer *t);
/* Worker 0, for gather: the block every worker's residual goes to for a
 * checkpoint, (workers, nparams) floats: allocated at start-up when the run
 * checkpoints (else on the first call). */
dt_status dt_trainer_all_residuals(dt_trainer *t, float **out);
/* Optimiser steps done so far (the clock of the next step). */
long dt_trainer_step(const dt_trainer *t);
/* Steps this worker would run in lockstep modes (epochs x steps per epoch,
 * capped by --max-steps). */
long dt_trainer_total_steps(const dt_trainer *t);

#endif
