/* The link between two MPI ranks as dtrain drives it, in dtrain simulate's
 * terms (alpha per message, beta bytes per second), measured two ways:
 *   allreduce: dtrain's ring allreduce (src/comm/ring.c), as the allreduce
 *     mode sums its fusion buckets. With two ranks the simulator's ring
 *     costs 2 alpha + b / beta: a 2-float ring gives alpha = t / 2 and a
 *     4 MiB one (dtrain's default fusion bucket) beta = b / (t - 2 alpha)
 *     (the sum is inside beta).
 *   p2p: a message from rank 0 to rank 1 and back (MPI_Isend/MPI_Irecv,
 *     as the parameter-server modes push and pull), half the round trip:
 *     alpha = t(8 bytes) / 2, beta = b / (t(4 MiB) / 2 - alpha). (Timing
 *     one way on the receiver measured nothing: an eager message is there
 *     before the receiver leaves the barrier.)
 * Both wait as dtrain's trainer thread does at the end of a step, where
 * the communication that is not hidden is waited for (hurried: polling
 * with sched_yield, then short sleeps); the plain wait's sleep growing to
 * 1 ms measured its own backoff (265 us per message between two emulated
 * hosts at 1 Gbit/s, against 5 us hurried). Run it placed as dtrain launch
 * places ranks across hosts: --bind-to none. With mpirun's default
 * binding, two emulated hosts on one machine each bind their rank to core
 * 0, and a message took 2 ms (the simulator then charged that for every
 * bucket: cnn's ring predicted 42% slow unshaped). And the ring, not
 * MPI_Iallreduce: between two emulated hosts at 1 Gbit/s Open MPI's
 * allreduce of 4 MiB reached 0.56 Gbit/s where dtrain's ring ran cnn's
 * buckets at 0.41 (as single 2 MiB messages; now segmented, ring.c).
 * Then both ways again on busy cores (allreduce_busy, p2p_busy): each rank
 * keeps a compute thread running (compute() below), as a worker's does
 * during backward, and waits as the communication thread does meanwhile
 * (not hurried: polling with a sleep that grows to 1 ms); the bandwidth
 * left (with the latency above) is dtrain simulate's --busy-bandwidth.
 * Between two emulated hosts on 2 cores a wire-bound link keeps its rate
 * there and a fast one does not (docs/CLUSTER.md).
 * Then what the transfers cost that compute (allreduce_cpu, p2p_cpu): the
 * compute threads' rate while the ranks move 4 MiB both ways back to back
 * for a second or more, against their rate while the ranks sleep; the core
 * time lost, summed over both ranks, is reported as the bytes sent plus
 * received per second of it, dtrain simulate's --kernel-rate for that
 * link. It holds the kernel's network stack (shaping included), the
 * waiting threads' wake-ups and the cache lines the copies evict: with
 * both ranks on one machine (emulated hosts) the copies of 2026-11-28's
 * unshaped ring cost the compute 1.7 times the CPU time /proc/stat counted
 * for them on idle cores (which was --kernel-rate until then: cnn's
 * unshaped ring was predicted 12 % short). On a real cluster it is each
 * host's own loss, and --kernel-rate does not apply (it needs
 * --shared-cores).
 * The bandwidths are medians of REPS; bench/validate_sim.py passes them all
 * to dtrain simulate.
 * With three ranks, instead, how two ranks pushing into a third at once
 * share its link (fan_in below): dtrain simulate's --fan-in-share.
 *
 * usage: mpirun -np 2 build/mpi_link [REPS]
 * prints one line per way: {"link":"allreduce"|"p2p"|"allreduce_busy"|"p2p_busy","latency_us":..,
 * "bandwidth_gbps":..}, then {"link":"allreduce_cpu"|"p2p_cpu","kernel_gbps":..} ("kernel_gbps":null
 * and "unmeasured":REASON when other load hid the loss three times)
 * usage: mpirun -np 3 build/mpi_link [REPS]   (rank 0 on the server's host)
 * prints {"link":"fan_in","first_share":..,"bandwidth_gbps":..} */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/group.h"
#include "comm/ring.h"
#include "dtrain/dist.h"
#include "dtrain/timer.h"

/* Reports every 60 s, never gives up: a measurement, not a job. */
static const dt_stall no_stall = {60, 0, NULL, NULL};

static void check(dt_status s) {
    if (s == DT_OK) return;
    fprintf(stderr, "mpi_link: %s\n", dt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The trainer's wait (see above), or the communication thread's while the
 * trainer computes (hurry 0). */
static void wait_one(MPI_Request *req, const atomic_int *hurry) {
    check(dt_mpi_wait_hurry(req, 1, &no_stall, NULL, NULL, "link", hurry));
}

/* The compute's stand-in while `run` is set: passes over a 1 MiB buffer
 * (a layer's working set held in a core's L2 cache, as a convolution's
 * blocks are), counted in `passes`. A plain spin loses only the CPU time a
 * transfer takes beside it; this loses, as the compute does, also the
 * cache lines the kernel's copies evict (between two emulated hosts
 * unshaped, per byte a ring moved beside it: a spin 0.27 ns, this loop
 * 0.35, two cnn trainings 0.31; point to point 0.45, 0.55 and 0.60). */
#define WORK_FLOATS (1 << 18)
typedef struct {
    atomic_int run;     /* cleared to end the thread */
    atomic_long passes; /* over buf so far */
    float *buf;         /* (WORK_FLOATS) */
} compute_thread;

static void *compute(void *arg) {
    compute_thread *c = arg;
    while (atomic_load_explicit(&c->run, memory_order_relaxed)) {
        for (int i = 0; i < WORK_FLOATS; i++) c->buf[i] = c->buf[i] * 0.999f + 1.0f;
        atomic_fetch_add_explicit(&c->passes, 1, memory_order_relaxed);
    }
    return NULL;
}

/* A ring allreduce of n floats among g's two workers (p2p = 0; tmp:
 * scratch), or a message of n floats from rank 0 to rank 1 and back (p2p
 * = 1): each rank sends n floats and receives n. */
static void move_once(dt_group *g, float *buf, float *tmp, int n, int p2p, int rank) {
    if (!p2p) {
        check(dt_ring_allreduce(g, buf, (size_t)n, tmp, 1.0f, DT_GC_NONE));
        return;
    }
    for (int leg = 0; leg < 2; leg++) { /* rank 0 sends first, rank 1 answers */
        MPI_Request req;
        if (rank == leg)
            check(dt_mpi_check(MPI_Isend(buf, n, MPI_FLOAT, 1 - rank, 0, MPI_COMM_WORLD, &req), "MPI_Isend"));
        else
            check(dt_mpi_check(MPI_Irecv(buf, n, MPI_FLOAT, 1 - rank, 0, MPI_COMM_WORLD, &req), "MPI_Irecv"));
        wait_one(&req, &g->hurry);
    }
}

/* Median seconds of a ring allreduce of n floats among g's two workers
 * (p2p = 0; tmp: scratch), or of a message of n floats from rank 0 to
 * rank 1 and back, as rank 0 sees it (p2p = 1). */
static double link_time(dt_group *g, float *buf, float *tmp, int n, int reps, int p2p, int rank) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = -2; r < reps; r++) { /* two untimed ones first */
        check(dt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
        double t0 = MPI_Wtime();
        move_once(g, buf, tmp, n, p2p, rank);
        double dt = MPI_Wtime() - t0;
        /* Rank 0's time (a whole round trip, for p2p) is the one reported. */
        check(dt_mpi_check(MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast"));
        if (r >= 0) t[r] = dt;
    }
    double m = dt_median(t, reps);
    free(t);
    return m;
}

/* The compute thread's passes per second while this rank sleeps for
 * `seconds` (both ranks at once). */
static double quiet_rate(compute_thread *c, double seconds) {
    check(dt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
    long p0 = atomic_load(&c->passes);
    double t0 = MPI_Wtime();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    return (double)(atomic_load(&c->passes) - p0) / (MPI_Wtime() - t0);
}

/* What moving bytes costs the compute c, running on both ranks: its rate
 * while the ranks move n floats back to back (for a second at least at
 * `t_each` seconds a transfer, at most 10000 transfers; waiting unhurried
 * as the communication thread does) against its rate while they sleep
 * (half a second before and after). Each rank's loss is the core time its
 * compute thread did not get, window x (1 - busy / quiet); returns, on
 * rank 0, the bytes both ranks sent plus received per second of that loss
 * (dtrain simulate's --kernel-rate), or 0 where no loss was seen. */
static double compute_loss_rate(compute_thread *c, dt_group *g, float *buf, float *tmp, int n, int p2p, int rank,
                                double t_each) {
    int k = t_each > 0 ? (int)fmax(1, fmin(10000, ceil(1.0 / t_each))) : 4;
    check(dt_mpi_check(MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast")); /* rank 0's decides */
    double quiet = quiet_rate(c, 0.5);
    check(dt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
    long p0 = atomic_load(&c->passes);
    double t0 = MPI_Wtime();
    for (int r = 0; r < k; r++) move_once(g, buf, tmp, n, p2p, rank);
    double window = MPI_Wtime() - t0, busy = (double)(atomic_load(&c->passes) - p0) / window;
    quiet = (quiet + quiet_rate(c, 0.5)) / 2;
    double loss = quiet > 0 ? window * (1 - busy / quiet) : 0, total = 0;
    check(dt_mpi_check(MPI_Reduce(&loss, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce"));
    double handled = 4.0 * n * sizeof(float) * k; /* n floats sent and n received by each rank */
    return rank == 0 && total > 0 ? handled / total : 0;
}

/* Two ranks (1, 2) push FAN_SEGS segments of FAN_SEG_FLOATS each (60 KB:
 * below Open MPI's eager limit over TCP, as most of a model's layers are)
 * into rank 0 at once, as a synchronous clock's workers push into their
 * server, and rank 0 replies to both with each segment once both parts are
 * in (the replies fill the link's other direction, as a server's do). On
 * rank 0, per rep: when the first pusher's last segment is in (t1) and the
 * second's (t2). Two pushes of B bytes took t2 on the link, and the first
 * had its B in at t1: its share while both pushed was (B / t1) / (2 B /
 * t2) = t2 / (2 t1), 0.5 when TCP shares the link evenly. Prints the
 * median share and the median rate of both pushes, 2 B / t2. Everyone
 * waits unhurried, as the communication threads and the server do. */
#define FAN_SEGS 16
#define FAN_SEG_FLOATS 15000
static void fan_in_serve(float *buf, double t0, double *t1, double *t2) {
    MPI_Request rq[2 * FAN_SEGS], sq[2 * FAN_SEGS];
    int in[2 * FAN_SEGS] = {0}, both[FAN_SEGS] = {0}, left[2] = {FAN_SEGS, FAN_SEGS}, pending = 2 * FAN_SEGS;
    for (int i = 0; i < 2 * FAN_SEGS; i++)
        check(dt_mpi_check(MPI_Irecv(buf + (size_t)i * FAN_SEG_FLOATS, FAN_SEG_FLOATS, MPI_FLOAT, 1 + i / FAN_SEGS,
                                     i % FAN_SEGS, MPI_COMM_WORLD, &rq[i]),
                           "MPI_Irecv"));
    *t1 = -1;
    long sleep_ns = 1000;
    while (pending > 0) {
        int progressed = 0;
        for (int i = 0; i < 2 * FAN_SEGS; i++) {
            int done = 0, w = i / FAN_SEGS, k = i % FAN_SEGS;
            if (in[i]) continue;
            check(dt_mpi_check(MPI_Test(&rq[i], &done, MPI_STATUS_IGNORE), "MPI_Test"));
            if (!done) continue;
            in[i] = progressed = 1;
            pending--;
            if (--left[w] == 0) {
                *t2 = MPI_Wtime() - t0;
                if (*t1 < 0) *t1 = *t2;
            }
            if (++both[k] < 2) continue;
            for (int v = 0; v < 2; v++)
                check(dt_mpi_check(MPI_Isend(buf + (size_t)k * FAN_SEG_FLOATS, FAN_SEG_FLOATS, MPI_FLOAT, 1 + v, k,
                                             MPI_COMM_WORLD, &sq[v * FAN_SEGS + k]),
                                   "MPI_Isend"));
        }
        /* As the server polls: a sleep growing from 1 us to 1 ms. */
        struct timespec ts = {0, sleep_ns};
        if (progressed) {
            sleep_ns = 1000;
        } else {
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
    }
    atomic_int calm = 0;
    check(dt_mpi_wait_hurry(sq, 2 * FAN_SEGS, &no_stall, NULL, NULL, "fan-in replies", &calm));
}

static void fan_in(int rank, int reps) {
    float *buf = calloc((size_t)2 * FAN_SEGS * FAN_SEG_FLOATS, sizeof(float));
    double *share = malloc(sizeof(double) * (size_t)reps), *rate = malloc(sizeof(double) * (size_t)reps);
    if (!buf || !share || !rate) MPI_Abort(MPI_COMM_WORLD, 1);
    double bytes = (double)FAN_SEGS * FAN_SEG_FLOATS * sizeof(float);
    atomic_int calm = 0;
    for (int r = -2; r < reps; r++) { /* two untimed ones first */
        check(dt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
        double t0 = MPI_Wtime(), t1 = 0, t2 = 0;
        if (rank == 0) {
            fan_in_serve(buf, t0, &t1, &t2);
            if (r >= 0) {
                share[r] = t2 < 2 * t1 ? t2 / (2 * t1) : 1; /* t2 past 2 t1: not the link (the cores) */
                rate[r] = 2 * bytes / t2;
            }
        } else {
            MPI_Request req[2 * FAN_SEGS];
            float *replies = buf + (size_t)FAN_SEGS * FAN_SEG_FLOATS;
            for (int k = 0; k < FAN_SEGS; k++) {
                check(dt_mpi_check(MPI_Isend(buf + (size_t)k * FAN_SEG_FLOATS, FAN_SEG_FLOATS, MPI_FLOAT, 0, k,
                                             MPI_COMM_WORLD, &req[k]),
                                   "MPI_Isend"));
                check(dt_mpi_check(MPI_Irecv(replies + (size_t)k * FAN_SEG_FLOATS, FAN_SEG_FLOATS, MPI_FLOAT, 0, k,
                                             MPI_COMM_WORLD, &req[FAN_SEGS + k]),
                                   "MPI_Irecv"));
            }
            check(dt_mpi_wait_hurry(req, 2 * FAN_SEGS, &no_stall, NULL, NULL, "fan-in push", &calm));
        }
    }
    if (rank == 0)
        printf("{\"link\":\"fan_in\",\"first_share\":%.4g,\"bandwidth_gbps\":%.4g}\n", dt_median(share, reps),
               dt_median(rate, reps) * 8 / 1e9);
    free(buf);
    free(share);
    free(rate);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (size < 2 || size > 3 || reps < 1) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2|3 mpi_link [REPS >= 1]\n");
        MPI_Finalize();
        return 2;
    }
    if (size == 3) {
        fan_in(rank, reps);
        MPI_Finalize();
        return 0;
    }
    const int big = 1 << 20; /* floats: 4 MiB */
    float *buf = calloc((size_t)big, sizeof(float)), *tmp = calloc(dt_ring_scratch_floats(big, 2), sizeof(float));
    if (!buf || !tmp) MPI_Abort(MPI_COMM_WORLD, 1);
    dt_comm comm;
    dt_group g;
    check(dt_comm_create(&comm, MPI_COMM_WORLD, 0));
    check(dt_group_create(&g, &comm, &no_stall));
    atomic_store(&g.hurry, 1); /* as the trainer at the end of a step */
    check(dt_group_enter(&g, "link")); /* once, as a step enters once for all its buckets */
    static const char *const names[4] = {"allreduce", "p2p", "allreduce_busy", "p2p_busy"};
    double alpha[2], t_busy[2];
    compute_thread worker = {.buf = calloc(WORK_FLOATS, sizeof(float))};
    pthread_t computer;
    if (!worker.buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int busy = 0; busy < 2; busy++) {
        if (busy) {
            atomic_store(&worker.run, 1);
            if (pthread_create(&computer, NULL, compute, &worker) != 0) {
                fprintf(stderr, "mpi_link: cannot start the compute thread\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            atomic_store(&g.hurry, 0);
        }
        for (int p2p = 0; p2p < 2; p2p++) {
            /* Two ring steps in an allreduce of two ranks; p2p: one way of
             * the round trip. Busy: the latency measured idle. */
            double msgs = p2p ? 1 : 2;
            if (!busy) alpha[p2p] = link_time(&g, buf, tmp, 2, reps * 10, p2p, rank) / 2;
            double t_all = link_time(&g, buf, tmp, big, reps, p2p, rank), t_big = t_all / (p2p ? 2 : 1);
            double bytes = (double)big * sizeof(float), a = alpha[p2p];
            double beta = bytes / (t_big - msgs * a > 0 ? t_big - msgs * a : t_big);
            if (busy) t_busy[p2p] = t_all;
            if (rank == 0)
                printf("{\"link\":\"%s\",\"latency_us\":%.4g,\"bandwidth_gbps\":%.4g}\n", names[2 * busy + p2p],
                       a * 1e6, beta * 8 / 1e9);
        }
    }
    for (int p2p = 0; p2p < 2; p2p++) {
        /* No loss measured (rate 0): other load on the cores swamped the
         * difference of the two rates; measure again, three times at most. */
        double rate = 0;
        for (int attempt = 0; attempt < 3 && rate <= 0; attempt++) {
            rate = compute_loss_rate(&worker, &g, buf, tmp, big, p2p, rank, t_busy[p2p]);
            check(dt_mpi_check(MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast")); /* rank 0's */
        }
        if (rank == 0 && rate > 0)
            printf("{\"link\":\"%s\",\"kernel_gbps\":%.4g}\n", p2p ? "p2p_cpu" : "allreduce_cpu", rate * 8 / 1e9);
        else if (rank == 0) /* said, rather than a rate of 0 that would price the link's copies at nothing */
            printf("{\"link\":\"%s\",\"kernel_gbps\":null,\"unmeasured\":\"other load on the cores hid "
                   "the compute the transfers cost (3 tries)\"}\n", p2p ? "p2p_cpu" : "allreduce_cpu");
    }
    atomic_store(&worker.run, 0);
    pthread_join(computer, NULL);
    free(worker.buf);
    dt_group_free(&g);
    dt_comm_free(&comm);
    free(buf);
    free(tmp);
    MPI_Finalize();
    return 0;
}
