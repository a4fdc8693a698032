/* A distributed run's configuration and what is planned from it, without
 * MPI: the modes and their table, allreduce algorithms, gradient codecs,
 * stall limits, shard ranges, bytes per step (SFB/SACP plans) and fusion
 * buckets. The scaling simulator and `dtrain info` use these without
 * <mpi.h>; dist.h (communicators, waits, the server) builds on them.
 * Rank, world size and server count are plain parameters here, so all of it
 * is testable in one process. */
#ifndef DTRAIN_PLAN_H
#define DTRAIN_PLAN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

#include "dtrain/net.h"
#include "dtrain/status.h"
#include "dtrain/timeline.h"
#include "dtrain/train.h"

/* A run's ranks and communicators (dist.h); only pointers to it here. */
typedef struct dt_comm dt_comm;

typedef enum {
    DT_MODE_SERIAL = 0,
    DT_MODE_ALLREDUCE,
    DT_MODE_PS_SYNC,  /* BSP: a clock is applied once every worker's gradient is in */
    DT_MODE_PS_ASYNC, /* each gradient applied on arrival, then that worker gets the shard */
    DT_MODE_PS_SSP,   /* stale synchronous parallel, bound --staleness s (s = 0 is ps-sync) */
    DT_MODE_PS_NOWAIT,  /* reply at once with the latest shard; apply queued gradients under a lock */
    DT_MODE_PS_HOGWILD  /* like nowait, applied by two threads without locks (races by design) */
} dt_mode;

/* How fully connected layers' gradients travel (Poseidon):
 *   DT_SFB_OFF   like every other layer (allreduce bucket / PS push + pull)
 *   DT_SFB_ALL   --sfb: as sufficient factors broadcast to every worker
 *   DT_SFB_AUTO  --sacp: per layer, whichever moves fewer bytes */
typedef enum { DT_SFB_OFF = 0, DT_SFB_ALL, DT_SFB_AUTO } dt_sfb_policy;

/* How --mode allreduce sums the gradients (--allreduce-algo):
 *   DT_AR_AUTO  shm when every worker is on one host; hier across hosts
 *               that each have the same number of workers, several; else
 *               fusion buckets: the ring for buckets of at least 16 Ki
 *               floats per worker, MPI_Iallreduce for smaller
 *               (latency-bound) ones
 *   DT_AR_SHM   in an MPI shared-memory window, no copies (shm.h)
 *   DT_AR_RING  always dtrain's ring (ring.h)
 *   DT_AR_MPI   always MPI_Iallreduce (Open MPI's algorithm choice)
 *   DT_AR_HIER  a window per host, a ring per shard across hosts (shm.h) */
typedef enum { DT_AR_AUTO = 0, DT_AR_RING, DT_AR_MPI, DT_AR_SHM, DT_AR_HIER } dt_ar_algo;

/* How gradients travel on the wire (--grad-compression):
 *   DT_GC_NONE  fp32
 *   DT_GC_BF16  bfloat16 (fp32's range, 8 bits of mantissa), half the bytes
 *   DT_GC_FP16  IEEE half (11 bits of mantissa, overflow above 65504 is
 *               infinite: the run then stops as diverged), half the bytes
 *   DT_GC_TOPK  the ratio R of largest-magnitude gradients of each fusion
 *               bucket as (index, value) pairs; the rest is kept (error
 *               feedback) and added to the next step's gradient
 * Sums are fp32 wherever they are accumulated; only messages are narrow. */
typedef enum { DT_GC_NONE = 0, DT_GC_BF16, DT_GC_FP16, DT_GC_TOPK } dt_gc_kind;
typedef struct {
    dt_gc_kind kind;
    double ratio;           /* DT_GC_TOPK: R in (0, 1] */
} dt_grad_codec;

/* "none" | "bf16" | "fp16" | "topk:R" (R a fraction in (0, 1], or a
 * percentage "topk:1%") -> *out; DT_ERR_USAGE naming the flag otherwise. */
dt_status dt_grad_codec_parse(const char *text, dt_grad_codec *out);
/* The name as parsed ("topk:0.01"), in buf. */
const char *dt_grad_codec_name(const dt_grad_codec *c, char *buf, size_t size);
/* Values top-k keeps of n: ceil(R n), at least 1. */
size_t dt_topk_count(double ratio, size_t n);
/* Bytes one worker sends (and as many it receives) to sum n floats over P
 * workers: the ring's 2 (P-1)/P n 4, halved by bf16/fp16; top-k
 * allgathers its pairs, (P-1) k 8. */
double dt_allreduce_bytes_each_way(const dt_grad_codec *c, size_t n, int P);

/* How long a rank waits for other ranks before it names them, and before
 * it gives up (--stall-timeout, --stall-abort). A wait that gives up
 * cannot end in order: the ranks it waits for may be stopped or behind a
 * dead link, and would never answer an orderly end. So give_up (the CLI's:
 * it ends the whole job with MPI_Abort) is called on the rank that gave up,
 * with the one line naming what it waited for and the ranks and hosts it
 * waited on; if it is NULL or returns, the wait fails with DT_ERR_STALLED
 * and that line. */
typedef struct {
    double report;          /* seconds between reports naming the ranks waited for (0: none) */
    double abort;           /* seconds after which the wait gives up (0: never) */
    void (*give_up)(void *ctx, const char *line);
    void *ctx;
} dt_stall;

typedef struct {
    dt_mode mode;
    int servers;            /* ps-* modes: server ranks (first S ranks) */
    double fusion_mb;       /* allreduce: fusion bucket size in MiB (0: one bucket per layer) */
    dt_stall stall;         /* when waits for other ranks report and give up */
    int staleness;          /* ps-ssp: s */
    dt_sfb_policy sfb;      /* allreduce and ps-sync only */
    int batch;              /* per-worker batch K (the SFB cost depends on it) */
    FILE *plan_out;         /* worker 0's start says here how gradients travel (allreduce: the way
                             * it sums them; --sfb/--sacp: the plan), or NULL */
    /* ps-sync / ps-async --group-size k (Apache SINGA): workers w with the
     * same w / k form a group that averages its gradients itself (a
     * synchronous allreduce over its own communicator); only the group's
     * first member (its leader) talks to the servers, which see the
     * groups as their workers. 1: no groups. */
    int group_size;
    dt_timeline *timeline;  /* spans of the strategies and servers go here (NULL: off) */
    dt_ar_algo ar_algo;     /* allreduce: how buckets are summed */
    /* Set by SIGINT/SIGTERM on this rank (NULL: never): a server passes it
     * to the workers in its reply headers, so they stop at an agreed step. */
    const atomic_int *stop;
    dt_grad_codec codec;    /* allreduce buckets and the hierarchy's ring across hosts */
    /* ps-* modes: the nice value a server rank's main thread and the
     * threads it starts run at (0: as started; never lowered below how it
     * was started; the MPI library's own threads keep theirs). A server beside
     * workers on the same cores then takes a core only when their compute
     * leaves one: polling and its wake-ups no longer preempt it. */
    int server_nice;
} dt_dist_cfg;

/* The combination of mode, --sfb/--sacp and --group-size is one dtrain
 * runs, for nworkers workers (DT_ERR_USAGE naming the flags otherwise). */
dt_status dt_dist_cfg_check(const dt_dist_cfg *cfg, int nworkers);

/* ---- the table of modes and allreduce algorithms (modes.c) ---------------
 *
 * One row per mode says what it is: its name and one-line summary (the
 * usage text prints them), the flags it reads (any other mode-specific flag
 * is an error naming the modes that read it), how its parameter servers
 * reply, and how its sync strategy is made. A new mode is a dt_mode value,
 * a row, and its strategy. */

/* Mode-specific flags a mode reads (dt_mode_info.flags). */
enum {
    DT_MF_SERVERS = 1 << 0,     /* --servers: the first S ranks are parameter servers */
    DT_MF_STALENESS = 1 << 1,   /* --staleness */
    DT_MF_ALGO = 1 << 2,        /* --allreduce-algo, --fusion-mb */
    DT_MF_FACTORS = 1 << 3,     /* --sfb, --sacp (sufficient factors) */
    DT_MF_GROUPS = 1 << 4,      /* --group-size */
    DT_MF_COMPRESSION = 1 << 5  /* --grad-compression */
};

/* How a mode's parameter servers answer a worker's gradient (ps_proto.h). */
typedef enum {
    DT_PS_NONE = 0,   /* no servers */
    DT_PS_CLOCKED,    /* when the clocks the worker may read are in (BSP, SSP) */
    DT_PS_IMMEDIATE,  /* right after that worker's gradient is applied */
    DT_PS_DEFERRED    /* at once with the shard as it is; gradients queued and applied later */
} dt_ps_policy;

typedef struct {
    const char *name;
    const char *summary;   /* one line for the usage text */
    unsigned flags;        /* DT_MF_* it reads */
    dt_ps_policy ps;
    int racy;              /* deferred updates by two threads without locks (Hogwild!) */
    int one_rank;          /* runs on one rank only */
    /* Its sync strategy for a worker; c and cfg as dt_sync_*_create. */
    dt_status (*create)(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg);
} dt_mode_info;

/* The row of mode m; the mode named name (-1 if none). */
const dt_mode_info *dt_mode_info_of(dt_mode m);
int dt_mode_from_name(const char *name);
const char *dt_mode_name(dt_mode mode);
/* The modes that read every flag of flags (0: all modes), as "a, b or c",
 * into buf. */
const char *dt_mode_list(unsigned flags, char *buf, size_t cap);
/* DT_ERR_USAGE "FLAG applies to --mode LIST, not MODE" unless mode reads
 * every flag of flags. */
dt_status dt_mode_check_flag(dt_mode mode, unsigned flags, const char *flag);
/* "  --mode M ..." and "  --allreduce-algo A ..." lines of the usage text:
 * the flag's own text, then a line per row of the table. */
void dt_mode_usage(FILE *out, const char *flag_text);
void dt_ar_algo_usage(FILE *out, const char *flag_text);

/* A ps-* mode (parameter servers). */
static inline int dt_mode_is_ps(dt_mode m) { return dt_mode_info_of(m)->ps != DT_PS_NONE; }
/* Workers never wait for each other (ps-async, ps-async-nowait, ps-hogwild). */
static inline int dt_mode_is_async(dt_mode m) {
    dt_ps_policy p = dt_mode_info_of(m)->ps;
    return p == DT_PS_IMMEDIATE || p == DT_PS_DEFERRED;
}
/* The bound on the clocks between workers the run's mode keeps: ps-ssp's
 * --staleness, 0 in every other clocked mode (ps-sync). */
static inline int dt_dist_staleness(const dt_dist_cfg *c) {
    return dt_mode_info_of(c->mode)->flags & DT_MF_STALENESS ? c->staleness : 0;
}
/* "auto" | "ring" | "mpi" | "shm" | "hier" <-> dt_ar_algo (-1 for any other name). */
int dt_ar_algo_from_name(const char *name);
const char *dt_ar_algo_name(dt_ar_algo algo);
/* "auto, ring, mpi, shm or hier" into buf. */
const char *dt_ar_algo_list(char *buf, size_t cap);

/* Shard s of n floats over `shards` servers: [lo, hi), contiguous,
 * sizes differing by at most one (balanced by bytes; a layer may be split). */
void dt_shard_range(size_t n, int shards, int s, size_t *lo, size_t *hi);

/* Gradient segments (a layer's part in a shard) of at least this many
 * bytes on the wire take turns on a server's link in the out-of-step
 * modes (ps_server.c's admit_turn; the simulator's run_async). */
#define DT_PS_TURN_BYTES ((size_t)1 << 20)

/* Which layers' gradients travel as sufficient factors, what each way
 * costs, and where the parameters the servers hold sit.
 *
 * A fully connected layer with weight W (M out, N in) at per-worker batch K
 * has the gradient sum over its K samples of u v^T (u the output gradient,
 * v the input), and its bias gradient is the sum of the u. Bytes one worker
 * moves per step (sent + received) for the layer's M*N + M parameters:
 *   ps-sync     2 (MN + M) 4           push the gradient, pull the parameters
 *   allreduce   4 (P-1)/P (MN + M) 4   ring: reduce-scatter + allgather (bf16/fp16: 2
 *                                      bytes a value; top-k: 2 (P-1) k 8, an allgather)
 *   SFB         2 K (P-1) (M + N) 4    send its K pairs to P-1 workers, receive theirs
 * An SFB layer is updated by every worker itself (the same summed gradient
 * everywhere): the servers do not hold it, so the parameters they shard are
 * the other layers' laid end to end (ps_offset). */
typedef struct {
    int nlayers;
    unsigned char *sfb;     /* (nlayers) 1: the layer's gradient travels as factors */
    double *dense_bytes;    /* (nlayers) predicted bytes per step the usual way */
    double *sfb_bytes;      /* (nlayers) ... as factors (0: layer not fully connected) */
    size_t *ps_offset;      /* (nlayers + 1) layer i's first float in the servers' vector */
    size_t ps_n;            /* floats the servers hold */
    int nsfb;               /* layers with sfb set */
} dt_comm_plan;

/* Bytes per step (sent + received by one worker) for the layer's n
 * parameters the usual way in `mode` with P workers (with the
 * --grad-compression codec, NULL for none), and as factors of an M x N
 * layer at batch K. */
double dt_dense_bytes(dt_mode mode, size_t n, int P, const dt_grad_codec *codec);
/* A parameter server's push or reply of n floats with codec (NULL: fp32):
 * 16-bit words under bf16/fp16. */
double dt_ps_bytes_each_way(const dt_grad_codec *codec, size_t n);
double dt_sfb_bytes(int M, int N, int K, int P);
/* "none", "sfb" (--sfb) or "sacp" (--sacp). */
static inline const char *dt_sfb_policy_name(dt_sfb_policy policy) {
    return policy == DT_SFB_ALL ? "sfb" : policy == DT_SFB_AUTO ? "sacp" : "none";
}
/* Whether a fully connected layer goes by factors under policy, given both
 * byte counts (the plan's rule; the scaling simulator's allreduce too). */
static inline int dt_sfb_chosen(dt_sfb_policy policy, double sfb_bytes, double dense_bytes) {
    return policy == DT_SFB_ALL || (policy == DT_SFB_AUTO && sfb_bytes < dense_bytes);
}

/* The plan for net with P workers at batch K, allreduce buckets sent with
 * codec (NULL: fp32), which SACP weighs against the factors: no SFB layer
 * when policy is DT_SFB_OFF or P == 1. */
dt_status dt_comm_plan_create(dt_comm_plan *plan, const dt_net *net, dt_mode mode, dt_sfb_policy policy,
                              int P, int K, const dt_grad_codec *codec);
void dt_comm_plan_free(dt_comm_plan *plan);
/* The plan's bytes per step, summed over the layers as chosen. */
double dt_comm_plan_bytes(const dt_comm_plan *plan);
/* One line per layer with parameters: the choice and both byte counts. */
void dt_comm_plan_write(FILE *out, const dt_comm_plan *plan, const dt_net *net);

/* A fusion bucket: the flat gradient range [lo, hi), ready once the layer
 * holding `lo` has finished backward (layers finish last to first, so every
 * higher offset is final by then). sfb: the bucket is SFB layer
 * ready_layer's factor exchange instead of an allreduce of [lo, hi). */
typedef struct {
    size_t lo, hi;
    int ready_layer;
    int sfb;
} dt_bucket;

/* Buckets of at most bucket_floats (0: one per layer) in backward order,
 * splitting layers larger than a bucket (the last piece of a split layer
 * is a bucket of its own); an SFB layer of plan (may be NULL) gets a bucket
 * of its own, marked sfb, and no fused bucket spans it.
 * Returns the count (<= max), or -1 if max is too small. */
int dt_bucket_plan(dt_bucket *out, int max, const dt_net *net, const dt_comm_plan *plan,
                   size_t bucket_floats);
/* The same from the layers' parameter offsets alone (nlayers + 1 entries,
 * as dt_net's param_offset) and an SFB mask (nlayers, or NULL): what the
 * scaling simulator plans with. */
int dt_bucket_plan_layers(dt_bucket *out, int max, const size_t *param_offset, int nlayers,
                          const unsigned char *sfb, size_t bucket_floats);

/* Sync strategies for workers. */
dt_status dt_sync_allreduce_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg);
dt_status dt_sync_ps_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg);

#endif
