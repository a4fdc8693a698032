/* ps-* modes, worker side: push each layer's gradients to the servers that
 * own them as soon as the layer's backward is done, and receive the shards
 * when the mode lets the servers reply (ps_proto.h): per-segment replies land
 * layer by layer in the parameters (a layer's parameters are not read again
 * in a step once its backward is done), so the top layers' come back while
 * the lower layers still run backward; the step ends when all are in. The
 * update itself runs on the servers.
 * ps-ssp's read-my-writes: the shards a worker receives may lack its own
 * latest clocks (up to s); it applies its own gradients of those clocks
 * (as a plain SGD step of lr/W each, its share of the averaged update) on
 * top, so its own updates are visible to it at once.
 * --grad-compression bf16/fp16: a clock's traffic (pushed gradients, the
 * replies) travels in 16-bit words, encoded into and decoded from buffers
 * laid out like the flat parameters (per-segment replies land there, decoded
 * once all are in); the start, pulls and the optimiser state stay fp32, so
 * evaluation and checkpoints see the servers' exact master weights. A step
 * after the start or a pull first rounds them as a reply would have been:
 * every step computes on 16-bit parameters, whatever the evaluation and
 * checkpoint schedule (a resumed run equals an uninterrupted one). */

#include <limits.h>

#include "dtrain/dist.h"
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/timer.h"
#include "plan/codec.h"
#include "comm/group.h"
#include "ps_proto.h"
#include "comm/pump.h"
#include "comm/sfb.h"

typedef struct {
    dt_group group;               /* first (dt_group_sync_alloc): the workers' own collectives */
    dt_comm comm;
    dt_dist_cfg cfg;
    dt_net *net;
    int k;                        /* group size (1: no groups) */
    int leader;                   /* this worker talks to the servers */
    MPI_Comm sub;                 /* k > 1: the group's communicator */
    MPI_Request *sub_reqs;        /* (nlayers) this step's in-group allreduces */
    int nsub_reqs;
    dt_comm_plan plan;
    dt_optim *ps_optim;           /* the optimiser over the servers' vector: where shards are cut */
    dt_sfb sfb;
    MPI_Request *sfb_reqs;        /* (dt_sfb_requests) this step's factor exchanges */
    int nsfb_reqs;
    size_t *shard_lo, *shard_hi;  /* (nservers) ranges of the servers' vector */
    MPI_Datatype *shard_type;     /* (nservers) shard s within the flat parameters */
    MPI_Request *reqs;            /* gradient sends and parameter receives, this step */
    int nreqs, maxreqs;
    int *req_from;                /* (maxreqs) the server each request receives from, -1 for a send */
    double ctrl[PS_CTRL_LEN];     /* send buffer of the step's control message */
    MPI_Request ctrl_reqs[1024];  /* one per server */
    dt_status err;                /* first failure inside grad_ready */
    char errmsg[512];
    double first_send;
    long clock;
    int hdr_len;                  /* PS_HDR_LEN + nlayers: room for any server's segments */
    double *hdr;                  /* (nservers, hdr_len) reply headers */
    float *own;                   /* ps-ssp: (s + 1, nparams) this worker's recent gradients;
                                   * backward writes clock c's into slot c % (s + 1) */
    float *own_lr;                /* (s + 1) their learning rates */
    int nown;                     /* s + 1, or 0 when not ps-ssp */
    dt_gc_kind wire;              /* bf16/fp16: a clock's messages in 16-bit words; else DT_GC_NONE */
    uint16_t *wire_grads;         /* wire: (nparams) the pushed gradients, encoded */
    uint16_t *wire_params;        /* wire: (nparams) the clock's replies, before decoding */
    MPI_Datatype *wire_type;      /* wire: (nservers) shard s within wire_params */
    int exact;                    /* wire: the parameters are fp32 from the start or a pull */
    dt_pump pump;                 /* progresses the step's messages while backward computes */
} ps_ctx;

static dt_status send_ctrl(ps_ctx *p, int kind, long clock, float lr) {
    /* The previous control messages (24 bytes, eager) have left long ago. */
    DT_TRY(dt_mpi_check(MPI_Waitall(p->comm.nservers, p->ctrl_reqs, MPI_STATUSES_IGNORE), "MPI_Waitall"));
    p->ctrl[0] = kind, p->ctrl[1] = (double)clock, p->ctrl[2] = lr;
    for (int s = 0; s < p->comm.nservers; s++)
        DT_TRY(dt_mpi_check(MPI_Isend(p->ctrl, PS_CTRL_LEN, MPI_DOUBLE, s, PS_TAG_CTRL, p->comm.world,
                                      &p->ctrl_reqs[s]),
                            "control message (MPI_Isend)"));
    return DT_OK;
}

/* Counts the request just posted into reqs: a receive from server `from`,
 * or a send (-1). */
static dt_status add_req(ps_ctx *p, int rc, int from, const char *what) {
    DT_TRY(dt_mpi_check(rc, what));
    p->req_from[p->nreqs++] = from;
    return DT_OK;
}

/* Starts layer's factor exchange (the step's first enters the group, for
 * the stall inspector). */
static dt_status start_sfb(ps_ctx *p, int layer) {
    dt_sfb_capture(&p->sfb, p->net, layer);
    if (p->nsfb_reqs == 0) DT_TRY(dt_group_enter(&p->group, "sufficient factor allgather"));
    int n;
    DT_TRY(dt_sfb_start(&p->sfb, layer, p->comm.workers, p->sfb_reqs + p->nsfb_reqs, &n));
    p->nsfb_reqs += n;
    return DT_OK;
}

/* Pushes layer's gradients to the servers holding them. */
static dt_status push_layer(ps_ctx *p, int layer) {
    const size_t *off = p->plan.ps_offset;
    for (int s = 0; s < p->comm.nservers; s++) {
        size_t a, b;
        ps_overlap(off, layer, p->shard_lo[s], p->shard_hi[s], &a, &b);
        if (a == b) continue;
        size_t at = p->net->param_offset[layer] + (a - off[layer]);
        const void *grads = p->net->grads + at;
        void *params = p->net->params + at;
        MPI_Datatype type = MPI_FLOAT;
        if (p->wire) {
            dt_half_encode(p->wire, p->net->grads + at, p->wire_grads + at, b - a);
            /* ps-ssp re-applies its own clocks: as the servers see them. */
            if (p->nown) dt_half_decode(p->wire, p->wire_grads + at, p->net->grads + at, b - a);
            grads = p->wire_grads + at;
            params = p->wire_params + at;
            type = MPI_UINT16_T;
        }
        DT_TRY(add_req(p, MPI_Isend(grads, (int)(b - a), type, s, PS_TAG_GRAD, p->comm.world, &p->reqs[p->nreqs]),
                       -1, "gradient push (MPI_Isend)"));
        if (!ps_replies_per_segment(p->cfg.mode)) continue;
        DT_TRY(add_req(p, MPI_Irecv(params, (int)(b - a), type, s, PS_TAG_PARAM, p->comm.world, &p->reqs[p->nreqs]),
                       s, "parameter pull (MPI_Irecv)"));
    }
    return DT_OK;
}

static void ps_grad_ready(void *ctx, int layer) {
    ps_ctx *p = ctx;
    if (p->err != DT_OK) return;
    if (p->nreqs == 0 && p->nsfb_reqs == 0 && p->nsub_reqs == 0) {
        p->first_send = dt_now();
        dt_pump_on(&p->pump);
    }
    dt_status st;
    if (p->k > 1) { /* summed in the group first; the leader pushes at end_step */
        size_t lo = p->net->param_offset[layer], n = p->net->param_offset[layer + 1] - lo;
        st = dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, p->net->grads + lo, (int)n, MPI_FLOAT, MPI_SUM, p->sub,
                                         &p->sub_reqs[p->nsub_reqs++]),
                          "group gradient allreduce (MPI_Iallreduce)");
    } else {
        st = p->sfb.index[layer] >= 0 ? start_sfb(p, layer) : push_layer(p, layer);
    }
    if (st != DT_OK) {
        p->err = st;
        snprintf(p->errmsg, sizeof p->errmsg, "%s", dt_last_error());
    }
}

/* Shard s's elements (of type base) within a buffer laid out like the flat
 * parameters: the pieces of each held layer that fall in [shard_lo[s],
 * shard_hi[s]) of the servers' vector. */
static dt_status make_shard_type(ps_ctx *p, int s, MPI_Datatype base, MPI_Datatype *out) {
    const dt_net *net = p->net;
    int *len, *disp, n = 0;
    DT_TRY(dt_alloc_bytes((void **)&len, sizeof(int) * (size_t)net->nlayers, "shard layout"));
    dt_status st = dt_alloc_bytes((void **)&disp, sizeof(int) * (size_t)net->nlayers, "shard layout");
    for (int i = 0; st == DT_OK && i < net->nlayers; i++) {
        size_t a, b;
        ps_overlap(p->plan.ps_offset, i, p->shard_lo[s], p->shard_hi[s], &a, &b);
        if (a == b) continue;
        len[n] = (int)(b - a);
        disp[n++] = (int)(net->param_offset[i] + (a - p->plan.ps_offset[i]));
    }
    if (st == DT_OK)
        st = dt_mpi_check(MPI_Type_indexed(n, len, disp, base, out), "MPI_Type_indexed");
    if (st == DT_OK) st = dt_mpi_check(MPI_Type_commit(out), "MPI_Type_commit");
    dt_free(len);
    dt_free(disp);
    return st;
}

/* wire: every layer the servers hold, from wire_params into the
 * parameters (decode), or rounded in place to the wire's precision. */
static void wire_params_in(ps_ctx *p, int decode) {
    const size_t *off = p->plan.ps_offset;
    for (int i = 0; i < p->net->nlayers; i++) {
        size_t at = p->net->param_offset[i], n = off[i + 1] - off[i];
        if (decode)
            dt_half_decode(p->wire, p->wire_params + at, p->net->params + at, n);
        else
            dt_half_round(p->wire, p->net->params + at, n);
    }
}

/* ps-ssp: where clock c's gradients live. */
static float *own_slot(const ps_ctx *p, long c) { return p->own + (size_t)(c % p->nown) * p->net->nparams; }

static dt_status ps_start(dt_sync *sy, dt_trainer *t) {
    ps_ctx *p = sy->ctx;
    p->net = dt_trainer_net(t);
    int S = p->comm.nservers;
    DT_TRY(dt_alloc_bytes((void **)&p->shard_lo, sizeof(size_t) * (size_t)S, "shards"));
    DT_TRY(dt_alloc_bytes((void **)&p->shard_hi, sizeof(size_t) * (size_t)S, "shards"));
    p->maxreqs = (2 * p->net->nlayers + 3) * S;
    DT_TRY(dt_alloc_bytes((void **)&p->req_from, sizeof(int) * (size_t)p->maxreqs, "requests"));
    DT_TRY(dt_alloc_bytes((void **)&p->reqs, sizeof(MPI_Request) * (size_t)p->maxreqs, "requests"));
    DT_TRY(dt_alloc_bytes((void **)&p->shard_type, sizeof(MPI_Datatype) * (size_t)S, "shards"));
    DT_TRY(dt_alloc_bytes((void **)&p->wire_type, sizeof(MPI_Datatype) * (size_t)S, "shards"));
    for (int s = 0; s < S; s++) p->shard_type[s] = p->wire_type[s] = MPI_DATATYPE_NULL;
    if (p->wire && p->leader) { /* the group's others get fp32 from their leader */
        DT_TRY(dt_alloc_bytes((void **)&p->wire_grads, sizeof(uint16_t) * p->net->nparams, "encoded gradients"));
        DT_TRY(dt_alloc_bytes((void **)&p->wire_params, sizeof(uint16_t) * p->net->nparams, "encoded parameters"));
    }
    DT_TRY(dt_alloc_bytes((void **)&p->sub_reqs, sizeof(MPI_Request) * (size_t)p->net->nlayers, "requests"));
    if (p->k > 1)
        DT_TRY(dt_mpi_check(MPI_Comm_split(p->comm.workers, p->comm.worker / p->k, p->comm.worker, &p->sub),
                            "worker groups (MPI_Comm_split)"));
    DT_TRY(dt_sfb_setup(sy, &p->plan, &p->sfb, p->net, &p->cfg, &p->comm));
    if (p->sfb.n)
        DT_TRY(dt_alloc_bytes((void **)&p->sfb_reqs, sizeof(MPI_Request) * (size_t)dt_sfb_requests(&p->sfb),
                              "sufficient factor requests"));
    DT_TRY(dt_optim_create(&p->ps_optim, dt_optim_config(dt_trainer_optim(t)), p->net, p->plan.ps_offset));
    p->hdr_len = PS_HDR_LEN + p->net->nlayers;
    DT_TRY(dt_alloc_bytes((void **)&p->hdr, sizeof(double) * (size_t)p->hdr_len * (size_t)S, "reply headers"));
    if ((dt_mode_info_of(p->cfg.mode)->flags & DT_MF_STALENESS) && p->cfg.staleness > 0) {
        size_t n;
        p->nown = p->cfg.staleness + 1;
        DT_TRY(dt_mul_size(&n, (size_t)p->nown, p->net->nparams, "own gradients"));
        DT_TRY(dt_alloc_floats(&p->own, n, "own gradients"));
        DT_TRY(dt_alloc_floats(&p->own_lr, (size_t)p->nown, "own gradients"));
        dt_net_bind_grads(p->net, own_slot(p, dt_trainer_step(t)));
    }
    for (int s = 0; s < S; s++) {
        ps_shard(p->ps_optim, p->plan.ps_n, S, s, &p->shard_lo[s], &p->shard_hi[s]);
        DT_TRY(make_shard_type(p, s, MPI_FLOAT, &p->shard_type[s]));
        if (p->wire && p->leader) DT_TRY(make_shard_type(p, s, MPI_UINT16_T, &p->wire_type[s]));
        p->ctrl_reqs[s] = MPI_REQUEST_NULL;
    }
    float *state = dt_trainer_opt_state(t);
    int nslots = dt_optim_nslots(p->ps_optim);
    DT_TRY(dt_group_create(&p->group, &p->comm, &p->cfg.stall));
    /* The pump makes MPI calls beside the trainer's: only under
     * MPI_THREAD_MULTIPLE (an MPI that grants less moves the messages at
     * the end of the step, as before the pump). */
    int level;
    DT_TRY(dt_mpi_check(MPI_Query_thread(&level), "MPI_Query_thread"));
    if (level == MPI_THREAD_MULTIPLE) DT_TRY(dt_pump_create(&p->pump));
    DT_TRY(dt_group_bcast_start(&p->group, p->net, state, dt_trainer_opt_floats(t)));
    if (p->comm.worker != 0) return DT_OK;
    /* Worker 0 seeds every server with its shard of the parameters and of
     * the optimiser state (zeros, or the resumed checkpoint's), the run's
     * budget of gradients for ps-async (every worker's steps, a group's
     * counting once; after a resume what is left, counting worker 0's step
     * for every worker), the clock the run starts at (a resumed run's
     * step) and the optimiser's count of updates done (Adam's bias
     * correction): the clock in lockstep modes; in the asynchronous ones
     * one update per gradient, worker 0's steps counted for every worker
     * as in the budget. */
    long step = dt_trainer_step(t), left = (dt_trainer_total_steps(t) - step * (long)p->comm.nworkers) / p->k;
    int async = dt_mode_is_async(p->cfg.mode);
    double run[3] = {async ? (double)(left > 1 ? left : 1) : 0, (double)step,
                     async ? (double)(step * (long)p->comm.nworkers / p->k) : (double)step};
    for (int s = 0; s < S; s++) {
        DT_TRY(dt_mpi_check(MPI_Send(p->net->params, 1, p->shard_type[s], s, PS_TAG_INIT, p->comm.world),
                            "server initialisation (MPI_Send)"));
        for (int k = 0; k < nslots; k++)
            DT_TRY(dt_mpi_check(MPI_Send(state + (size_t)k * p->net->nparams, 1, p->shard_type[s], s, PS_TAG_INIT,
                                         p->comm.world),
                                "server initialisation (MPI_Send)"));
        DT_TRY(dt_mpi_check(MPI_Send(run, 3, MPI_DOUBLE, s, PS_TAG_INIT, p->comm.world),
                            "server initialisation (MPI_Send)"));
    }
    return DT_OK;
}

static dt_status ps_begin_step(dt_sync *sy, dt_trainer *t, float lr) {
    ps_ctx *p = sy->ctx;
    p->clock = dt_trainer_step(t);
    p->nreqs = p->nsfb_reqs = p->nsub_reqs = 0;
    if (p->wire && p->exact) wire_params_in(p, 0);
    p->exact = 0;
    return p->leader ? send_ctrl(p, PS_CTRL_STEP, p->clock, lr) : DT_OK;
}

static void on_stall(void *arg, double waited, int report, char *line, size_t cap) {
    if (!report) return;
    ps_ctx *p = arg;
    unsigned char late[1024] = {0}; /* (nservers) a receive from s is not done */
    for (int i = 0; i < p->nreqs; i++) {
        int done = 0, s = p->req_from[i];
        if (s < 0 || late[s]) continue;
        MPI_Test(&p->reqs[i], &done, MPI_STATUS_IGNORE);
        late[s] = !done;
    }
    char missing[256] = "";
    size_t used = 0;
    for (int s = 0; s < p->comm.nservers; s++)
        if (late[s]) dt_comm_name_rank(&p->comm, s, missing, sizeof missing, &used);
    snprintf(line, cap, "dtrain: rank %d: step %ld has waited %.0f s for parameters from server rank(s) %s",
             p->comm.rank, p->clock + 1, waited, missing[0] ? missing : "(sends pending)");
}

/* Server s's reply header (PS_HDR_LEN, then its segments' committed clocks). */
static double *hdr_of(const ps_ctx *p, int s) { return p->hdr + (size_t)s * (size_t)p->hdr_len; }

/* Posts the receives of every server's reply into reqs: the header, then
 * the whole shard unless its segments are already on their way (wire: a
 * clock's, encoded, into wire_params). */
static dt_status post_replies(ps_ctx *p, int whole, int wire) {
    for (int s = 0; s < p->comm.nservers; s++) {
        DT_TRY(add_req(p, MPI_Irecv(hdr_of(p, s), p->hdr_len, MPI_DOUBLE, s, PS_TAG_HDR, p->comm.world,
                                    &p->reqs[p->nreqs]),
                       s, "parameter pull (MPI_Irecv)"));
        if (whole)
            DT_TRY(add_req(p, MPI_Irecv(wire ? (void *)p->wire_params : p->net->params, 1,
                                        wire ? p->wire_type[s] : p->shard_type[s], s, PS_TAG_PARAM, p->comm.world,
                                        &p->reqs[p->nreqs]),
                           s, "parameter pull (MPI_Irecv)"));
    }
    return DT_OK;
}

/* ps-ssp: re-apply this worker's own clocks the servers had not committed
 * on a segment when they sent it (from its committed count up to the
 * current clock). ps-ssp has no SFB layers, so the servers' vector is the
 * flat parameters and server s's segments are its pieces of each layer,
 * last layer first. */
static void read_my_writes(ps_ctx *p) {
    float inv_w = 1.0f / (float)p->comm.nworkers;
    size_t a[DT_MAX_LAYERS], b[DT_MAX_LAYERS];
    for (int s = 0; s < p->comm.nservers; s++) {
        int nseg = ps_segments(p->plan.ps_offset, p->net->nlayers, p->shard_lo[s], p->shard_hi[s], 0, a, b);
        for (int k = 0; k < nseg; k++)
            for (long j = (long)hdr_of(p, s)[PS_HDR_LEN + k]; j <= p->clock; j++) {
                const float *g = own_slot(p, j);
                float step = p->own_lr[j % p->nown] * inv_w;
                for (size_t x = a[k]; x < b[k]; x++) p->net->params[x] -= step * g[x];
            }
    }
}

/* The SFB layers' update, the same on every worker: their summed factors
 * rebuilt, averaged, one optimiser step with this worker's own state. */
static dt_status update_sfb_layers(ps_ctx *p, dt_trainer *t, float lr) {
    if (p->nsfb_reqs == 0) return DT_OK;
    DT_TRY(dt_group_wait(&p->group, p->sfb_reqs, p->nsfb_reqs));
    dt_net *net = p->net;
    float inv = 1.0f / (float)p->comm.nworkers;
    for (int k = 0; k < p->sfb.n; k++) {
        int i = p->sfb.layers[k].layer;
        size_t lo = net->param_offset[i], n = net->param_offset[i + 1] - lo;
        dt_sfb_rebuild(&p->sfb, i, net, inv);
        dt_trainer_update(t, lr, lo, lo + n);
    }
    return DT_OK;
}

/* A wait inside the worker group names the group's ranks every
 * --stall-timeout: one of them (or the leader's servers) is holding it up. */
typedef struct {
    const ps_ctx *p;
    const char *what;
} group_stall_info;

static void on_group_stall(void *arg, double waited, int report, char *line, size_t cap) {
    if (!report) return;
    const group_stall_info *gi = arg;
    const ps_ctx *p = gi->p;
    int first = p->comm.nservers + p->comm.worker / p->k * p->k;
    char members[256] = "";
    size_t used = 0;
    for (int r = first; r < first + p->k; r++)
        if (r != p->comm.rank) dt_comm_name_rank(&p->comm, r, members, sizeof members, &used);
    snprintf(line, cap, "dtrain: rank %d: %s has waited %.0f s; its worker group is ranks %d-%d (leader %d): %s",
             p->comm.rank, gi->what, waited, first, first + p->k - 1, first, members);
}

static dt_status group_wait(const ps_ctx *p, MPI_Request *reqs, int n, const char *what) {
    group_stall_info gi = {p, what};
    return dt_mpi_wait(reqs, n, &p->cfg.stall, on_group_stall, &gi, what);
}

/* k > 1: the group's summed gradients, averaged; the leader pushes them
 * (layers last to first, the order the servers expect). */
static dt_status group_reduce(ps_ctx *p) {
    DT_TRY(group_wait(p, p->sub_reqs, p->nsub_reqs, "group gradient allreduce"));
    float inv = 1.0f / (float)p->k;
    for (size_t i = 0; i < p->net->nparams; i++) p->net->grads[i] *= inv;
    for (int i = p->net->nlayers - 1; p->leader && i >= 0; i--)
        if (p->net->param_offset[i + 1] > p->net->param_offset[i]) DT_TRY(push_layer(p, i));
    return DT_OK;
}

/* The servers' replies (whole shards, or the headers after segments
 * already posted; wire: a clock's, encoded): a leader receives them, its
 * group gets parameters and headers from it. */
static dt_status receive_replies(ps_ctx *p, int whole, int wire, const char *what) {
    if (p->leader) {
        DT_TRY(post_replies(p, whole, wire));
        /* The trainer itself waits here: its core is free to poll. */
        static const atomic_int trainer_waits = 1;
        DT_TRY(dt_mpi_wait_hurry(p->reqs, p->nreqs, &p->cfg.stall, on_stall, p, what, &trainer_waits));
        if (wire) wire_params_in(p, 1);
    }
    if (p->k == 1) return DT_OK;
    MPI_Request r[2];
    DT_TRY(dt_mpi_check(MPI_Ibcast(p->net->params, (int)p->net->nparams, MPI_FLOAT, 0, p->sub, &r[0]),
                        "parameters to the group (MPI_Ibcast)"));
    DT_TRY(dt_mpi_check(MPI_Ibcast(p->hdr, p->hdr_len * p->comm.nservers, MPI_DOUBLE, 0, p->sub, &r[1]),
                        "parameters to the group (MPI_Ibcast)"));
    return group_wait(p, r, 2, "parameters from the group's leader");
}

static dt_status ps_end_step(dt_sync *sy, dt_trainer *t, float lr) {
    ps_ctx *p = sy->ctx;
    if (p->err != DT_OK) {
        (void)dt_pump_off(&p->pump);
        return dt_fail(p->err, "%s", p->errmsg);
    }
    if (p->nreqs == 0 && p->nsfb_reqs == 0 && p->nsub_reqs == 0) p->first_send = dt_now();
    if (p->nown) p->own_lr[p->clock % p->nown] = lr; /* the gradients are in their slot already */
    double t0 = dt_now();
    /* The SFB layers first (their factors left long ago; their rebuild is a
     * GEMM of the compute's), while the pump moves the servers' replies
     * (they touch only the layers the servers hold). Then the pump stops on
     * every path: after a failure the trainer frees the buffers that the
     * step's open requests point to, and nothing may progress them. */
    dt_status st = p->k > 1 ? group_reduce(p) : DT_OK;
    if (st == DT_OK) st = update_sfb_layers(p, t, lr);
    dt_status off = dt_pump_off(&p->pump); /* from here the trainer's own waits progress */
    DT_TRY(st);
    DT_TRY(off);
    /* Whole replies land in net->params only now, per-segment ones have
     * been landing layer by layer (wire: in wire_params, decoded once all are
     * in); either way the step ends with all of them in. */
    int per_segment = ps_replies_per_segment(p->cfg.mode);
    double t_post = per_segment ? p->first_send : dt_now();
    DT_TRY(receive_replies(p, !per_segment, p->wire != DT_GC_NONE, "parameter exchange"));
    double t1 = dt_now();
    if (p->nown) {
        read_my_writes(p);
        /* The next clock's slot held clock - s, which every segment has
         * committed (the reply required it), and its sends are done. */
        dt_net_bind_grads(p->net, own_slot(p, p->clock + 1));
    }
    /* Each way: the servers' vector (a leader's push and pull), the factors,
     * and in a group about 2 (k-1)/k of the gradients (ring allreduce) plus
     * the broadcast parameters. */
    double n = (double)p->plan.ps_n, k = p->k, word = p->wire ? sizeof(uint16_t) : sizeof(float);
    double bytes = (p->leader ? n * word : 0) + (k > 1 ? (2 * (k - 1) / k + 1) * n * sizeof(float) : 0) +
                   dt_sfb_bytes_each_way(&p->sfb);
    /* Gradients are in flight from the first push until the exchange is
     * complete, replies from their receives being posted (per segment: with
     * the first push). */
    dt_tl_arg arg[] = {{"bytes", bytes}};
    dt_timeline_span(p->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "ps push", p->first_send, t1, arg, 1);
    dt_timeline_span(p->cfg.timeline, DT_TL_COMM, DT_TL_CAT_COMM, "ps pull", t_post, t1, arg, 1);
    dt_timeline_span(p->cfg.timeline, DT_TL_MAIN, DT_TL_CAT_WAIT, "wait parameters", t0, t1, NULL, 0);
    sy->stats.comm_s += t1 - p->first_send;
    sy->stats.wait_s += t1 - t0;
    sy->stats.bytes_sent += (uint64_t)bytes;
    sy->stats.bytes_recv += (uint64_t)bytes;
    sy->stats.version = hdr_of(p, 0)[0];
    for (int s = 0; s < p->comm.nservers; s++) {
        const double *h = hdr_of(p, s);
        if (h[1] > sy->stats.lag) sy->stats.lag = h[1];
        if (h[3] != 0) sy->stats.done = 1;
        if (h[4] != 0) sy->stop_requested = 1;
    }
    return DT_OK;
}

/* Before evaluation and checkpoints: the servers' shards with every
 * delivered clock applied, then the workers' average BN state. */
static dt_status ps_sync_state(dt_sync *sy, dt_trainer *t, dt_pace here) {
    ps_ctx *p = sy->ctx;
    if (p->leader) DT_TRY(send_ctrl(p, PS_CTRL_PULL, dt_trainer_step(t), 0));
    p->nreqs = 0;
    DT_TRY(receive_replies(p, 1, 0, "parameter pull"));
    p->exact = 1;
    return dt_group_state_hook(sy, t, here);
}

/* ps-async groups: a group stops together (see dt_sync.agree_stop). */
static dt_status ps_agree_stop(dt_sync *sy, int *flags) {
    ps_ctx *p = sy->ctx;
    MPI_Request r;
    DT_TRY(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, flags, 1, MPI_INT, MPI_MAX, p->sub, &r),
                        "stop agreement in the group (MPI_Iallreduce)"));
    return group_wait(p, &r, 1, "stop agreement in the group");
}

/* Worker 0 fetches the servers' shards of the optimiser state for a
 * checkpoint, slot by slot. */
static dt_status ps_gather(dt_sync *sy, dt_trainer *t) {
    ps_ctx *p = sy->ctx;
    if (p->comm.worker != 0) return DT_OK;
    DT_TRY(send_ctrl(p, PS_CTRL_CKPT, dt_trainer_step(t), 0));
    float *state = dt_trainer_opt_state(t);
    for (int s = 0; s < p->comm.nservers; s++)
        for (int k = 0; k < dt_optim_nslots(p->ps_optim); k++)
            DT_TRY(dt_mpi_check(MPI_Recv(state + (size_t)k * p->net->nparams, 1, p->shard_type[s], s, PS_TAG_MOM,
                                         p->comm.world, MPI_STATUS_IGNORE),
                                "optimiser state for checkpoint (MPI_Recv)"));
    return DT_OK;
}

static dt_status ps_finish(dt_sync *sy, dt_trainer *t) {
    ps_ctx *p = sy->ctx;
    if (p->leader) DT_TRY(send_ctrl(p, PS_CTRL_STOP, dt_trainer_step(t), 0));
    DT_TRY(dt_mpi_check(MPI_Waitall(p->comm.nservers, p->ctrl_reqs, MPI_STATUSES_IGNORE), "MPI_Waitall"));
    if (p->comm.worker != 0) return DT_OK;
    double worst = 0;
    sy->stats.server_nice = INT_MAX;
    for (int s = 0; s < p->comm.nservers; s++) {
        double st[PS_STATS_LEN];
        DT_TRY(dt_mpi_check(MPI_Recv(st, PS_STATS_LEN, MPI_DOUBLE, s, PS_TAG_STATS, p->comm.world,
                                     MPI_STATUS_IGNORE),
                            "server statistics (MPI_Recv)"));
        if (st[1] > 0 && st[0] / st[1] > worst) worst = st[0] / st[1];
        if ((long)st[3] > sy->stats.max_clock_gap) sy->stats.max_clock_gap = (long)st[3];
        if ((int)st[5] < sy->stats.server_nice) sy->stats.server_nice = (int)st[5];
    }
    sy->stats.server_cpu_share = worst;
    return DT_OK;
}

static void ps_free(dt_sync *sy) {
    if (!sy) return;
    ps_ctx *p = sy->ctx;
    dt_pump_free(&p->pump);
    for (int s = 0; p->shard_type && p->wire_type && s < p->comm.nservers; s++) {
        if (p->shard_type[s] != MPI_DATATYPE_NULL) MPI_Type_free(&p->shard_type[s]);
        if (p->wire_type[s] != MPI_DATATYPE_NULL) MPI_Type_free(&p->wire_type[s]);
    }
    dt_free(p->shard_type);
    dt_free(p->wire_type);
    dt_free(p->wire_grads);
    dt_free(p->wire_params);
    dt_free(p->sfb_reqs);
    dt_free(p->sub_reqs);
    if (p->sub != MPI_COMM_NULL) MPI_Comm_free(&p->sub);
    dt_sfb_free(&p->sfb);
    dt_comm_plan_free(&p->plan);
    dt_optim_free(p->ps_optim);
    dt_free(p->shard_lo);
    dt_free(p->shard_hi);
    dt_free(p->reqs);
    dt_free(p->req_from);
    dt_free(p->hdr);
    dt_free(p->own);
    dt_free(p->own_lr);
    dt_group_sync_free(sy);
}

dt_status dt_sync_ps_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg) {
    *out = NULL;
    if (c->nservers > 1024) return dt_fail(DT_ERR_USAGE, "--servers %d: at most 1024", c->nservers);
    DT_TRY(dt_dist_cfg_check(cfg, c->nworkers));
    DT_TRY(dt_group_sync_alloc(out, sizeof(ps_ctx)));
    dt_sync *sy = *out;
    ps_ctx *p = sy->ctx;
    p->comm = *c;
    p->cfg = *cfg;
    p->k = cfg->group_size;
    p->leader = c->worker % p->k == 0;
    p->sub = MPI_COMM_NULL;
    p->wire = dt_gc_is_half(cfg->codec.kind) ? cfg->codec.kind : DT_GC_NONE;
    p->exact = 1;
    sy->name = dt_mode_name(cfg->mode);
    sy->start = ps_start;
    sy->begin_step = ps_begin_step;
    sy->grad_ready = ps_grad_ready;
    sy->end_step = ps_end_step;
    sy->gather = ps_gather;
    sy->sync_state = ps_sync_state;
    sy->pace = dt_mode_is_async(cfg->mode) ? DT_PACE_APART : DT_PACE_LOCKSTEP;
    if (sy->pace == DT_PACE_APART && p->k > 1) sy->agree_stop = ps_agree_stop;
    if (sy->pace == DT_PACE_LOCKSTEP) sy->lead = dt_dist_staleness(cfg);
    sy->finish = ps_finish;
    sy->free = ps_free;
    return DT_OK;
}
