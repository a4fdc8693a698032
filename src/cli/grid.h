/* The --grid of dtrain sweep: axes KEY=V1,V2,... whose cartesian product
 * is the list of trials. A key names a train flag (lr -> --lr) or any
 * model-file [net] key (policy -> --policy, netkeys.h); the values are
 * checked by the train flag parser when a trial's flags are built. */
#ifndef DTRAIN_CLI_GRID_H
#define DTRAIN_CLI_GRID_H

#include <stddef.h>

#include "dtrain/status.h"

#define CLI_GRID_MAX_AXES 8
#define CLI_GRID_MAX_VALUES 64
#define CLI_GRID_MAX_TRIALS 10000
#define CLI_GRID_TERM_MAX 1024

typedef struct {
    const char *key;                       /* "lr" */
    const char *flag;                      /* "--lr" (may point into flagbuf) */
    char flagbuf[40];                      /* a [net] key's train flag */
    int numeric;                           /* values are numbers (else strings, in JSON) */
    int nvalues;
    const char *values[CLI_GRID_MAX_VALUES]; /* point into buf */
    char buf[CLI_GRID_TERM_MAX];
} cli_grid_axis;

typedef struct {
    int naxes;
    long ntrials;                          /* product of the axes' sizes (1 when empty) */
    cli_grid_axis axes[CLI_GRID_MAX_AXES];
} cli_grid;

void cli_grid_init(cli_grid *g);

/* Adds one axis "KEY=V1,V2,...". DT_ERR_USAGE ("--grid: ...") for a term
 * that is not of that form, an unknown or repeated key, an empty or
 * repeated value, or more than the limits above. */
dt_status cli_grid_add(cli_grid *g, const char *term);

/* Value of `axis` in trial t (0 <= t < ntrials); the last axis varies
 * fastest, so trials are numbered like nested loops in --grid order. */
const char *cli_grid_value(const cli_grid *g, long t, int axis);

/* "lr=0.01 batch=64": trial t's values, for messages and the table. */
void cli_grid_describe(const cli_grid *g, long t, char *buf, size_t cap);

#endif
