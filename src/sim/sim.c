/* The scaling simulator's model (see sim.h): a worker's step as a pipeline
 * of its compute, its link and the servers' links, from a profile. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/codec.h"
#include "dtrain/mem.h"
#include "dtrain/sim.h"

int dt_sim_models(dt_mode mode) {
    const dt_mode_info *m = dt_mode_info_of(mode);
    return !m->one_rank && (m->ps == DT_PS_NONE || m->ps == DT_PS_CLOCKED || m->ps == DT_PS_IMMEDIATE);
}

double dt_sim_ps_bytes(int m, int n) { return 2.0 * m * n * 4; }

double dt_sim_sfb_bytes(int m, int n, int k, int p) { return 2.0 * k * (p - 1) * ((double)m + n) * 4; }

/* What a server does with a worker's push before its reply: the clock of
 * every worker served (sum, average, update: ps-sync), that gradient alone
 * (an update and a snapshot: ps-async), or a snapshot of the shard as it
 * is (ps-ssp with staleness: the clock is applied once every worker's is
 * in, which the reply need not wait for, and each worker's reply is a
 * snapshot of its own: PASS_CLOCK is that commit's work). */
typedef enum { PASS_SYNC, PASS_CLOCK, PASS_APPLY, PASS_SNAPSHOT } server_pass;

/* One worker's step in flight. Times are seconds from the step's start. */
typedef struct {
    const dt_profile *p;
    const dt_sim_cfg *c;
    size_t nparams;
    double scale;       /* multiplies the profile's compute times (shared cores) */
    double straggler;   /* multiplies forward and backward too: a synchronous step waits
                           for the slowest worker (the profile's straggler), 1 otherwise */
    double bw, lat;     /* the link's bandwidth and latency (cfg's, or slowed on shared cores) */
    double *ready;      /* (nlayers) when layer i's gradients can be sent */
    double bwd_end;     /* end of backward: the compute cores are free from here */
    double compute;     /* the worker's compute time so far */
    double link;        /* when the worker's link is next free */
    double link_busy;
    double bytes_sent;
    /* Shared cores with none to spare for a worker's communication thread:
     * a transfer (its sums, coding, top-k selection, the polling that moves
     * it) shares the cores with the compute while the compute runs, every
     * thread moving at 1 / share of its speed (link_send). `stolen`: the
     * compute time lost so far, by which backward and every later gradient
     * are late. share 1: a core of its own. */
    double share;
    double stolen;
    /* Shared cores with --kernel-rate: seconds of a core the kernel's
     * network stack spends per byte a worker sends or receives (0: not
     * priced). Done while the compute runs, it is taken from the compute as
     * a transfer's polling is. */
    double kernel_s_per_byte;
    /* Shared cores with --busy-bandwidth: the share of its speed a transfer
     * keeps while the workers compute (busy bandwidth / bandwidth, at most
     * 1; 0: not measured, the transfer takes turns with the compute). */
    double busy_rate;
    /* The parameter servers' pass (run_ps): how many workers they serve at
     * once (P; 1 for an asynchronous worker's own cycle), what a server does
     * before a reply, and whether the worker then adds its own gradient to
     * what it read (ps-ssp's read-my-writes). */
    double peers;
    server_pass pass;
    int adds_own;
} sim_step;

/* When a transfer ready at `ready` (of the compute as profiled) starts on
 * the worker's link: after the compute lost so far and every transfer
 * before it. */
static double link_start(const sim_step *st, double ready) { return fmax(ready + st->stolen, st->link); }

/* A part of a transfer that takes turns with the compute on shared cores
 * with no core to spare, from t: dur seconds at full speed, copies of
 * `copied` bytes by the kernel. The threads that do it (the communication
 * thread's sums, coding and polling, the pump, the kernel's copies in
 * their calls) and the compute each move at 1 / share of their speed
 * while both run, and the compute loses the difference. Measured between
 * two emulated hosts: the convolution beside a top-k selection 54 % slower;
 * the ring 0.95 Gbit/s on idle cores, 0.51 with both cores computing. The
 * kernel's copies are within that time, or longer on a link they bound
 * (unshaped): then the compute loses them, but the transfer, measured with
 * them, is not longer. Returns its end. */
static double take_turns(sim_step *st, double t, double dur, double copied) {
    double left = st->bwd_end + st->stolen - t; /* compute still to run, at full speed */
    if (st->share <= 1 || left <= 0) return t + dur;
    double during = fmin(dur, left);
    st->stolen += fmin(fmax(during, copied * st->kernel_s_per_byte), left) * (st->share - 1);
    return t + during * st->share + (dur - during);
}

/* The wire part of a transfer, from t, with the rate measured on busy
 * cores (--busy-bandwidth): while the workers compute it moves at r =
 * busy_rate of its speed (the communication thread polls with sleeps: a
 * slow wire keeps its rate, a fast one does not), and the compute loses
 * only the kernel's copies of what moved meanwhile, c per second moved.
 * Those copies make backward end later, so what moves beside it, m, solves
 * m = r (left + c m); the rest moves at full speed after. Returns its end. */
static double beside_compute(sim_step *st, double t, double dur, double copied) {
    double left = st->bwd_end + st->stolen - t, r = st->busy_rate;
    if (st->share <= 1 || left <= 0 || dur <= 0) return t + dur;
    double c = copied * st->kernel_s_per_byte * (st->share - 1) / dur;
    int all = c * r >= 1 || dur <= r * left / (1 - c * r);
    double moved = all ? dur : r * left / (1 - c * r);
    st->stolen += c * moved;
    return all ? t + dur / r : t + left + c * moved + (dur - moved);
}

/* The servers' link carrying every worker's part of a segment, in or out,
 * from t: dur seconds at full speed. With the busy bandwidth measured it
 * moves at that rate while the workers still compute, as a worker's link
 * does (the server's copies are priced in run_ps). Measured between
 * emulated hosts: cnn's two 13 MB pushes into one server took 42 ms
 * beside the workers' backward, at 5 Gbit/s on a 13 Gbit/s link. */
static double server_link(sim_step *st, double t, double dur) {
    return st->busy_rate > 0 ? beside_compute(st, t, dur, 0) : t + dur;
}

/* A transfer on the worker's link, ready at `ready` (of the compute as
 * profiled), after every transfer before it: cpu seconds of its own work
 * (sums, coding, top-k's selection), then wire seconds on the link, at
 * full speed, while the kernel copies `copied` bytes (sent and received by
 * this worker). Returns its end. */
static double link_send(sim_step *st, double ready, double cpu, double wire, double copied) {
    double t = take_turns(st, link_start(st, ready), cpu, 0);
    double end = st->busy_rate > 0 ? beside_compute(st, t, wire, copied) : take_turns(st, t, wire, copied);
    st->link = end;
    st->link_busy += cpu + wire;
    return end;
}

/* Once every transfer of the backward pass is placed: backward ends as
 * late as the communication thread made it. */
static void settle_stolen(sim_step *st) {
    st->bwd_end += st->stolen;
    st->compute += st->stolen;
    st->stolen = 0;
}

/* Forward, loss and backward on the compute cores: each layer's ready time. */
static void compute_pass(sim_step *st) {
    const dt_profile *p = st->p;
    double scale = st->scale * st->straggler, t = 0;
    int L = p->nlayers;
    for (int i = 0; i < L; i++) t += p->layers[i].fwd_s * scale;
    t += p->layers[L - 1].bwd_s * scale; /* the loss */
    st->ready[L - 1] = t;
    for (int i = L - 2; i >= 0; i--) {
        t += p->layers[i].bwd_s * scale;
        st->ready[i] = t;
    }
    st->bwd_end = t;
    st->compute = t;
    if (!st->c->overlap)
        for (int i = 0; i < L; i++) st->ready[i] = t;
}

/* Whether layer l can go by sufficient factors: a fully connected layer. */
static int is_fc(const dt_sim_layer *l) { return l->fc_out > 0 && l->fc_in > 0 && l->params > 0; }

/* Fully connected layer l's sufficient factors, K (M + N) floats, to and
 * from every other worker (an allgather), ready at `ready`: when all are in. */
static double send_factors(sim_step *st, const dt_sim_layer *l, double ready) {
    double P = st->c->nodes, factors = (double)st->p->batch * (l->fc_out + l->fc_in) * sizeof(float);
    st->bytes_sent += (P - 1) * factors;
    return link_send(st, ready, 0, (P - 1) * (factors / st->bw + st->lat), 2 * (P - 1) * factors);
}

/* Parameter servers with factors (run_ps): a worker's link carries the
 * factors to the other workers beside its pushes to the servers, two flows
 * at once (ps_worker.c starts a layer's exchange as soon as its backward
 * is done, in segments: sfb.h). The factors are placed first, on a lane of
 * their own as if alone (send_factors, with every cost of a transfer); the
 * pushes go on the link as ever, not waiting for them; then each factor
 * transfer ends later by the time the pushes held the link within its
 * window (the pushes, small next to the factors where factors pay, are
 * served first: their replies are what the servers wait on). Measured
 * between emulated hosts at 100 Mbit/s: cnn's ps-sync --sacp 147-150 ms a
 * step; this model says 135, the pushes queued behind the factors 181. */
typedef struct {
    double start, end; /* on their lane, alone; end: delayed by the pushes (settle_factors) */
    double rebuild;    /* the rebuild and the layer's own update after them, on the compute cores */
} sim_factors;

typedef struct {
    sim_factors *factors; /* (L) in the order sent */
    int nfactors;
    double lane;          /* when the factors' lane is next free */
    double *pushes;       /* (2 L S) start and end of every push on the link, in order */
    int npushes;
} sim_beside;

/* Seconds of [a, e) in which a push held the link. */
static double push_overlap(const sim_beside *b, double a, double e) {
    double held = 0;
    for (int k = 0; k < b->npushes; k++)
        held += fmax(0, fmin(e, b->pushes[2 * k + 1]) - fmax(a, b->pushes[2 * k]));
    return held;
}

/* Layer l's factors ready at `ready`, on their lane. */
static void send_factors_beside(sim_step *st, sim_beside *b, const dt_sim_layer *l, double ready, double rebuild) {
    double keep = st->link;
    sim_factors *f = &b->factors[b->nfactors++];
    st->link = b->lane;
    f->start = link_start(st, ready);
    f->end = b->lane = send_factors(st, l, ready);
    f->rebuild = rebuild;
    st->link = keep;
}

/* Each factor transfer delayed by the pushes within its window, and every
 * later one by as much (one lane); returns when the last rebuild ends
 * counting from the factors alone (-inf: none), the rebuilds in turn. */
static double settle_factors(const sim_beside *b) {
    double delay = 0, chain = -INFINITY;
    for (int j = 0; j < b->nfactors; j++) {
        const sim_factors *f = &b->factors[j];
        double s = f->start + delay, e = f->end + delay;
        for (int k = 0; k <= b->npushes; k++) { /* grows to a fixed point: each pass adds a push or stops */
            double next = f->end + delay + push_overlap(b, s, e);
            if (next <= e) break;
            e = next;
        }
        delay = e - f->end;
        chain = fmax(chain, e) + f->rebuild;
    }
    return chain;
}

/* Rebuilding layer l's (M, N) gradient from the other workers' factors on
 * the compute cores: (P - 1) 2 K M N flops at the profile's GEMM rate. */
static double rebuild_s(const sim_step *st, const dt_sim_layer *l) {
    return (st->c->nodes - 1) * 2.0 * st->p->batch * l->fc_out * l->fc_in / (st->p->gemm_gflops * 1e9) * st->scale;
}

/* Ring allreduce of dtrain's fusion buckets, then average and SGD; with
 * factors, the SFB layers' allgathers among the buckets and their rebuilds
 * before the update (allreduce_buckets.c's end_step). */
static dt_status run_allreduce(sim_step *st, int *fc_sfb) {
    const dt_profile *p = st->p;
    const dt_sim_cfg *c = st->c;
    size_t *off, bucket_floats = (size_t)(c->fusion_mb * 1048576.0 / sizeof(float));
    int max = p->nlayers + 1 + (bucket_floats ? (int)(st->nparams / bucket_floats) : 0);
    dt_bucket *b;
    unsigned char sfb[DT_MAX_LAYERS] = {0};
    DT_TRY(dt_alloc_bytes((void **)&off, sizeof *off * (size_t)(p->nlayers + 1), "simulator"));
    dt_status s = dt_alloc_bytes((void **)&b, sizeof *b * (size_t)max, "simulator buckets");
    if (s != DT_OK) {
        dt_free(off);
        return s;
    }
    double P = c->nodes;
    for (int i = 0; i < p->nlayers; i++) {
        const dt_sim_layer *l = &p->layers[i];
        off[i + 1] = off[i] + l->params;
        sfb[i] = is_fc(l) && P > 1 &&
                 dt_sfb_chosen(c->factors, dt_sfb_bytes(l->fc_out, l->fc_in, p->batch, (int)P),
                               dt_dense_bytes(DT_MODE_ALLREDUCE, l->params, (int)P, &c->codec));
    }
    int nb = dt_bucket_plan_layers(b, max, off, p->nlayers, sfb, bucket_floats);
    DT_ASSERT(nb >= 0); /* max above is an upper bound on the buckets */
    /* The work on a bucket besides its transfer, per float as a share of
     * all parameters: the ring's reduce-scatter adds (P-1)/P of a gradient
     * sum; encoding and decoding 16-bit words one more; top-k instead its
     * measured selection (a radix select's histogram passes cost several
     * sums each; the P k adds of the gathered pairs are left out). */
    int topk = c->codec.kind == DT_GC_TOPK;
    double work = topk ? p->topk_s : ((P - 1) / P + (c->codec.kind != DT_GC_NONE)) * p->sum_s;
    double rebuilds = 0;
    for (int k = 0; k < nb; k++) {
        if (b[k].sfb) {
            const dt_sim_layer *l = &p->layers[b[k].ready_layer];
            send_factors(st, l, st->ready[b[k].ready_layer]);
            rebuilds += rebuild_s(st, l);
            (*fc_sfb)++;
            continue;
        }
        size_t n = b[k].hi - b[k].lo;
        double moved = dt_allreduce_bytes_each_way(&c->codec, n, (int)P);
        double reduce = work * (double)n / (double)st->nparams * st->scale;
        double messages = topk ? P - 1 : 2 * (P - 1); /* an allgather's rounds, or the ring's */
        link_send(st, st->ready[b[k].ready_layer], reduce, moved / st->bw + messages * st->lat, 2 * moved);
        st->bytes_sent += moved;
    }
    settle_stolen(st);
    double update = rebuilds + (p->sum_s + p->update_s) * st->scale;
    st->compute += update;
    st->link = fmax(st->link, st->bwd_end) + update;
    dt_free(b);
    dt_free(off);
    return DT_OK;
}

/* A segment (ps_server.c): how many of a layer's n parameters, from
 * offset off among those the servers hold, fall in shard [lo, hi). */
static size_t segment_params(size_t off, size_t n, size_t lo, size_t hi) {
    size_t a = off > lo ? off : lo, e = off + n < hi ? off + n : hi;
    return a < e ? e - a : 0;
}

/* Seconds a server's cores spend on `served` workers' pushes for a shard
 * that is `share` of the parameters, as `pass`: ps-sync's clock is summing
 * and averaging (served + 1 passes at the sum rate; in 16-bit words the sum
 * decodes as it adds) and one update, its reply going straight from the
 * shard (in 16-bit words encoded once for every worker: one pass more);
 * ps-ssp's is that with a reply snapshot per worker and, in 16-bit words,
 * each gradient decoded as it arrives (2 served + 1 passes, served more);
 * applied straight, each gradient is one update and one snapshot (and its
 * decoding); a snapshot alone is one pass each (ps_clocked.c,
 * ps_immediate.c). */
static double server_work(const sim_step *st, server_pass pass, double served, int half, double share) {
    const dt_profile *p = st->p;
    double passes = pass == PASS_SYNC     ? served + 1 + half
                    : pass == PASS_CLOCK  ? 2 * served + 1 + (half ? served : 0)
                    : pass == PASS_APPLY  ? served * (1 + half)
                                          : served;
    double updates = pass == PASS_APPLY ? served : pass == PASS_SNAPSHOT ? 0 : 1;
    return (passes * p->sum_s + updates * p->update_s) * share * st->scale;
}

/* The kernel's CFS weights of nice 0..19 (sched_prio_to_weight): runnable
 * threads on one core share it in proportion to their weights. */
static const double nice_weight[20] = {1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
                                       110,  87,  70,  56,  45,  36,  29,  23,  18,  15};

/* When a server's commit of `work` seconds, from `begin`, ends on shared
 * cores with none to spare: while the workers still compute (scale nice-0
 * compute threads on every core) its thread gets w / (w + 1024 scale) of
 * a core, w its nice value's weight, and a core after. At dtrain's nice 19
 * that is 15 / 1039: a timeline of cnn's ps-sync (bf16, unshaped, between
 * emulated hosts) had the fc1024's pushes in during the conv layers'
 * backward and its commit (6-8 ms) begin once backward was over, while
 * resnet20's commits of 0.1 ms go on beside the compute (docs/CLUSTER.md).
 * *used: the core time it took from the compute meanwhile. */
static double commit_end(const sim_step *st, double begin, double work, double *used) {
    double w = nice_weight[st->c->server_nice], share = w / (w + 1024 * st->scale);
    double during = st->bwd_end + st->stolen - begin, can = during * share;
    *used = 0;
    if (during <= 0) return begin + work;
    *used = fmin(work, can);
    return can >= work ? begin + work / share : begin + during + (work - can);
}

/* How much later than an even share the slowest of the P workers pushing
 * at once into a server's link has y of its bytes in, when the first takes
 * fan_in_share f of the link until its B bytes are in and the others share
 * the rest evenly, then all of it. Seconds; 0 when the share is even.
 * TCP shares a link that unevenly over a push: two resnet20 pushes (1.08
 * MB) into one server between emulated hosts at 100 Mbit/s, the first was
 * in at 0.68-0.77 of the time both took (docs/CLUSTER.md). */
static double fan_in_lag(const sim_step *st, double y, double B) {
    double P = st->peers, f = st->c->fan_in_share, bw = st->bw;
    if (P < 2 || f <= 1 / P || y <= 0) return 0;
    double slow = (1 - f) / (P - 1) * bw; /* each other worker's rate while the first pushes */
    double first_in = B / (f * bw);
    double t = y <= slow * first_in ? y / slow : first_in + (y - slow * first_in) * (P - 1) / bw;
    return fmax(0, t - P * y / bw);
}

/* The servers as a parameter-server step's pushes meet them (run_ps).
 * ps_off[i]: layer i's offset among the `total` parameters the servers
 * hold. Server k's link has every worker's part of the segments so far by
 * in[k], its cores have committed them by done[k], its link has sent them
 * to every worker by out[k]. A worker had queued[k] of its bytes to push
 * when the link last waited for a segment, and has to_push[k] left:
 * queued[k] - to_push[k] are in since. */
typedef struct {
    size_t *ps_off, total;
    double *in, *done, *out, *queued, *to_push;
    /* bf16/fp16: pushes and replies in 16-bit words; a server decodes the
     * gradients and encodes its replies (server_work), a worker encodes its
     * gradient and decodes the parameters: a pass each. */
    int half;
    double word; /* bytes of a parameter on the wire */
    double got;  /* the worker's link, receiving: every reply so far is in */
} sim_servers;

/* The servers' state and the factors' (sim_beside) in one block, every
 * part 8-byte aligned: ps_off (L), srv (5 S), the pushes' intervals
 * (2 L S) and the factors (L); the caller frees *block. */
static dt_status servers_create(const sim_step *st, const unsigned char *sfb, sim_servers *sv, sim_beside *b,
                                void **block) {
    const dt_profile *p = st->p;
    int L = p->nlayers, S = st->c->servers;
    sv->half = dt_gc_is_half(st->c->codec.kind);
    sv->word = sv->half ? 2 : sizeof(float);
    sv->total = 0;
    sv->got = 0;
    DT_TRY(dt_alloc_bytes(block, sizeof(size_t) * (size_t)L + sizeof(double) * (5 + 2 * (size_t)L) * (size_t)S +
                                     sizeof(sim_factors) * (size_t)L, "simulator"));
    sv->ps_off = *block;
    double *srv = (double *)(sv->ps_off + L);
    *b = (sim_beside){(sim_factors *)(srv + (5 + 2 * (size_t)L) * (size_t)S), 0, 0, srv + 5 * S, 0};
    sv->in = srv, sv->done = srv + S, sv->out = srv + 2 * S, sv->queued = srv + 3 * S, sv->to_push = srv + 4 * S;
    for (int i = 0; i < L; i++) {
        sv->ps_off[i] = sv->total;
        if (!sfb[i]) sv->total += p->layers[i].params;
    }
    for (int k = 0; k < S; k++) {
        size_t lo, hi;
        dt_shard_range(sv->total, S, k, &lo, &hi);
        sv->to_push[k] = (double)(hi - lo) * sv->word;
    }
    return DT_OK;
}

/* The worker's segment of seg parameters to server k, ready at `ready`:
 * the push, the server's commit once every worker's is in (summing,
 * averaging and an update, as server_work prices a shard) and its reply,
 * sent at once while later segments still come in: the links' two
 * directions run side by side. */
static void push_segment(sim_step *st, sim_servers *sv, sim_beside *b, int k, size_t seg, double ready) {
    double served = st->peers;
    double *in = sv->in, *done = sv->done, *out = sv->out, *queued = sv->queued, *to_push = sv->to_push;
    double bytes = (double)seg * sv->word;
    double start = link_start(st, ready);
    double sent = link_send(st, ready, 0, bytes / st->bw + st->lat, bytes);
    b->pushes[2 * b->npushes] = start;
    b->pushes[2 * b->npushes++ + 1] = sent;
    /* The server's link takes the same part from every worker it
     * serves; a clock's segment is in once the slowest's part is. */
    if (start >= in[k]) queued[k] = to_push[k]; /* the link waited: the pushes meet it anew */
    to_push[k] -= bytes;
    in[k] = fmax(sent, server_link(st, fmax(start, in[k]), served * bytes / st->bw) + st->lat);
    double lag = st->pass == PASS_SYNC ? fan_in_lag(st, queued[k] - to_push[k], queued[k]) : 0;
    double part = (double)seg / (double)st->nparams;
    double work = server_work(st, st->pass, served, sv->half, part);
    /* With no core to spare (shared cores), the server's rank runs
     * on the workers' cores: its commit at its nice value's share
     * while they compute (commit_end), its copies of the segment in
     * and out (every worker's) and the core time its commit takes
     * while they compute are taken from the C cores, 1/C from each
     * compute thread. */
    double begin = fmax(in[k] + lag, done[k]), used = 0;
    done[k] = st->share > 1 ? commit_end(st, begin, work, &used) : begin + work;
    out[k] = server_link(st, fmax(done[k], out[k]), served * bytes / st->bw) + st->lat;
    double left = st->bwd_end + st->stolen - in[k];
    if (st->share > 1 && left > 0)
        st->stolen += fmin(2 * served * bytes * st->kernel_s_per_byte + used, left) / st->c->shared_cores;
    sv->got = fmax(out[k], sv->got + bytes / st->bw + st->lat);
    st->bytes_sent += bytes;
    st->link_busy += bytes / st->bw;
}

/* Layer i's part in each shard is a segment (ps_server.c). */
static void push_layer(sim_step *st, sim_servers *sv, sim_beside *b, int i) {
    int S = st->c->servers;
    for (int k = 0; k < S; k++) {
        size_t lo, hi;
        dt_shard_range(sv->total, S, k, &lo, &hi);
        size_t seg = segment_params(sv->ps_off[i], st->p->layers[i].params, lo, hi);
        if (seg > 0) push_segment(st, sv, b, k, seg, st->ready[i]);
    }
}

/* The step's end once every reply is in and the compute cores are free
 * (at cpu). bf16/fp16: the worker decodes the parameters; ps-ssp: then
 * adds its own gradient to what it read. */
static void receive_params(sim_step *st, const sim_servers *sv, double cpu) {
    const dt_profile *p = st->p;
    double scale = st->scale;
    if (sv->total > 0) {
        double coding = sv->half ? 2 * p->sum_s * (double)sv->total / (double)st->nparams * scale : 0;
        if (st->adds_own) coding += p->sum_s * (double)sv->total / (double)st->nparams * scale;
        st->link = fmax(st->link, sv->got) + coding;
        st->compute += coding;
    }
    st->link = fmax(st->link, cpu);
}

/* Parameter servers for every layer but those marked in sfb[] (fully
 * connected), which broadcast sufficient factors. */
static dt_status run_ps(sim_step *st, const unsigned char *sfb, int *fc_sfb) {
    const dt_profile *p = st->p;
    sim_servers sv;
    sim_beside b;
    void *block;
    DT_TRY(servers_create(st, sfb, &sv, &b, &block));
    *fc_sfb = 0;
    /* Under shared cores pushes and factors share the compute's cores as
     * every transfer does (link_send: the pump moves them). The SFB layers'
     * rebuilds run in turn on the compute cores once backward is over and
     * their factors are in (settle_factors), rebuilds their sum. */
    double rebuilds = 0;
    for (int i = p->nlayers - 1; i >= 0; i--) {
        const dt_sim_layer *l = &p->layers[i];
        if (l->params == 0) continue;
        if (!sfb[i]) {
            push_layer(st, &sv, &b, i);
            continue;
        }
        /* The factors beside the pushes, then the rebuild and the
         * layer's own update on the compute cores once they are free. */
        double rebuild = rebuild_s(st, l) + p->update_s * (double)l->params / (double)st->nparams * st->scale;
        send_factors_beside(st, &b, l, st->ready[i], rebuild);
        rebuilds += rebuild;
        st->compute += rebuild;
        (*fc_sfb)++;
    }
    settle_stolen(st);
    receive_params(st, &sv, fmax(st->bwd_end + rebuilds, settle_factors(&b))); /* the compute cores are free */
    dt_free(block);
    return DT_OK;
}

/* The parameter-server model with assignment sfb[], from `base` (the step
 * after the compute pass) into *out. */
static dt_status run_plan(const sim_step *base, const unsigned char *sfb, sim_step *out, int *fc_sfb) {
    *out = *base;
    return run_ps(out, sfb, fc_sfb);
}

/* sacp: each fully connected layer goes through the servers or by factors,
 * by the simulated step (the same run_ps that prices ps-sync and sfb, so the
 * servers' links, their work and the rebuild all count). With F fully
 * connected layers, F <= SACP_EXHAUSTIVE: every one of the 2^F assignments,
 * the fastest kept (ties: the first, in the order all through the servers,
 * then by binary count). With more: a descent from the faster of all through
 * the servers and all by factors, moving one layer at a time (last to first)
 * while the step gets strictly shorter. Both uniform assignments, which are
 * ps-sync and sfb, are candidates either way, so sacp's step is never longer
 * than the shorter of theirs. sfb[] (L, zeroed) returns the choice. */
#define SACP_EXHAUSTIVE 8

static dt_status run_sacp(sim_step *st, unsigned char *sfb, int *fc_sfb) {
    const dt_profile *p = st->p;
    int idx[DT_MAX_LAYERS], F = 0;
    for (int i = 0; i < p->nlayers; i++)
        if (is_fc(&p->layers[i])) idx[F++] = i;
    sim_step best = *st, t = *st;
    int best_fc = 0, fc;
    if (F <= SACP_EXHAUSTIVE) {
        unsigned best_bits = 0;
        for (unsigned bits = 0; bits < 1u << F; bits++) {
            for (int j = 0; j < F; j++) sfb[idx[j]] = (unsigned char)(bits >> j & 1);
            DT_TRY(run_plan(st, sfb, &t, &fc));
            if (bits == 0 || t.link < best.link) best = t, best_fc = fc, best_bits = bits;
        }
        for (int j = 0; j < F; j++) sfb[idx[j]] = (unsigned char)(best_bits >> j & 1);
    } else {
        DT_TRY(run_plan(st, sfb, &best, &best_fc)); /* all through the servers */
        for (int j = 0; j < F; j++) sfb[idx[j]] = 1;
        DT_TRY(run_plan(st, sfb, &t, &fc));
        if (t.link < best.link)
            best = t, best_fc = fc;
        else
            for (int j = 0; j < F; j++) sfb[idx[j]] = 0;
        for (int changed = 1; changed;) { /* each move shortens the step: it ends */
            changed = 0;
            for (int j = F - 1; j >= 0; j--) {
                sfb[idx[j]] ^= 1;
                DT_TRY(run_plan(st, sfb, &t, &fc));
                if (t.link < best.link)
                    best = t, best_fc = fc, changed = 1;
                else
                    sfb[idx[j]] ^= 1;
            }
        }
    }
    *st = best;
    *fc_sfb = best_fc;
    return DT_OK;
}

/* ps-sync and its factors: the assignment of the fully connected layers. */
static dt_status run_servers(sim_step *st, dt_sim_result *r) {
    const dt_profile *p = st->p;
    unsigned char *sfb;
    DT_TRY(dt_alloc_bytes((void **)&sfb, (size_t)p->nlayers, "simulator"));
    dt_status s;
    if (st->c->factors == DT_SFB_AUTO) {
        s = run_sacp(st, sfb, &r->fc_sfb);
    } else {
        for (int i = 0; i < p->nlayers; i++) sfb[i] = st->c->factors == DT_SFB_ALL && is_fc(&p->layers[i]);
        s = run_ps(st, sfb, &r->fc_sfb);
    }
    dt_free(sfb);
    return s;
}

/* Messages of one push to (or reply from) the server of shard [lo, hi):
 * one per layer with parameters in it. */
static int shard_messages(const dt_profile *p, size_t lo, size_t hi) {
    int n = 0;
    for (size_t i = 0, off = 0; i < (size_t)p->nlayers; off += p->layers[i++].params)
        n += segment_params(off, p->layers[i].params, lo, hi) > 0;
    return n;
}

/* The shared cores' own bound on an out-of-step cycle (--shared-cores C):
 * no worker waits for another, so the cores never idle and a cycle is at
 * least all the work the P workers and the servers put on them, over C:
 * every worker's compute (`compute`: forward and backward, which its T
 * threads keep busy; both it and the servers' work `served` were
 * stretched by the scale when P T > C, which is undone), and with
 * --kernel-rate R the kernel's copies of the bytes: each worker's push and
 * reply (of `word` bytes a parameter) is sent by one rank and received by
 * another, so the cycle moves 4 P parameters' bytes through the ranks'
 * ends, each 1/R of a core (what mpi_link's *_cpu measures). On a fast
 * shaped link that binds:
 * cnn's ps-async at 1 Gbit/s between emulated hosts on 2 cores (docs/
 * CLUSTER.md) has its 26 MB a cycle cost the cores 565 ms of 655. The
 * worker's coding and ps-ssp's add of its own gradient are left out: a
 * pass each over the parameters, a few ms next to those. */
static double cores_per_cycle(const sim_step *st, double compute, double served, double word) {
    const dt_sim_cfg *c = st->c;
    if (!c->shared_cores) return 0;
    double P = c->nodes, threads = P * st->p->threads;
    double copies = 4 * P * (double)st->nparams * word * st->kernel_s_per_byte;
    return ((threads * compute + served) / st->scale + copies) / c->shared_cores;
}

/* Whether most of a push's bytes go in segments that take turns on a
 * server's link (DT_PS_TURN_BYTES or more: a layer's part in a shard, of
 * `word` bytes a parameter). */
static int pushes_take_turns(const sim_step *st, double word) {
    const dt_profile *p = st->p;
    double turns = 0;
    for (size_t i = 0, off = 0; i < (size_t)p->nlayers; off += p->layers[i++].params)
        for (int k = 0; k < st->c->servers; k++) {
            size_t lo, hi;
            dt_shard_range(st->nparams, st->c->servers, k, &lo, &hi);
            double bytes = (double)segment_params(off, p->layers[i].params, lo, hi) * word;
            if (bytes >= (double)DT_PS_TURN_BYTES) turns += bytes;
        }
    return 2 * turns >= (double)st->nparams * word;
}

/* ps-async and ps-ssp (staleness >= 1): P identical workers, none waiting
 * for another. Where most of their bytes go in large segments, their
 * transfers on a server's link fall into turns: a server takes those in
 * one at a time (ps_server.c's admit_turn), so the first ends first, has
 * its reply and computes first, and stays ahead (shared fairly instead,
 * workers keep the phase they start in: cnn at 100 Mbit/s between
 * emulated hosts took 3.7 s a step where turns take 2.2, docs/CLUSTER.md).
 * Small segments share the link fairly, and the workers keep the phase
 * they start in, together: a server serves all P at once, as in ps-sync
 * but without the wait for the clock (resnet20 at 100 Mbit/s, whose
 * largest segment is 147 KB: 225-237 ms a step, where turns said 184 and
 * serving all at once says 250). With turns, a worker's cycle
 * is against servers that serve it alone; the server replies once that
 * worker's gradient is in (ps-async: applied straight; ps-ssp: from a
 * snapshot, as the clock need not wait while the worker is within s of the
 * slowest, which identical workers always are). When the turns do not fit
 * in that cycle, what the servers need per cycle for all P workers sets
 * it: P shards' pushes in and P replies out on each server's link, and
 * their work on P gradients (ps-async) or one clock (ps-ssp). */
static dt_status run_async(sim_step *st, dt_sim_result *r) {
    const dt_sim_cfg *c = st->c;
    const dt_profile *p = st->p;
    double P = c->nodes;
    int half = dt_gc_is_half(c->codec.kind), async = dt_mode_info_of(c->mode)->ps == DT_PS_IMMEDIATE;
    double word = half ? 2 : sizeof(float);
    st->peers = pushes_take_turns(st, word) ? 1 : P;
    st->pass = async ? PASS_APPLY : PASS_SNAPSHOT;
    st->adds_own = !async;
    double bound = 0, served = 0; /* served: the servers' work per cycle, on the shared cores */
    for (int k = 0; k < c->servers; k++) {
        size_t lo, hi;
        dt_shard_range(st->nparams, c->servers, k, &lo, &hi);
        if (hi == lo) continue;
        double share = (double)(hi - lo) / (double)st->nparams;
        double wire = P * ((double)(hi - lo) * word / st->bw + shard_messages(p, lo, hi) * st->lat);
        double work = server_work(st, async ? PASS_APPLY : PASS_CLOCK, P, half, share);
        bound = fmax(bound, fmax(wire, work));
        served += work;
    }
    double compute = st->compute; /* the worker's forward and backward, before any transfer */
    DT_TRY(run_servers(st, r));
    st->link = fmax(st->link, fmax(bound, cores_per_cycle(st, compute, served, word)));
    return DT_OK;
}

/* DT_ERR_USAGE for a configuration or profile the model cannot price. */
static dt_status check_cfg(const dt_profile *p, const dt_sim_cfg *c) {
    if (!dt_sim_models(c->mode) || (c->factors && !(dt_mode_info_of(c->mode)->flags & DT_MF_FACTORS)))
        return dt_fail(DT_ERR_USAGE, "simulate: mode %s%s is not modelled", dt_mode_name(c->mode),
                       c->factors ? " with factors" : "");
    if (c->nodes < 1 || c->servers < 1)
        return dt_fail(DT_ERR_USAGE, "simulate: nodes (%d) and servers (%d) must be at least 1", c->nodes,
                       c->servers);
    if (c->shared_cores < 0 || c->staleness < 0)
        return dt_fail(DT_ERR_USAGE, "simulate: shared cores (%d) and staleness (%d) must not be negative",
                       c->shared_cores, c->staleness);
    if (!(c->kernel_rate >= 0) || !isfinite(c->kernel_rate) || !(c->busy_bandwidth >= 0) ||
        !isfinite(c->busy_bandwidth))
        return dt_fail(DT_ERR_USAGE, "simulate: the kernel rate and the busy bandwidth must be non-negative");
    if (!(c->fan_in_share >= 0 && c->fan_in_share <= 1))
        return dt_fail(DT_ERR_USAGE, "simulate: the fan-in share must be within [0, 1]");
    if (c->server_nice < 0 || c->server_nice > 19)
        return dt_fail(DT_ERR_USAGE, "simulate: the servers' nice value (%d) must be within [0, 19]",
                       c->server_nice);
    if (!(c->bandwidth > 0) || !(c->latency >= 0) || !(c->fusion_mb >= 0) || !isfinite(c->bandwidth) ||
        !isfinite(c->latency))
        return dt_fail(DT_ERR_USAGE, "simulate: bandwidth must be positive, latency and fusion size "
                                     "non-negative");
    if (p->nlayers < 1 || p->batch < 1 || p->threads < 1)
        return dt_fail(DT_ERR_USAGE, "simulate: empty profile");
    if (c->codec.kind == DT_GC_TOPK && !(p->topk_s > 0))
        return dt_fail(DT_ERR_USAGE, "simulate: the profile has no top-k rate (version 1): measure it again "
                                     "(dtrain bench --profile-out) to price --grad-compression topk");
    for (int i = 0; i < p->nlayers; i++)
        if (p->layers[i].fc_out > 0 && p->layers[i].fc_in > 0 && !(p->gemm_gflops > 0))
            return dt_fail(DT_ERR_USAGE,
                           "simulate: the profile has fully connected layers but no GEMM rate");
    return DT_OK;
}

dt_status dt_sim_run(dt_sim_result *r, const dt_profile *p, const dt_sim_cfg *c) {
    memset(r, 0, sizeof *r);
    DT_TRY(check_cfg(p, c));
    sim_step st = {.p = p, .c = c, .scale = 1, .straggler = 1, .bw = c->bandwidth, .lat = c->latency,
                   .peers = c->nodes, .pass = PASS_SYNC};
    double want = (double)c->nodes * p->threads;
    if (c->shared_cores && want > c->shared_cores) {
        /* One machine's cores, all computing: each worker gets its share,
         * for its compute and for its transfers (memory copies by the same
         * cores, and polling threads that must be scheduled to progress);
         * the servers' work runs on the same cores. */
        st.scale = want / c->shared_cores;
        st.bw = c->bandwidth / st.scale;
        st.lat = c->latency * st.scale;
    }
    /* Each worker's communication thread is one more runnable thread: with
     * no core to spare for it, its work shares the compute's (link_send). */
    double with_comm = (double)c->nodes * (p->threads + 1);
    st.share = c->shared_cores && c->nodes > 1 && with_comm > c->shared_cores
                   ? with_comm / fmax(want, c->shared_cores)
                   : 1;
    if (c->kernel_rate > 0) st.kernel_s_per_byte = 1 / c->kernel_rate;
    if (c->busy_bandwidth > 0) st.busy_rate = fmin(1, c->busy_bandwidth / st.bw);
    /* Workers out of step (no one waits for the slowest) or in step. */
    const dt_mode_info *mode = dt_mode_info_of(c->mode);
    int out_of_step = mode->ps == DT_PS_IMMEDIATE || ((mode->flags & DT_MF_STALENESS) && c->staleness > 0);
    if (c->nodes > 1 && !out_of_step && p->straggler > 1) st.straggler = p->straggler;
    for (int i = 0; i < p->nlayers; i++) st.nparams += p->layers[i].params;
    DT_TRY(dt_alloc_bytes((void **)&st.ready, sizeof(double) * (size_t)p->nlayers, "simulator"));
    compute_pass(&st);
    dt_status s = DT_OK;
    if (c->nodes == 1) {
        /* One node is the serial run: its own update, nothing to send. */
        st.compute += p->update_s * st.scale;
        st.link = st.compute;
    } else if (mode->ps == DT_PS_NONE) {
        s = run_allreduce(&st, &r->fc_sfb);
    } else if (out_of_step) {
        s = run_async(&st, r);
    } else {
        s = run_servers(&st, r);
    }
    dt_free(st.ready);
    if (s != DT_OK) return s;
    r->step_s = st.link;
    r->images_per_sec = c->nodes * p->batch / r->step_s;
    r->speedup = r->images_per_sec / (p->batch / dt_profile_step_s(p));
    r->compute_s = st.compute;
    r->comm_share = fmax(0, r->step_s - st.compute) / r->step_s;
    r->compute_scale = st.scale;
    r->straggler = st.straggler;
    r->link_busy_s = st.link_busy;
    r->bytes_sent = st.bytes_sent;
    return DT_OK;
}
