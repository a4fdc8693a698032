#include <mpi.h>
#include <oneapi/dnnl/dnnl.h>
#include <zlib.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_report(dt_status s, const cli_env *env) {
    if (s == DT_OK) return 0;
    if (env->world > 1)
        fprintf(stderr, "dtrain: rank %d: %s\n", env->rank, dt_last_error());
    else
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
    return dt_status_exit_code(s);
}

void cli_print_version(FILE *out) {
    const dnnl_version_t *d = dnnl_version();
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) != MPI_SUCCESS) snprintf(mpi, sizeof mpi, "unknown");
    char *nl = strchr(mpi, '\n');
    if (nl) *nl = '\0';
    fprintf(out, "dtrain %s\n", DT_VERSION);
    fprintf(out, "build: %s, %s, %s%s\n", DT_BUILD_TYPE, DT_BUILD_NATIVE ? "-march=native" : "generic x86-64",
            DT_BUILD_SANITIZE[0] ? "sanitizer " : "no sanitizer", DT_BUILD_SANITIZE);
    fprintf(out, "oneDNN: %d.%d.%d (%s; convolutions and every GEMM)\n", d->major, d->minor, d->patch, d->hash);
    /* dtrain links no BLAS (tests/test_everyday.sh holds this line to ldd's
     * answer); only bench/sgemm_peak does, for the reference peak. */
    fprintf(out, "OpenBLAS: not linked (dtrain's GEMMs run on oneDNN; bench/sgemm_peak links it for the reference "
                 "peak)\n");
    fprintf(out, "MPI: %s\n", mpi);
    fprintf(out, "zlib: %s, OpenMP: %d\n", zlibVersion(), _OPENMP);
}

int cli_agree_start(dt_status s, cli_env *env) {
    if (env->world == 1) return cli_report(s, env);
    int mine = s == DT_OK ? env->world : env->rank, first, code = dt_status_exit_code(s);
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        (first < env->world && MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD) != MPI_SUCCESS)) {
        fprintf(stderr, "dtrain: rank %d: the ranks could not agree on how start-up went (MPI failed)\n", env->rank);
        return 1;
    }
    if (first == env->world) return 0;
    if (env->rank == first) fprintf(stderr, "dtrain: %s\n", dt_last_error());
    env->orderly = 1;
    return code;
}
