/* Measures this machine's sgemm peak (GFLOP/s) on a large square product,
 * with OpenBLAS and with oneDNN (the GEMM dtrain runs), so benchmarks can
 * state dtrain's achieved fraction of the better of the two.
 * usage: sgemm_peak THREADS */
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/mem.h"
#include "dtrain/timer.h"

enum { N = 2048, REPS = 5 };

static double best_gflops(int use_dnnl, const float *a, const float *b, float *c) {
    double best = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = dt_now();
        if (use_dnnl) {
            if (dnnl_sgemm('N', 'N', N, N, N, 1.0f, a, N, b, N, 0.0f, c, N) != dnnl_success) return 0;
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
        }
        double g = 2.0 * N * N * N / (dt_now() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1) threads = 1;
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
    float *a, *b, *c;
    if (dt_alloc_floats(&a, (size_t)N * N, "a") || dt_alloc_floats(&b, (size_t)N * N, "b") ||
        dt_alloc_floats(&c, (size_t)N * N, "c")) {
        fprintf(stderr, "sgemm_peak: %s\n", dt_last_error());
        return 1;
    }
    for (size_t i = 0; i < (size_t)N * N; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    double openblas = best_gflops(0, a, b, c), onednn = best_gflops(1, a, b, c);
    printf("{\"event\":\"sgemm_peak\",\"threads\":%d,\"openblas_gflops\":%.1f,\"onednn_gflops\":%.1f,"
           "\"gflops\":%.1f}\n",
           threads, openblas, onednn, openblas > onednn ? openblas : onednn);
    dt_free(a);
    dt_free(b);
    dt_free(c);
    return 0;
}
