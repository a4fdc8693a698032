/* What dtrain sweep reports: one trial's outcome, the JSONL records, the
 * table sorted by test accuracy and the summary line. */
#ifndef DTRAIN_CLI_SWEEP_REPORT_H
#define DTRAIN_CLI_SWEEP_REPORT_H

#include <stdio.h>

#include "dtrain/status.h"
#include "grid.h"

typedef enum { TRIAL_OK = 0, TRIAL_FAILED, TRIAL_SKIPPED } cli_trial_state;

/* One trial's outcome. Plain bytes: group leaders send them to rank 0 as
 * MPI_BYTE (every rank of a job runs the same binary). */
typedef struct {
    long trial;                 /* index into the grid (shown 1-based: trial 1..N) */
    int state;                  /* cli_trial_state */
    int status;                 /* dt_status of the run */
    int group, ranks;           /* group that ran it and its size */
    long steps;
    double test_accuracy, test_loss, train_loss, images_per_sec, wall_s;
    char mode[24];              /* its --mode ("" if its flags were not read) */
    int has_staleness;          /* parameter servers: the three below are set */
    double staleness_mean, staleness_max;
    long max_clock_gap;
    char error[512];            /* failed/skipped: the one-line message */
} cli_trial;

/* One JSON object per trial, in trial order: the grid values, mode,
 * status, error (null when ok), metrics (null unless ok; staleness and
 * clock gap also null unless the trial ran parameter servers), steps,
 * group, ranks. */
dt_status cli_sweep_write_jsonl(FILE *f, const char *path, const cli_grid *g, const cli_trial *t, long n);

/* The table: successful trials by test accuracy (best first), then the
 * failed and skipped ones in trial order with their message. Columns of
 * staleness and clock gap when a trial ran parameter servers. */
void cli_sweep_print_table(FILE *out, const cli_grid *g, const cli_trial *t, long n);

/* The closing JSON line: counts, wall time and the best trial. */
void cli_sweep_print_summary(FILE *out, const cli_grid *g, const cli_trial *t, long n, int ranks,
                             int ranks_per_trial, double wall_s);

#endif
