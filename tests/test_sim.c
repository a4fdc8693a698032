/* Scaling simulator: the alpha-beta formulas against hand-computed step
 * times, Poseidon's byte counts, sacp's choice by simulated step (never
 * slower than ps-sync or sfb), monotonicity in bandwidth and latency, one
 * node without communication, unit parsing. Profile files and their
 * measurement: test_sim_profile.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/sim.h"
#include "testutil.h"

#define GBPS10 1.25e9 /* bytes per second */

static dt_profile *prof; /* large (DT_MAX_LAYERS layers): one, on the heap */

static void set_layer(dt_profile *p, int i, const char *kind, double fwd, double bwd, size_t params,
                      int fc_out, int fc_in) {
    dt_sim_layer *l = &p->layers[i];
    snprintf(l->kind, sizeof l->kind, "%s", kind);
    l->fwd_s = fwd, l->bwd_s = bwd, l->params = params, l->fc_out = fc_out, l->fc_in = fc_in;
}

/* Two layers: L0 (1 MB of parameters) fwd 10 ms, bwd 20 ms; L1 (5 MB)
 * fwd 2 ms, bwd (the loss) 1 ms. L1 is ready at 13 ms, L0 at 33 ms. */
static dt_profile *two_layers(double sum_s) {
    memset(prof, 0, sizeof *prof);
    snprintf(prof->model, sizeof prof->model, "synthetic");
    prof->batch = 10, prof->threads = 1, prof->reps = 1;
    prof->nlayers = 2;
    set_layer(prof, 0, "connected", 0.010, 0.020, 250000, 0, 0);
    set_layer(prof, 1, "connected", 0.002, 0.001, 1250000, 0, 0);
    prof->update_s = 0.003;
    prof->sum_s = sum_s;
    prof->gemm_gflops = 1;
    return prof;
}

static dt_sim_cfg cfg(dt_mode mode, int nodes) {
    dt_sim_cfg c = {.mode = mode, .nodes = nodes, .servers = 1, .bandwidth = GBPS10, .latency = 20e-6,
                    .fusion_mb = 4, .overlap = 1, .server_nice = 19};
    return c;
}

/* ps-sync with its fully connected layers by factors (every one, or SACP's choice). */
static dt_sim_cfg cfg_factors(dt_sfb_policy factors, int nodes) {
    dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, nodes);
    c.factors = factors;
    return c;
}

/* Everything the simulator models, as --modes lists it. */
static const struct {
    dt_mode mode;
    dt_sfb_policy factors;
} points[] = {{DT_MODE_ALLREDUCE, DT_SFB_OFF}, {DT_MODE_PS_SYNC, DT_SFB_OFF}, {DT_MODE_PS_SYNC, DT_SFB_ALL},
              {DT_MODE_PS_SYNC, DT_SFB_AUTO},  {DT_MODE_PS_ASYNC, DT_SFB_OFF}, {DT_MODE_PS_SSP, DT_SFB_OFF}};
enum { NPOINTS = (int)(sizeof points / sizeof *points) };

static dt_sim_cfg cfg_point(int m, int nodes) {
    dt_sim_cfg c = cfg(points[m].mode, nodes);
    c.factors = points[m].factors;
    return c;
}

static double step(const dt_profile *p, const dt_sim_cfg *c) {
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, c));
    return r.step_s;
}

static void test_allreduce_by_hand(void) {
    dt_profile *p = two_layers(0);
    dt_sim_cfg c = cfg(DT_MODE_ALLREDUCE, 4);
    /* Ring on 4 nodes: 1.5 * bytes / beta + 6 alpha. L1: 7.5 MB -> 6.12 ms,
     * L0: 1.5 MB -> 1.32 ms. */
    c.fusion_mb = 64; /* one bucket, ready when L0 is: 33 + 7.32 + update 3 */
    CHECK_CLOSE(step(p, &c), 0.033 + 0.00732 + 0.003, 1e-12, 1e-12);
    c.overlap = 0; /* one bucket: overlap changes nothing */
    CHECK_CLOSE(step(p, &c), 0.04332, 1e-12, 1e-12);

    c.fusion_mb = 0; /* a bucket per layer */
    c.overlap = 1;   /* L1's bucket runs 13..19.12 ms, hidden by L0's backward; L0's 33..34.32 */
    CHECK_CLOSE(step(p, &c), 0.03432 + 0.003, 1e-12, 1e-12);
    c.overlap = 0; /* both after backward: 33 + 6.12 + 1.32 + 3 */
    CHECK_CLOSE(step(p, &c), 0.04344, 1e-12, 1e-12);

    /* The ring's sums (3/4 of one gradient sum) and the averaging pass. */
    p = two_layers(0.002);
    c.fusion_mb = 64;
    c.overlap = 1;
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.033 + 0.00732 + 0.0015 + 0.002 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.002 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.comm_share, (r.step_s - r.compute_s) / r.step_s, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 1.5 * 6e6, 1e-6, 0);
    CHECK_CLOSE(r.images_per_sec, 4 * 10 / r.step_s, 1e-9, 1e-12);
    CHECK_CLOSE(r.speedup, r.images_per_sec / (10 / (0.033 + 0.003)), 1e-9, 1e-12);
}

/* Compressed allreduce, by hand on the one-bucket case above (1.5 M
 * floats, 4 nodes, sum 2 ms for all of them): bf16 halves the bytes and
 * adds an encoding pass; top-k 1% allgathers 15000 pairs of 8 bytes (3 x
 * 120 KB, 3 alpha) after the profile's selection (5 ms for all of them);
 * a profile without a top-k rate cannot price it. */
static void test_allreduce_compressed(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_ALLREDUCE, 4);
    c.fusion_mb = 64;
    c.codec = (dt_grad_codec){DT_GC_BF16, 0};
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.bytes_sent, 0.75 * 6e6, 1e-6, 0);
    CHECK_CLOSE(r.step_s, 0.033 + (3.6e-3 + 120e-6) + 1.75 * 0.002 + 0.002 + 0.003, 1e-12, 1e-12);
    c.codec = (dt_grad_codec){DT_GC_TOPK, 0.01};
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "no top-k rate"));
    p->topk_s = 0.005;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.bytes_sent, 3 * 15000 * 8, 1e-6, 0);
    CHECK_CLOSE(r.step_s, 0.033 + (288e-6 + 60e-6) + 0.005 + 0.002 + 0.003, 1e-12, 1e-12);
}

static void test_ps_by_hand(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, 2);
    /* Segment by segment (a layer each). Worker link: L1 (5 MB) 13..17.02
     * ms, L0 (1 MB) 33..33.82. The server's link takes both workers' copies
     * of L1 by 13 + 8.02 = 21.02; it commits them (2 sums and the
     * average, 2 ms each, and the update, 3 ms: 9 ms for the whole shard,
     * 5/6 of it for L1; the replies go from the shard) by 28.52 and sends
     * them to both workers (+ 8.02) by 36.54. L0 is in by 33 + 1.62 =
     * 34.62, committed (9/6 ms) by 36.12, sent (+ 1.62) once L1's replies
     * are out: 38.16 (the worker's own receives, 4.02 and 0.82 ms, fit). */
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.03816, 1e-10, 0);
    CHECK_CLOSE(r.compute_s, 0.033, 1e-12, 1e-12); /* the update runs on the server */
    CHECK_CLOSE(r.bytes_sent, 6e6, 1e-6, 0);
    double one_server = r.step_s;
    /* bf16: 2-byte words. Worker link: L1 13..15.02, L0 33..33.42; the
     * server's: L1 in by 17.02, committed with the reply encoded once (4 x
     * 2 ms and the update: 11 ms, 5/6 of it) by 26.1867, sent (+ 4.02) by
     * 30.2067; L0 in by 33.82, committed (11/6 ms) by 35.6533, sent (+
     * 0.82) by 36.4733; then the worker's encode and decode passes (2 x 2
     * ms): 40.4733. */
    c.codec = (dt_grad_codec){DT_GC_BF16, 0};
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.0404733333, 1e-10, 0);
    CHECK_CLOSE(r.compute_s, 0.037, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 3e6, 1e-6, 0);
    c.codec = (dt_grad_codec){DT_GC_NONE, 0};
    /* Two servers halve what each link carries. */
    c.servers = 2;
    CHECK(step(p, &c) < one_server);
}

/* ps-async and ps-ssp on the two layers, 10 Gbit/s, one server, sums of
 * 2 ms. A worker's cycle against a server that serves it alone (ms),
 * segment by segment: L1 (5 MB) on its link from 13, in by 17.02; L0 (1
 * MB) from 33, in by 33.82. ps-async: the server applies each straight
 * (one update, 3 ms, and one reply copy, 2 ms, for the whole shard: 5/6 of
 * it for L1, 1/6 for L0) and sends it back (L0: 0.02 + 0.8): the cycle is
 * 33.02 + 0.8 + 5/6 + 0.02 + 0.8 = 35.4733. The server's bounds: its link
 * takes P x (4.8 + 2 x 0.02) each way, its cores P x 5 ms: 2 workers 9.68
 * and 10, below the cycle; 10 workers 48.4 and 50, which sets the step.
 * ps-ssp (staleness 3): the server replies from a snapshot (2 ms for the
 * shard, 1/3 for L0) and the worker then adds its own gradient (2 ms): the
 * cycle is 33.02 + 0.8 + 1/3 + 0.02 + 0.8 + 2 = 36.9733; with 10 workers
 * the link's 48.4 (one clock's work: 21 passes and an update, 45) sets it.
 * Staleness 0 is ps-sync. */
static void test_async_by_hand(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_PS_ASYNC, 2);
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, (33.02 + 0.8 + 5 / 6.0 + 0.02 + 0.8) * 1e-3, 1e-12, 1e-9);
    CHECK_CLOSE(r.compute_s, 0.033, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 6e6, 1e-6, 0);
    c.nodes = 10;
    CHECK_CLOSE(step(p, &c), 0.050, 1e-12, 1e-9);
    c = cfg(DT_MODE_PS_SSP, 2);
    c.staleness = 3;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, (33.02 + 0.8 + 1 / 3.0 + 0.02 + 0.8 + 2) * 1e-3, 1e-12, 1e-9);
    CHECK_CLOSE(r.compute_s, 0.035, 1e-12, 1e-12);
    c.nodes = 10;
    CHECK_CLOSE(step(p, &c), 0.0484, 1e-12, 1e-9);
    c.staleness = 0;
    dt_sim_cfg sync = cfg(DT_MODE_PS_SYNC, 10);
    CHECK_CLOSE(step(p, &c), step(p, &sync), 0, 0);
    /* With no one to wait for, ps-ssp and ps-async are never slower than
     * ps-sync, on any link. */
    for (double bw = 1.25e7; bw <= 1.25e10; bw *= 10) {
        dt_sim_cfg a = cfg(DT_MODE_PS_ASYNC, 4), s = cfg(DT_MODE_PS_SSP, 4), y = cfg(DT_MODE_PS_SYNC, 4);
        a.bandwidth = s.bandwidth = y.bandwidth = bw;
        s.staleness = 1;
        CHECK(step(p, &s) <= step(p, &y) && step(p, &a) <= step(p, &y));
    }
    /* Where the server's work on P gradients outlasts the cycle, it sets
     * the step: 10 x (10 + 3) ms against a cycle of about 58. */
    p = two_layers(0.010);
    c = cfg(DT_MODE_PS_ASYNC, 10);
    CHECK_CLOSE(step(p, &c), 0.130, 1e-12, 1e-12);
}

/* ps-async whose segments are all below DT_PS_TURN_BYTES: the workers
 * share the server's link and stay in phase, so the server serves both at
 * once. two_layers' shape with L0 0.4 MB and L1 0.8 MB, sums of 2 ms, 10
 * Gbit/s (ms): L1 ready at 13, on the worker's link by 13.66; the server's
 * link has both workers' by 13 + 1.28 + 0.02 = 14.3; it applies both (2 x
 * (2 + 3) ms for the shard, 2/3 of it for L1) by 20.9667 and sends both
 * back (+ 1.3) by 22.2667. L0 ready at 33, both in by 33.66, applied (1/3
 * of 10 ms) by 36.9933, sent (+ 0.66) by 37.6533. Taking turns, as when
 * most bytes go in large segments, it would be 35.6667. */
static void test_async_small_segments(void) {
    dt_profile *p = two_layers(0.002);
    p->layers[0].params = 100000;
    p->layers[1].params = 200000;
    dt_sim_cfg c = cfg(DT_MODE_PS_ASYNC, 2);
    CHECK_CLOSE(step(p, &c), 0.0376533333, 1e-10, 0);
}

/* The server's link moves at the busy bandwidth while the workers compute,
 * and the server's commit at its nice value's share of a core. two_layers,
 * ps-sync, 2 workers x 1 thread on 2 shared cores (their communication
 * threads have no core: share 2), busy bandwidth half the link's (ms): L1
 * ready at 13, on the worker's link at half speed by 13 + 8.04 = 21.04;
 * the server's link takes both workers' 10 MB (8 ms at full speed) by 13 +
 * 16 + 0.02 = 29.02, which leaves 3.98 ms of backward. Its commit (9 ms
 * for the shard, 5/6 of it: 7.5) gets 15 / 1039 of a core meanwhile (nice
 * 19: 0.0574591 ms of it, taken from the compute, half from each thread:
 * backward ends at 33.0287296), the rest once backward is over: it ends
 * at 29.02 + 3.98 + 7.4425409 = 40.4425409, the replies (8 ms) at
 * 48.4625409. L0 goes at 33.0287296, after backward: on the worker's link
 * by 33.8487296, on the server's by 34.6487296, committed (1.5) after
 * L1's, by 41.9425409, its replies after L1's: 50.0825409. At nice 0 the
 * commit gets half a core beside the compute: 1.99 ms of it by 33 (the
 * compute loses 0.995), it ends at 38.51, its replies at 46.53; L0 goes at
 * 33.995, is in by 35.615, committed by 40.01, back by 48.15. */
static void test_server_link_busy(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, 2);
    c.shared_cores = 2;
    c.busy_bandwidth = GBPS10 / 2;
    CHECK_CLOSE(step(p, &c), 0.0500825409, 1e-10, 0);
    c.server_nice = 0;
    CHECK_CLOSE(step(p, &c), 0.04815, 1e-10, 0);
}

/* Two workers pushing at once share the server's link unevenly: the first
 * takes f of it until its push is in, the other the rest, then all of it.
 * A clock commits a segment once the slower's part is in. two_layers,
 * ps-sync, 2 workers (ms): L1 (5 MB of each worker's 6) is ready at 13 on
 * an idle link, so both pushes meet there. Shared evenly, the slower has
 * its 5 MB in 8 ms later (test_ps_by_hand: in by 21.02, the step 38.16).
 * With f = 0.75 the first's 6 MB are in at 6.4 ms, when the slower has 2
 * MB; its other 3 take 2.4 ms at the link's rate: 8.8, so L1 commits 0.8
 * later and its replies hold L0's back as long: 38.96 (past the crossing
 * (1 - f) / f of 6 MB, any f gives (6 + 5) / 1.25 = 8.8). With f = 0.52
 * the slower reaches 5 MB before the first's push is in, at 0.48 of the
 * link: 8.3333, 0.3333 late: 38.4933. L0, ready at 33 when the link is
 * idle again, is a push of its own, all of it (1 MB): no lag. ps-async
 * commits each worker's segment alone and waits for no slower one. */
static void test_fan_in_share(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, 2);
    double even = step(p, &c);
    CHECK_CLOSE(even, 0.03816, 1e-10, 0);
    c.fan_in_share = 0.5;
    CHECK_CLOSE(step(p, &c), even, 1e-12, 0);
    c.fan_in_share = 0.75;
    CHECK_CLOSE(step(p, &c), 0.03896, 1e-10, 0);
    c.fan_in_share = 0.52;
    CHECK_CLOSE(step(p, &c), 0.0384933333, 1e-10, 0);
    c.mode = DT_MODE_PS_ASYNC;
    c.fan_in_share = 0;
    double async_even = step(p, &c);
    c.fan_in_share = 0.75;
    CHECK_CLOSE(step(p, &c), async_even, 1e-12, 0);
}

/* Out of step on shared cores, the cores never idle: a cycle is at least
 * all the work on them over C. two_layers on 2 workers x 1 thread, 2
 * cores, --kernel-rate 0.5 GB/s: each worker's forward and backward (33
 * ms), the server's on both gradients (ps-async: 2 x (2 + 3) ms; ps-ssp's
 * clock: 5 sums and an update, 13 ms) and the copies of each worker's
 * push and reply at both ends (4 x 2 x 6 MB at 0.5 GB/s: 96 ms), over 2
 * cores: 86 ms and 87.5, more than the turns or the wire (9.6 ms). With a
 * core for every thread (8) the bound, 21.5 ms, is below the cycle. */
static void test_async_cores_bound(void) {
    dt_profile *p = two_layers(0.002);
    dt_sim_cfg c = cfg(DT_MODE_PS_ASYNC, 2);
    double alone = step(p, &c);
    c.shared_cores = 2;
    c.kernel_rate = 0.5e9;
    CHECK_CLOSE(step(p, &c), (2 * 33 + 10 + 96) / 2.0 * 1e-3, 1e-12, 1e-12);
    c.mode = DT_MODE_PS_SSP;
    c.staleness = 2;
    CHECK_CLOSE(step(p, &c), (2 * 33 + 13 + 96) / 2.0 * 1e-3, 1e-12, 1e-12);
    c.mode = DT_MODE_PS_ASYNC;
    c.shared_cores = 8;
    CHECK_CLOSE(step(p, &c), alone, 0, 1e-12);
}

/* prof: one FC layer (100 x 200, batch 10: fwd 10 ms, bwd 20) and a loss
 * layer (2 ms, 1 ms); sum 2 ms, update 3 ms, 1 GFLOP/s. */
static void fc_layer(void) {
    memset(prof, 0, sizeof *prof);
    prof->batch = 10, prof->threads = 1, prof->reps = 1, prof->nlayers = 2;
    set_layer(prof, 0, "connected", 0.010, 0.020, 100 * 200 + 100, 100, 200);
    set_layer(prof, 1, "softmax", 0.002, 0.001, 0, 0, 0);
    prof->update_s = 0.003, prof->sum_s = 0.002, prof->gemm_gflops = 1;
}

static void test_sfb_by_hand(void) {
    fc_layer(); /* 3 workers below */
    dt_sim_cfg c = cfg_factors(DT_SFB_ALL, 3);
    /* Allgather of 10 x 300 x 4 bytes from 2 peers: 2 x (9.6 + 20) us after
     * backward (33 ms); rebuild 2 x 2 x 10 x 100 x 200 flops = 0.8 ms; the
     * layer's own update 3 ms. */
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK_CLOSE(r.step_s, 0.033 + 2 * (9.6e-6 + 20e-6) + 0.0008 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 2 * 10 * 300 * 4, 1e-9, 0);
    CHECK(r.fc_sfb == 1);
    /* sacp on 3 workers: SFB is faster than the server (and moves 48 kB
     * against PS's 160 kB). */
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_AUTO;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK(r.fc_sfb == 1);
    CHECK_CLOSE(r.step_s, 0.033 + 2 * (9.6e-6 + 20e-6) + 0.0008 + 0.003, 1e-12, 1e-12);

    /* 100 workers. SFB moves 2 x 10 x 99 x 300 x 4 = 2.4 MB per worker,
     * Poseidon's byte rule's PS 160 kB, but the one server's link takes
     * 100 x 80.4 kB each way and the server sums 100 gradients:
     * ps-sync: the pushes arrive by 33 + 100 x 0.06432 + 0.02 = 39.452 ms;
     * 100 sums and the average (2 ms each) and the update (3 ms): 244.452;
     * the replies: + 0.02 + 6.432 = 250.904 ms.
     * sfb: 99 x (9.6 + 20) us of factors after backward, then the rebuild,
     * 99 x 2 x 10 x 100 x 200 flops = 39.6 ms, and the update: 78.5304 ms. */
    c.nodes = 100;
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_OFF;
    CHECK_CLOSE(step(prof, &c), 0.250904, 1e-12, 1e-12);
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_ALL;
    CHECK_CLOSE(step(prof, &c), 0.0785304, 1e-12, 1e-12);
    CHECK(dt_sim_sfb_bytes(100, 200, 10, 100) > dt_sim_ps_bytes(100, 200)); /* the byte rule: PS */
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_AUTO; /* the simulated steps: SFB */
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK(r.fc_sfb == 1);
    CHECK_CLOSE(r.step_s, 0.0785304, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 99 * 10 * 300 * 4, 1e-9, 0);

    /* 100 servers of 201 floats each: a worker sends 100 messages of 804 B
     * (20.6432 us each) from 33 ms; the last server has its parts from the
     * 100 workers at 33 + 99 x 0.0206432 + 0.08432 ms, applies them in
     * 2.05 ms and replies in 0.02 + 0.06432 ms: 37.2623168 ms. The server
     * path wins now. */
    c.servers = 100;
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_OFF;
    CHECK_CLOSE(step(prof, &c), 0.0372623168, 1e-12, 1e-12);
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_AUTO;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK(r.fc_sfb == 0);
    CHECK_CLOSE(r.step_s, 0.0372623168, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, (100 * 200 + 100) * 4, 1e-9, 0);
}

/* --mode allreduce --sfb/--sacp, on fc_layer's profile. */
static void test_allreduce_factors_by_hand(void) {
    fc_layer();
    dt_sim_cfg c = cfg(DT_MODE_ALLREDUCE, 3);
    c.factors = DT_SFB_ALL;
    /* 3 workers: the factors' allgather, 2 x (9.6 + 20) us from 33 ms; the
     * rebuild, 2 x 2 x 10 x 100 x 200 flops = 0.8 ms; the averaging pass and
     * the update over all parameters, 2 + 3 ms. */
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK_CLOSE(r.step_s, 0.033 + 2 * (9.6e-6 + 20e-6) + 0.0008 + 0.005, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 2 * 10 * 300 * 4, 1e-9, 0);
    CHECK(r.fc_sfb == 1);
    /* --sacp, the trainer's byte rule: factors 48 kB against the ring's
     * 2 x 4/3 x 80.4 kB: factors. */
    c.factors = DT_SFB_AUTO;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK(r.fc_sfb == 1);
    CHECK_CLOSE(r.step_s, 0.033 + 2 * (9.6e-6 + 20e-6) + 0.0008 + 0.005, 1e-12, 1e-12);
    /* 100 workers: factors 2 x 10 x 99 x 300 x 4 = 2.376 MB against the
     * ring's 2 x 1.98 x 80.4 kB = 318 kB: the ring, one bucket from 33 ms:
     * its sums 0.99 x 2 ms, 159,192 bytes at 10 Gbit/s (127.3536 us) and
     * 198 messages (3.96 ms), then 5 ms. --sfb: 99 x 29.6 us of factors,
     * a 39.6 ms rebuild, 5 ms. */
    c.nodes = 100;
    CHECK_OK(dt_sim_run(&r, prof, &c));
    CHECK(r.fc_sfb == 0);
    CHECK_CLOSE(r.step_s, 0.033 + 0.00198 + 127.3536e-6 + 0.00396 + 0.005, 1e-12, 1e-12);
    c.factors = DT_SFB_ALL;
    CHECK_CLOSE(step(prof, &c), 0.033 + 99 * 29.6e-6 + 0.0396 + 0.005, 1e-12, 1e-12);
    c.factors = DT_SFB_OFF;
    CHECK_CLOSE(step(prof, &c), 0.033 + 0.00198 + 127.3536e-6 + 0.00396 + 0.005, 1e-12, 1e-12);
}

static void test_byte_counts(void) {
    CHECK_CLOSE(dt_sim_ps_bytes(1024, 3136), 2.0 * 1024 * 3136 * 4, 0, 0);
    CHECK_CLOSE(dt_sim_sfb_bytes(1024, 3136, 64, 8), 2.0 * 64 * 7 * (1024 + 3136) * 4, 0, 0);
    CHECK_CLOSE(dt_sim_sfb_bytes(1024, 3136, 64, 1), 0, 0, 0);
    /* The cnn's fc1024 at batch 64: SFB is cheaper up to 12 workers. */
    CHECK(dt_sim_sfb_bytes(1024, 3136, 64, 13) < dt_sim_ps_bytes(1024, 3136));
    CHECK(dt_sim_sfb_bytes(1024, 3136, 64, 14) > dt_sim_ps_bytes(1024, 3136));
}

/* A cnn-like profile: conv, pool, a large FC layer, a small one, the loss. */
static dt_profile *cnn_like(void) {
    memset(prof, 0, sizeof *prof);
    prof->batch = 64, prof->threads = 1, prof->reps = 1, prof->nlayers = 5;
    set_layer(prof, 0, "convolutional", 0.011, 0.022, 51264, 0, 0);
    set_layer(prof, 1, "maxpool", 0.001, 0.0003, 0, 0, 0);
    set_layer(prof, 2, "connected", 0.007, 0.009, 3212288, 1024, 3136);
    set_layer(prof, 3, "connected", 0.00005, 0.00006, 10250, 10, 1024);
    set_layer(prof, 4, "softmax", 0.000004, 0.000007, 0, 0, 0);
    prof->update_s = 0.0012, prof->sum_s = 0.0006, prof->gemm_gflops = 60;
    return prof;
}

/* A synchronous step waits for the slowest worker: forward and backward
 * stretch by the profile's straggler in allreduce and ps-sync (and ps-ssp
 * at staleness 0), not in ps-async, and not for one node. */
static void test_straggler(void) {
    const dt_mode modes[] = {DT_MODE_ALLREDUCE, DT_MODE_PS_SYNC, DT_MODE_PS_SSP, DT_MODE_PS_ASYNC};
    for (int nodes = 1; nodes <= 2; nodes++)
        for (int m = 0; m < 4; m++) {
            dt_sim_cfg c = {.mode = modes[m], .nodes = nodes, .servers = 1, .bandwidth = 1e12, .fusion_mb = 4,
                            .overlap = 1};
            dt_sim_result alone, slow;
            dt_profile *p = cnn_like();
            double passes = 0;
            for (int i = 0; i < p->nlayers; i++) passes += p->layers[i].fwd_s + p->layers[i].bwd_s;
            CHECK_OK(dt_sim_run(&alone, p, &c));
            p->workers = 2;
            p->straggler = 1.5;
            CHECK_OK(dt_sim_run(&slow, p, &c));
            int waits = nodes > 1 && modes[m] != DT_MODE_PS_ASYNC;
            CHECK(slow.straggler == (waits ? 1.5 : 1) && alone.straggler == 1);
            CHECK_CLOSE(slow.compute_s - alone.compute_s, waits ? 0.5 * passes : 0, 1e-12, 1e-9);
        }
}

/* docs/profiles/cnn-1t.json (examples/cnn.cfg, batch 64, one thread). */
static dt_profile *cnn_1t(void) {
    memset(prof, 0, sizeof *prof);
    prof->batch = 64, prof->threads = 1, prof->reps = 30, prof->nlayers = 10;
    set_layer(prof, 0, "convolutional", 0.001376054, 0.0014455115, 832, 0, 0);
    set_layer(prof, 1, "activation", 0.0004258305, 0.0006345755, 0, 0, 0);
    set_layer(prof, 2, "maxpool", 0.00225119, 0.000619708, 0, 0, 0);
    set_layer(prof, 3, "convolutional", 0.0105119045, 0.021130302, 51264, 0, 0);
    set_layer(prof, 4, "activation", 0.000193567001, 0.000326904001, 0, 0, 0);
    set_layer(prof, 5, "maxpool", 0.0011904535, 0.000270085, 0, 0, 0);
    set_layer(prof, 6, "connected", 0.0065590775, 0.008175057, 3212288, 1024, 3136);
    set_layer(prof, 7, "activation", 1.53174997e-05, 1.64940002e-05, 0, 0, 0);
    set_layer(prof, 8, "connected", 4.69800007e-05, 5.66540002e-05, 10250, 10, 1024);
    set_layer(prof, 9, "softmax", 4.02600017e-06, 7.26100006e-06, 0, 0, 0);
    prof->update_s = 0.0011252125, prof->sum_s = 0.000565257501, prof->gemm_gflops = 62.4204;
    return prof;
}

/* sacp chooses by the simulated step, servers' links included: never slower
 * than ps-sync or sfb. The cnn's fc1024 takes SFB at every node count here
 * (Poseidon's byte rule sent it to the single server from 14 workers on, and
 * sacp then predicted ps-sync's step: 3399 ms at 1 Gbit/s on 16 nodes where
 * sfb predicts 283), its fc10 the servers. */
static void test_sacp_cnn(void) {
    dt_profile *p = cnn_1t();
    static const int nodes[] = {2, 4, 8, 16, 32};
    /* sacp's step in ms at 1 and 10 Gbit/s, one server. */
    static const double want[2][5] = {{62.9458, 79.0149, 139.5139, 260.5118, 502.5075},
                                      {62.9458, 76.1159, 102.4561, 155.1366, 263.3081}};
    for (int g = 0; g < 2; g++)
        for (int n = 0; n < 5; n++) {
            dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, nodes[n]);
            c.bandwidth = g ? GBPS10 : GBPS10 / 10;
            double ps = step(p, &c);
            c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_ALL;
            double sfb = step(p, &c);
            c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_AUTO;
            dt_sim_result r;
            CHECK_OK(dt_sim_run(&r, p, &c));
            if (!(r.step_s <= fmin(ps, sfb))) {
                fprintf(stderr, "%d nodes, %d Gbps: sacp %g s, ps-sync %g, sfb %g\n", nodes[n], g ? 10 : 1,
                        r.step_s, ps, sfb);
                CHECK(r.step_s <= fmin(ps, sfb));
            }
            CHECK_CLOSE(r.step_s * 1e3, want[g][n], 1e-4, 0);
            /* fc1024 by factors, the rest (conv 832 + 51264, fc10 10250) by the server. */
            double P = nodes[n];
            CHECK(r.fc_sfb == 1);
            CHECK_CLOSE(r.bytes_sent, (P - 1) * 64 * (1024 + 3136) * 4 + (832 + 51264 + 10250) * 4, 1e-6, 0);
        }
    /* 1 Gbit/s, 16 and 32 nodes: ps-sync 3357.50 and 6684.75 ms, sfb 284.38
     * and 560.58, sacp 260.51 and 502.51. sfb sends both fully connected
     * layers' factors from 15 (31) peers, a transfer whose window the conv
     * layers' two pushes ((832 + 51264) x 4 bytes: 1.6671 ms and 2 x 20 us)
     * fall in: they go first, the factors end 1.7071 ms later than alone
     * (282.68 and 558.88 with the pushes after them). The 2-node choice is
     * the byte rule's: 62.95 ms, 1.3143 MB. */
    dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, 16);
    c.bandwidth = GBPS10 / 10;
    CHECK_CLOSE(step(p, &c) * 1e3, 3357.4961, 1e-4, 0);
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_ALL;
    CHECK_CLOSE(step(p, &c) * 1e3, 282.6776 + 1.7071, 1e-4, 0);
    c.nodes = 32;
    CHECK_CLOSE(step(p, &c) * 1e3, 558.8755 + 1.7071, 1e-4, 0);
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_OFF;
    CHECK_CLOSE(step(p, &c) * 1e3, 6684.7486, 1e-4, 0);
    CHECK(dt_sim_sfb_bytes(1024, 3136, 64, 16) > dt_sim_ps_bytes(1024, 3136));
    CHECK(dt_sim_sfb_bytes(1024, 3136, 64, 2) < dt_sim_ps_bytes(1024, 3136));
    CHECK(dt_sim_sfb_bytes(10, 1024, 64, 2) > dt_sim_ps_bytes(10, 1024));

    /* With 16 servers on 32 workers at 10 Gbit/s each server's link carries
     * 32 x 13.1 / 16 MB each way (21 ms), far less than the fc1024's rebuild
     * from 31 peers (204 ms): the fc1024 goes through the servers, as in
     * ps-sync (84.15 ms; sfb 263.10). The fc10's factors (8.5 MB from 31
     * peers on the worker's link, a 40 MFLOP rebuild) come in while the
     * servers still commit the other segments: 84.02 ms. */
    c = cfg_factors(DT_SFB_AUTO, 32);
    c.servers = 16;
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    /* Only the fc10's factors (31 x 64 x 1034 floats) besides the servers' 13.1 MB less the fc10's. */
    CHECK(r.fc_sfb == 1);
    CHECK_CLOSE(r.bytes_sent, 31.0 * 64 * (10 + 1024) * 4 + (832 + 51264 + 1024 * 3136 + 1024) * 4, 1e-6, 0);
    c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_OFF;
    CHECK_CLOSE(step(p, &c) * 1e3, 84.1525, 1e-4, 0);
    CHECK_CLOSE(r.step_s * 1e3, 84.0194, 1e-4, 0);
}

/* More than 8 fully connected layers: sacp descends from the faster of
 * ps-sync and sfb instead of trying every assignment; still never slower
 * than either, and strictly faster where the layers want different paths. */
static void test_sacp_many_fc(void) {
    memset(prof, 0, sizeof *prof);
    prof->batch = 32, prof->threads = 1, prof->reps = 1, prof->nlayers = 11;
    for (int i = 0; i < 10; i++) {
        int m = i % 2 ? 2048 : 16, n = i % 3 ? 1024 : 64; /* wide layers and thin ones */
        set_layer(prof, i, "connected", 0.001, 0.002, (size_t)m * n + (size_t)m, m, n);
    }
    set_layer(prof, 10, "softmax", 0.00001, 0.00001, 0, 0, 0);
    prof->update_s = 0.004, prof->sum_s = 0.002, prof->gemm_gflops = 50;
    int mixed = 0;
    static const int nodes[] = {2, 8, 32};
    for (size_t n = 0; n < sizeof nodes / sizeof *nodes; n++)
        for (int servers = 1; servers <= 8; servers *= 8)
            for (int g = 0; g < 2; g++) {
                dt_sim_cfg c = cfg(DT_MODE_PS_SYNC, nodes[n]);
                c.servers = servers;
                c.bandwidth = g ? GBPS10 : GBPS10 / 10;
                double ps = step(prof, &c);
                c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_ALL;
                double sfb = step(prof, &c);
                c.mode = DT_MODE_PS_SYNC, c.factors = DT_SFB_AUTO;
                dt_sim_result r;
                CHECK_OK(dt_sim_run(&r, prof, &c));
                CHECK(r.step_s <= fmin(ps, sfb));
                CHECK(r.fc_sfb >= 0 && r.fc_sfb <= 10);
                mixed += r.fc_sfb > 0 && r.fc_sfb < 10 && r.step_s < fmin(ps, sfb);
            }
    CHECK(mixed > 0);
}

static void test_monotonic(void) {
    dt_profile *p = cnn_like();
    static const int nodes[] = {2, 3, 4, 16, 64};
    for (int m = 0; m < NPOINTS; m++)
        for (size_t n = 0; n < sizeof nodes / sizeof *nodes; n++)
            for (int overlap = 0; overlap < 2; overlap++) {
                dt_sim_cfg c = cfg_point(m, nodes[n]);
                c.overlap = overlap;
                c.servers = 1 + (int)n % 3;
                double prev = INFINITY;
                for (double gbps = 0.1; gbps <= 400; gbps *= 1.7) {
                    c.bandwidth = gbps * 1e9 / 8;
                    double t = step(p, &c);
                    if (!(t <= prev)) {
                        fprintf(stderr, "mode %d nodes %d: %g Gbps slower (%g s) than less\n", m, nodes[n],
                                gbps, t);
                        CHECK(t <= prev);
                    }
                    prev = t;
                }
                c.bandwidth = GBPS10;
                prev = 0;
                for (double lat = 0; lat <= 2e-3; lat = lat * 2 + 1e-7) {
                    c.latency = lat;
                    double t = step(p, &c);
                    if (!(t >= prev)) {
                        fprintf(stderr, "mode %d nodes %d: latency %g faster (%g s) than less\n", m, nodes[n],
                                lat, t);
                        CHECK(t >= prev);
                    }
                    prev = t;
                }
            }
}

static void test_one_node(void) {
    dt_profile *p = cnn_like();
    for (int m = 0; m < NPOINTS; m++) {
        dt_sim_cfg c = cfg_point(m, 1);
        c.bandwidth = 1e3; /* a network that slow would dominate anything it carried */
        dt_sim_result r;
        CHECK_OK(dt_sim_run(&r, p, &c));
        CHECK(r.bytes_sent == 0 && r.link_busy_s == 0 && r.comm_share == 0);
        CHECK_CLOSE(r.step_s, dt_profile_step_s(p), 1e-15, 1e-12);
        CHECK_CLOSE(r.speedup, 1, 0, 1e-12);
    }
}

static void test_shared_cores(void) {
    dt_profile *p = cnn_like();
    for (int m = 0; m < NPOINTS; m++) {
        dt_sim_cfg c = cfg_point(m, 3);
        c.shared_cores = 2; /* 3 workers x 1 thread on 2 cores: everything 1.5 x slower */
        c.overlap = 0;      /* (and nothing sent while computing: see test_comm_shares_cores) */
        dt_sim_result shared, alone;
        CHECK_OK(dt_sim_run(&shared, p, &c));
        CHECK_CLOSE(shared.compute_scale, 1.5, 0, 1e-12);
        c.shared_cores = 0;
        CHECK_OK(dt_sim_run(&alone, p, &c));
        CHECK(alone.compute_scale == 1);
        /* Every time in the step's pipeline is 1.5 x longer, so the step is. */
        CHECK_CLOSE(shared.step_s, 1.5 * alone.step_s, 1e-12, 1e-9);
        c.overlap = 1;
        c.shared_cores = 0;
        CHECK_OK(dt_sim_run(&alone, p, &c));
        c.shared_cores = 6; /* a core per worker's compute and one per its communication: as if alone */
        CHECK_OK(dt_sim_run(&shared, p, &c));
        CHECK(shared.compute_scale == 1);
        CHECK_CLOSE(shared.step_s, alone.step_s, 0, 1e-12);
    }
}

/* 4 workers x 1 thread on 4 cores: no core left for the communication
 * threads, so a transfer during backward (its work and the polling that
 * moves it) shares a core with the compute (share 8 / 4 = 2: each at half
 * speed). By hand on two_layers at top-k 1% with a 12 ms selection over
 * all 1.5 M floats, a bucket per layer: L1's transfer, its selection (10
 * ms) and allgather (3 x 12500 pairs of 8 bytes, 0.24 ms, and 3 alpha),
 * 10.3 ms in all, starts at 13 ms while 20 ms of backward remain: it ends
 * at 33.6 ms and the compute has lost 10.3 ms. L0's gradients are ready
 * at 43.3 ms, where backward now ends: its selection (2 ms) and allgather
 * (3 x 2500 pairs: 0.048 ms + 3 alpha) run alone, then the 3 ms update. */
static void test_comm_shares_cores(void) {
    dt_profile *p = two_layers(0);
    p->topk_s = 0.012;
    dt_sim_cfg c = cfg(DT_MODE_ALLREDUCE, 4);
    c.fusion_mb = 0;
    c.codec = (dt_grad_codec){DT_GC_TOPK, 0.01};
    c.shared_cores = 4;
    dt_sim_result r;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK(r.compute_scale == 1);
    CHECK_CLOSE(r.step_s, 0.0433 + 0.002 + 0.000108 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.0103 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.bytes_sent, 3 * (12500 + 2500) * 8, 1e-6, 0);
    c.shared_cores = 8; /* a core for each: L1's bucket 13..23.3 ms, hidden; L0's from 33 ms */
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.033 + 0.002108 + 0.003, 1e-12, 1e-12);
    /* 4 workers x 2 threads on 8 cores: share 12 / 8 = 1.5, every thread
     * at 2/3 speed. L1's transfer takes 15.45 ms (13..28.45), while the
     * compute does 10.3 ms of work and loses 5.15: L0's gradients at 38.15
     * ms, its bucket 38.15..40.258, the update 3 ms. */
    p->threads = 2;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK(r.compute_scale == 1);
    CHECK_CLOSE(r.step_s, 0.03815 + 0.002108 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.00515 + 0.003, 1e-12, 1e-12);
    p->threads = 1;
    /* A plain ring (no sums: sum_s 0) shares the core as well: L1's bucket
     * (1.5 x 5 MB / 10 Gbit/s + 6 alpha = 6.12 ms) from 13 ms ends at 25.24
     * and costs the compute 6.12 ms; L0's (1.32 ms) from 39.12, alone. */
    c.codec = (dt_grad_codec){DT_GC_NONE, 0};
    c.shared_cores = 4;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.03912 + 0.00132 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.00612 + 0.003, 1e-12, 1e-12);
    /* The kernel's copies, when longer than the transfer, cost the compute
     * their time instead (--kernel-rate 1.5 GB/s): L1's bucket moves 7.5 MB
     * each way, 15 MB copied = 10 ms of a core from 13 ms, while 20 ms of
     * backward remain: the compute loses 10 ms (share 2). L0's gradients
     * at 43 ms, when backward is over: its ring 43..44.32, the update 3 ms. */
    c.kernel_rate = 1.5e9;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.04432 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.010 + 0.003, 1e-12, 1e-12);
    c.shared_cores = 8; /* a core for each communication thread: the copies run there */
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.03432 + 0.003, 1e-12, 1e-12);

    /* With the rate measured on busy cores (--busy-bandwidth) a transfer
     * during the compute moves at that rate and takes nothing from the
     * compute but the kernel's copies. 5 Gbit/s (half speed): L1's bucket
     * 13..25.24 ms, L0's 33..34.32, the update; the compute untouched. */
    c.shared_cores = 4;
    c.kernel_rate = 0;
    c.busy_bandwidth = GBPS10 / 2;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.03432 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.003, 1e-12, 1e-12);
    /* 2.5 Gbit/s: 5 of L1's 6.12 ms move in the 20 ms of backward, the
     * other 1.12 at full speed after it (33..34.12); L0's 34.12..35.44. */
    c.busy_bandwidth = GBPS10 / 4;
    CHECK_CLOSE(step(p, &c), 0.03544 + 0.003, 1e-12, 1e-12);
    /* With --kernel-rate 1.5 GB/s the copies of what moves beside the
     * compute are its loss (15 MB: 10 ms of a core for all 6.12 ms of L1's
     * transfer, c = 10 / 6.12 per second moved), and backward ends later
     * by them: m = r (20 ms + c m) is 8.45 ms at r = 1/4, more than the
     * transfer, so all of it moves beside the compute (13..37.48 ms) and
     * costs 10 ms. L0's gradients at 43 ms, its ring 1.32, the update. */
    c.kernel_rate = 1.5e9;
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, 0.043 + 0.00132 + 0.003, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, 0.033 + 0.010 + 0.003, 1e-12, 1e-12);
    /* At r = 1/16: m = (20 / 16) / (1 - c / 16) ms moves beside it, at a
     * loss of c m; the rest (6.12 - m) after backward, which ends at
     * 33 + c m ms; then L0's ring and the update. */
    c.busy_bandwidth = GBPS10 / 16;
    double cm = 10.0 / 6.12, m = 1.25 / (1 - cm / 16);
    CHECK_OK(dt_sim_run(&r, p, &c));
    CHECK_CLOSE(r.step_s, (33 + cm * m + 6.12 - m + 1.32 + 3) * 1e-3, 1e-12, 1e-12);
    CHECK_CLOSE(r.compute_s, (33 + cm * m + 3) * 1e-3, 1e-12, 1e-12);
    /* Faster than the link: the link's rate (no busy slowdown). */
    c.busy_bandwidth = GBPS10 * 2;
    c.kernel_rate = 0;
    CHECK_CLOSE(step(p, &c), 0.03432 + 0.003, 1e-12, 1e-12);
}

static void test_bad_config(void) {
    dt_profile *p = cnn_like();
    dt_sim_result r;
    dt_sim_cfg c = cfg(DT_MODE_ALLREDUCE, 0);
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c = cfg(DT_MODE_PS_SYNC, 2);
    c.bandwidth = 0;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c = cfg(DT_MODE_PS_SYNC, 2);
    c.servers = 0;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c = cfg(DT_MODE_PS_SSP, 2);
    c.staleness = -1;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c = cfg_factors(DT_SFB_ALL, 2);
    c.shared_cores = -1;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c.shared_cores = 0;
    c.kernel_rate = -1;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c.kernel_rate = 0;
    c.busy_bandwidth = -1;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "busy bandwidth"));
    c.busy_bandwidth = 0;
    c.fan_in_share = 1.5;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "fan-in share"));
    c.fan_in_share = NAN;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE);
    c.fan_in_share = 0;
    c.server_nice = 20;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "nice value (20)"));
    c.server_nice = -1;
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "nice value (-1)"));
    c.server_nice = 19;
    p->gemm_gflops = 0; /* the SFB rebuild's rate */
    CHECK(dt_sim_run(&r, p, &c) == DT_ERR_USAGE && strstr(dt_last_error(), "GEMM"));
}

static void test_units(void) {
    double v = 0;
    CHECK_OK(dt_sim_parse_bandwidth("10Gbps", "--bandwidth", &v));
    CHECK_CLOSE(v, 1.25e9, 0, 1e-15);
    CHECK_OK(dt_sim_parse_bandwidth("1Gbps", "--bandwidth", &v));
    CHECK_CLOSE(v, 1.25e8, 0, 1e-15);
    CHECK_OK(dt_sim_parse_bandwidth("100Mbps", "--bandwidth", &v));
    CHECK_CLOSE(v, 1.25e7, 0, 1e-15);
    CHECK_OK(dt_sim_parse_bandwidth("25Gbps", "--bandwidth", &v));
    CHECK_CLOSE(v, 3.125e9, 0, 1e-15);
    CHECK_OK(dt_sim_parse_bandwidth("2.5GB/s", "--bandwidth", &v));
    CHECK_CLOSE(v, 2.5e9, 0, 1e-15);
    CHECK_OK(dt_sim_parse_latency("20us", &v));
    CHECK_CLOSE(v, 20e-6, 0, 1e-15);
    CHECK_OK(dt_sim_parse_latency("1ms", &v));
    CHECK_CLOSE(v, 1e-3, 0, 1e-15);
    CHECK_OK(dt_sim_parse_latency("0us", &v));
    CHECK(v == 0);
    static const char *const bad_bw[] = {"10", "10Gb", "10gbps", "fast", "-1Gbps", "0Gbps", "10 Gbps",
                                         "1e400Gbps", "Gbps", ""};
    for (size_t i = 0; i < sizeof bad_bw / sizeof *bad_bw; i++) {
        CHECK(dt_sim_parse_bandwidth(bad_bw[i], "--bandwidth", &v) == DT_ERR_USAGE);
        CHECK(strstr(dt_last_error(), "--bandwidth") && strstr(dt_last_error(), "Gbps"));
    }
    static const char *const bad_lat[] = {"20", "20sec", "-1us", "us", "nan us", "inf"};
    for (size_t i = 0; i < sizeof bad_lat / sizeof *bad_lat; i++) {
        CHECK(dt_sim_parse_latency(bad_lat[i], &v) == DT_ERR_USAGE);
        CHECK(strstr(dt_last_error(), "--latency") && strstr(dt_last_error(), "us"));
    }
    /* --modes: the mode table's names, with factors where a mode reads them. */
    dt_mode m;
    dt_sfb_policy f;
    char name[64];
    CHECK(dt_sim_parse_mode("ps-sync+sacp", "--modes", &m, &f) == DT_OK && m == DT_MODE_PS_SYNC && f == DT_SFB_AUTO);
    CHECK(dt_sim_parse_mode("allreduce+sfb", "--modes", &m, &f) == DT_OK && m == DT_MODE_ALLREDUCE && f == DT_SFB_ALL);
    CHECK(dt_sim_parse_mode("ps-ssp", "--modes", &m, &f) == DT_OK && m == DT_MODE_PS_SSP && f == DT_SFB_OFF);
    CHECK(strcmp(dt_sim_mode_name(DT_MODE_PS_SYNC, DT_SFB_AUTO, name, sizeof name), "ps-sync+sacp") == 0);
    CHECK(strcmp(dt_sim_mode_name(DT_MODE_PS_ASYNC, DT_SFB_OFF, name, sizeof name), "ps-async") == 0);
    static const char *const bad_mode[][2] = {
        {"ps-hogwild", "does not model ps-hogwild (it models allreduce, ps-sync, ps-async, ps-ssp)"},
        {"serial", "does not model serial"},
        {"hogwild", "unknown mode 'hogwild'"},
        {"sacp", "sacp is an option of a mode, not a mode: write ps-sync+sacp or allreduce+sacp"},
        {"ps-async+sfb", "ps-async has no sufficient factors (allreduce or ps-sync have)"},
        {"ps-sync+topk", "after + comes sfb or sacp"}};
    for (size_t i = 0; i < sizeof bad_mode / sizeof *bad_mode; i++) {
        CHECK(dt_sim_parse_mode(bad_mode[i][0], "--modes", &m, &f) == DT_ERR_USAGE);
        if (!strstr(dt_last_error(), bad_mode[i][1])) fprintf(stderr, "%s: %s\n", bad_mode[i][0], dt_last_error());
        CHECK(strstr(dt_last_error(), bad_mode[i][1]) != NULL);
    }
}

int main(void) {
    prof = malloc(sizeof *prof);
    test_allreduce_by_hand();
    test_allreduce_compressed();
    test_ps_by_hand();
    test_async_by_hand();
    test_sfb_by_hand();
    test_allreduce_factors_by_hand();
    test_byte_counts();
    test_sacp_cnn();
    test_sacp_many_fc();
    test_monotonic();
    test_one_node();
    test_shared_cores();
    test_async_cores_bound();
    test_async_small_segments();
    test_server_link_busy();
    test_fan_in_share();
    test_straggler();
    test_comm_shares_cores();
    test_bad_config();
    test_units();
    free(prof);
    return dt_test_finish("test_sim");
}
