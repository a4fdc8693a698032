/* The train job: what `dtrain train` runs, as a library module so that
 * the CLI's train and sweep, and the job API (dtrain.h, the Python
 * package) are clients of one implementation:
 *   dt_job_parse / dt_job_set  options (flags by name, one table:
 *                              job_flags.c) -> dt_job_args (no I/O)
 *   dt_job_prepare             model file + options, data set, mode for a
 *                              number of ranks, straggler settings (no
 *                              MPI): a dt_job_plan
 *   dt_job_run                 the run on the ranks of a communicator:
 *                              servers serve, workers train
 *   dt_job_execute             dt_job_run after the checks of its files and
 *                              a start every rank agrees on
 * Every failure is a dt_status with a one-line message naming the flag. */
#ifndef DTRAIN_JOB_H
#define DTRAIN_JOB_H

#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "dtrain/dist.h"
#include "dtrain/netkeys.h"
#include "dtrain/opts.h"
#include "dtrain/train.h"

/* Requests from outside the run, read between steps: stop (SIGINT, a
 * callback: the workers stop at a step they agree on, with a final
 * checkpoint) and print a progress line now (SIGUSR1). */
typedef struct {
    atomic_int stop;
    atomic_int progress; /* cleared by the trainer when it prints */
} dt_job_requests;

/* The signals a run takes as requests: SIGINT, SIGTERM, SIGHUP (stop) and
 * SIGUSR1 (progress), into *set. No handler of them may run on a thread that
 * computes (oneDNN 2.6's JIT GEMMs point rsp into the heap: oneDNN #4845),
 * so the CLI and the job API block them there and take them on a thread of
 * their own. */
void dt_job_signal_set(sigset_t *set);

/* Flags of the option table: its own rows and a generated one per [net]
 * key (netkeys.h). */
#define DT_JOB_MAX_OPTS (64 + DT_NETKEYS_MAX)

/* The flags as given; 0, NULL or -1 (warmup_epochs, the optimiser's
 * hyperparameters) mean "not given": the model file's value stands.
 * Strings point into argv. */
typedef struct {
    const char *model;
    const char *dataset, *data_dir, *log, *ckpt, *resume, *weights, *mode, *straggle, *slow, *lr_scaling, *timeline;
    const char *ckpt_dir;
    const char *data;                 /* --data FILE.data (Darknet's), or NULL */
    char backup[4096];                /* its backup=, when it is the run's --checkpoint-dir */
    int epochs, batch, threads, quiet, no_prefetch, servers, staleness, help, sfb, sacp, group_size, keep;
    int keep_global_batch, keep_fewer;
    int partial, freeze;              /* --partial; --freeze N (0: not given) */
    long max_steps, ckpt_every, seed;
    double lr, warmup_epochs, fusion_mb, stall_timeout, stall_abort, max_loss_ratio;
    const char *optimizer;
    /* Hyperparameter i of optim.h's table (--momentum, --beta1 ...; -1: not
     * given); hyper_flags[i] its flag's name. */
    double hyper[DT_OPT_MAX_HYPERS];
    char hyper_flags[DT_OPT_MAX_HYPERS][DT_NETKEY_FLAG_MAX];
    int accumulate;                   /* 0: not given */
    const char *ar_algo;
    const char *grad_compression;     /* NULL: not given */
    const char *precision;            /* NULL: not given */
    int loader_threads, skip_bad;     /* 0: not given */
    double val_split;                 /* 0: not given */
    int server_nice;                  /* 0-19 */
    long cache_mb;                    /* -1: not given */
    /* [net] key i's value given as its generated flag (--policy cosine), or NULL;
     * net_flags[i] holds the flag's name while dt_job_parse runs. */
    const char *net_vals[DT_NETKEYS_MAX];
    char net_flags[DT_NETKEYS_MAX][DT_NETKEY_FLAG_MAX];
    /* Flags that apply to some modes only, given or not (an error where they do nothing). */
    int given_servers, given_staleness, given_fusion, given_group, given_keep, given_server_nice;
} dt_job_args;

typedef struct {
    const char *model;      /* the model file's path or the model's text (a's), which every rank compares */
    dt_model_spec spec;     /* overrides applied; lr not yet scaled for the global batch */
    int base_batch;         /* the model file's batch= (the base of --lr-scaling), before --batch */
    dt_lr_scaling scaling;
    dt_train_opts opts;     /* all but the fields that depend on the communicator */
    dt_dist_cfg dist;
    dt_straggle_cfg straggle; /* --straggle, --slow-worker (seed, world_rank, timeline: set per run) */
    int threads;            /* --threads (0: cores / ranks on the node) */
    long cache_mb;          /* --cache-mb (-1: a quarter of memory over the ranks on the node) */
    const char *timeline_path; /* --timeline, or NULL */
    char notes[512];        /* "note: ...\n" lines worker 0 prints after the start-up line ("": none) */
    int agreed_failure;     /* set by dt_job_run: it failed alike on every rank, before training
                               (ranks disagree on the model), and every rank returned */
} dt_job_plan;

/* a's defaults (every option "not given"). */
void dt_job_args_init(dt_job_args *a);
/* The option table over a's fields into opts (DT_JOB_MAX_OPTS rows); its
 * row count. */
int dt_job_opts(dt_job_args *a, dt_opt *opts);
/* a's given_* from the table's ->seen (after parsing or setting). */
void dt_job_note_given(dt_job_args *a, const dt_opt *opts, int n);
/* Parses argv (after "train"). With --help only a->help is meaningful. */
dt_status dt_job_parse(dt_job_args *a, int argc, char **argv);
/* `dtrain train --help`: every flag of the table, the modes and [net] keys. */
void dt_job_usage(FILE *out);

/* A rank's part in a run: a parameter server, worker 0 (the chief: it
 * prints, writes the log and the checkpoints, gets the records) or
 * another worker. */
typedef enum { DT_JOB_SERVER, DT_JOB_CHIEF, DT_JOB_WORKER } dt_job_role_kind;
/* The part of rank `rank` in a run of a on `ranks` ranks, from --mode and
 * --servers alone (no model or data read, no MPI): the servers are the
 * first ranks, worker 0 the next. Fails as dt_job_prepare would on an
 * unknown mode or too few ranks for it. */
dt_status dt_job_role(const dt_job_args *a, int rank, int ranks, dt_job_role_kind *role);

/* --data's backup= as the run's --checkpoint-dir when neither --checkpoint
 * nor --checkpoint-dir is given (Darknet writes its weights there). */
dt_status dt_job_use_backup(dt_job_args *a);

/* Resolves a for a run on `ranks` ranks: loads the model file, applies the
 * overrides and checks the combination of flags. in_sweep: the ranks are a
 * sweep trial's (--ranks-per-trial), which messages say instead of the job's. */
dt_status dt_job_prepare(dt_job_plan *p, const dt_job_args *a, int ranks, int in_sweep);

/* Trains p on the ranks of comm (each calls it; every rank of comm must be
 * given the same plan): server ranks serve, worker 0 prints the start-up
 * line and progress to out (NULL: nothing) and fills *sum. Scales the
 * learning rate for the global batch (--lr-scaling). local_ranks: the
 * ranks on this node (the default thread count). */
dt_status dt_job_run(dt_job_plan *p, MPI_Comm comm, int local_ranks, dt_job_requests *req, FILE *out,
                     dt_train_summary *sum);

/* A verdict over the ranks of comm before a run starts: each rank's status
 * local; the first failing rank's status and message become every rank's
 * (its rank named when comm has several), or DT_OK when none failed. */
dt_status dt_job_agree(MPI_Comm comm, dt_status local);

/* dt_job_run of p (prepared from a) after what `dtrain train` checks
 * first: a's files collide nowhere, worker 0 can write its outputs and
 * holds its --checkpoint-dir; a failure there is every rank's (the first
 * failing rank's message, p->agreed_failure set). */
dt_status dt_job_execute(dt_job_plan *p, const dt_job_args *a, MPI_Comm comm, int local_ranks,
                         dt_job_requests *req, FILE *out, dt_train_summary *sum);

#endif
