/* Parameter servers, every ps-* mode: a server owns one shard of the flat
 * parameters and its optimiser state, and serves each worker's clocks.
 * This file is the core (posting receives, polling, control messages,
 * replies, pulls, set-up); what happens when a gradient arrives is the
 * mode's policy, in ps_clocked.c, ps_immediate.c and ps_deferred.c
 * (ps_server.h):
 *   clocked modes (ps-sync, ps-ssp --staleness s; ps-sync is s = 0): a
 *     clock is committed (every worker's gradient for it averaged in worker
 *     order, one SGD step) as soon as all have arrived, clocks in order; a
 *     worker that finished clock c gets parameters once clocks up to c - s
 *     are committed, so the fastest worker is at most s clocks ahead.
 *   ps-async: each worker's gradient is applied the moment it is complete
 *     (with lr / W, less when it is staler than usual: async_lr), and that
 *     worker alone gets the fresh shard; nobody waits for anybody.
 *   ps-async-nowait / ps-hogwild (deferred): the worker gets the latest
 *     shard the moment its gradient is complete, and the gradient is queued
 *     for applier threads: one applying under the shard's lock (nowait), or
 *     two applying at once without it (hogwild; ps_deferred.c says what races).
 * Per-segment replies (all but the deferred modes, ps_proto.h): the shard is
 * cut where the layers meet; a worker's gradient arrives segment by
 * segment, top layer first, as backprop frees them. ps-async applies each
 * segment and sends it back at once; the clocked modes commit each segment
 * clock by clock as soon as every worker has delivered it, and send a
 * worker each segment as soon as it holds the clocks that worker may read.
 * So the top layers' parameters travel while the worker still runs the
 * lower layers' backward. Per-element arithmetic is the same as applying
 * the whole shard at once.
 * Out of step (all but ps-sync), large gradient segments come in one at a
 * time, so the workers take turns on the server's link (admit_turn).
 * --grad-compression bf16/fp16: a clock's gradient segments arrive in
 * 16-bit words and are decoded into their fp32 slot as each arrives; its
 * replies are encoded from the shard (a snapshot, in effect) as they are
 * sent. ps-sync, where every worker reads the same, decodes in the commit
 * and encodes once for all, as each segment is committed (ps_clocked.c):
 * nothing then keeps the server from the sockets while pushes come in.
 * The sums, the shard and the optimiser state stay fp32; pulls, the
 * start and checkpoints move fp32.
 * All MPI calls are made by the server's main thread; appliers only compute.
 * Waits by polling with a growing sleep, so an idle server takes no core. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "plan/codec.h"
#include "ps_server.h"

static dt_status post_ctrl(server *sv, int w) {
    return dt_mpi_check(MPI_Irecv(sv->peer[w].ctrl, PS_CTRL_LEN, MPI_DOUBLE, world_rank_of(sv, w), PS_TAG_CTRL,
                                  sv->comm->world, &sv->peer[w].ctrl_req),
                        "control receive (MPI_Irecv)");
}

/* Gradient segments of DT_PS_TURN_BYTES or more on the wire take turns on
 * a server's link in the out-of-step modes (admit_turn). Above Open MPI's
 * eager limits (64 KiB over TCP by default, 256 KiB as dtrain launch sets
 * it), so such a segment's bytes wait for its receive. A smaller one is
 * posted as soon as the segments before it are: it is in already, or it
 * shares the link, as every segment did before the turns. */
static int takes_turn(const server *sv, int k) {
    size_t word = sv->wire ? sizeof(uint16_t) : sizeof(float);
    return sv->traits.turns && (sv->seg_hi[k] - sv->seg_lo[k]) * word >= DT_PS_TURN_BYTES;
}

/* Posts the receive for worker w's next gradient segment of its clock. */
static dt_status post_segment(server *sv, int w) {
    int k = sv->peer[w].seg_posted++;
    MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
    size_t lo = sv->seg_lo[k];
    uint16_t *words = sv->wire ? sv->wire_recv + (size_t)w * sv->n : NULL;
    return dt_mpi_check(MPI_Irecv(words ? (void *)(words + lo) : slot_of(sv, w, sv->peer[w].wclock) + lo,
                                  (int)(sv->seg_hi[k] - lo), words ? MPI_UINT16_T : MPI_FLOAT,
                                  world_rank_of(sv, w), PS_TAG_GRAD, sv->comm->world, &r[k]),
                        "gradient receive (MPI_Irecv)");
}

/* Posts w's segments in the order the worker sends them (layers last to
 * first: MPI matches them in that order), up to one that takes its turn. */
static dt_status post_until_turn(server *sv, int w) {
    ps_peer *p = &sv->peer[w];
    while (p->seg_posted < sv->nseg && !takes_turn(sv, p->seg_posted)) DT_TRY(post_segment(sv, w));
    return DT_OK;
}

/* Starts taking in worker w's gradient for its clock. */
static dt_status post_grads(server *sv, int w) {
    sv->peer[w].seg_done = sv->peer[w].seg_posted = 0;
    sv->peer[w].receiving = 1;
    sv->peer[w].grad_posted = dt_now();
    return post_until_turn(sv, w);
}

/* Out of step (ps-async, ps-ssp with s > 0, the deferred modes) the
 * workers' large segments come in one at a time: while none is coming in,
 * the next is the first, round robin from the worker after the last one's,
 * whose sender has begun it (MPI_Iprobe: its first bytes are here; every
 * segment before it has a receive, so this is the one). Shared fairly, two
 * pushes that overlap both end late, their replies too, and the workers
 * keep whatever phase they started in (measured with cnn's 13 MB fc layer
 * at 100 Mbit/s between emulated hosts: 3.7 s a step where taking turns
 * gives 2.2; docs/CLUSTER.md). One at a time, the first ends first, its
 * reply leaves while the next comes in, and the workers fall into turns.
 * A waiting segment is admitted at the first poll after the last ends. */
static dt_status admit_turn(server *sv, int *progressed) {
    if (!sv->traits.turns || sv->turn.w >= 0) return DT_OK;
    for (int i = 0; i < sv->W; i++) {
        int w = (sv->turn.next + i) % sv->W, here = 0;
        if (!sv->peer[w].receiving || sv->peer[w].seg_posted == sv->nseg) continue;
        DT_TRY(dt_mpi_check(MPI_Iprobe(world_rank_of(sv, w), PS_TAG_GRAD, sv->comm->world, &here,
                                       MPI_STATUS_IGNORE),
                            "gradient probe (MPI_Iprobe)"));
        if (!here) continue;
        sv->turn.w = w;
        sv->turn.seg = sv->peer[w].seg_posted;
        sv->turn.since = dt_now();
        sv->turn.next = (w + 1) % sv->W;
        *progressed = 1;
        DT_TRY(post_segment(sv, w));
        return post_until_turn(sv, w);
    }
    return DT_OK;
}

/* As a worker starts `clock`: how far ahead it is of the slowest running
 * worker, whose current clock is the count of clocks it has delivered. SSP
 * bounds this by s (0 in ps-sync); ps-async does not bound it. */
static void note_gap(server *sv, long clock) {
    long slowest = clock;
    for (int w = 0; w < sv->W; w++)
        if (!sv->peer[w].stopped && sv->peer[w].arrived < slowest) slowest = sv->peer[w].arrived;
    if (clock - slowest > sv->max_gap) sv->max_gap = clock - slowest;
}

static dt_status handle_ctrl(server *sv, int w) {
    int kind = (int)sv->peer[w].ctrl[0];
    long clock = (long)sv->peer[w].ctrl[1];
    if (kind == PS_CTRL_STOP) {
        /* Count the gradients: a worker that ran `clock` steps sent exactly
         * that many, and every one arrived. */
        if (sv->peer[w].arrived != clock || sv->peer[w].receiving)
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: worker rank %d stopped after %ld steps but "
                           "%ld of its gradients arrived", sv->comm->rank, world_rank_of(sv, w), clock,
                           sv->peer[w].arrived);
        sv->peer[w].stopped = 1;
        return DT_OK;
    }
    if (kind == PS_CTRL_PULL) {
        sv->peer[w].pulling = 1;
    } else if (kind == PS_CTRL_CKPT) {
        /* Flushed before worker 0 can go on: a stop after this checkpoint
         * merges this server's part as it is now. */
        DT_TRY(dt_timeline_flush(sv->cfg->timeline));
        for (int k = 0; k < dt_optim_nslots(sv->optim); k++)
            DT_TRY(dt_mpi_check(MPI_Send(sv->state + (size_t)k * sv->n, (int)sv->n, MPI_FLOAT, world_rank_of(sv, w),
                                         PS_TAG_MOM, sv->comm->world),
                                "optimiser state for checkpoint (MPI_Send)"));
    } else if (kind == PS_CTRL_STEP) {
        if (sv->peer[w].receiving || sv->peer[w].awaiting || clock != sv->peer[w].arrived)
            return dt_fail(DT_ERR_INTERNAL, "server rank %d: worker rank %d started clock %ld out of turn",
                           sv->comm->rank, world_rank_of(sv, w), clock + 1);
        sv->peer[w].wclock = clock;
        *lr_of(sv, w, clock) = (float)sv->peer[w].ctrl[2];
        note_gap(sv, clock);
        if (sv->policy->slot_busy && sv->policy->slot_busy(sv, w, clock))
            sv->peer[w].post_pending = 1; /* posted once the policy frees the slot */
        else
            DT_TRY(post_grads(sv, w));
    } else {
        return dt_fail(DT_ERR_MPI, "server rank %d: unknown control message %d from rank %d",
                       sv->comm->rank, kind, world_rank_of(sv, w));
    }
    return post_ctrl(sv, w);
}

/* One optimiser step, the t-th, with gradient g (n floats, as the shard)
 * on [lo, hi) of the shard. */
void ps_apply(server *sv, float lr, long t, const float *g, size_t lo, size_t hi) {
    dt_optim_vec v = {sv->params, g, sv->state, sv->n, sv->lo};
    dt_optim_update(sv->optim, lr, t, v, lo, hi);
}

/* Copies [lo, hi) of the shard into the same place of w's reply buffer,
 * which it returns (the snapshot to send from). */
const float *ps_take_snapshot(server *sv, int w, size_t lo, size_t hi) {
    float *snap = sv->reply + (size_t)w * sv->n;
    if (sv->policy->copy)
        sv->policy->copy(sv, snap, lo, hi);
    else
        memcpy(snap + lo, sv->params + lo, sizeof(float) * (hi - lo));
    return snap;
}

/* w received our previous reply before it could start this clock: its
 * buffers are free (these complete at once). */
dt_status ps_wait_replies(server *sv, int w) {
    return dt_mpi_check(MPI_Waitall(sv->nreply, reply_reqs(sv, w), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

long ps_current_version(server *sv) {
    pthread_mutex_lock(&sv->mu);
    long v = sv->version;
    pthread_mutex_unlock(&sv->mu);
    return v;
}

/* Sends w the header of its reply: the shard's version and w's lag; w's
 * next gradient will be computed on version *v_read (NULL: the version in
 * this header, read under the same lock). */
/* SIGINT/SIGTERM on this server's rank: passed on in every reply header. */
static int signalled(const server *sv) { return sv->cfg->stop && atomic_load(sv->cfg->stop); }

dt_status ps_send_header(server *sv, int w, long lag, const long *v_read) {
    MPI_Request *r = reply_reqs(sv, w);
    DT_TRY(dt_mpi_check(MPI_Wait(&r[0], MPI_STATUS_IGNORE), "MPI_Wait"));
    double *h = header_of(sv, w);
    pthread_mutex_lock(&sv->mu);
    h[0] = (double)sv->version;
    h[1] = (double)lag;
    h[2] = (double)sv->committed;
    /* Delivered gradients count as spent: those the policy holds (the
     * deferred queue) will be applied. */
    h[3] = sv->budget > 0 && sv->delivered >= sv->budget;
    h[4] = signalled(sv);
    sv->peer[w].v_read = v_read ? *v_read : sv->version;
    pthread_mutex_unlock(&sv->mu);
    sv->peer[w].awaiting = 0;
    return dt_mpi_check(MPI_Isend(h, sv->hdr_len, MPI_DOUBLE, world_rank_of(sv, w), PS_TAG_HDR, sv->comm->world,
                                  &r[0]),
                        "parameter reply (MPI_Isend)");
}

/* Sends w `count` elements of `type` at data as request `slot` of its
 * reply, its timeline span from t0 (when the reply's part began). */
static dt_status send_part(server *sv, int w, const void *data, MPI_Datatype type, size_t count, int slot,
                           double t0) {
    int to = world_rank_of(sv, w);
    DT_TRY(dt_mpi_check(MPI_Isend(data, (int)count, type, to, PS_TAG_PARAM, sv->comm->world,
                                  &reply_reqs(sv, w)[slot]),
                        "parameter reply (MPI_Isend)"));
    double bytes = (double)count * (type == MPI_FLOAT ? sizeof(float) : sizeof(uint16_t));
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_COMM, "reply", t0, dt_now(),
                     (dt_tl_arg[]){{"worker", to}, {"bytes", bytes}}, 2);
    return DT_OK;
}

/* Sends w floats [lo, hi) of src (the shard, or a snapshot of it) as
 * request `slot` of its reply; a clock's reply (clock) goes encoded when
 * the wire is 16-bit. */
dt_status ps_send_params(server *sv, int w, const float *src, size_t lo, size_t hi, int slot, int clock) {
    double t0 = dt_now();
    if (!clock || !sv->wire) return send_part(sv, w, src + lo, MPI_FLOAT, hi - lo, slot, t0);
    if (!sv->wire_reply) /* (not before a policy encodes a reply: ps-sync never does, it encodes once for all) */
        DT_TRY(dt_alloc_bytes((void **)&sv->wire_reply, (size_t)sv->W * sv->n * sizeof(uint16_t),
                              "server replies"));
    uint16_t *words = sv->wire_reply + (size_t)w * sv->n + lo;
    dt_half_encode(sv->wire, src + lo, words, hi - lo);
    return send_part(sv, w, words, MPI_UINT16_T, hi - lo, slot, t0);
}

dt_status ps_send_words(server *sv, int w, const uint16_t *words, size_t lo, size_t hi, int slot) {
    return send_part(sv, w, words + lo, MPI_UINT16_T, hi - lo, slot, dt_now());
}

/* Sends w a snapshot of the whole shard with its header: a clock's reply
 * (clock), or a pull's. */
dt_status ps_reply(server *sv, int w, long lag, int clock) {
    DT_TRY(ps_wait_replies(sv, w));
    const float *snap = ps_take_snapshot(sv, w, 0, sv->n);
    DT_TRY(ps_send_header(sv, w, lag, NULL));
    return ps_send_params(sv, w, snap, 0, sv->n, 1, clock);
}

/* Worker w's gradients for its clock are all here. */
static dt_status gradient_complete(server *sv, int w) {
    ps_peer *p = &sv->peer[w];
    long c = p->wclock;
    p->receiving = 0;
    p->arrived = c + 1;
    p->awaiting = 1;
    sv->delivered++;
    dt_timeline_span(sv->cfg->timeline, DT_TL_RECV + w, DT_TL_CAT_COMM, "receive gradients", p->grad_posted,
                     dt_now(), (dt_tl_arg[]){{"clock", c}, {"bytes", dt_ps_bytes_each_way(&sv->cfg->codec, sv->n)}}, 2);
    return sv->policy->complete(sv, w);
}

/* A PULL is answered with every clock the pulling worker delivered
 * applied (the state evaluation and checkpoints must see), as soon as the
 * policy says they are (pull_ready). */
static dt_status serve_pulls(server *sv, int *progressed) {
    for (int w = 0; w < sv->W; w++) {
        if (!sv->peer[w].pulling) continue;
        if (sv->policy->pull_ready && !sv->policy->pull_ready(sv, w)) continue;
        sv->peer[w].pulling = 0;
        *progressed = 1;
        DT_TRY(ps_reply(sv, w, 0, 0));
    }
    return DT_OK;
}

/* Takes in w's gradient segments that have arrived, tested in the order
 * they were sent (the order MPI matches them in), and the gradient once all
 * are here. */
static dt_status take_segments(server *sv, int w, int *progressed) {
    MPI_Request *r = sv->grad_req + (size_t)w * (size_t)sv->net->nlayers;
    while (sv->peer[w].seg_done < sv->peer[w].seg_posted) {
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Test(&r[sv->peer[w].seg_done], &done, MPI_STATUS_IGNORE), "MPI_Test"));
        if (!done) return DT_OK;
        int k = sv->peer[w].seg_done++;
        *progressed = 1;
        if (w == sv->turn.w && k == sv->turn.seg) { /* the link is free for the next */
            sv->turn.w = -1;
            dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_COMM, "turn", sv->turn.since, dt_now(),
                             (dt_tl_arg[]){{"worker", world_rank_of(sv, w)}, {"segment", k}}, 2);
        }
        if (sv->wire && !sv->traits.decodes) {
            size_t lo = sv->seg_lo[k];
            dt_half_decode(sv->wire, sv->wire_recv + (size_t)w * sv->n + lo,
                           slot_of(sv, w, sv->peer[w].wclock) + lo, sv->seg_hi[k] - lo);
        }
        if (sv->policy->segment) DT_TRY(sv->policy->segment(sv, w, k));
    }
    if (sv->peer[w].seg_done < sv->nseg) return DT_OK; /* the rest waits for its turn */
    *progressed = 1;
    return gradient_complete(sv, w);
}

/* Takes in control messages and gradient segments; 1 in *progressed if
 * anything happened, 0 in *active once every worker has stopped. */
static dt_status poll_once(server *sv, int *progressed, int *active) {
    *progressed = *active = 0;
    for (int w = 0; w < sv->W; w++) {
        if (sv->peer[w].stopped) continue;
        (*active)++;
        int done = 0;
        DT_TRY(dt_mpi_check(MPI_Test(&sv->peer[w].ctrl_req, &done, MPI_STATUS_IGNORE), "MPI_Test"));
        if (done) {
            DT_TRY(handle_ctrl(sv, w));
            *progressed = 1;
        }
        if (sv->peer[w].post_pending && !sv->policy->slot_busy(sv, w, sv->peer[w].wclock)) {
            sv->peer[w].post_pending = 0;
            DT_TRY(post_grads(sv, w));
            *progressed = 1;
        }
        if (sv->peer[w].receiving) DT_TRY(take_segments(sv, w, progressed));
    }
    DT_TRY(admit_turn(sv, progressed));
    return serve_pulls(sv, progressed);
}

static void report_stall(void *arg, double waited, int report, char *line, size_t cap) {
    if (!report) return;
    const server *sv = arg;
    char missing[256] = "";
    size_t used = 0;
    for (int w = 0; w < sv->W; w++)
        if (!sv->peer[w].stopped && !sv->peer[w].awaiting)
            dt_comm_name_rank(sv->comm, world_rank_of(sv, w), missing, sizeof missing, &used);
    snprintf(line, cap, "dtrain: server rank %d: clock %ld has waited %.0f s for gradients from worker rank(s) %s",
             sv->comm->rank, sv->committed + 1, waited, missing);
}

/* At the end: every delivered gradient was applied exactly once (each
 * worker's count was checked against its steps at STOP), and the replies
 * have left. */
static dt_status check_counts(server *sv) {
    if (sv->policy->finish) DT_TRY(sv->policy->finish(sv));
    if (sv->applied != sv->delivered)
        return dt_fail(DT_ERR_INTERNAL, "server rank %d: %ld gradients delivered but %ld applied",
                       sv->comm->rank, sv->delivered, sv->applied);
    return dt_mpi_check(MPI_Waitall(sv->nreply * sv->W, sv->reply_req, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

static dt_status serve(server *sv) {
    for (int w = 0; w < sv->W; w++) DT_TRY(post_ctrl(sv, w));
    dt_backoff sleep = dt_backoff_start(1000, 1000000); /* 1 us to 1 ms */
    dt_stall_clock idle;                                 /* since the last progress */
    dt_stall_clock_start(&idle, &sv->cfg->stall, dt_now());
    for (;;) {
        int progressed, active;
        DT_TRY(poll_once(sv, &progressed, &active));
        if (!active) return check_counts(sv);
        double now = dt_now();
        if (progressed) {
            dt_backoff_reset(&sleep);
            dt_stall_clock_start(&idle, &sv->cfg->stall, now);
            continue;
        }
        dt_backoff_sleep(&sleep);
        DT_TRY(dt_stall_clock_poll(&idle, now, report_stall, sv));
    }
}

/* The policy of each dt_ps_policy (the mode table's column), each
 * defined in its file. */
extern const ps_policy ps_clocked_policy, ps_immediate_policy, ps_deferred_policy;
static const ps_policy *const policies[] = {
    [DT_PS_CLOCKED] = &ps_clocked_policy,
    [DT_PS_IMMEDIATE] = &ps_immediate_policy,
    [DT_PS_DEFERRED] = &ps_deferred_policy,
};

/* The shard's buffers, the segments and the requests, for W workers with
 * nslots gradient slots each. */
static dt_status alloc_buffers(server *sv) {
    size_t W = (size_t)sv->W, L = (size_t)sv->net->nlayers, S = (size_t)sv->nslots, rn, wn, sn;
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_lo, L * sizeof(size_t), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->seg_hi, L * sizeof(size_t), "server"));
    sv->nseg = ps_segments(sv->plan.ps_offset, sv->net->nlayers, sv->lo, sv->hi, sv->lo, sv->seg_lo, sv->seg_hi);
    sv->nreply = sv->nseg + 1 > 2 ? sv->nseg + 1 : 2;
    sv->hdr_len = PS_HDR_LEN + sv->nseg;
    DT_TRY(dt_mul_size(&wn, W, sv->n, "server buffers"));
    DT_TRY(dt_mul_size(&rn, wn, S, "server buffers"));
    DT_TRY(dt_alloc_floats(&sv->params, sv->n, "server shard"));
    DT_TRY(dt_mul_size(&sn, (size_t)dt_optim_nslots(sv->optim), sv->n, "server optimiser state"));
    DT_TRY(dt_alloc_floats(&sv->state, sn, "server optimiser state"));
    DT_TRY(dt_alloc_floats(&sv->recv, rn, "server gradients"));
    DT_TRY(dt_alloc_floats(&sv->reply, wn, "server replies"));
    sv->wire = dt_gc_is_half(sv->cfg->codec.kind) ? sv->cfg->codec.kind : DT_GC_NONE;
    if (sv->wire) DT_TRY(dt_alloc_bytes((void **)&sv->wire_recv, wn * sizeof(uint16_t), "server gradients"));
    DT_TRY(dt_alloc_floats(&sv->lr, W * S, "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->hdr, W * (size_t)sv->hdr_len * sizeof(double), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->peer, W * sizeof *sv->peer, "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->reply_req, (size_t)sv->nreply * W * sizeof(MPI_Request), "server"));
    DT_TRY(dt_alloc_bytes((void **)&sv->grad_req, W * L * sizeof(MPI_Request), "server"));
    for (size_t i = 0; i < (size_t)sv->nreply * W; i++) sv->reply_req[i] = MPI_REQUEST_NULL;
    return DT_OK;
}

/* Worker 0 sends this shard's parameters and optimiser state, the budget
 * of gradients (ps-async), the clock the run starts at (resume) and the
 * optimiser's updates done. */
static dt_status receive_init(server *sv) {
    int w0 = world_rank_of(sv, 0);
    double run[3];
    DT_TRY(dt_mpi_check(MPI_Recv(sv->params, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT, sv->comm->world,
                                 MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)"));
    for (int k = 0; k < dt_optim_nslots(sv->optim); k++)
        DT_TRY(dt_mpi_check(MPI_Recv(sv->state + (size_t)k * sv->n, (int)sv->n, MPI_FLOAT, w0, PS_TAG_INIT,
                                     sv->comm->world, MPI_STATUS_IGNORE),
                            "server initialisation (MPI_Recv)"));
    DT_TRY(dt_mpi_check(MPI_Recv(run, 3, MPI_DOUBLE, w0, PS_TAG_INIT, sv->comm->world, MPI_STATUS_IGNORE),
                        "server initialisation (MPI_Recv)"));
    sv->budget = (long)run[0];
    sv->t_offset = (long)run[2] - (long)run[1];
    sv->first_clock = sv->committed = sv->version = (long)run[1];
    for (int w = 0; w < sv->W; w++) {
        sv->peer[w].wclock = -1;
        sv->peer[w].arrived = sv->peer[w].v_read = sv->committed;
    }
    return DT_OK;
}

static dt_status setup(server *sv) {
    DT_TRY(dt_net_create(&sv->net, sv->spec, 1, 1));
    sv->W = sv->comm->nworkers / sv->cfg->group_size;
    sv->turn.w = -1;
    sv->policy = policies[dt_mode_info_of(sv->cfg->mode)->ps];
    sv->nslots = sv->policy->slots(sv->cfg);
    DT_TRY(dt_comm_plan_create(&sv->plan, sv->net, sv->cfg->mode, sv->cfg->sfb, sv->W, sv->cfg->batch,
                               &sv->cfg->codec));
    DT_TRY(dt_optim_create(&sv->optim, &sv->spec->optim, sv->net, sv->plan.ps_offset));
    ps_shard(sv->optim, sv->plan.ps_n, sv->comm->nservers, sv->comm->rank, &sv->lo, &sv->hi);
    sv->n = sv->hi - sv->lo;
    DT_TRY(alloc_buffers(sv));
    DT_TRY(receive_init(sv));
    return sv->policy->setup(sv, &sv->traits);
}

static void teardown(server *sv) {
    if (sv->policy) sv->policy->free(sv); /* first: it may have threads reading the shard */
    pthread_mutex_destroy(&sv->mu);
    dt_net_free(sv->net);
    dt_comm_plan_free(&sv->plan);
    dt_optim_free(sv->optim);
    void *bufs[] = {sv->params, sv->state, sv->recv, sv->reply, sv->lr, sv->hdr, sv->peer, sv->reply_req,
                    sv->grad_req, sv->seg_lo, sv->seg_hi, sv->wire_recv, sv->wire_reply};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
}

/* This thread's nice value raised to `nice` (never lowered: that needs
 * privileges) before the server starts threads, which inherit it; the
 * value it then runs at in *now. On Linux a nice value is a thread's. */
static dt_status lower_priority(int rank, int nice, int *now) {
    errno = 0;
    int was = getpriority(PRIO_PROCESS, 0);
    if (was == -1 && errno != 0)
        return dt_fail(DT_ERR_INTERNAL, "server rank %d: getpriority: %s", rank, strerror(errno));
    *now = was;
    if (nice <= was) return DT_OK;
    if (setpriority(PRIO_PROCESS, 0, nice) != 0)
        return dt_fail(DT_ERR_INTERNAL, "server rank %d: --server-nice %d (setpriority): %s", rank, nice,
                       strerror(errno));
    *now = nice;
    return DT_OK;
}

dt_status dt_server_run(const dt_comm *c, const dt_dist_cfg *cfg, const dt_model_spec *spec) {
    server sv;
    memset(&sv, 0, sizeof sv);
    pthread_mutex_init(&sv.mu, NULL);
    sv.comm = c;
    sv.cfg = cfg;
    sv.spec = spec;
    double t0 = dt_now();
    int nice = 0;
    dt_status s = lower_priority(c->rank, cfg->server_nice, &nice);
    if (s == DT_OK) s = setup(&sv);
    if (s == DT_OK) s = serve(&sv);
    if (s == DT_OK) {
        /* CPU time against wall time: how much of a core the server took. */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double st[PS_STATS_LEN] = {(double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                                       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec,
                                   dt_now() - t0, (double)sv.version, (double)sv.max_gap,
                                   (double)sv.applied, (double)nice};
        s = dt_mpi_check(MPI_Send(st, PS_STATS_LEN, MPI_DOUBLE, world_rank_of(&sv, 0), PS_TAG_STATS, c->world),
                         "server statistics (MPI_Send)");
    }
    /* The workers stopped at an agreed step because of it (they say where). */
    if (s == DT_OK && signalled(&sv)) s = dt_fail(DT_ERR_INTERRUPTED, "server rank %d: interrupted", c->rank);
    teardown(&sv);
    return s;
}
