/* Subcommands of the dtrain command and what they share. Only src/cli/
 * prints errors and decides exit codes. */
#ifndef DTRAIN_CLI_H
#define DTRAIN_CLI_H

#include <stdio.h>

#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/status.h"
#include "signals.h"

/* MPI process layout (world size 1 for a plain run). */
typedef struct {
    int rank, world;
    int local_ranks; /* ranks on this node (for the default thread count) */
    int orderly;     /* set by a command whose failure every rank reached in order
                        (an interrupted run): main finalises MPI instead of aborting */
} cli_env;

int cmd_train(int argc, char **argv, cli_env *env, cli_signals *sig);
/* Every rank returns the same exit code (the ranks agree on the outcome). */
int cmd_sweep(int argc, char **argv, const cli_env *env, cli_signals *sig);
int cmd_eval(int argc, char **argv, const cli_env *env);
int cmd_info(int argc, char **argv, const cli_env *env);
int cmd_bench(int argc, char **argv, const cli_env *env);
int cmd_simulate(int argc, char **argv, const cli_env *env);
/* Classifies image files with a checkpoint; one process, no MPI. */
int cmd_predict(int argc, char **argv, const cli_env *env);
/* Runs mpirun; needs no MPI itself (called before MPI_Init). */
int cmd_launch(int argc, char **argv);
/* Draws training logs; needs no MPI either. */
int cmd_plot(int argc, char **argv);
/* Writes a trained network as ONNX; no MPI. */
int cmd_export(int argc, char **argv);

/* Prints "dtrain: <message>" (with the rank when world > 1) for a failed
 * status and returns its exit code. */
int cli_report(dt_status s, const cli_env *env);

/* A command's start-up result s on every rank (a bad flag fails on every
 * rank alike, an unwritable path only where it is checked): every rank
 * returns the exit code of the first rank that failed, which alone prints
 * its message, or 0 when none did; after a failure, env->orderly is set
 * (no rank waits for another: MPI is finalised, not aborted). */
int cli_agree_start(dt_status s, cli_env *env);

/* dt_stall's give_up: prints line and ends the whole job at once with
 * MPI_Abort and exit status 3 (DT_ERR_STALLED); the ranks waited for may
 * never answer an orderly end. Does not return. */
void cli_end_stalled_job(void *ctx, const char *line);

/* dtrain --version: version, build options, the libraries' versions
 * (callable before MPI_Init). */
void cli_print_version(FILE *out);

/* Parses the model file and applies --batch/--lr/--epochs overrides
 * (0 = keep the file's value). */
dt_status cli_load_model(dt_model_spec *spec, const char *path, int batch, double lr, int epochs);
/* The same with n [net] keys given as flags (dt_model_parse_file_over). */
dt_status cli_load_model_over(dt_model_spec *spec, const char *path, const dt_model_override *ov, int n, int batch,
                              double lr, int epochs);

/* --precision NAME (NULL: not given) over the model file's precision=, and
 * the CPU check of the result: the error names the flag, or the file. */
dt_status cli_precision(dt_model_spec *spec, const char *name);

/* Sets the OpenMP threads oneDNN runs on: `threads` if > 0, else cores /
 * ranks on this node. */
int cli_set_threads(int threads, const cli_env *env);

/* --dataset name (NULL: the model file's, else fashion-mnist) -> kind. */
dt_status cli_dataset_kind(dt_dataset_kind *kind, const char *name, const dt_model_spec *spec);

/* The data set's kind and where it is: --data FILE.data (Darknet's; it
 * excludes --dataset and --data-dir) as kind darknet with *dir the file,
 * else --dataset (cli_dataset_kind) and --data-dir. */
dt_status cli_data_source(dt_dataset_kind *kind, const char **dir, const char *data, const char *dataset,
                          const char *data_dir, const dt_model_spec *spec);

/* The image data sets' flags against the kind: --data-dir required for
 * folder, --cache-mb (cache_mb >= 0) and --skip-bad-images only for kinds
 * that decode images (folder, darknet). */
dt_status cli_folder_flags(dt_dataset_kind kind, const char *data_dir, long cache_mb, int skip_bad);
/* --loader-threads when not given: 2 for folder (decoding), else 1. */
/* --val-split F (0: not given) applies to folder data sets only. */
dt_status cli_val_split_flag(dt_dataset_kind kind, double val_split);

int cli_default_loader_threads(dt_dataset_kind kind);
/* --cache-mb in bytes; -1 (not given): a quarter of memory over the ranks
 * on this node. */
size_t cli_cache_bytes(long cache_mb, const cli_env *env);

#endif
