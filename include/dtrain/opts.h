/* Options read through a table of flags: strict values ("--batch: 'x' is
 * not an integer"), DT_ERR_USAGE on error. Every subcommand's argv is
 * parsed so, and the job API (dtrain.h) sets a train job's options by name
 * through the same table. */
#ifndef DTRAIN_OPTS_H
#define DTRAIN_OPTS_H

#include "dtrain/status.h"

typedef enum { DT_OPT_INT, DT_OPT_LONG, DT_OPT_DOUBLE, DT_OPT_STR, DT_OPT_FLAG } dt_opt_type;

typedef struct {
    const char *name;    /* "--batch" */
    dt_opt_type type;
    void *dest;          /* int*, long*, double*, const char**, int* (flag: set to 1) */
    double min, max;     /* numeric bounds (inclusive) */
    int seen;            /* set by dt_opts_parse and dt_opts_set when given */
} dt_opt;

/* Parses argv[0..argc) (after the subcommand). Non-flag words go to
 * positional (at most max_pos); "--" ends flags (rest also positional). */
dt_status dt_opts_parse(int argc, char **argv, dt_opt *flags, int nflags, const char **positional,
                  int max_pos, int *npos);

/* Sets the option `name` ("max_steps", "max-steps" or "--max-steps") to
 * value as its flag would (a string value is kept by pointer: it must
 * outlive the table's destination). A flag (DT_OPT_FLAG) takes NULL, "1",
 * "true", "0" or "false". Unknown names fail with a suggestion. */
dt_status dt_opts_set(dt_opt *opts, int nopts, const char *name, const char *value);

/* The flag named name in the table (for ->seen). */
const dt_opt *dt_opt_find(const dt_opt *flags, int nflags, const char *name);

#endif
