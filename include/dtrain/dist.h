/* Data-parallel training over MPI: process roles, shard maps, fusion
 * buckets, and the sync strategies that plug into the trainer loop.
 *
 * Roles: in ps-* modes the first S ranks of MPI_COMM_WORLD are parameter
 * servers and the rest workers; in allreduce every rank is a worker. Workers
 * share a communicator of their own (evaluation, metrics, allreduce).
 * Rank, world size and server count are plain parameters of the shard and
 * bucket code, so it is testable in one process. */
#ifndef DTRAIN_DIST_H
#define DTRAIN_DIST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/status.h"
#include "dtrain/train.h"

typedef enum {
    DT_MODE_SERIAL = 0,
    DT_MODE_ALLREDUCE,
    DT_MODE_PS_SYNC,  /* BSP: a clock is applied once every worker's gradient is in */
    DT_MODE_PS_ASYNC, /* each gradient applied on arrival, then that worker gets the shard */
    DT_MODE_PS_SSP,   /* stale synchronous parallel, bound --staleness s (s = 0 is ps-sync) */
    DT_MODE_PS_NOWAIT,  /* reply at once with the latest shard; apply queued gradients under a lock */
    DT_MODE_PS_HOGWILD  /* like nowait, applied by two threads without locks (races by design) */
} dt_mode;

/* "serial" | "allreduce" | "ps-sync" | "ps-async" | "ps-ssp" | "ps-async-nowait" |
 * "ps-hogwild" -> mode, -1 if unknown. */
int dt_mode_from_name(const char *name);
const char *dt_mode_name(dt_mode mode);

typedef struct {
    dt_mode mode;
    int servers;            /* ps-* modes: server ranks (first S ranks) */
    double fusion_mb;       /* allreduce: fusion bucket size in MiB (0: one bucket per layer) */
    double stall_timeout;   /* seconds a wait may take before the missing ranks are named */
    int staleness;          /* ps-ssp: s */
} dt_dist_cfg;

/* A ps-* mode (parameter servers). */
static inline int dt_mode_is_ps(dt_mode m) { return m >= DT_MODE_PS_SYNC; }
/* Workers never wait for each other (ps-async, ps-async-nowait, ps-hogwild). */
static inline int dt_mode_is_async(dt_mode m) {
    return m == DT_MODE_PS_ASYNC || m == DT_MODE_PS_NOWAIT || m == DT_MODE_PS_HOGWILD;
}

typedef struct {
    MPI_Comm world;         /* MPI_COMM_WORLD */
    MPI_Comm workers;       /* the worker ranks; MPI_COMM_NULL on servers */
    int rank, size;         /* in world */
    int nservers, nworkers;
    int worker;             /* index among workers, -1 on a server */
} dt_comm;

/* Splits world into servers (ranks < nservers) and workers. */
dt_status dt_comm_create(dt_comm *c, int nservers);
void dt_comm_free(dt_comm *c);

/* Every rank must build the same model: compares shape hashes over world
 * and names the ranks that differ. */
dt_status dt_comm_check_model(const dt_comm *c, uint64_t shape_hash, const char *model_path);

/* Called by dt_mpi_wait every quarter of stall_timeout while requests are
 * pending (ctx is the caller's): report is 1 once per full stall_timeout,
 * when the callback should print which peers are missing; the calls in
 * between let it send heartbeats. */
typedef void (*dt_stall_fn)(void *ctx, double waited_s, int report);

/* Waits for n requests without spinning a core: MPI_Testall with a growing
 * sleep (up to 1 ms), calling stall() as above. MPI errors become
 * DT_ERR_MPI naming `what`. */
dt_status dt_mpi_wait(MPI_Request *reqs, int n, double stall_timeout, dt_stall_fn stall, void *ctx,
                      const char *what);

/* Checks an MPI return code: DT_ERR_MPI "what: <MPI error string>". */
dt_status dt_mpi_check(int rc, const char *what);

/* Shard s of n floats over `shards` servers: [lo, hi), contiguous,
 * sizes differing by at most one (balanced by bytes; a layer may be split). */
void dt_shard_range(size_t n, int shards, int s, size_t *lo, size_t *hi);

/* A fusion bucket: the flat gradient range [lo, hi), ready once the layer
 * holding `lo` has finished backward (layers finish last to first, so every
 * higher offset is final by then). */
typedef struct {
    size_t lo, hi;
    int ready_layer;
} dt_bucket;

/* Buckets of at most bucket_floats (0: one per layer) in backward order,
 * splitting layers larger than a bucket. Returns the count (<= max), or -1
 * if max is too small. */
int dt_bucket_plan(dt_bucket *out, int max, const dt_net *net, size_t bucket_floats);
/* The same from the layers' parameter offsets alone (nlayers + 1 entries,
 * as dt_net's param_offset): what the scaling simulator plans with. */
int dt_bucket_plan_layers(dt_bucket *out, int max, const size_t *param_offset, int nlayers,
                          size_t bucket_floats);

/* Sync strategies for workers. */
dt_status dt_sync_allreduce_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg);
dt_status dt_sync_ps_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg);

/* A parameter server's whole life: receives its shard from worker 0, then
 * serves clocks until every worker has stopped. */
dt_status dt_server_run(const dt_comm *c, const dt_dist_cfg *cfg, const dt_model_spec *spec);

#endif
