/* The files a command reads and writes, checked before anything is
 * written: no output may be an input or another output (a typo must not
 * destroy a file), their folders are made (mkdir -p), and train's must be
 * writable (found now, not when the first checkpoint is due). Every
 * subcommand describes its files in one dt_path table. */
#ifndef DTRAIN_PATHS_H
#define DTRAIN_PATHS_H

#include "dtrain/job.h"

/* One file of a command: an input when role says what it is ("the model
 * file"), else an output. Files are the same by identity (device and inode
 * when both exist, else the normalised path). */
typedef struct {
    const char *flag;      /* "-o", "--log"; for a positional, its name in the usage ("MODEL.cfg") */
    const char *path;      /* NULL: not given */
    const char *role;      /* inputs: "the model file"; NULL: an output */
    unsigned may_replace;  /* outputs: bit j set when it may name input j (train's --resume F --checkpoint F) */
} dt_path;

/* DT_ERR_USAGE naming the flag when an output of p[0..n) is an input (not
 * allowed by may_replace) or an earlier output. */
dt_status dt_paths_check(const dt_path *p, int n);

/* Creates the folders of p's outputs that do not exist (DT_ERR_IO naming
 * the flag and the folder when one cannot be). */
dt_status dt_paths_make_parents(const dt_path *p, int n);

/* Collisions between a's paths (every rank: the answer is the same). */
dt_status dt_job_check_path_collisions(const dt_job_args *a);

/* Whether the outputs worker 0 writes can be written (--log, --checkpoint,
 * --checkpoint-dir, which is created; the folders of all are made): call it on worker 0 only. Nothing
 * existing is truncated or changed. */
dt_status dt_job_check_outputs_writable(const dt_job_args *a);

#endif
