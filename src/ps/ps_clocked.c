/* Parameter servers, the clocked policy (ps-sync; ps-ssp --staleness s,
 * ps-sync being s = 0): a clock is committed segment by segment as soon as
 * every worker has delivered that segment, clocks in order; a worker is
 * sent each segment once it holds every clock up to (its clock - s). */
#include <string.h>

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

/* sum[a, e) = every worker's clock-c gradient on [a, e) averaged, in
 * worker order (so ps-sync and ps-ssp --staleness 0 give serial's
 * numbers): from their fp32 slots, or in ps-sync on a 16-bit wire from
 * the words as they came (wire_recv, the same floats decoded). */
static void average(server *sv, long c, size_t a, size_t e) {
    float *sum = sv->sum + a;
    size_t n = e - a;
    for (int w = 0; w < sv->W; w++) {
        const uint16_t *words = sv->wire_shard ? sv->wire_recv + (size_t)w * sv->n + a : NULL;
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
    size_t lo = sv->seg_lo[k], hi = sv->seg_hi[k];
    size_t block = dt_optim_needs_norms(sv->spec->optim.kind) ? hi - lo : COMMIT_BLOCK;
    float lr = *lr_of(sv, 0, c);
    double t0 = dt_now();
    for (size_t a = lo; a < hi; a += block) {
        size_t e = hi - a < block ? hi : a + block;
        average(sv, c, a, e);
        ps_apply(sv, lr, c + 1, sv->sum, a, e);
        if (sv->wire_shard) dt_half_encode(sv->wire, sv->params + a, sv->wire_shard + a, e - a);
    }
    dt_timeline_span(sv->cfg->timeline, DT_TL_MAIN, DT_TL_CAT_UPDATE, "apply clock", t0, dt_now(),
                     (dt_tl_arg[]){{"clock", c}, {"segment", k}}, 2);
}

/* Has worker v delivered segment k of clock c? */
static int delivered(const server *sv, int v, int k, long c) {
    return sv->arrived[v] > c || (sv->receiving[v] && sv->wclock[v] == c && sv->seg_done[v] > k);
}

/* Commits segment k clock by clock while every worker has delivered it.
 * ps-sync sends segments straight from the shard or wire_shard (below):
 * MPI wants those sends complete before they change, and they are, since
 * every worker received the last clock before it could deliver this one. */
static dt_status commit_segment(server *sv, int k) {
    for (;;) {
        long c = sv->seg_committed[k];
        for (int v = 0; v < sv->W; v++)
            if (!delivered(sv, v, k, c)) return DT_OK;
        for (int v = 0; sv->staleness == 0 && v < sv->W; v++)
            DT_TRY(dt_mpi_check(MPI_Wait(&reply_reqs(sv, v)[1 + k], MPI_STATUS_IGNORE), "MPI_Wait"));
        average_and_apply(sv, c, k);
        sv->seg_committed[k]++;
    }
}

/* Sends w what its next clock may read: segment by segment, each once w
 * has delivered it and it holds every clock up to (w's clock - s); then,
 * once w's gradient is complete, the header with each segment's committed
 * clocks (for w's read-my-writes). With s = 0 nothing changes a segment
 * before every worker has it, so it goes straight from the shard (or its
 * encoding, wire_shard); with s > 0 a faster worker's clock may commit on
 * it meanwhile: a snapshot. */
static dt_status advance_reply(server *sv, int w) {
    if (!sv->receiving[w] && !sv->awaiting[w]) return DT_OK;
    long c = sv->wclock[w];
    double *h = sv->hdr + (size_t)w * (size_t)sv->hdr_len;
    for (int k; (k = sv->seg_sent[w]) < sv->nseg; sv->seg_sent[w]++) {
        if (!delivered(sv, w, k, c) || sv->seg_committed[k] < c + 1 - sv->staleness) return DT_OK;
        if (k == 0) DT_TRY(ps_wait_replies(sv, w));
        h[PS_HDR_LEN + k] = (double)sv->seg_committed[k];
        if (sv->wire_shard) {
            DT_TRY(ps_send_words(sv, w, sv->wire_shard, sv->seg_lo[k], sv->seg_hi[k], 1 + k));
            continue;
        }
        const float *src = sv->staleness > 0 ? ps_take_snapshot(sv, w, sv->seg_lo[k], sv->seg_hi[k]) : sv->params;
        DT_TRY(ps_send_params(sv, w, src, sv->seg_lo[k], sv->seg_hi[k], 1 + k, 1));
    }
    /* (With segments all sent the whole clocks are there too; an empty
     * shard has only them to wait for.) */
    if (!sv->awaiting[w] || sv->committed < c + 1 - sv->staleness) return DT_OK;
    return ps_send_header(sv, w, c + 1 - sv->committed, NULL);
}

/* The clocked modes after a segment or a gradient arrived: commit what
 * every worker has delivered, count whole clocks, send what may be read. */
static dt_status clocked_progress(server *sv) {
    for (int k = 0; k < sv->nseg; k++) DT_TRY(commit_segment(sv, k));
    for (;;) { /* a clock is whole once all its segments are (or all gradients, on an empty shard) */
        int whole = 1;
        for (int k = 0; k < sv->nseg; k++) whole &= sv->seg_committed[k] > sv->committed;
        for (int v = 0; sv->nseg == 0 && v < sv->W; v++) whole &= sv->arrived[v] > sv->committed;
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
    sv->awaiting[w] = 1;
    return clocked_progress(sv);
}

const ps_policy ps_clocked_policy = {clocked_segment, clocked_complete};
