/* Ring allreduce among the workers of a dt_group: the sum over workers of a
 * float buffer, in place, with every worker ending on the same bits.
 *
 * The buffer is cut into W chunks; W-1 reduce-scatter steps (send one chunk
 * to the right neighbour, add the chunk received from the left) leave each
 * worker with one fully summed chunk, and W-1 allgather steps pass the
 * summed chunks round. Each worker sends and receives 2 (W-1)/W of the
 * buffer and adds (W-1)/W of it: the bandwidth-optimal schedule (Patarasuk
 * and Yuan; Baidu's and Horovod's ring allreduce). It is built on MPI
 * point-to-point because Open MPI's nonblocking MPI_Iallreduce (libnbc)
 * moved the whole buffer each way between two ranks: on this machine a
 * 4 MiB bucket cost 1.7-2.2 ms of CPU that way, 0.8 ms as a ring
 * (docs/PERFORMANCE.md). A step's message travels as segments of at most
 * 64000 bytes posted at once (under Open MPI's TCP eager limit: no
 * rendezvous per message; 1.4-1.9x the ring's rate between hosts, ring.c).
 * Waits go through dt_group_wait, so a missing
 * worker is reported by the stall inspector, never waited for silently.
 *
 * Small buffers are latency-bound (2 (W-1) messages in sequence), so
 * dt_ring_pays says when to use the ring rather than MPI_Iallreduce. */
#ifndef DTRAIN_COMM_RING_H
#define DTRAIN_COMM_RING_H

#include <stddef.h>

#include "group.h"

/* Whether a ring beats MPI_Iallreduce for n floats among w workers: at least
 * 16 Ki floats (64 KiB) per chunk. */
int dt_ring_pays(size_t n, int w);

/* Floats of scratch dt_ring_allreduce needs for n floats among w workers
 * (the largest chunk; in 16-bit words, room for a chunk sent and one
 * received). */
size_t dt_ring_scratch_floats(size_t n, int w);

/* x (n) <- scale * (sum over the group's workers of x (n)), in place; tmp
 * holds dt_ring_scratch_floats(n, size) floats. The scaling rides on the
 * last reduction pass (scale 1/W: the average, with no pass of its own).
 * wire DT_GC_BF16 or DT_GC_FP16 sends 16-bit words (codec.h) and adds
 * them into x in fp32; the summed chunks are rounded to the wire's
 * precision before the allgather, so every worker still ends on the same
 * bits. Any other wire kind sends floats. The caller has entered the
 * collective (dt_group_enter). */
dt_status dt_ring_allreduce(dt_group *g, float *x, size_t n, float *tmp, float scale, dt_gc_kind wire);

#endif
