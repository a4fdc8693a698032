#include "ring.h"

#include <limits.h>

enum { TAG_RING = 902 };

/* Chunk i of n floats among w: [lo(i), lo(i + 1)). */
static size_t chunk_lo(size_t n, int w, int i) { return n / (size_t)w * (size_t)i + n % (size_t)w * (size_t)i / (size_t)w; }

int dt_ring_pays(size_t n, int w) { return w > 1 && n / (size_t)w >= 16384; }

size_t dt_ring_scratch_floats(size_t n, int w) { return w > 0 ? (n + (size_t)w - 1) / (size_t)w : n; }

/* One ring step: send chunk `send` to the right, receive chunk `recv` from
 * the left into dst; waits for both. */
static dt_status ring_step(dt_group *g, float *x, size_t n, int send, int recv, float *dst) {
    int w = g->size, right = (g->rank + 1) % w, left = (g->rank + w - 1) % w;
    size_t s0 = chunk_lo(n, w, send), s1 = chunk_lo(n, w, send + 1);
    size_t r0 = chunk_lo(n, w, recv), r1 = chunk_lo(n, w, recv + 1);
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    dt_status s = dt_mpi_check(MPI_Irecv(dst, (int)(r1 - r0), MPI_FLOAT, left, TAG_RING, g->comm.workers, &req[0]),
                               "ring allreduce (MPI_Irecv)");
    if (s == DT_OK)
        s = dt_mpi_check(MPI_Isend(x + s0, (int)(s1 - s0), MPI_FLOAT, right, TAG_RING, g->comm.workers, &req[1]),
                         "ring allreduce (MPI_Isend)");
    if (s == DT_OK) s = dt_group_wait(g, req, 2);
    /* On failure no request may outlive the buffers: the job is about to
     * end, but MPI could still write into tmp or x. */
    for (int i = 0; s != DT_OK && i < 2; i++)
        if (req[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&req[i]);
            MPI_Wait(&req[i], MPI_STATUS_IGNORE);
        }
    return s;
}

dt_status dt_ring_allreduce(dt_group *g, float *x, size_t n, float *tmp, float scale) {
    int w = g->size, r = g->rank;
    if (w < 2) {
        for (size_t i = 0; i < n; i++) x[i] *= scale;
        return DT_OK;
    }
    if (dt_ring_scratch_floats(n, w) > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "ring allreduce: %zu floats make chunks over an MPI count", n);
    /* Reduce-scatter: at step s, send chunk r-s (holding s+1 workers' sums)
     * and add the left neighbour's chunk r-s-1; worker r ends with chunk
     * r+1 summed over all. */
    for (int s = 0; s < w - 1; s++) {
        int send = ((r - s) % w + w) % w, recv = ((r - s - 1) % w + w) % w;
        DT_TRY(ring_step(g, x, n, send, recv, tmp));
        float *c = x + chunk_lo(n, w, recv);
        size_t len = chunk_lo(n, w, recv + 1) - chunk_lo(n, w, recv);
        if (s < w - 2)
            for (size_t i = 0; i < len; i++) c[i] += tmp[i];
        else /* the chunk's last term: the sum is complete */
            for (size_t i = 0; i < len; i++) c[i] = (c[i] + tmp[i]) * scale;
    }
    /* Allgather: pass the summed chunks round, received in place. */
    for (int s = 0; s < w - 1; s++) {
        int send = ((r + 1 - s) % w + w) % w, recv = ((r - s) % w + w) % w;
        DT_TRY(ring_step(g, x, n, send, recv, x + chunk_lo(n, w, recv)));
    }
    return DT_OK;
}
