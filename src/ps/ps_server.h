/* Parameter servers, private to src/ps: the server's state, shared by
 * its core (ps_server.c: posting receives, polling, control messages,
 * replies, pulls, set-up) and its reply policies, one file each:
 *   ps_clocked.c    ps-sync, ps-ssp: clocks committed segment by segment
 *   ps_immediate.c  ps-async: each gradient applied on arrival, answered
 *   ps_deferred.c   ps-async-nowait, ps-hogwild: answered at once, applied
 *                   later by applier threads
 * The mode table (modes.c) says which policy a mode has; a new policy is a
 * file with a ps_policy and a line in setup's choice. */
#ifndef DTRAIN_PS_PS_SERVER_H
#define DTRAIN_PS_PS_SERVER_H

#include <pthread.h>

#include "dtrain/dist.h"
#include "dtrain/optim.h"
#include "ps_proto.h"

enum { HOGWILD_APPLIERS = 2 };

/* A queued gradient: worker w's clock, its lr and the version it read. */
typedef struct {
    int w;
    long clock;
    float lr;
    long v_read;
} apply_job;

typedef struct server server;

/* What a policy does when a worker's gradient arrives. */
typedef struct {
    /* Segment k of w's gradient is in (segmented modes only; NULL otherwise). */
    dt_status (*segment)(server *sv, int w, int k);
    /* All of w's gradient for its clock is in (counted in arrived[w]). */
    dt_status (*complete)(server *sv, int w);
} ps_policy;

extern const ps_policy ps_clocked_policy, ps_immediate_policy, ps_deferred_policy;

struct server {
    const ps_policy *policy; /* the mode's (modes.c) */
    const dt_comm *comm;
    const dt_dist_cfg *cfg;
    const dt_model_spec *spec;
    dt_net *net;             /* layout only; built at batch 1 */
    dt_comm_plan plan;       /* which layers the servers hold (not SFB), where */
    size_t lo, hi, n;        /* this shard [lo, hi) of the servers' vector */
    int W;
    int clocked;             /* ps-sync/ps-ssp (else ps-async) */
    int staleness;           /* clocked: s */
    int turns;               /* out of step: large gradient segments come in one at a time (admit_turn) */
    int turn_w, turn_seg;    /* turns: the worker and segment coming in; turn_w -1 when none */
    double turn_since;       /* turns: when turn_w's segment was admitted (its timeline span) */
    int turn_next;           /* turns: the worker to look at first for the next */
    int nslots;              /* gradient slots per worker: s + 2 clocked, 1 async */
    int nseg;                /* segments of the shard: its pieces of each held layer */
    size_t *seg_lo, *seg_hi; /* (nseg) in arrival order (layers last to first), from lo */
    int nreply;              /* reply requests per worker: header, then shard or segments */
    dt_optim *optim;         /* over the servers' vector */
    float *params;           /* (n) */
    float *state;            /* (nslots of the optimiser, n) its state, slot-major */
    float *recv;             /* (W, nslots, n) gradients of each worker's clocks */
    float *lr;               /* (W, nslots) the learning rate each clock came with */
    float *sum;              /* (n) */
    float *reply;            /* (W, n) snapshot being sent to each worker */
    dt_gc_kind wire;         /* bf16/fp16: a clock's messages in 16-bit words; else DT_GC_NONE */
    uint16_t *wire_recv;     /* wire: (W, n) w's gradient segments as they arrive */
    uint16_t *wire_reply;    /* wire, out of step: (W, n) w's reply, encoded from its snapshot */
    uint16_t *wire_shard;    /* wire, ps-sync: (n) the shard as committed, encoded once for every worker;
                              * a clock's gradients stay in wire_recv until its commit decodes them */
    int hdr_len;             /* PS_HDR_LEN + nseg */
    double *hdr;             /* (W, hdr_len) reply headers */
    double (*ctrl)[PS_CTRL_LEN]; /* (W) control receive buffers */
    MPI_Request *ctrl_req;   /* (W) */
    MPI_Request *grad_req;   /* (W, nlayers) */
    MPI_Request *reply_req;  /* (W, nreply) header, then the shard or its segments */
    int *seg_posted;         /* (W) gradient receives posted for the clock (turns: up to one waiting its turn) */
    int *seg_done;           /* (W) of those, completed (tested in the order they match) */
    long *seg_committed;     /* (nseg) clocked: clocks committed on each segment */
    int *seg_sent;           /* (W) clocked: segments of w's reply sent this clock */
    float *seg_lr;           /* (W) ps-async: the step of the gradient arriving */
    long *seg_lag;           /* (W) ps-async: its lag */
    long *seg_version;       /* (W) ps-async: the version w reads in the reply being sent */
    int *receiving;          /* (W) gradients of clock wclock[w] on their way */
    int *awaiting;           /* (W) finished wclock[w], waiting for its reply */
    int *stopped;            /* (W) */
    int *pulling;            /* (W) asked for the current shard (PULL) */
    long *wclock;            /* (W) the clock w is in (from its STEP message), -1 before */
    long *arrived;           /* (W) clocks of w whose gradients are complete */
    long *v_read;            /* (W) version of the shard last sent to w */
    double *grad_posted;     /* (W) when w's gradient receives were posted (timeline) */
    long committed;          /* clocked: clocks committed */
    long first_clock;        /* the clock the run started at (a resumed step, else 0) */
    long t_offset;           /* async: optimiser updates done before the run started, less first_clock
                              * (versions count from first_clock; Adam's t must go on from the total) */
    long version;            /* updates applied to the shard */
    long applied;            /* gradients applied (async) or averaged in (clocked) */
    long budget;             /* ps-async: gradients to apply before replies say done */
    long max_gap;            /* largest clock gap seen between running workers */
    /* Deferred modes (nowait, hogwild). version, applied, the queue and
     * slot_busy are shared with the appliers under qmu; params under pmu
     * (nowait) or no lock at all (hogwild). */
    int deferred, hogwild, nappliers, quit, inflight;
    int applier_tracks;      /* appliers started: each takes the next timeline track */
    pthread_t appliers[HOGWILD_APPLIERS];
    pthread_mutex_t qmu, pmu;
    pthread_cond_t queued, drained;
    apply_job *queue;        /* (W * nslots) ring */
    int qhead, qlen;
    int *slot_busy;          /* (W, nslots) gradient queued, not yet applied */
    int *post_pending;       /* (W) STEP arrived while its slot was still queued */
};

/* The servers' worker w is the leader of worker group w (a worker itself
 * when groups are of 1). */
static inline int world_rank_of(const server *sv, int w) { return sv->comm->nservers + w * sv->cfg->group_size; }
static inline float *slot_of(const server *sv, int w, long clock) {
    return sv->recv + ((size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots)) * sv->n;
}

static inline int *busy_of(const server *sv, int w, long clock) {
    return sv->slot_busy + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}

static inline float *lr_of(const server *sv, int w, long clock) {
    return sv->lr + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}

static inline MPI_Request *reply_reqs(const server *sv, int w) {
    return sv->reply_req + (size_t)w * (size_t)sv->nreply;
}

/* ps_server.c: the optimiser step, the t-th, with gradient g (n floats,
 * as the shard) on [lo, hi) of the shard; w's reply buffer holding a copy
 * of [lo, hi) of the shard (returned); the shard's version; waiting for
 * w's previous reply; sending w its header (w's next gradient is computed
 * on version *v_read, NULL: this header's), floats [lo, hi) of src as
 * request `slot` of its reply (clock: a clock's reply, 16-bit on a 16-bit
 * wire), words [lo, hi) already encoded (ps-sync's wire_shard), or a
 * snapshot of the whole shard with its header. */
void ps_apply(server *sv, float lr, long t, const float *g, size_t lo, size_t hi);
const float *ps_take_snapshot(server *sv, int w, size_t lo, size_t hi);
long ps_current_version(server *sv);
dt_status ps_wait_replies(server *sv, int w);
dt_status ps_send_header(server *sv, int w, long lag, const long *v_read);
dt_status ps_send_params(server *sv, int w, const float *src, size_t lo, size_t hi, int slot, int clock);
dt_status ps_send_words(server *sv, int w, const uint16_t *words, size_t lo, size_t hi, int slot);
dt_status ps_reply(server *sv, int w, long lag, int clock);

/* ps_immediate.c: the step of a gradient of lag `lag` in the asynchronous
 * modes. */
float ps_async_lr(const server *sv, float lr, long lag);

/* ps_deferred.c: whether w's slot for clock still waits to be applied;
 * blocking until every queued gradient is applied; starting the appliers. */
int ps_slot_queued(server *sv, int w, long clock);
void ps_drain_queue(server *sv);
dt_status ps_start_appliers(server *sv);

#endif
