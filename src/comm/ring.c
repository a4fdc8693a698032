#include "ring.h"

#include <limits.h>

#include "plan/codec.h"
#include "segments.h"

enum { TAG_RING = 902 };

/* Chunk i of n floats among w: [lo(i), lo(i + 1)). */
static size_t chunk_lo(size_t n, int w, int i) { return n / (size_t)w * (size_t)i + n % (size_t)w * (size_t)i / (size_t)w; }

int dt_ring_pays(size_t n, int w) { return w > 1 && n / (size_t)w >= 16384; }

size_t dt_ring_scratch_floats(size_t n, int w) { return w > 0 ? (n + (size_t)w - 1) / (size_t)w : n; }

/* A ring step's message goes as up to SEGMENTS_MAX segments of at most
 * DT_SEGMENT_BYTES, all posted at once (segments.h). Between two emulated
 * hosts cnn's ring ran 110 img/s this way against 59 as 2 MiB messages at
 * 100 Mbit/s, 711 against 505 at 1 Gbit/s (the same within noise in shared
 * memory; docs/CLUSTER.md). A message over SEGMENTS_MAX x 64000 bytes goes
 * in SEGMENTS_MAX longer segments. */
enum { SEGMENTS_MAX = 64 };

/* Posts a message of n words (of size bytes) of buf to (send) or from peer
 * into reqs; returns the number of requests posted (*s: the status). The
 * segment length depends on n alone, so the two ends of a message cut it
 * alike (their other message may be longer: uneven chunks). */
static int post_segments(dt_group *g, void *buf, size_t n, MPI_Datatype type, int size, int peer, int send,
                         MPI_Request *reqs, dt_status *s) {
    size_t seg = DT_SEGMENT_BYTES / (size_t)size;
    if (dt_segment_count(n, seg) > SEGMENTS_MAX) seg = dt_segment_count(n, SEGMENTS_MAX);
    return dt_post_segments(g->comm.workers, TAG_RING, buf, n, type, size, seg, peer, send, reqs, "ring allreduce",
                            s);
}

/* One ring step: send nsend words (of size bytes) of sendbuf to the right,
 * receive nrecv words from the left into recvbuf; waits for both. */
static dt_status ring_step(dt_group *g, const void *sendbuf, size_t nsend, void *recvbuf, size_t nrecv,
                           MPI_Datatype type, int size) {
    int w = g->members, right = (g->member + 1) % w, left = (g->member + w - 1) % w;
    MPI_Request req[2 * SEGMENTS_MAX];
    dt_status s = DT_OK;
    int n = post_segments(g, recvbuf, nrecv, type, size, left, 0, req, &s);
    n += post_segments(g, (void *)sendbuf, nsend, type, size, right, 1, req + n, &s);
    if (s == DT_OK) s = dt_group_wait(g, req, n);
    /* On failure no request may outlive the buffers: the job is about to
     * end, but MPI could still write into tmp or x. */
    if (s != DT_OK) dt_cancel_requests(req, n);
    return s;
}

/* Chunk i of x (n floats among w workers): start and length. */
static float *chunk(float *x, size_t n, int w, int i, size_t *len) {
    i = (i % w + w) % w;
    *len = chunk_lo(n, w, i + 1) - chunk_lo(n, w, i);
    return x + chunk_lo(n, w, i);
}

/* A ring step in 16-bit words: chunk sc (slen floats) encoded to the
 * right, rlen words from the left into *in. tmp's floats hold the words
 * received, then the words sent. */
static dt_status half_step(dt_group *g, size_t n, const float *sc, size_t slen, size_t rlen, float *tmp,
                           dt_gc_kind wire, uint16_t **in) {
    *in = (uint16_t *)tmp;
    uint16_t *out = *in + dt_ring_scratch_floats(n, g->members);
    dt_half_encode(wire, sc, out, slen);
    return ring_step(g, out, slen, *in, rlen, MPI_UINT16_T, sizeof(uint16_t));
}

/* A step of the reduce-scatter: chunk `send` to the right; the left's
 * chunk `recv` added to ours (then scaled, on the last step: the sum is
 * complete; in halves, also rounded as every other worker will receive it). */
static dt_status reduce_step(dt_group *g, float *x, size_t n, int send, int recv, float *tmp, float scale,
                             int last, dt_gc_kind wire) {
    size_t slen, rlen;
    float *sc = chunk(x, n, g->members, send, &slen), *rc = chunk(x, n, g->members, recv, &rlen);
    if (!dt_gc_is_half(wire)) {
        DT_TRY(ring_step(g, sc, slen, tmp, rlen, MPI_FLOAT, sizeof(float)));
        for (size_t i = 0; i < rlen; i++) rc[i] += tmp[i];
    } else {
        uint16_t *in;
        DT_TRY(half_step(g, n, sc, slen, rlen, tmp, wire, &in));
        dt_half_add(wire, in, rc, rlen);
    }
    if (!last) return DT_OK;
    for (size_t i = 0; i < rlen; i++) rc[i] *= scale;
    if (dt_gc_is_half(wire)) dt_half_round(wire, rc, rlen);
    return DT_OK;
}

/* A step of the allgather: our summed chunk `send` to the right, the
 * left's chunk `recv` received in place. */
static dt_status gather_step(dt_group *g, float *x, size_t n, int send, int recv, float *tmp, dt_gc_kind wire) {
    size_t slen, rlen;
    float *sc = chunk(x, n, g->members, send, &slen), *rc = chunk(x, n, g->members, recv, &rlen);
    if (!dt_gc_is_half(wire)) return ring_step(g, sc, slen, rc, rlen, MPI_FLOAT, sizeof(float));
    uint16_t *in;
    DT_TRY(half_step(g, n, sc, slen, rlen, tmp, wire, &in));
    dt_half_decode(wire, in, rc, rlen);
    return DT_OK;
}

dt_status dt_ring_allreduce(dt_group *g, float *x, size_t n, float *tmp, float scale, dt_gc_kind wire) {
    int w = g->members, r = g->member;
    if (w < 2) {
        for (size_t i = 0; i < n; i++) x[i] *= scale;
        return DT_OK;
    }
    if (dt_ring_scratch_floats(n, w) > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "ring allreduce: %zu floats make chunks over an MPI count", n);
    /* Reduce-scatter: at step s, send chunk r-s (holding s+1 workers' sums)
     * and add the left neighbour's chunk r-s-1; worker r ends with chunk
     * r+1 summed over all. */
    for (int s = 0; s < w - 1; s++) DT_TRY(reduce_step(g, x, n, r - s, r - s - 1, tmp, scale, s == w - 2, wire));
    /* Allgather: pass the summed chunks round. */
    for (int s = 0; s < w - 1; s++) DT_TRY(gather_step(g, x, n, r + 1 - s, r - s, tmp, wire));
    return DT_OK;
}
