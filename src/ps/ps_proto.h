/* The parameter-server protocol shared by workers (ps_worker.c) and servers
 * (ps_server.c).
 *
 * Per clock (a worker's optimiser step), worker w and server s exchange, on world:
 *   w -> s  CTRL {STEP, clock, lr}       at begin_step: s posts receives for w's gradients
 *                                        (out of step, a segment of 1 MiB or more waits for
 *                                        its turn: ps_server.c's admit_turn)
 *   w -> s  GRAD segments                as each layer finishes backward (wait-free BP):
 *                                        layer ∩ shard, layers last to first; MPI's
 *                                        non-overtaking order tells s where each lands
 *   s -> w  the parameters for w's next clock, when the mode allows. Segmented
 *           (every mode but the deferred ones): PARAM segment by segment, in
 *           the order they came, each as soon as it may be read, then HDR;
 *           w receives each layer's segment into its parameters while the
 *           layers below still run backward:
 *             ps-sync / ps-ssp: a segment once it holds every worker's
 *               clocks up to (w's clock - staleness) (a segment commits a
 *               clock when every worker's gradient for it is in);
 *             ps-async: right after w's own gradient segment is applied.
 *           Whole (ps-async-nowait / ps-hogwild): HDR then the PARAM shard
 *           in one message, as it is, as soon as w's gradient is complete
 *           (queued, not yet applied)
 * Outside clocks:
 *   w0 -> s INIT params, each optimiser state slot, {budget, first clock, updates done}
 *           at start (fresh or resumed):
 *           budget is ps-async's total of gradients to apply before replies say
 *           done; the first clock is the resumed step (0 when fresh); updates done
 *           is the optimiser's step count so far (Adam's bias correction)
 *   w0 -> s CTRL {CKPT}; s -> w0 MOM (each state slot)   before worker 0 writes a checkpoint
 *   w -> s  CTRL {PULL}; s -> w HDR, PARAM   before evaluation and checkpoints: the shard
 *                                        with every delivered clock applied
 *   w -> s  CTRL {STOP}; s -> w0 STATS   at the end (STATS only to worker 0)
 */
#ifndef DTRAIN_PS_PS_PROTO_H
#define DTRAIN_PS_PS_PROTO_H

#include <stddef.h>

#include "dtrain/dist.h"
#include "dtrain/optim.h"

enum { PS_TAG_CTRL = 10, PS_TAG_GRAD, PS_TAG_PARAM, PS_TAG_INIT, PS_TAG_MOM, PS_TAG_STATS, PS_TAG_HDR };
enum { PS_CTRL_STEP = 1, PS_CTRL_CKPT, PS_CTRL_STOP, PS_CTRL_PULL };

/* A control message: {kind, clock, lr} as doubles. */
#define PS_CTRL_LEN 3
/* A reply header: {version of the shard sent, version lag of the params
 * for w's next step, clocks committed, done (ps-async budget reached),
 * stop (the server got SIGINT/SIGTERM: the workers stop at an agreed step)},
 * then per segment the clocks committed on it when it was sent (ps-ssp's
 * read-my-writes; a segment may be ahead of the whole shard's count). */
#define PS_HDR_LEN 5
/* Server statistics to worker 0 at the end: {cpu_s, wall_s, updates,
 * largest clock gap seen between workers, gradients applied, the nice
 * value it ran at}. */
#define PS_STATS_LEN 6

/* Whether a mode's servers reply segment by segment, each segment as soon
 * as it may be read (the worker posts a receive beside each push), rather
 * than the whole shard once the worker's gradient is complete: every policy
 * but the deferred one. The deferred modes reply at once anyway; sent
 * segment by segment, the top layers would be copied before the worker's
 * previous gradient is applied (measured: version lag 1.9 -> 2.4 for 5 %
 * more img/s on 2 cores), so they send the shard as it is when the
 * gradient is complete. */
static inline int ps_replies_per_segment(dt_mode mode) { return dt_mode_info_of(mode)->ps != DT_PS_DEFERRED; }

/* The servers' vector is the parameters of every layer that is not SFB,
 * end to end (dt_comm_plan ps_offset); shards are ranges of it.
 * The part of layer i's parameters that falls in [lo, hi) of that vector:
 * [*a, *b), empty when *a == *b. */
static inline void ps_overlap(const size_t *ps_offset, int i, size_t lo, size_t hi, size_t *a, size_t *b) {
    size_t l0 = ps_offset[i], l1 = ps_offset[i + 1];
    *a = l0 > lo ? l0 : lo;
    *b = l1 < hi ? l1 : hi;
    if (*b < *a) *b = *a;
}

/* Server s's shard of the servers' vector (n floats over S servers):
 * nearly equal ranges, cut between tensors where the optimiser (made for
 * that vector) needs whole-tensor norms (LARS, LAMB: dt_optim_align), so a
 * server holds every such tensor whole and computes its trust ratio alone.
 * Workers and servers call it alike. */
static inline void ps_shard(const dt_optim *o, size_t n, int S, int s, size_t *lo, size_t *hi) {
    dt_shard_range(n, S, s, lo, hi);
    *lo = dt_optim_align(o, *lo);
    *hi = dt_optim_align(o, *hi);
}

/* The segments of shard [lo, hi) of the servers' vector: its pieces of
 * each layer in the order backward frees them (last layer first), which is
 * the order a worker pushes them in and the order of the committed clocks
 * in a reply header. Writes segment k as [a[k], b[k]) less `from` (room
 * for nlayers) and returns how many there are. */
static inline int ps_segments(const size_t *ps_offset, int nlayers, size_t lo, size_t hi, size_t from, size_t *a,
                              size_t *b) {
    int n = 0;
    for (int i = nlayers - 1; i >= 0; i--) {
        size_t l, h;
        ps_overlap(ps_offset, i, lo, hi, &l, &h);
        if (l == h) continue;
        a[n] = l - from;
        b[n++] = h - from;
    }
    return n;
}

#endif
