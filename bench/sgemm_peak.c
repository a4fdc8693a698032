/* Measures this machine's OpenBLAS sgemm peak (GFLOP/s) for a large square
 * product, so benchmarks can state dtrain's achieved fraction of it.
 * usage: sgemm_peak THREADS */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    const int n = 2048, reps = 5;
    openblas_set_num_threads(threads > 0 ? threads : 1);
    float *a, *b, *c;
    if (dt_alloc_floats(&a, (size_t)n * n, "a") || dt_alloc_floats(&b, (size_t)n * n, "b") ||
        dt_alloc_floats(&c, (size_t)n * n, "c")) {
        fprintf(stderr, "sgemm_peak: %s\n", dt_last_error());
        return 1;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = dt_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * n / (dt_now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("{\"event\":\"sgemm_peak\",\"threads\":%d,\"gflops\":%.1f}\n", threads, best);
    dt_free(a);
    dt_free(b);
    dt_free(c);
    return 0;
}
