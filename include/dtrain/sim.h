/* Scaling simulator: predicts the step time, throughput and speedup of
 * data-parallel training on P nodes from a per-layer compute profile and an
 * alpha-beta network model (latency alpha per message, bandwidth beta per
 * node link, full duplex).
 *
 * Profiles come from measurement: dt_profile_measure times every layer's
 * forward and backward at the per-worker batch on this machine (alone, or
 * beside companion workers as a job on one machine computes), and
 * dt_profile_write/read keep them as JSON (docs/SCALING.md has the format).
 * A synchronous step of P >= 2 waits for the slowest worker: forward and
 * backward stretch by the profile's straggler (1 when measured alone).
 * The model is pure arithmetic on a profile (no MPI, no timing), so it is
 * tested with hand-made profiles.
 *
 * One step of a worker, as dtrain runs it:
 *   forward, loss, then backward from the last layer to the first; layer i's
 *   gradients are ready when its backward ends (with overlap; without, all
 *   at the end of backward). A single link per node carries transfers one
 *   at a time in the order they become ready. The step ends when the last
 *   transfer and the optimiser update are done.
 *   allreduce: dtrain's fusion buckets (dt_bucket_plan_layers), each a ring
 *     allreduce of b bytes: 2(P-1)/P * b / beta + 2(P-1) * alpha, plus the
 *     ring's sums, (P-1)/P of the bucket at the profile's sum rate; then
 *     every worker averages and runs SGD. With factors (allreduce+sfb,
 *     allreduce+sacp: the trainer's choice of layers, dt_sfb_chosen) a fully
 *     connected layer is a bucket of its own whose factors are allgathered as
 *     ps-sync+sfb's
 *     below; once every bucket is in, each worker rebuilds those layers on
 *     its compute cores, then updates.
 *   ps-sync: S servers on nodes of their own hold equal shards of the
 *     parameters. A worker pushes each layer's part of each shard when the
 *     layer is ready; a server's link takes P copies of every part; once all
 *     are in it sums P gradients, averages, runs SGD on its shard and copies
 *     a reply snapshot per worker ((2P + 1) x the profile's sum time and one
 *     update, scaled to the shard) and sends the shard to all P workers; a
 *     worker's link receives every shard.
 *   ps-sync+sfb: ps-sync for every layer but the fully connected ones, which
 *     broadcast sufficient factors (Poseidon): an allgather of K * (M + N)
 *     floats per worker, (P-1) * (K (M+N) 4 / beta + alpha); then each
 *     worker rebuilds the (M, N) gradient from the others' factors,
 *     (P-1) * 2 K M N flops at the profile's GEMM rate, on its compute cores
 *     after backward, and updates the layer itself.
 *   ps-sync+sacp: each fully connected layer goes through the servers (as
 *     ps-sync) or by sufficient factors (as ps-sync+sfb), whichever assignment of the F fully
 *     connected layers gives the shortest simulated step: all 2^F are
 *     simulated when F <= 8 (otherwise a descent from the faster of all-PS
 *     and all-SFB, one layer moved at a time while the step shortens). So
 *     the servers' links (P x the layer's part each way), their sums and the
 *     SFB rebuild all count, not only the worker's bytes that Poseidon's
 *     HybComm compares (dt_sim_ps_bytes against dt_sim_sfb_bytes, the
 *     trainer's --sacp rule), and its step is never longer than ps-sync's
 *     or ps-sync+sfb's (both are candidates; ties keep the servers).
 *   ps-async, ps-ssp: P identical workers in steady state, none waiting for
 *     another; their transfers on a server's link fall into turns (where two
 *     overlap, the one that began first stays ahead until they no longer
 *     do; measured, though ps-ssp's workers once fell back into step). A
 *     worker's cycle is its step against servers that serve it alone: as
 *     ps-sync with P = 1, except for what a server does before
 *     the reply: ps-async applies the gradient straight and copies the
 *     reply (one pass and one update, not 2P + 1 passes); a ps-ssp server
 *     (staleness >= 1) copies the shard as it is (one pass: the clock is
 *     applied once every worker's is in, and with identical workers the
 *     bound s is never reached), and the worker then adds its own gradient
 *     (read-my-writes). The servers bound the cycle from below: per cycle a
 *     server's link takes P pushes of its shard in and sends P replies out,
 *     and it applies P gradients (ps-async) or one clock (ps-ssp, as
 *     ps-sync). ps-ssp with staleness 0 is ps-sync.
 * One node (P = 1) is the serial step in every mode: nothing to exchange. */
#ifndef DTRAIN_SIM_H
#define DTRAIN_SIM_H

#include <stddef.h>

#include "dtrain/plan.h"
#include "dtrain/model.h"
#include "dtrain/status.h"

/* One layer of a profile, in forward order. */
typedef struct {
    char kind[24];         /* section name, e.g. "connected" */
    double fwd_s, bwd_s;   /* median seconds of its forward / backward at the profile's
                              batch (the loss counts as the softmax layer's backward) */
    size_t params;         /* trainable floats (weights then biases) */
    int fc_out, fc_in;     /* fully connected: weights (fc_out, fc_in); 0 for other kinds */
} dt_sim_layer;

/* What a worker's step costs on the measuring machine. */
typedef struct {
    char model[512];       /* model file it was measured on */
    int batch;             /* per-worker batch K */
    int threads;           /* compute threads of the measurement */
    int reps;              /* timed repetitions (medians) */
    int nlayers;
    dt_sim_layer layers[DT_MAX_LAYERS];
    double update_s;       /* one SGD step over all parameters */
    double sum_s;          /* adding one gradient into another over all parameters
                              (a server summing a worker's gradient, a worker averaging) */
    double gemm_gflops;    /* GFLOP/s of the fully connected layers' forward GEMMs
                              (SFB's reconstruction rate); 0 when there are none */
    double topk_s;         /* a worker's top-k selection at R = 1% over all parameters
                              (--grad-compression topk:R, dt_topk_encode); 0: not measured
                              (version 1 profiles), which the simulator refuses for top-k */
    int workers;           /* workers computing at once while it was measured, each on its own
                              `threads` (1: alone; versions 1 and 2 are) */
    double straggler;      /* with workers > 1: how much later the slowest of them ends a
                              step they all begin together than the measured one (median
                              of the slowest over median of its own; >= 1; 1 for one) */
} dt_profile;

#define DT_PROFILE_MAX_WORKERS 64

/* Builds spec's net at spec->batch and times it on random data: a few
 * warm-up steps, then the medians of `reps` timed repetitions of every
 * layer's forward and backward (dt_net_time_step), of the SGD update, of a
 * gradient sum and of a top-k selection. `threads` is recorded (the caller
 * sets the calling thread's count).
 *
 * workers > 1 measures the compute as that many workers on one machine see
 * it: workers - 1 companions, each its own net on a thread of its own with
 * `threads` OpenMP threads, compute beside the measured one. Their timed
 * steps begin together (a barrier per rep, as a synchronous job's steps
 * do), which gives `straggler`; the companions keep computing while the
 * update, sum and top-k are timed. DT_ERR_USAGE for reps < 1 or workers
 * outside [1, DT_PROFILE_MAX_WORKERS]. */
dt_status dt_profile_measure(dt_profile *p, const dt_model_spec *spec, int threads, int reps, int workers);

/* Profile files (JSON). Write: DT_ERR_IO naming the file. Read: DT_ERR_IO,
 * or DT_ERR_FORMAT "FILE:LINE: ..." / "FILE: ..." for malformed JSON, a
 * wrong format tag or version, a missing or invalid field. */
dt_status dt_profile_write(const dt_profile *p, const char *path);
dt_status dt_profile_read(dt_profile *p, const char *path);

/* Serial step (forward, loss, backward, SGD) in seconds. */
double dt_profile_step_s(const dt_profile *p);

/* The modes of the mode table (plan.h) the simulator models: allreduce and
 * the parameter servers whose replies wait for the clocks a worker may read
 * (ps-sync, ps-ssp) or for its own gradient (ps-async). Not the serial run
 * (one node of any mode is) nor the deferred replies of ps-async-nowait
 * and ps-hogwild. */
int dt_sim_models(dt_mode mode);

/* "MODE" or "MODE+sfb" / "MODE+sacp" (a mode that reads --sfb/--sacp: its
 * fully connected layers by sufficient factors, all of them or where they
 * move fewer bytes) -> *mode, *factors. DT_ERR_USAGE naming flag for an
 * unknown mode, one the simulator does not model, or factors on a mode
 * that has none. */
dt_status dt_sim_parse_mode(const char *text, const char *flag, dt_mode *mode, dt_sfb_policy *factors);
/* "ps-sync+sacp", "allreduce", ... into buf. */
const char *dt_sim_mode_name(dt_mode mode, dt_sfb_policy factors, char *buf, size_t cap);

typedef struct {
    dt_mode mode;          /* one that dt_sim_models */
    int nodes;             /* P: workers */
    int servers;           /* S: the parameter servers of every mode but allreduce, each with its
                              own link */
    int staleness;         /* ps-ssp: clocks a worker may run ahead (0: ps-sync) */
    double bandwidth;      /* beta: bytes per second per link, each direction */
    double latency;        /* alpha: seconds per message */
    double fusion_mb;      /* allreduce bucket size in MiB, as --fusion-mb (0: one per layer) */
    int overlap;           /* 1: wait-free backprop; 0: transfers start after backward */
    dt_sfb_policy factors; /* allreduce and ps-sync: fully connected layers by sufficient factors,
                              all of them (MODE+sfb) or where they make the step shorter
                              (MODE+sacp); DT_SFB_OFF for the other modes */
    dt_grad_codec codec;   /* gradients on the wire (--grad-compression): allreduce buckets; bf16/fp16
                              also the servers' pushes and replies; zero: fp32 */
    int shared_cores;      /* 0: every node is a machine of its own. C: all workers share one
                              machine of C cores (validation on this machine): with P x threads
                              > C, compute, transfers (copies by the same cores) and the servers'
                              work all slow by P x threads / C */
    double kernel_rate;    /* with shared_cores: bytes per second one core moves through the
                              kernel's network stack (each byte a worker sends or receives while
                              its compute runs costs the compute 1/kernel_rate of a core, as its
                              communication thread's work does); 0: not priced */
    double busy_bandwidth; /* with shared_cores: bytes per second a transfer moves at while the
                              workers compute, measured with every core busy (bench/mpi_link's
                              *_busy); the compute then loses only the kernel's copies. 0: not
                              measured; such a transfer takes turns with the compute */
    double fan_in_share;   /* the share of a server's link the first of the workers pushing into it
                              at once takes until its push is in, the others sharing the rest
                              evenly (bench/mpi_link with 3 ranks measures it for two); a
                              synchronous clock commits each segment when the slowest's part is
                              in. At most 1 / P (0 too): an even share */
    int server_nice;       /* the servers' nice value, 0-19, as dtrain train --server-nice (its
                              default is 19): with shared_cores and no core to spare, a server's
                              work while the workers compute gets the share of a core the
                              kernel gives that value beside them */
} dt_sim_cfg;

typedef struct {
    double step_s;         /* predicted step time of a worker */
    double images_per_sec; /* P * K / step_s */
    double speedup;        /* images_per_sec over the serial step's on one node */
    double compute_s;      /* the worker's own compute in the step (forward, backward, its
                              update, SFB reconstruction) */
    double comm_share;     /* (step_s - compute_s) / step_s: time waiting for the network
                              and the servers that compute did not hide */
    double compute_scale;  /* factor applied to the profile's compute (shared cores) */
    double straggler;      /* factor applied to forward and backward besides: the profile's
                              straggler in a synchronous mode of 2 or more nodes, else 1 */
    double link_busy_s;    /* time the worker's link is busy */
    double bytes_sent;     /* bytes a worker sends per step (it receives as many) */
    int fc_sfb;            /* fully connected layers sent as sufficient factors (sacp: its choice) */
} dt_sim_result;

/* Predicts one configuration. DT_ERR_USAGE for nodes/servers < 1, a
 * bandwidth <= 0, a negative latency, fusion size, staleness or core count. */
dt_status dt_sim_run(dt_sim_result *r, const dt_profile *p, const dt_sim_cfg *cfg);

/* Bytes a worker sends plus receives per step for one fully connected
 * layer with an (M, N) weight, batch K, P workers (Poseidon's counts, which
 * the trainer's --sacp compares; they leave out the servers' links, which
 * carry P x the layer each way, so the simulator's sacp chooses by the
 * simulated step instead). */
double dt_sim_ps_bytes(int m, int n);                /* 2 M N 4 */
double dt_sim_sfb_bytes(int m, int n, int k, int p); /* 2 K (P-1) (M+N) 4 */

/* "10Gbps", "25Gbps", "100Mbps", "1.5Gbps", "400Kbps", "3GBps" (bytes) ->
 * bytes per second; "20us", "1ms", "0.5s", "100ns" -> seconds. A missing or
 * unknown unit, or a value that is not a positive finite number (latency
 * may be 0), is DT_ERR_USAGE naming the flag (a rate's: `flag`) and the
 * accepted units. */
dt_status dt_sim_parse_bandwidth(const char *s, const char *flag, double *bytes_per_s);
dt_status dt_sim_parse_latency(const char *s, double *seconds);

#endif
