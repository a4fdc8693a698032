/* The train job's plan: the model file with the options over it, the
 * data set, the mode for a number of ranks, all checked before any
 * message is sent (job.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/job.h"
#include "dtrain/setup.h"

/* dt_stall's give_up: prints line and ends the whole MPI job with
 * MPI_Abort and exit status 3 (DT_ERR_STALLED). The one place the library
 * ends the process: the ranks waited for may never answer an orderly end,
 * so no status could ever be returned to a caller. */
static void end_stalled(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    /* MPI_Abort asks mpirun to end every rank; should it never return
     * (mpirun itself unreachable), SIGALRM's default action ends this one. */
    alarm(20);
    MPI_Abort(MPI_COMM_WORLD, dt_status_exit_code(DT_ERR_STALLED));
    _exit(dt_status_exit_code(DT_ERR_STALLED));
}


/* "this job has 3 ranks" for a train run, "a trial has 3 ranks
 * (--ranks-per-trial)" for a sweep's. */
static const char *ranks_said(char *buf, size_t cap, int ranks, int in_sweep) {
    snprintf(buf, cap, "%s has %d rank%s%s", in_sweep ? "a trial" : "this job", ranks, ranks == 1 ? "" : "s",
             in_sweep ? " (--ranks-per-trial)" : "");
    return buf;
}

/* --mode (NULL: the default for the ranks) and --servers against the run's
 * ranks: dc's mode and servers. */
static dt_status mode_of(dt_dist_cfg *dc, const char *name, int servers, int ranks, int in_sweep) {
    char has[64], list[160];
    if (!name) name = ranks > 1 ? "allreduce" : "serial";
    int m = dt_mode_from_name(name);
    if (m < 0)
        return dt_fail(DT_ERR_USAGE, "--mode: unknown mode '%s' (%s)", name, dt_mode_list(0, list, sizeof list));
    dc->mode = (dt_mode)m;
    if (dt_mode_info_of(dc->mode)->one_rank && ranks > 1)
        return dt_fail(DT_ERR_USAGE, "--mode %s runs on one rank, %s (use allreduce or ps-sync)", name,
                       ranks_said(has, sizeof has, ranks, in_sweep));
    dc->servers = dt_mode_is_ps(dc->mode) ? servers : 0;
    if (dt_mode_is_ps(dc->mode) && ranks < servers + 1)
        return dt_fail(DT_ERR_USAGE, "--mode %s --servers %d needs at least %d ranks, %s%s", name, servers,
                       servers + 1, ranks_said(has, sizeof has, ranks, in_sweep),
                       in_sweep ? "" : " (start it with dtrain launch -n N or mpirun -np N)");
    return DT_OK;
}

/* --mode/--servers/--sfb/--sacp/--group-size against the run's ranks. */
static dt_status resolve_mode(dt_dist_cfg *dc, const char *name, int servers, int ranks, int in_sweep) {
    DT_TRY(mode_of(dc, name, servers, ranks, in_sweep));
    return dt_dist_cfg_check(dc, ranks - dc->servers);
}

dt_status dt_job_role(const dt_job_args *a, int rank, int ranks, dt_job_role_kind *role) {
    dt_dist_cfg dc;
    memset(&dc, 0, sizeof dc);
    DT_TRY(mode_of(&dc, a->mode, a->servers, ranks, 0));
    *role = rank < dc.servers ? DT_JOB_SERVER : rank == dc.servers ? DT_JOB_CHIEF : DT_JOB_WORKER;
    return DT_OK;
}

/* "A:B" with A in [amin, amax] and B >= 0 (--straggle P:MS, --slow-worker RANK:MS). */
static dt_status parse_pair(const char *arg, const char *flag, const char *form, double amin, double amax,
                            double *a, double *b) {
    char *end;
    *a = strtod(arg, &end);
    if (end == arg || *end != ':' || !(*a >= amin && *a <= amax))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (first part in [%g, %g])", flag, arg, form, amin,
                       amax);
    const char *rest = end + 1;
    *b = strtod(rest, &end);
    if (end == rest || *end != '\0' || !(*b >= 0 && *b <= 1e7))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (milliseconds >= 0)", flag, arg, form);
    return DT_OK;
}

/* The model file with the [net] keys given as flags over it, and --lr and --epochs. */
static dt_status load_model(dt_model_spec *spec, const dt_job_args *a) {
    dt_model_override ov[DT_NETKEYS_MAX];
    char flag[DT_NETKEYS_MAX][DT_NETKEY_FLAG_MAX];
    int n = 0;
    for (int i = 0; i < DT_NETKEYS_MAX; i++) {
        if (!a->net_vals[i]) continue;
        const char *key = dt_model_net_key(i);
        dt_netkey_flag(key, flag[n], sizeof flag[n]);
        ov[n] = (dt_model_override){key, a->net_vals[i], flag[n]};
        n++;
    }
    DT_TRY(dt_setup_model_over(spec, a->model, ov, n, 0, a->lr, a->epochs));
    return dt_model_check_loss(spec);
}

/* --checkpoint, --checkpoint-dir, --keep, --checkpoint-every, --resume auto. */
static dt_status check_checkpoint_flags(const dt_job_args *a) {
    if (a->ckpt && a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--checkpoint and --checkpoint-dir exclude each other (one file, or a "
                       "directory of them)");
    if (a->ckpt_every && !a->ckpt && !a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--checkpoint-every needs --checkpoint FILE or --checkpoint-dir DIR");
    if (a->given_keep && !a->ckpt_dir) return dt_fail(DT_ERR_USAGE, "--keep needs --checkpoint-dir DIR");
    if (a->keep_fewer && !a->ckpt_dir) return dt_fail(DT_ERR_USAGE, "--keep-fewer needs --checkpoint-dir DIR");
    if (a->resume && a->weights && strcmp(a->resume, "auto") != 0)
        return dt_fail(DT_ERR_USAGE, "--weights goes with --resume auto only (the weights start the run until "
                       "--checkpoint-dir has a checkpoint); with --resume %s the run continues that checkpoint",
                       a->resume);
    if (a->resume && strcmp(a->resume, "auto") == 0 && !a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--resume auto needs --checkpoint-dir DIR (it resumes from there)");
    return DT_OK;
}

/* Flags that would do nothing in the mode chosen are errors, not ignored. */
static dt_status check_mode_flags(const dt_job_args *a, const dt_dist_cfg *dc) {
    const struct {
        int given;
        unsigned reads;
        const char *flag;
    } given[] = {{a->given_servers, DT_MF_SERVERS, "--servers"},
                 {a->given_server_nice, DT_MF_SERVERS, "--server-nice"},
                 {a->given_staleness, DT_MF_STALENESS, "--staleness"},
                 {a->ar_algo != NULL, DT_MF_ALGO, "--allreduce-algo"},
                 {a->given_fusion, DT_MF_ALGO, "--fusion-mb"},
                 {a->given_group, DT_MF_GROUPS, "--group-size"}};
    for (size_t i = 0; i < sizeof given / sizeof *given; i++)
        if (given[i].given) DT_TRY(dt_mode_check_flag(dc->mode, given[i].reads, given[i].flag));
    if (a->given_fusion && (dc->ar_algo == DT_AR_SHM || dc->ar_algo == DT_AR_HIER))
        return dt_fail(DT_ERR_USAGE, "--fusion-mb applies to --allreduce-algo auto, ring or mpi (buckets), not %s",
                       dt_ar_algo_name(dc->ar_algo));
    return DT_OK;
}

/* --optimizer over the model file's: the file's keys for the old one that
 * the new one would not read are an error, as in the file itself; but
 * momentum=, which nearly every file writes (for sgd), only gets a note in
 * *note (switching a file's optimiser from the command line is what the flag
 * is for). */
static dt_status switch_optimizer(dt_model_spec *spec, const char *name, char *note, size_t cap) {
    dt_optim_cfg *o = &spec->optim;
    int k = dt_optim_kind_from_name(name);
    if (k < 0) return dt_fail(DT_ERR_USAGE, "--optimizer: unknown optimizer '%s' (sgd, adam, adamw, lars, lamb)", name);
    o->kind = (dt_optim_kind)k;
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        int line = spec->hyper_line[i];
        if (!line || dt_optim_uses(o->kind, h->key)) continue;
        if (strcmp(h->key, "momentum") != 0)
            return dt_fail(DT_ERR_USAGE, "--optimizer %s: %s sets %s=, which %s does not read (remove it)", name,
                           spec->path, h->key, name);
        char who[64];
        dt_optim_users(who, sizeof who, h->key);
        snprintf(note, cap, "note: %s:%d: momentum= applies only to optimizer=%s (--optimizer is %s): ignored\n",
                 spec->path, line, who, name);
    }
    return DT_OK;
}

/* Hyperparameter h's flag (given as value) against the optimiser and its
 * model-file key's open ends (the parser checked the closed range). */
static dt_status check_hyper_flag(const dt_optim_hyper *h, const char *flag, double value, dt_optim_kind kind) {
    if (!dt_optim_uses(kind, h->key)) {
        char who[64];
        dt_optim_users(who, sizeof who, h->key);
        return dt_fail(DT_ERR_USAGE, "%s applies only to --optimizer %s (the optimizer is %s)", flag, who,
                       dt_optim_kind_name(kind));
    }
    double lo, hi;
    int lo_open, hi_open;
    dt_model_net_key_range(h->key, &lo, &hi, &lo_open, &hi_open);
    if (hi_open && value >= hi) return dt_fail(DT_ERR_USAGE, "%s: %g is not below %g", flag, value, hi);
    if (lo_open && value <= lo) return dt_fail(DT_ERR_USAGE, "%s: %g is not above %g", flag, value, lo);
    if (h->integer && value != (double)(int)value)
        return dt_fail(DT_ERR_USAGE, "%s: %g is not an integer", flag, value);
    return DT_OK;
}

/* --optimizer and its hyperparameters over the model file's; a flag the
 * optimiser would not read is an error. */
static dt_status apply_optimizer_flags(dt_model_spec *spec, const dt_job_args *a, char *note, size_t cap) {
    dt_optim_cfg *o = &spec->optim;
    if (a->optimizer) DT_TRY(switch_optimizer(spec, a->optimizer, note, cap));
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        if (a->hyper[i] < 0) continue;
        DT_TRY(check_hyper_flag(h, a->hyper_flags[i], a->hyper[i], o->kind));
        dt_optim_hyper_set(o, h, a->hyper[i]);
    }
    return DT_OK;
}

/* --partial and --freeze. */
static dt_status apply_finetune_flags(dt_model_spec *spec, const dt_job_args *a) {
    if (a->partial && !a->weights)
        return dt_fail(DT_ERR_USAGE, "--partial needs --weights CHECKPOINT (the layers it loads)");
    if (a->freeze >= spec->nlayers)
        return dt_fail(DT_ERR_USAGE, "--freeze %d: %s has %d layers, the last (its softmax) included: nothing would "
                       "train", a->freeze, spec->path, spec->nlayers);
    spec->optim.freeze = a->freeze;
    return DT_OK;
}

/* Combinations of optimiser, accumulation and mode that cannot run. */
static dt_status check_mode_optimizer(const dt_model_spec *spec, const dt_dist_cfg *dc) {
    if ((dt_mode_info_of(dc->mode)->flags & DT_MF_STALENESS) && dc->staleness > 0 && spec->optim.kind != DT_OPT_SGD)
        return dt_fail(DT_ERR_USAGE, "--mode ps-ssp --staleness %d runs only with --optimizer sgd: its read-my-writes "
                       "re-applies a worker's own gradients as plain gradient steps, and a %s step is not one (use "
                       "ps-sync, ps-async or --staleness 0)", dc->staleness, dt_optim_kind_name(spec->optim.kind));
    if (spec->optim.freeze && (dt_mode_info_of(dc->mode)->flags & DT_MF_STALENESS) && dc->staleness > 0)
        return dt_fail(DT_ERR_USAGE, "--freeze does not run with --mode ps-ssp --staleness %d: its read-my-writes "
                       "steps a worker's copy of every layer between replies, so frozen layers would drift there "
                       "(use ps-sync, ps-async or --staleness 0)", dc->staleness);
    if (spec->accumulate > 1 && dc->sfb != DT_SFB_OFF)
        return dt_fail(DT_ERR_USAGE, "--accumulate %d does not run with --sfb/--sacp: sufficient factors are the "
                       "last pass's samples only", spec->accumulate);
    return DT_OK;
}

static dt_status read_meta(const char *path, void *ctx) { return dt_checkpoint_verify(path, ctx); }

/* --keep-global-batch: resumed on another number of workers, a step keeps
 * the checkpoint's samples G (its schedule and place in the epoch count in
 * them): G / workers a worker, in the fewest passes (--accumulate) of at
 * most the batch that divide it. */
static dt_status keep_global_batch(dt_job_plan *p, int workers) {
    dt_model_spec *spec = &p->spec;
    if (!p->opts.resume_path)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch keeps the global batch of the checkpoint a run resumes "
                       "from: give --resume");
    struct stat st;
    if (strcmp(p->opts.resume_path, "auto") == 0 && p->opts.checkpoint_dir && stat(p->opts.checkpoint_dir, &st) != 0)
        return DT_OK; /* no directory yet: nothing to resume */
    dt_ckpt_meta m;
    char from[4096];
    DT_TRY(dt_resume_find(&p->opts, read_meta, NULL, &m, from, sizeof from));
    long global = (long)m.step_samples, mine = (long)dt_model_step_batch(spec) * workers;
    if (!from[0] || global == 0 || global == mine) return DT_OK; /* nothing to resume, or nothing to change */
    if (spec->subdivisions > 1)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch: %s sets subdivisions=%d; the passes of a step are "
                       "chosen here instead: remove it", spec->path, spec->subdivisions);
    if (global % workers != 0)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch: the checkpoint's steps of %ld samples (%s) do not divide "
                       "among %d workers", global, from, workers);
    int each = (int)(global / workers), passes = 1;
    while (each % passes != 0 || each / passes > spec->batch) passes++;
    spec->batch = each / passes;
    spec->accumulate = passes;
    p->dist.batch = spec->batch;
    return DT_OK;
}

/* The mode and its settings for `ranks` ranks, and the straggler settings. */
static dt_status prepare_dist(dt_job_plan *p, const dt_job_args *a, int ranks, int in_sweep) {
    const dt_model_spec *spec = &p->spec;
    if (a->sfb && a->sacp) return dt_fail(DT_ERR_USAGE, "--sfb and --sacp exclude each other");
    dt_dist_cfg dc = {.mode = DT_MODE_SERIAL,
                      .fusion_mb = a->fusion_mb,
                      .stall = {.report = a->stall_timeout,
                                .abort = a->stall_abort < 0 ? 10 * a->stall_timeout : a->stall_abort,
                                .give_up = end_stalled},
                      .staleness = a->staleness,
                      .sfb = a->sfb ? DT_SFB_ALL : a->sacp ? DT_SFB_AUTO : DT_SFB_OFF,
                      .batch = spec->batch,
                      .group_size = a->group_size,
                      .ar_algo = DT_AR_AUTO,
                      .codec = {DT_GC_NONE, 0},
                      .server_nice = a->server_nice};
    int algo = dt_ar_algo_from_name(a->ar_algo ? a->ar_algo : "auto");
    char list[64];
    if (algo < 0)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo: unknown algorithm '%s' (%s)", a->ar_algo,
                       dt_ar_algo_list(list, sizeof list));
    dc.ar_algo = (dt_ar_algo)algo;
    if (a->grad_compression) DT_TRY(dt_grad_codec_parse(a->grad_compression, &dc.codec));
    DT_TRY(resolve_mode(&dc, a->mode, a->servers, ranks, in_sweep));
    DT_TRY(check_mode_flags(a, &dc));
    DT_TRY(check_mode_optimizer(spec, &dc));
    p->dist = dc;
    dt_straggle_cfg *sc = &p->straggle;
    if (a->straggle) DT_TRY(parse_pair(a->straggle, "--straggle", "P:MS", 0, 1, &sc->p, &sc->ms));
    double slow_rank = 0;
    if (a->slow) DT_TRY(parse_pair(a->slow, "--slow-worker", "RANK:MS", 0, 65535, &slow_rank, &sc->slow_ms));
    sc->slow_rank = (int)slow_rank;
    if (a->slow && (sc->slow_rank < dc.servers || sc->slow_rank >= ranks))
        return dt_fail(DT_ERR_USAGE, "--slow-worker %s: rank %d is not a worker (the workers are ranks %d to %d)",
                       a->slow, sc->slow_rank, dc.servers, ranks - 1);
    return DT_OK;
}

/* The trainer's options from the flags. */
static void fill_opts(dt_job_plan *p, const dt_job_args *a) {
    const dt_model_spec *spec = &p->spec;
    dt_train_opts *o = &p->opts;
    o->epochs = spec->epochs;
    o->max_steps = a->max_steps;
    o->seed = (uint64_t)a->seed;
    o->log_path = a->log;
    o->checkpoint_path = a->ckpt;
    o->checkpoint_every = a->ckpt_every;
    o->checkpoint_dir = a->ckpt_dir;
    if (a->ckpt_dir && a->ckpt_dir == a->backup) {
        size_t used = strlen(p->notes);
        snprintf(p->notes + used, sizeof p->notes - used, "note: checkpoints in %s (backup= of %s)\n", a->ckpt_dir,
                 a->data);
    }
    o->keep = a->keep;
    o->keep_fewer = a->keep_fewer;
    o->max_loss_ratio = a->max_loss_ratio;
    o->resume_path = a->resume;
    o->weights_path = a->weights;
    o->partial = a->partial;
    o->quiet = a->quiet;
    o->prefetch = !a->no_prefetch;
    o->loader_threads = a->loader_threads ? a->loader_threads : dt_setup_loader_threads(o->dataset);
    o->skip_bad = a->skip_bad;
    o->val_split = a->val_split;
    p->cache_mb = a->cache_mb;
    p->timeline_path = a->timeline;
    p->threads = a->threads;
}

dt_status dt_job_prepare(dt_job_plan *p, const dt_job_args *a, int ranks, int in_sweep) {
    memset(p, 0, sizeof *p);
    p->model = a->model;
    DT_TRY(check_checkpoint_flags(a));
    int rule = dt_lr_scaling_from_name(a->lr_scaling ? a->lr_scaling : "none");
    if (rule < 0)
        return dt_fail(DT_ERR_USAGE, "--lr-scaling: unknown rule '%s' (linear, none)", a->lr_scaling);
    p->scaling = (dt_lr_scaling)rule;
    dt_model_spec *spec = &p->spec;
    DT_TRY(load_model(spec, a));
    if (a->epochs > 0 && spec->sched.max_batches > 0)
        return dt_fail(DT_ERR_USAGE, "--epochs: %s sets max_batches=%d, the run's length in steps (--max-steps "
                       "stops earlier)", spec->path, spec->sched.max_batches);
    if ((int64_t)spec->batch * spec->accumulate > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "%s: batch=%d x accumulate=%d is too large a batch", spec->path, spec->batch,
                       spec->accumulate);
    p->base_batch = dt_model_step_batch(spec); /* the file's step's batch */
    if (a->batch > 0) spec->batch = a->batch;
    DT_TRY(apply_optimizer_flags(spec, a, p->notes, sizeof p->notes));
    DT_TRY(apply_finetune_flags(spec, a));
    DT_TRY(dt_setup_precision(spec, a->precision));
    if (a->accumulate > 0 && spec->subdivisions > 1)
        return dt_fail(DT_ERR_USAGE, "--accumulate: %s sets subdivisions=%d (its batch is the step's); change "
                       "subdivisions= there instead", spec->path, spec->subdivisions);
    if (a->accumulate > 0) spec->accumulate = a->accumulate;
    if ((int64_t)spec->batch * spec->accumulate * ranks > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "--batch %d x --accumulate %d x %d ranks is too large a global batch", spec->batch,
                       spec->accumulate, ranks);
    if (a->warmup_epochs > 0 && spec->sched.burn_in > 0)
        return dt_fail(DT_ERR_USAGE, "--warmup-epochs: %s has burn_in=%d, Darknet's warmup; give one of them",
                       spec->path, spec->sched.burn_in);
    if (a->warmup_epochs >= 0) spec->sched.warmup_epochs = a->warmup_epochs;
    dt_train_opts *o = &p->opts;
    DT_TRY(dt_setup_data_source(&o->dataset, &o->data_dir, a->data, a->dataset, a->data_dir, spec));
    DT_TRY(dt_setup_folder_flags(o->dataset, o->data_dir, a->cache_mb, a->skip_bad));
    DT_TRY(dt_setup_val_split(o->dataset, a->val_split));
    DT_TRY(prepare_dist(p, a, ranks, in_sweep));
    fill_opts(p, a);
    if (a->keep_global_batch) DT_TRY(keep_global_batch(p, ranks - p->dist.servers));
    return DT_OK;
}

/* --data's backup= is the run's --checkpoint-dir when neither
 * --checkpoint nor --checkpoint-dir is given (Darknet writes its weights
 * there). */
dt_status dt_job_use_backup(dt_job_args *a) {
    if (!a->data || a->ckpt || a->ckpt_dir) return DT_OK;
    dt_darknet_data d;
    DT_TRY(dt_darknet_data_read(&d, a->data));
    dt_status s = DT_OK;
    if (d.backup && (size_t)snprintf(a->backup, sizeof a->backup, "%s", d.backup) >= sizeof a->backup)
        s = dt_fail(DT_ERR_USAGE, "%s: backup= is too long a path", a->data);
    if (s == DT_OK && d.backup) a->ckpt_dir = a->backup;
    dt_darknet_data_free(&d);
    return s;
}
