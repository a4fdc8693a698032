/* The link between two MPI ranks as dtrain drives it, in dtrain simulate's
 * terms (alpha per message, beta bytes per second), measured two ways:
 *   allreduce: MPI_Iallreduce of floats completed by dt_mpi_wait, as the
 *     allreduce mode does. With two ranks the simulator's ring costs
 *     2 alpha + b / beta: an 8-byte allreduce gives alpha = t / 2 and a
 *     4 MiB one (dtrain's default fusion bucket) beta = b / (t - 2 alpha)
 *     (the sum is inside beta).
 *   p2p: one message from rank 0 to rank 1, sent with MPI_Isend and
 *     received with MPI_Irecv, both completed by dt_mpi_wait, as the
 *     parameter-server modes push and pull: alpha = t(8 bytes),
 *     beta = b / (t(4 MiB) - alpha).
 * dt_mpi_wait polls MPI_Testall with a sleep growing to 1 ms (Open MPI
 * progresses only in those calls), so both include what dtrain's waiting
 * adds to the raw transport (on one machine, Open MPI's shared memory).
 * Medians of REPS; bench/validate_sim.py passes them to dtrain simulate.
 *
 * usage: mpirun -np 2 build/mpi_link [REPS]
 * prints one line per way: {"link":"allreduce"|"p2p","latency_us":..,"bandwidth_gbps":..} */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/dist.h"
#include "dtrain/timer.h"

static void check(dt_status s) {
    if (s == DT_OK) return;
    fprintf(stderr, "mpi_link: %s\n", dt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Median seconds of an allreduce of n floats (p2p = 0), or of a message of
 * n floats from rank 0 to rank 1 as rank 1 sees it (p2p = 1). */
static double link_time(float *buf, int n, int reps, int p2p, int rank) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = -2; r < reps; r++) { /* two untimed ones first */
        MPI_Request req;
        check(dt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"));
        double t0 = MPI_Wtime();
        if (!p2p)
            check(dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req),
                               "MPI_Iallreduce"));
        else if (rank == 0)
            check(dt_mpi_check(MPI_Isend(buf, n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, &req), "MPI_Isend"));
        else
            check(dt_mpi_check(MPI_Irecv(buf, n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, &req), "MPI_Irecv"));
        check(dt_mpi_wait(&req, 1, 60, NULL, NULL, "link"));
        double dt = MPI_Wtime() - t0;
        /* Rank 1's time (the receiver's, for p2p) is the one reported. */
        check(dt_mpi_check(MPI_Bcast(&dt, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD), "MPI_Bcast"));
        if (r >= 0) t[r] = dt;
    }
    double m = dt_median(t, reps);
    free(t);
    return m;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (size != 2 || reps < 1) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 mpi_link [REPS >= 1]\n");
        MPI_Finalize();
        return 2;
    }
    const int big = 1 << 20; /* floats: 4 MiB */
    float *buf = calloc((size_t)big, sizeof(float));
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    static const char *const names[2] = {"allreduce", "p2p"};
    for (int p2p = 0; p2p < 2; p2p++) {
        /* Two ring steps in an allreduce of two ranks, one message in p2p. */
        double msgs = p2p ? 1 : 2;
        double alpha = link_time(buf, 2, reps * 10, p2p, rank) / msgs;
        double t_big = link_time(buf, big, reps, p2p, rank);
        double bytes = (double)big * sizeof(float);
        double beta = bytes / (t_big - msgs * alpha > 0 ? t_big - msgs * alpha : t_big);
        if (rank == 0)
            printf("{\"link\":\"%s\",\"latency_us\":%.3f,\"bandwidth_gbps\":%.3f}\n", names[p2p],
                   alpha * 1e6, beta * 8 / 1e9);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
