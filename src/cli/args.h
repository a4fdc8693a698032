/* Command-line flag parsing shared by every subcommand: a table of flags,
 * strict values ("--batch: 'x' is not an integer"), DT_ERR_USAGE on error. */
#ifndef DTRAIN_CLI_ARGS_H
#define DTRAIN_CLI_ARGS_H

#include "dtrain/status.h"

typedef enum { ARG_INT, ARG_LONG, ARG_DOUBLE, ARG_STR, ARG_FLAG } cli_arg_type;

typedef struct {
    const char *name;    /* "--batch" */
    cli_arg_type type;
    void *dest;          /* int*, long*, double*, const char**, int* (flag: set to 1) */
    double min, max;     /* numeric bounds (inclusive) */
    int seen;            /* set by cli_parse when given */
} cli_flag;

/* Parses argv[0..argc) (after the subcommand). Non-flag words go to
 * positional (at most max_pos); "--" ends flags (rest also positional). */
dt_status cli_parse(int argc, char **argv, cli_flag *flags, int nflags, const char **positional,
                    int max_pos, int *npos);

/* The flag named name in the table (for ->seen). */
const cli_flag *cli_flag_get(const cli_flag *flags, int nflags, const char *name);

#endif
