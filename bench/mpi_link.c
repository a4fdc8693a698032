/* The link between two MPI ranks as dtrain's allreduce drives it, in
 * dtrain simulate's terms: MPI_Iallreduce of a float buffer completed by
 * dt_mpi_wait (MPI_Testall with a sleep growing to 1 ms, so Open MPI
 * progresses only at those calls). With two ranks the simulator's ring costs
 * 2 alpha + b / beta, so the median time of an 8-byte allreduce gives
 * alpha = t / 2 and that of a 4 MiB one (dtrain's default fusion bucket)
 * beta = b / (t - 2 alpha). Both include what dtrain's polling adds to the
 * raw transport (on one machine, Open MPI's shared memory); beta also
 * includes the sum. bench/validate_sim.py passes them to dtrain simulate.
 *
 * usage: mpirun -np 2 build/mpi_link [REPS]
 * prints: {"latency_us":..,"bandwidth_gbps":..} and the simulate flags */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/dist.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of an allreduce of n floats over every rank. */
static double allreduce_time(float *buf, int n, int reps) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = -2; r < reps; r++) { /* two untimed ones first */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Request req;
        dt_status s = dt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                                  &req), "MPI_Iallreduce");
        if (s == DT_OK) s = dt_mpi_wait(&req, 1, 60, NULL, NULL, "allreduce");
        if (s != DT_OK) {
            fprintf(stderr, "mpi_link: %s\n", dt_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (r >= 0) t[r] = MPI_Wtime() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double m = t[reps / 2];
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
    double t_small = allreduce_time(buf, 2, reps * 10);
    double t_big = allreduce_time(buf, big, reps);
    double alpha = t_small / 2;
    double bytes = (double)big * sizeof(float);
    double beta = bytes / (t_big - 2 * alpha > 0 ? t_big - 2 * alpha : t_big);
    if (rank == 0) {
        printf("{\"latency_us\":%.3f,\"bandwidth_gbps\":%.3f}\n", alpha * 1e6, beta * 8 / 1e9);
        printf("dtrain simulate flags: --bandwidth %.2fGbps --latency %.2fus\n", beta * 8 / 1e9,
               alpha * 1e6);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
