/* Parameter servers, the clocked policy (ps-sync; ps-ssp --staleness s,
 * ps-sync being s = 0): a clock is committed segment by segment as soon as
 * every worker has delivered that segment, clocks in order; a worker is
 * sent each segment once it holds every clock up to (its clock - s). */
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"
#include "plan/codec.h"
#include "ps_server.h"

/* Floats of a segment a commit takes at a time: a block's average (64
 * KiB) is still in cache when the update reads it, and its parameters
 * when ps-sync encodes them. Taken whole, a segment's sum went through
 * memory three times before the update: cnn's 3.2 M-parameter fc layer
 * took 6.7 ms to commit, then 2.2 ms per worker to encode, after 1.5 ms
 * per worker to decode as each push came in (bf16, two workers, between
 * emulated hosts); by blocks, decoding and encoding once included, 6-8. */
#define COMMIT_BLOCK 16384

typedef struct {
    int staleness;       /* s */
    float *sum;          /* (n) a block's average */
    long *seg_committed; /* (nseg) clocks committed on each segment */
    int *seg_sent;       /* (W) segments of w's reply sent this clock */
    uint16_t *wire_shard; /* ps-sync on a 16-bit wire: (n) the shard as committed, encoded once for every
                           * worker; a clock's gradients stay in the core's wire_recv until its commit
                           * decodes them */
} clocked;

/* sum[a, e) = every worker's clock-c gradient on [a, e) averaged, in
 * worker order (so ps-sync and ps-ssp --staleness 0 give serial's
 * numbers): from their fp32 slots, or in ps-sync on a 16-bit wire from
 * the words as they came (wire_recv, the same floats decoded). */
static void average(server *sv, long c, size_t a, size_t e) {
    clocked *p = sv->pol;
    float *sum = p->sum + a;
    size_t n = e - a;
    for (int w = 0; w < sv->W; w++) {
        const uint16_t *words = p->wire_shard ? sv->wire_recv + (size_t)w * sv->n + a : NULL;
        const float *g = slot_of(sv, w, c) + a;
        if (w == 0 && words) dt_half_decode(sv->wire, words, sum, n);
        else if (w == 0) memcpy(sum, g, sizeof(float) * n);
        else if (words) dt_half_add(sv->wire, words, sum, n);
        else
            for (size_t i = 0; i < n; i++) sum[i] += g[i];
    }
    float inv = 1.0f / (float)sv->W;
    for (size_t i = 0; i < n; i++) sum[i] *= inv;
}

/* Clock c's step on segment k of the shard: the average, one optimiser
 * step, and on ps-sync's 16-bit wire the reply every worker gets, encoded
 * once (the gradients decoded here too); block by block (an optimiser
 * that needs whole-tensor norms takes the segment at once: its tensors
 * are never cut between segments). */
static void average_and_apply(server *sv, long c, int k) {
    clocked *p = sv->pol;
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    size_t block = dt_optim_needs_norms(sv->spec->optim.kind) ? hi - lo : COMMIT_BLOCK;
    float lr = *lr_of(sv, 0, c);
    double t0 = dt_now();
    for (size_t a = lo; a < hi; a += block) {
        size_t e = hi - a < block ? hi : a + block;
        average(sv, c, a, e);
        ps_apply(sv, lr, c + 1, p->sum, a, e);
        if (p->wire_shard) dt_half_encode(sv->wire, sv->params + a, p->wire_shard + a, e - a);
    }
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply clock", t0, dt_now(),
                     (dt_tl_arg[]){{"clock", c}, {"segment", k}}, 2);
}

/* Has worker v delivered segment k of clock c? */
static int delivered(const server *sv, int v, int k, long c) {
    const ps_peer *p = &sv->peer[v];
    return p->arrived > c || (p->receiving && p->wclock == c && p->seg_done > k);
}

/* Commits segment k clock by clock while every worker has delivered it.
 * ps-sync sends segments straight from the shard or wire_shard (below):
 * MPI wants those sends complete before they change, and they are, since
 * every worker received the last clock before it could deliver this one. */
static dt_status commit_segment(server *sv, int k) {
    clocked *p = sv->pol;
    for (;;) {
        long c = p->seg_committed[k];
        for (int v = 0; v < sv->W; v++)
            if (!delivered(sv, v, k, c)) return DT_OK;
        for (int v = 0; p->staleness == 0 && v < sv->W; v++)
            DT_TRY(dt_mpi_check(MPI_Wait(&reply_reqs(sv, v)[1 + k], MPI_STATUS_IGNORE), "MPI_Wait"));
        average_and_apply(sv, c, k);
        p->seg_committed[k]++;
    }
}

/* Sends w what its next clock may read: segment by segment, each once w
 * has delivered it and it holds every clock up to (w's clock - s); then,
 * once w's gradient is complete, the header with each segment's committed
 * clocks (for w's read-my-writes), which ends the clock's reply. With s =
 * 0 nothing changes a segment before every worker has it, so it goes
 * straight from the shard (or its encoding, wire_shard); with s > 0 a
 * faster worker's clock may commit on it meanwhile: a snapshot. */
static dt_status advance_reply(server *sv, int w) {
    clocked *p = sv->pol;
    if (!sv->peer[w].receiving && !sv->peer[w].awaiting) return DT_OK;
    long c = sv->peer[w].wclock;
    double *h = header_of(sv, w);
    for (int k; (k = p->seg_sent[w]) < sv->nseg; p->seg_sent[w]++) {
        if (!delivered(sv, w, k, c) || p->seg_committed[k] < c + 1 - p->staleness) return DT_OK;
        if (k == 0) DT_TRY(ps_wait_replies(sv, w));
        h[PS_HDR_LEN + k] = (double)p->seg_committed[k];
        if (p->wire_shard) {
            DT_TRY(ps_send_words(sv, w, p->wire_shard, sv->seg_lo[k], sv->seg_hi[k], 1 + k));
            continue;
        }
        const float *src = p->staleness > 0 ? ps_take_snapshot(sv, w, sv->seg_lo[k], sv->seg_hi[k]) : sv->params;
        DT_TRY(ps_send_params(sv, w, src, sv->seg_lo[k], sv->seg_hi[k], 1 + k, 1));
    }
    /* (With segments all sent the whole clocks are there too; an empty
     * shard has only them to wait for.) */
    if (!sv->peer[w].awaiting || sv->committed < c + 1 - p->staleness) return DT_OK;
    p->seg_sent[w] = 0; /* for its next clock */
    return ps_send_header(sv, w, c + 1 - sv->committed, NULL);
}

/* After a segment or a gradient arrived: commit what every worker has
 * delivered, count whole clocks, send what may be read. */
static dt_status clocked_progress(server *sv) {
    clocked *p = sv->pol;
    for (int k = 0; k < sv->nseg; k++) DT_TRY(commit_segment(sv, k));
    for (;;) { /* a clock is whole once all its segments are (or all gradients, on an empty shard) */
        int whole = 1;
        for (int k = 0; k < sv->nseg; k++) whole &= p->seg_committed[k] > sv->committed;
        for (int v = 0; sv->nseg == 0 && v < sv->W; v++) whole &= sv->peer[v].arrived > sv->committed;
        if (!whole) break;
        sv->committed++;
        sv->version++;
        sv->applied += sv->W;
    }
    for (int w = 0; w < sv->W; w++) DT_TRY(advance_reply(sv, w));
    return DT_OK;
}

static dt_status clocked_segment(server *sv, int w, int k) {
    (void)w, (void)k;
    return clocked_progress(sv);
}

static dt_status clocked_complete(server *sv, int w) {
    (void)w;
    return clocked_progress(sv);
}

/* s + 2: a worker s clocks ahead may deliver its next clock while the
 * slowest worker's is still needed for the commit. */
static int clocked_slots(const dt_dist_cfg *cfg) { return dt_dist_staleness(cfg) + 2; }

/* ps-sync posts every segment at once (a clock needs every worker's) and,
 * on a 16-bit wire, decodes in its commit and encodes once for all. */
static dt_status clocked_setup(server *sv, ps_traits *tr) {
    clocked *p;
    DT_TRY(dt_alloc_bytes((void **)&p, sizeof *p, "server"));
    sv->pol = p;
    p->staleness = dt_dist_staleness(sv->cfg);
    DT_TRY(dt_alloc_floats(&p->sum, sv->n, "server shard"));
    DT_TRY(dt_alloc_bytes((void **)&p->seg_committed, (size_t)sv->net->nlayers * sizeof(long), "server"));
    DT_TRY(dt_alloc_bytes((void **)&p->seg_sent, (size_t)sv->W * sizeof(int), "server"));
    for (int k = 0; k < sv->nseg; k++) p->seg_committed[k] = sv->committed;
    if (sv->wire && p->staleness == 0)
        DT_TRY(dt_alloc_bytes((void **)&p->wire_shard, sv->n * sizeof(uint16_t), "server replies"));
    tr->turns = p->staleness > 0;
    tr->decodes = p->wire_shard != NULL;
    return DT_OK;
}

/* A pull waits for w's delivered clocks to be committed. Not more:
 * another worker may already be sending its next clock, which cannot
 * commit before the pulling worker's. */
static int clocked_pull_ready(server *sv, int w) {
    return sv->committed >= sv->peer[w].arrived && !sv->peer[w].receiving;
}

/* Every delivered gradient is in a committed clock. */
static dt_status clocked_finish(server *sv) {
    if ((sv->committed - sv->first_clock) * sv->W != sv->delivered)
        return dt_fail(DT_ERR_INTERNAL, "server rank %d: %ld gradients delivered but %ld applied",
                       sv->comm->rank, sv->delivered, sv->applied);
    return DT_OK;
}

static void clocked_free(server *sv) {
    clocked *p = sv->pol;
    if (!p) return;
    dt_free(p->sum);
    dt_free(p->seg_committed);
    dt_free(p->seg_sent);
    dt_free(p->wire_shard);
    dt_free(p);
}

const ps_policy ps_clocked_policy = {
    .slots = clocked_slots,
    .setup = clocked_setup,
    .segment = clocked_segment,
    .complete = clocked_complete,
    .pull_ready = clocked_pull_ready,
    .finish = clocked_finish,
    .free = clocked_free,
};
