/* --mode allreduce, private to src/allreduce: the strategy's state and the
 * ways it sums a step's gradients (paths). allreduce.c is the strategy
 * (the dt_sync vtable, the start-up broadcast, SFB, statistics); it tries
 * the paths in order and the first enabled for the job runs it:
 *   ar_window_path   allreduce_window.c: a shared-memory window on one host
 *                    (shm), or one per host with a ring across hosts (hier)
 *   ar_bucket_path   allreduce_buckets.c: fusion buckets on a thread, each
 *                    by dtrain's ring, MPI_Iallreduce or a top-k allgather
 * A new path is a file with an ar_path and a line in allreduce.c's list. */
#ifndef DTRAIN_ALLREDUCE_ALLREDUCE_H
#define DTRAIN_ALLREDUCE_ALLREDUCE_H

#include "dtrain/dist.h"
#include "comm/group.h"
#include "comm/sfb.h"

typedef struct ar_ctx ar_ctx;

typedef struct {
    const char *name;
    /* 1 in *yes when it runs this job (collective over the workers: it may
     * look at the hosts); an error when the flags ask for it and it cannot.
     * What it keeps for the run goes in a->path_state only when it says
     * yes. */
    dt_status (*enabled)(ar_ctx *a, int *yes);
    /* After the start-up broadcast; may set s->grad_ready. */
    dt_status (*start)(ar_ctx *a, dt_sync *s, dt_trainer *t);
    /* The step's sums and the update; bytes (per step, for the timeline);
     * adds the seconds communication took and the trainer waited. */
    dt_status (*end_step)(ar_ctx *a, dt_trainer *t, float lr, double bytes, double *comm, double *waited);
    /* Frees a->path_state; together: every worker ended the run at the
     * same point (collective frees allowed). */
    void (*free)(ar_ctx *a, int together);
    /* One line for the start of the run: how it sums (after start). */
    void (*describe)(const ar_ctx *a, FILE *out);
} ar_path;

extern const ar_path ar_window_path, ar_bucket_path;

/* The strategy's state, shared by its paths; what only one path needs is
 * that path's own (its file's struct, behind `path_state`). */
struct ar_ctx {
    dt_group group;           /* first (dt_group_sync_alloc); the bucket thread's during a step */
    dt_comm comm;
    dt_dist_cfg cfg;
    dt_net *net;
    dt_comm_plan plan;
    dt_sfb sfb;
    const ar_path *path;      /* the one running the job (NULL until start has chosen) */
    void *path_state;         /* the running path's: set by its enabled or start, freed by its free */
    double bytes_per_step;    /* sent (as many received) by this worker per step, but SFB */
    long step;                /* clock of the step in flight */
};

#endif
