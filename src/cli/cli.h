/* Subcommands of the dtrain command and what they share. Only src/cli/
 * prints errors and decides exit codes. */
#ifndef DTRAIN_CLI_H
#define DTRAIN_CLI_H

#include <stdio.h>

#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/status.h"
#include "dtrain/setup.h"
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

/* dtrain --version: version, build options, the libraries' versions
 * (callable before MPI_Init). */
void cli_print_version(FILE *out);

#endif
