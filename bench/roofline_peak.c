/* Measures this machine's two fp32 roofline ceilings on THREADS threads:
 *  - the FMA peak: each thread runs 12 independent chains of fused
 *    multiply-adds in registers (no memory traffic), with the widest vectors
 *    the CPU has, chosen at run time (avx512f: 16 lanes, avx2+fma: 8, else
 *    SSE2 multiply and add: 4); 2 FLOPs per lane per FMA, best of 5 runs.
 *    Each thread's rate is its FLOPs over its own CPU time, summed over the
 *    threads: what the cores do while they run, so that other processes
 *    sharing the cores do not lower the ceiling (the wall-clock rate, which
 *    they do lower, is printed beside it as fma_gflops_wall);
 *  - the memory bandwidth: a STREAM triad a[i] = b[i] + s * c[i] over three
 *    float arrays of 128 MiB each (larger than any L3 of the project's
 *    machines), first touched by the thread that later reads them; counted
 *    as STREAM counts it, 12 bytes per element (2 reads, 1 write; the
 *    write-allocate read of a[] is not counted), best of 20 runs, by the
 *    wall clock (the threads share one memory bus: their CPU times would
 *    count a bus shared in turns as if it were shared at once), so other
 *    processes' load does lower it.
 * bench/bench_engine.py puts each model's training step against them.
 * Prints {"event":"roofline_peak","threads":T,"isa":...,"fma_gflops":...,
 * "fma_gflops_wall":...,"triad_gbs":...,"triad_mib":...}.
 * usage: roofline_peak THREADS [avx512f|avx2|sse2]  (the ISA forced: refused
 *        with exit 1 if the CPU lacks it) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DT_X86 1
#endif

#include "dtrain/mem.h"
#include "dtrain/timer.h"

enum { CHAINS = 12, FMA_REPS = 5, TRIAD_REPS = 20 };
#define TRIAD_N ((size_t)32 << 20) /* floats per array: 128 MiB */

/* Each kernel runs `iters` rounds of CHAINS independent a = a * m + c on
 * full vectors and returns a value that depends on every chain (so that
 * nothing is optimised away). m < 1 keeps the chains bounded. */
#ifdef DT_X86
__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
    __m512 a[CHAINS], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int k = 0; k < CHAINS; k++) a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < CHAINS; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    __m512 s = a[0];
    for (int k = 1; k < CHAINS; k++) s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
    __m256 a[CHAINS], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int k = 0; k < CHAINS; k++) a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < CHAINS; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 s = a[0];
    for (int k = 1; k < CHAINS; k++) s = _mm256_add_ps(s, a[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

static float fma_sse2(long iters) { /* a multiply and an add: 2 FLOPs per lane too */
    __m128 a[CHAINS], m = _mm_set1_ps(0.999999f), c = _mm_set1_ps(1e-6f);
    for (int k = 0; k < CHAINS; k++) a[k] = _mm_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < CHAINS; k++) a[k] = _mm_add_ps(_mm_mul_ps(a[k], m), c);
    __m128 s = a[0];
    for (int k = 1; k < CHAINS; k++) s = _mm_add_ps(s, a[k]);
    float out[4];
    _mm_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3];
}
#else
static float fma_scalar(long iters) {
    float a[CHAINS];
    for (int k = 0; k < CHAINS; k++) a[k] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < CHAINS; k++) a[k] = a[k] * 0.999999f + 1e-6f;
    float s = 0;
    for (int k = 0; k < CHAINS; k++) s += a[k];
    return s;
}
#endif

typedef struct {
    const char *name;
    int lanes;
    float (*run)(long iters);
    int (*supported)(void);
} fma_isa;

#ifdef DT_X86
static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static int has_sse2(void) { return 1; }
static const fma_isa isas[] = {
    {"avx512f", 16, fma_avx512, has_avx512},
    {"avx2", 8, fma_avx2, has_avx2},
    {"sse2", 4, fma_sse2, has_sse2},
};
#else
static int has_scalar(void) { return 1; }
static const fma_isa isas[] = {{"scalar", 1, fma_scalar, has_scalar}};
#endif

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* `threads` threads each run `iters` rounds at once: *cpu = the sum of each
 * thread's GFLOP per second of its own CPU time, *wall = GFLOP/s by the
 * wall clock. */
static void fma_once(const fma_isa *isa, int threads, long iters, double *cpu, double *wall) {
    const double gflop = 2.0 * isa->lanes * CHAINS * (double)iters / 1e9; /* per thread */
    double rate = 0, t0 = dt_now();
#pragma omp parallel num_threads(threads) reduction(+ : rate)
    {
        double c0 = thread_cpu_s();
        volatile float v = isa->run(iters);
        (void)v;
        double c = thread_cpu_s() - c0;
        rate += gflop / (c > 1e-9 ? c : 1e-9);
    }
    *wall = gflop * threads / (dt_now() - t0);
    *cpu = rate;
}

/* The best of FMA_REPS runs of each kind (CPU-time and wall-clock rates). */
static void fma_peak(const fma_isa *isa, int threads, double *cpu, double *wall) {
    long iters = 1L << 20;
    /* Calibrate to about 0.2 s a run (the first run also warms the cores up). */
    double c, w;
    fma_once(isa, threads, iters, &c, &w);
    long want = (long)(0.2 * c / threads * 1e9 / (2.0 * isa->lanes * CHAINS));
    if (want > iters) iters = want;
    *cpu = *wall = 0;
    for (int r = 0; r < FMA_REPS; r++) {
        fma_once(isa, threads, iters, &c, &w);
        if (c > *cpu) *cpu = c;
        if (w > *wall) *wall = w;
    }
}

static double triad_gbs(int threads, float *a, float *b, float *c) {
    const long n = (long)TRIAD_N;
    const float s = 3.0f;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++) a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f; /* first touch, as the triad splits */
    double best = 0;
    for (int r = 0; r < TRIAD_REPS + 1; r++) {
        double t0 = dt_now();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double gbs = 3.0 * sizeof(float) * (double)n / (dt_now() - t0) / 1e9;
        if (r > 0 && gbs > best) best = gbs; /* the first run warms up */
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 1024) threads = 1;
    const fma_isa *isa = NULL;
    for (size_t i = 0; i < sizeof isas / sizeof *isas && !isa; i++)
        if (argc > 2 ? strcmp(argv[2], isas[i].name) == 0 : isas[i].supported()) isa = &isas[i];
    if (!isa) {
        fprintf(stderr, "roofline_peak: unknown ISA '%s'\n", argv[2]);
        return 1;
    }
    if (!isa->supported()) {
        fprintf(stderr, "roofline_peak: this CPU has no %s\n", isa->name);
        return 1;
    }
    double fma, fma_wall;
    fma_peak(isa, threads, &fma, &fma_wall);
    float *a, *b, *c;
    if (dt_alloc_scratch_floats(&a, TRIAD_N, "a") || dt_alloc_scratch_floats(&b, TRIAD_N, "b") ||
        dt_alloc_scratch_floats(&c, TRIAD_N, "c")) {
        fprintf(stderr, "roofline_peak: %s\n", dt_last_error());
        return 1;
    }
    double bw = triad_gbs(threads, a, b, c);
    printf("{\"event\":\"roofline_peak\",\"threads\":%d,\"isa\":\"%s\",\"fma_gflops\":%.1f,"
           "\"fma_gflops_wall\":%.1f,\"triad_gbs\":%.2f,\"triad_mib\":%zu}\n",
           threads, isa->name, fma, fma_wall, bw, 3 * TRIAD_N * sizeof(float) >> 20);
    dt_free(a);
    dt_free(b);
    dt_free(c);
    return 0;
}
