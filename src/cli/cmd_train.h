/* dtrain train, in three parts so that `dtrain sweep` can run each trial as
 * a train run on a group of ranks:
 *   cli_train_parse    flags and MODEL.cfg -> cli_train_args (no I/O)
 *   cli_train_prepare  model file + overrides, dataset, mode for a number of
 *                      ranks, straggler settings (no MPI): a cli_train_plan
 *   cli_train_run      the run on the ranks of a communicator
 * Every failure is a dt_status with a one-line message naming the flag. */
#ifndef DTRAIN_CLI_CMD_TRAIN_H
#define DTRAIN_CLI_CMD_TRAIN_H

#include <mpi.h>
#include <stdio.h>

#include "cli.h"
#include "netkeys.h"
#include "dtrain/dist.h"
#include "dtrain/train.h"

/* The flags as given; 0, NULL or -1 (momentum, decay, warmup_epochs, the
 * optimiser's hyperparameters) mean
 * "not given": the model file's value stands. Strings point into argv. */
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
    double lr, momentum, decay, warmup_epochs, fusion_mb, stall_timeout, stall_abort, max_loss_ratio;
    const char *optimizer;
    double beta1, beta2, eps, trust;  /* -1: not given */
    int exclude, accumulate;          /* -1, 0: not given */
    const char *ar_algo;
    const char *grad_compression;     /* NULL: not given */
    const char *precision;            /* NULL: not given */
    int loader_threads, skip_bad;     /* 0: not given */
    double val_split;                 /* 0: not given */
    int server_nice;                  /* 0-19 */
    long cache_mb;                    /* -1: not given */
    /* [net] key i's value given as its generated flag (--policy cosine), or NULL;
     * net_flags[i] holds the flag's name while cli_train_parse runs. */
    const char *net_vals[CLI_NET_KEYS_MAX];
    char net_flags[CLI_NET_KEYS_MAX][CLI_NET_FLAG_MAX];
    /* Flags that apply to some modes only, given or not (an error where they do nothing). */
    int given_servers, given_staleness, given_fusion, given_group, given_keep, given_server_nice;
} cli_train_args;

typedef struct {
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
    int agreed_failure;     /* set by cli_train_run: it failed alike on every rank, before training
                               (ranks disagree on the model), and every rank returned */
} cli_train_plan;

/* Parses argv (after "train"). With --help only a->help is meaningful. */
dt_status cli_train_parse(cli_train_args *a, int argc, char **argv);

/* Resolves a for a run on `ranks` ranks: loads the model file, applies the
 * overrides and checks the combination of flags. in_sweep: the ranks are a
 * sweep trial's (--ranks-per-trial), which messages say instead of the job's. */
dt_status cli_train_prepare(cli_train_plan *p, const cli_train_args *a, int ranks, int in_sweep);

/* Trains p on the ranks of comm (each calls it; every rank of comm must be
 * given the same plan): server ranks serve, worker 0 prints the start-up
 * line and progress to out (NULL: nothing) and fills *sum. Scales the
 * learning rate for the global batch (--lr-scaling). */
dt_status cli_train_run(cli_train_plan *p, MPI_Comm comm, const cli_env *env,
                        cli_signals *sig, FILE *out, dt_train_summary *sum);

#endif
