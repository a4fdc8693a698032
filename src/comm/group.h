/* Collectives among the workers that never hang silently.
 *
 * Every collective of the workers' communicator (a gradient bucket's
 * allreduce, metrics, batch-norm state, the start-up broadcast) goes through
 * a dt_group: before it, the worker counts it and announces the count to the
 * other workers; while it waits (MPI_Test with a growing sleep, no spinning)
 * it repeats the announcement as a heartbeat every quarter of
 * --stall-timeout, and every --stall-timeout it names the workers whose last
 * announced count is below its own (they have not reached this collective)
 * or who have gone silent inside it (stopped, hung): Horovod's stall
 * inspector. After --stall-abort it gives up, naming them (dt_stall).
 * Only one thread at a time may use a group. */
#ifndef DTRAIN_COMM_GROUP_H
#define DTRAIN_COMM_GROUP_H

#include "dtrain/dist.h"

/* Values a deferred sum carries at most. */
enum { DT_GROUP_PENDING_MAX = 4 };

typedef struct {
    dt_comm comm;       /* world layout; collectives run on comm.workers */
    const dt_stall *stall; /* the run's (outlives the group) */
    int member, members; /* this process's index among the group's members (the ranks of
                            comm.workers: all workers, a host's, or one per host), and their
                            count; not its rank in comm.world, which is world_rank[member] */
    int *world_rank;    /* (members) each member's rank in comm.world, for messages */
    long seq;           /* collectives this worker has entered */
    long *seen;         /* (members) latest count announced by each worker, -1 none */
    double *heard;      /* (members) when each worker's last announcement arrived */
    long *inbox;        /* (members) receive buffers */
    long outbox;        /* send buffer of this worker's announcement */
    MPI_Request *recv;  /* (members) one posted receive per peer */
    MPI_Request *send;  /* (members) last announcement to each peer */
    const char *what;   /* the collective being waited for (messages) */
    atomic_int hurry;   /* set by the owner while its trainer blocks on the group's waits */
    /* A sum started by dt_group_sum_start and not yet finished: its
     * request (MPI_REQUEST_NULL: none) and values, kept here rather than
     * by the caller so that they outlive any caller's frame. */
    MPI_Request pending;
    double pending_vals[DT_GROUP_PENDING_MAX];
    int npending;
    const char *pending_what; /* its name, for the stall inspector's messages */
} dt_group;

dt_status dt_group_create(dt_group *g, const dt_comm *c, const dt_stall *stall);
void dt_group_free(dt_group *g);

/* Counts and announces a collective; then wait for its requests with
 * dt_group_wait. The two helpers below do both. */
dt_status dt_group_enter(dt_group *g, const char *what);
dt_status dt_group_wait(dt_group *g, MPI_Request *reqs, int n);

/* Sum of vals[0..n) over the workers, in place. */
dt_status dt_group_sum_doubles(dt_group *g, double *vals, int n, const char *what);
/* The same sum in two halves, so that a worker need not wait for the others
 * to reach it: start with vals[0..n) (n <= DT_GROUP_PENDING_MAX; one sum
 * at a time), finish later with the sums in vals. Every worker starts it at
 * the same point among its collectives. */
dt_status dt_group_sum_start(dt_group *g, const double *vals, int n, const char *what);
dt_status dt_group_sum_finish(dt_group *g, double *vals, int n);
/* Average of the net's layer state (BN running statistics) over the workers. */
dt_status dt_group_average_state(dt_group *g, dt_net *net);
/* Worker 0's parameters, layer state and optimiser state (nopt_state
 * floats) to every worker (they differ
 * only when worker 0 resumed from a checkpoint). */
dt_status dt_group_bcast_start(dt_group *g, dt_net *net, float *opt_state, size_t nopt_state);

/* For the worker strategies, whose ctx struct starts with a dt_group:
 * allocate a dt_sync with a zeroed ctx of ctx_size bytes (freed together by
 * dt_group_sync_free), and the reduce_sum / sync_state hooks they share. */
dt_status dt_group_sync_alloc(dt_sync **out, size_t ctx_size);
void dt_group_sync_free(dt_sync *s);
dt_status dt_group_reduce_hook(dt_sync *s, double *vals, int n);
dt_status dt_group_reduce_start_hook(dt_sync *s, const double *vals, int n);
dt_status dt_group_reduce_finish_hook(dt_sync *s, double *vals, int n);
dt_status dt_group_state_hook(dt_sync *s, dt_trainer *t, dt_pace here);

#endif
