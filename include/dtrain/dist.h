/* Data-parallel training over MPI: process roles and communicators, model
 * agreement, waits for other ranks that report and give up, and the sync
 * strategies that plug into the trainer loop (their configuration and the
 * MPI-free arithmetic they plan with: plan.h).
 *
 * Roles: in ps-* modes the first S ranks of the run's communicator
 * (MPI_COMM_WORLD, or a sweep trial's group of ranks) are parameter servers
 * and the rest workers; in allreduce every rank is a worker. Workers share a
 * communicator of their own (evaluation, metrics, allreduce). */
#ifndef DTRAIN_DIST_H
#define DTRAIN_DIST_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/plan.h"
#include "dtrain/status.h"
#include "dtrain/train.h"

struct dt_comm {
    MPI_Comm world;         /* the run's ranks (not owned): MPI_COMM_WORLD or a sweep group */
    MPI_Comm workers;       /* the worker ranks; MPI_COMM_NULL on servers */
    int rank, size;         /* in world */
    int nservers, nworkers;
    int worker;             /* index among workers, -1 on a server */
    /* (size, DT_HOST_NAME) every world rank's host name, for messages that
     * name ranks; owned by the dt_comm that dt_comm_create made (copies
     * share it, dt_comm_free frees it). */
    char *hosts;
};

enum { DT_HOST_NAME = 64 };
/* World rank r's host name ("?" if unknown). */
const char *dt_comm_host(const dt_comm *c, int r);
/* Appends ", " (unless at the start) and "R (HOST)" for world rank r to
 * buf (cap bytes, *used of them used), cutting at cap. */
void dt_comm_name_rank(const dt_comm *c, int r, char *buf, size_t cap, size_t *used);

/* Splits world (the ranks of this run) into servers (ranks < nservers) and
 * workers. Every rank of world must call it. */
dt_status dt_comm_create(dt_comm *c, MPI_Comm world, int nservers);
void dt_comm_free(dt_comm *c);

/* Every rank of world must read the same model file, in meaning: each
 * rank reads model_path again, rank 0 broadcasts its file, and files are
 * compared by their section headers and key=value lines (comments, blank
 * lines and spacing ignored; keys of a section in any order; numbers by
 * value, so 0.01 equals 1e-2), then the shape hashes of the built nets.
 * Collective over world; every rank returns the same status and message:
 * DT_ERR_CONFIG "ranks disagree on the model: rank(s) 1, 3 read a different
 * model file than rank 0: rank 0 has [net] learning_rate=0.05 (a.cfg line
 * 8), rank 1 has [net] learning_rate=0.01 (b.cfg line 8); give every rank
 * the same model file" (the first differing rank's first difference), or
 * the first rank's failure to read its file. DT_ERR_MPI if a collective
 * fails. */
dt_status dt_comm_check_model(const dt_comm *c, uint64_t shape_hash, const char *model);

/* Every rank's outcome of a check each ran alone, made one: DT_OK when all
 * passed, else on every rank the status and message of the first rank that
 * failed. DT_ERR_MPI if a collective fails. */
dt_status dt_comm_agree(const dt_comm *c, dt_status local);

/* --timeline FILE: each rank opens its part with a clock origin shared by
 * every rank (collective over world; see comm_timeline.c for clusters). */
dt_status dt_comm_timeline_open(dt_timeline **out, const dt_comm *c, const char *path);
/* After the run (run: how it ended): the rank flushes its part; after a
 * clean end, an agreed stop (DT_ERR_INTERRUPTED) or an agreed divergence
 * (DT_ERR_NUMERIC), which every rank reaches, worker 0 merges the parts
 * into FILE once all have flushed. Otherwise the parts are left as they
 * are. No-op when tl is NULL. */
dt_status dt_comm_timeline_close(dt_timeline *tl, const dt_comm *c, dt_status run);

/* Called by the waits below while requests are pending (ctx is the
 * caller's), every quarter of the shorter of stall->report and
 * stall->abort, so that it can send heartbeats; when report is nonzero it
 * writes into line (cap bytes) the one line that names what is waited for
 * and the ranks it waits on, with their hosts, e.g. "dtrain: rank 0:
 * gradient allreduce of step 9 has waited 60 s; ranks that have not reached
 * it: 1 (h2)". */
typedef void (*dt_stall_fn)(void *ctx, double waited_s, int report, char *line, size_t cap);

/* A wait's clock (stall.c): when the next call of a dt_stall_fn is due,
 * when its line is printed, when the wait gives up. */
typedef struct {
    const dt_stall *stall;
    double start, next_tick, next_report;
    double last_poll;   /* a gap between polls is time this rank was not running: not counted */
} dt_stall_clock;
void dt_stall_clock_start(dt_stall_clock *k, const dt_stall *stall, double now);
/* At time now (of dt_now): calls who when due, prints its line every
 * stall->report seconds; once stall->abort has passed since the start,
 * gives up as dt_stall says (DT_ERR_STALLED). */
dt_status dt_stall_clock_poll(dt_stall_clock *k, double now, dt_stall_fn who, void *ctx);

/* The sleep between two polls of a wait: from lo nanoseconds, doubling up
 * to hi, back to lo when the wait makes progress. A rank that waits for
 * others must not take a core from the ranks computing beside it. */
typedef struct {
    long ns, lo, hi;
} dt_backoff;
static inline dt_backoff dt_backoff_start(long lo, long hi) { return (dt_backoff){lo, lo, hi}; }
static inline void dt_backoff_reset(dt_backoff *b) { b->ns = b->lo; }
/* Sleeps b->ns, then doubles it (up to hi). */
void dt_backoff_sleep(dt_backoff *b);

/* Waits for n requests without spinning a core: MPI_Testall with a growing
 * sleep (up to 1 ms), calling who() as above (who and stall may be NULL:
 * no reports, never gives up; so do the start-up agreement, a sweep's
 * trial bookkeeping and the timeline's closing barrier, which have no
 * --stall-abort of their own). MPI errors become DT_ERR_MPI naming `what`. */
dt_status dt_mpi_wait(MPI_Request *reqs, int n, const dt_stall *stall, dt_stall_fn who, void *ctx,
                      const char *what);
/* The same, except while *hurry (may be NULL) is nonzero: the caller's
 * trainer thread is itself blocked on this wait, so its core is free, and
 * the wait polls without sleeping (sched_yield) for its first 2 ms, then
 * sleeps from 50 us growing to 250 us. The sleeping waits cost the last
 * gradient bucket of a step about a millisecond per message round. */
dt_status dt_mpi_wait_hurry(MPI_Request *reqs, int n, const dt_stall *stall, dt_stall_fn who, void *ctx,
                            const char *what, const atomic_int *hurry);

/* Checks an MPI return code: DT_ERR_MPI "what: <MPI error string>". */
dt_status dt_mpi_check(int rc, const char *what);

/* Cancels and completes every one of reqs[0..n) still pending (skipping
 * MPI_REQUEST_NULL), so that none outlives the buffers it reads or writes
 * (after a failure, or receives no message will answer). */
void dt_cancel_requests(MPI_Request *reqs, int n);

/* A parameter server's whole life: receives its shard from worker 0, then
 * serves clocks until every worker has stopped. */
dt_status dt_server_run(const dt_comm *c, const dt_dist_cfg *cfg, const dt_model_spec *spec);

#endif