/* Measures this machine's bf16 matrix-product peak (GFLOP/s) the way
 * sgemm_peak measures fp32's: oneDNN's matmul primitive (the kernels
 * dtrain's bf16 layers run: AMX tiles or AVX512_BF16 dot products) on a
 * large square product, bf16 operands, f32 result, weights in the layout
 * oneDNN prefers, best of 5. Prints {"event":"bf16_peak",...,"isa":...}
 * or exits 1 on a CPU without bf16.
 * usage: bf16_peak THREADS */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/layer.h"
#include "dtrain/timer.h"

enum { N = 2048, REPS = 5 };

#define TRY(call)                                                          \
    do {                                                                   \
        if ((call) != dnnl_success) {                                      \
            fprintf(stderr, "bf16_peak: %s failed\n", #call);              \
            return 1;                                                      \
        }                                                                  \
    } while (0)

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    omp_set_num_threads(threads < 1 ? 1 : threads);
    if (dt_precision_check(DT_PRECISION_BF16) != DT_OK) {
        fprintf(stderr, "bf16_peak: %s\n", dt_last_error());
        return 1;
    }
    dnnl_engine_t eng;
    dnnl_stream_t st;
    TRY(dnnl_engine_create(&eng, dnnl_cpu, 0));
    TRY(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    dnnl_dims_t dims = {N, N};
    dnnl_memory_desc_t a, b_any, c;
    TRY(dnnl_memory_desc_init_by_tag(&a, 2, dims, dnnl_bf16, dnnl_ab));
    TRY(dnnl_memory_desc_init_by_tag(&b_any, 2, dims, dnnl_bf16, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&c, 2, dims, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    TRY(dnnl_matmul_desc_init(&md, &a, &b_any, NULL, &c));
    dnnl_primitive_desc_t pd;
    TRY(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
    const char *impl = "?";
    TRY(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    dnnl_primitive_t mm;
    TRY(dnnl_primitive_create(&mm, pd));
    dnnl_memory_t ma, mb, mc;
    TRY(dnnl_memory_create(&ma, &a, eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&mb, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng,
                           DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&mc, &c, eng, DNNL_MEMORY_ALLOCATE));
    /* Zeroed operands: the time of a product does not depend on values. */
    void *p;
    TRY(dnnl_memory_get_data_handle(ma, &p));
    for (size_t i = 0; i < (size_t)N * N; i++) ((unsigned short *)p)[i] = 0x3f80; /* 1.0 */
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    double best = 0;
    for (int r = 0; r < REPS + 1; r++) {
        double t0 = dt_now();
        TRY(dnnl_primitive_execute(mm, st, 3, args));
        TRY(dnnl_stream_wait(st));
        double g = 2.0 * N * N * N / (dt_now() - t0) / 1e9;
        if (r > 0 && g > best) best = g; /* the first run warms up */
    }
    printf("{\"event\":\"bf16_peak\",\"threads\":%d,\"impl\":\"%s\",\"gflops\":%.1f}\n", threads, impl,
           best);
    (void)dnnl_memory_destroy(ma), (void)dnnl_memory_destroy(mb), (void)dnnl_memory_destroy(mc);
    (void)dnnl_primitive_destroy(mm), (void)dnnl_primitive_desc_destroy(pd);
    (void)dnnl_stream_destroy(st), (void)dnnl_engine_destroy(eng);
    return 0;
}
