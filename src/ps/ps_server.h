/* Parameter servers, private to src/ps: the server's core state
 * (ps_server.c: posting receives, polling, control messages, replies,
 * pulls, set-up, the 16-bit wire) and the interface of its policies, one
 * file each, whose state is their own:
 *   ps_clocked.c    ps-sync, ps-ssp: clocks committed segment by segment
 *   ps_immediate.c  ps-async: each gradient applied on arrival, answered
 *   ps_deferred.c   ps-async-nowait, ps-hogwild: answered at once, applied
 *                   later by applier threads
 * The mode table (modes.c) says which policy a mode has (dt_ps_policy); a
 * new policy is a file with a ps_policy and its row in ps_server.c's
 * table. */
#ifndef DTRAIN_PS_PS_SERVER_H
#define DTRAIN_PS_PS_SERVER_H

#include <pthread.h>

#include "dtrain/dist.h"
#include "dtrain/optim.h"
#include "ps_proto.h"

typedef struct server server;

/* What a policy tells the core at set-up besides its state. */
typedef struct {
    /* Out of step: large gradient segments take turns on the link
     * (ps_server.c's admit_turn); 0 when every worker's segment is needed
     * at once (ps-sync). */
    int turns;
    /* On a 16-bit wire, the policy decodes w's words (wire_recv) itself;
     * 0: the core decodes each segment into w's slot as it arrives. */
    int decodes;
} ps_traits;

/* A reply policy: when a gradient is applied and answered. Hooks get the
 * server; the policy's own state is sv->pol (set by setup). NULL hooks
 * are optional and say what happens without them. */
typedef struct {
    /* Gradient slots per worker (the clocks of a worker held at once). */
    int (*slots)(const dt_dist_cfg *cfg);
    /* After the core's set-up (buffers, the INIT from worker 0): its state
     * in sv->pol, its traits in *tr. */
    dt_status (*setup)(server *sv, ps_traits *tr);
    /* Segment k of w's gradient is in (decoded unless tr->decodes; NULL:
     * nothing until all of it is). */
    dt_status (*segment)(server *sv, int w, int k);
    /* All of w's gradient for its clock is in (counted in delivered and
     * peer[w].arrived; w awaits its reply). */
    dt_status (*complete)(server *sv, int w);
    /* Whether w's slot for clock still holds a gradient not applied: its
     * receives wait (NULL: never). */
    int (*slot_busy)(server *sv, int w, long clock);
    /* Copies [lo, hi) of the shard to dst + lo while the policy's threads
     * may update it (NULL: nothing else writes it, a memcpy). */
    void (*copy)(server *sv, float *dst, size_t lo, size_t hi);
    /* Whether w's pull can be answered now, every gradient it delivered
     * applied; may block until that is so (NULL: at once). */
    int (*pull_ready)(server *sv, int w);
    /* At the end, every worker stopped: everything delivered applied, or
     * an error (NULL: it is). */
    dt_status (*finish)(server *sv);
    /* Frees the state (NULL before setup). */
    void (*free)(server *sv);
} ps_policy;

/* The core's view of one worker (the leader of a worker group). */
typedef struct {
    double ctrl[PS_CTRL_LEN]; /* control receive buffer */
    MPI_Request ctrl_req;
    int seg_posted;           /* gradient receives posted for the clock (turns: up to one waiting its turn) */
    int seg_done;             /* of those, completed (tested in the order they match) */
    int receiving;            /* gradients of clock wclock on their way */
    int post_pending;         /* STEP arrived while its slot was busy (policy slot_busy): posted once free */
    int awaiting;             /* finished wclock, waiting for its reply */
    int stopped;
    int pulling;              /* asked for the current shard (PULL) */
    long wclock;              /* the clock it is in (from its STEP message), -1 before */
    long arrived;             /* clocks whose gradients are complete */
    long v_read;              /* version of the shard last sent to it */
    double grad_posted;       /* when its gradient receives were posted (timeline) */
} ps_peer;

struct server {
    const ps_policy *policy; /* the mode's (modes.c) */
    void *pol;               /* the policy's own state (its file's struct) */
    ps_traits traits;
    const dt_comm *comm;
    const dt_dist_cfg *cfg;
    const dt_model_spec *spec;
    dt_net *net;             /* layout only; built at batch 1 */
    dt_comm_plan plan;       /* which layers the servers hold (not SFB), where */
    size_t lo, hi, n;        /* this shard [lo, hi) of the servers' vector */
    int W;
    ps_peer *peer;           /* (W) */
    struct {                 /* traits.turns: the segment coming in (admit_turn) */
        int w, seg;          /* its worker and segment; w -1 when none */
        int next;            /* the worker to look at first for the next */
        double since;        /* when it was admitted (its timeline span) */
    } turn;
    int nslots;              /* gradient slots per worker (policy slots) */
    int nseg;                /* segments of the shard: its pieces of each held layer */
    size_t *seg_lo, *seg_hi; /* (nseg) in arrival order (layers last to first), from lo */
    int nreply;              /* reply requests per worker: header, then shard or segments */
    dt_optim *optim;         /* over the servers' vector */
    float *params;           /* (n) */
    float *state;            /* (nslots of the optimiser, n) its state, slot-major */
    float *recv;             /* (W, nslots, n) gradients of each worker's clocks */
    float *lr;               /* (W, nslots) the learning rate each clock came with */
    float *reply;            /* (W, n) snapshot being sent to each worker */
    dt_gc_kind wire;         /* bf16/fp16: a clock's messages in 16-bit words; else DT_GC_NONE */
    uint16_t *wire_recv;     /* wire: (W, n) w's gradient segments as they arrive */
    uint16_t *wire_reply;    /* wire: (W, n) w's reply, encoded from its snapshot (allocated at the first) */
    int hdr_len;             /* PS_HDR_LEN + nseg */
    double *hdr;             /* (W, hdr_len) reply headers */
    MPI_Request *grad_req;   /* (W, nlayers) */
    MPI_Request *reply_req;  /* (W, nreply) header, then the shard or its segments */
    long first_clock;        /* the clock the run started at (a resumed step, else 0) */
    long t_offset;           /* async: optimiser updates done before the run started, less first_clock
                              * (versions count from first_clock; Adam's t must go on from the total) */
    long delivered;          /* gradients complete since the start */
    long budget;             /* async: gradients to apply before replies say done */
    long max_gap;            /* largest clock gap seen between running workers */
    /* What the policy counts as it applies, read by the core for headers
     * and statistics; a policy's threads write them under mu. */
    pthread_mutex_t mu;
    long version;            /* updates applied to the shard */
    long applied;            /* gradients applied (async) or averaged in (clocked) */
    long committed;          /* clocks committed (clocked; else the first clock) */
};

/* The servers' worker w is the leader of worker group w (a worker itself
 * when groups are of 1). */
static inline int world_rank_of(const server *sv, int w) { return sv->comm->nservers + w * sv->cfg->group_size; }
static inline float *slot_of(const server *sv, int w, long clock) {
    return sv->recv + ((size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots)) * sv->n;
}

static inline float *lr_of(const server *sv, int w, long clock) {
    return sv->lr + (size_t)w * (size_t)sv->nslots + (size_t)(clock % sv->nslots);
}

static inline MPI_Request *reply_reqs(const server *sv, int w) {
    return sv->reply_req + (size_t)w * (size_t)sv->nreply;
}

static inline double *header_of(const server *sv, int w) { return sv->hdr + (size_t)w * (size_t)sv->hdr_len; }

/* ps_server.c: the optimiser step, the t-th, with gradient g (n floats,
 * as the shard) on [lo, hi) of the shard; w's reply buffer holding a copy
 * of [lo, hi) of the shard (returned); the shard's version; waiting for
 * w's previous reply; sending w its header (w's next gradient is computed
 * on version *v_read, NULL: this header's), floats [lo, hi) of src as
 * request `slot` of its reply (clock: a clock's reply, 16-bit on a 16-bit
 * wire), words [lo, hi) already encoded (ps-sync's), or a snapshot of the
 * whole shard with its header. */
void ps_apply(server *sv, float lr, long t, const float *g, size_t lo, size_t hi);
const float *ps_take_snapshot(server *sv, int w, size_t lo, size_t hi);
long ps_current_version(server *sv);
dt_status ps_wait_replies(server *sv, int w);
dt_status ps_send_header(server *sv, int w, long lag, const long *v_read);
dt_status ps_send_params(server *sv, int w, const float *src, size_t lo, size_t hi, int slot, int clock);
dt_status ps_send_words(server *sv, int w, const uint16_t *words, size_t lo, size_t hi, int slot);
dt_status ps_reply(server *sv, int w, long lag, int clock);

/* ps_immediate.c: the step of a gradient of lag `lag` in the asynchronous
 * modes, where a gradient normally finds `normal` updates applied since
 * it read. */
float ps_async_lr(const server *sv, float lr, long lag, long normal);

#endif
