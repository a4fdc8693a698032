/* Winograd F(4x4, 3x3) convolutions on nChw8c or nChw16c activations
 * (winograd.h).
 *
 * Buffer shapes, for a block of TB tiles (TB a multiple of ROWS, the
 * matrix kernels' rows; a block's rows past the last tile are zero and
 * their products dropped):
 *   V  (TB, 36, Cin)   the block's input tiles, B^T d B, by position xi
 *                      (tile-major: a tile's transform writes one run;
 *                      rows tile_stride(Cin) apart);
 *   U  (36, Cin, Cout) the weights, G g G^T, by position;
 *   M  (TB, 36, Cout)  V . U, position by position; A^T M A gives the 4x4
 *                      outputs of each tile;
 *   dM (TB, 36, F)     backward-weights: A dy A^T of the output gradients;
 *   dU (36, C', F)     backward-weights: sum over tiles of V^T . dM, one
 *                      per thread, brought to 3x3 by G^T dU G (C' = C
 *                      rounded up to whole 6-row groups).
 * Tiles are numbered (b, th, tw) over each image's ceil(H/4) x ceil(W/4)
 * grid; tile (th, tw) writes outputs (4th.., 4tw..) and reads the 6x6
 * inputs from (4th-1, 4tw-1), zero outside the image (the padding of 1).
 *
 * The threads are OpenMP's, the ones oneDNN uses. The forward takes blocks
 * as threads come free (each tile's result is one thread's, whichever);
 * backward takes contiguous ranges, one per thread, so that a result
 * depends on the thread count only through the order of backward-weights'
 * per-thread sums, as oneDNN's does. */
#include "layers/winograd.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "dtrain/mem.h"

#define AVX2 __attribute__((target("avx2,fma")))

enum {
    TILE_OUT = 4,           /* a tile's outputs per side */
    TILE_IN = 6,            /* a tile's inputs per side: TILE_OUT + 3 - 1 */
    XI = TILE_IN * TILE_IN, /* positions of a tile */
    ROWS = 6,               /* rows of the product kernel: 12 accumulators of 16 */
    BLOCK_FLOATS = 768,     /* TB x channels of a block's V or M: 108 KiB for all 36 positions */
    WEIGHTS_PAR = 1024,     /* channel pairs from which the weights' transforms use the threads */
    AHEAD = 4,              /* tiles between a tile's prefetch and its transform */
    /* The widest side these kernels take. With more channels a block holds
     * the minimum of 6 tiles, while the weights' U and each thread's dU
     * (36 C F floats) outgrow the caches: on Zen 4 at 2 threads, resnet18's
     * 256x14x14 backward took 51 ms here against oneDNN's Winograd's 16,
     * its 512x7x7 forward 71 against 9; at 128x28x28 the two were level,
     * at 64x56x56 these were 4-15 % faster. In nChw8c (Zen 4 with
     * ONEDNN_MAX_CPU_ISA=AVX2, as on an AVX2 CPU) against oneDNN's direct
     * AVX2 kernels: level at 256 channels, 197 ms against 56 at 512;
     * resnet18 trained at 22.9 img/s with this limit, 14.2 without. */
    MAX_CHANNELS = 128
};

typedef struct {
    int H, W, TH, TW; /* image and tile grid */
    int lb;           /* the activations' channel block: 8 (nChw8c) or 16 (nChw16c) */
    long T;           /* tiles in the batch: B TH TW */
    int widest;       /* max(Cin, Cout): a tile row of V large enough for either side */
    int TB;           /* tiles per block */
    long blocks;
} wino_grid;

/* Floats from one tile's row of V, M or dM to the next: its 36 positions
 * of c channels, then one cache line more, so that the rows a product
 * kernel walks down are not 4 KiB apart (they would share one L1 set). */
static size_t tile_stride(int c) { return (size_t)XI * (size_t)c + 16; }

/* The tiles of a convolution of Cin into Cout channels over (batch, H, W),
 * activations blocked by lb channels. */
static wino_grid grid_of(int batch, int H, int W, int lb, int Cin, int Cout) {
    wino_grid g = {H, W, (H + TILE_OUT - 1) / TILE_OUT, (W + TILE_OUT - 1) / TILE_OUT, lb, 0, Cin > Cout ? Cin : Cout,
                   0, 0};
    g.T = (long)batch * g.TH * g.TW;
    int rows = BLOCK_FLOATS / g.widest / ROWS * ROWS;
    g.TB = rows > ROWS ? rows : ROWS;
    g.blocks = (g.T + g.TB - 1) / g.TB;
    return g;
}

/* The first float of channels 8q..8q+7 of image b in an activation (B,
 * C, H, W) of g's layout: the transforms work on 8 channels at a time,
 * and in nChw16c two such groups share a block (a cell's 16 floats hold
 * both, group q at float 8 (q % 2)). A cell is lb floats after the last. */
static size_t group_at(const wino_grid *g, int C, int b, int q) {
    int per = g->lb / 8;
    return ((size_t)b * (size_t)(C / g->lb) + (size_t)(q / per)) * (size_t)g->H * (size_t)g->W * (size_t)g->lb +
           (size_t)(q % per) * 8;
}

/* A tile's image and place in the grid. */
typedef struct {
    int b, th, tw;
} tile_pos;

/* Block blk's first tile. */
static tile_pos block_start(const wino_grid *g, long blk) {
    long t = blk * g->TB, per = (long)g->TH * g->TW, rem = t % per;
    return (tile_pos){(int)(t / per), (int)(rem / g->TW), (int)(rem % g->TW)};
}

/* The tile after p. */
static void next_tile(const wino_grid *g, tile_pos *p) {
    if (++p->tw < g->TW) return;
    p->tw = 0;
    if (++p->th < g->TH) return;
    p->th = 0, p->b++;
}

/* Tiles of block blk that exist (the rest of its TB rows are padding). */
static int block_tiles(const wino_grid *g, long blk) {
    long left = g->T - blk * g->TB;
    return left < g->TB ? (int)left : g->TB;
}

static int cpu_has_avx2_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

/* Whether these kernels take nChw16c too, which AVX-512 CPUs use: where
 * the CPU runs a 512-bit FMA as two 256-bit halves (AMD family 19h: Zen 3,
 * which has no AVX-512 and so no nChw16c, and Zen 4), AVX2's FMAs reach
 * the same peak, and these kernels trained resnet20 1.21x (1 thread) and
 * 1.26x (2 threads) faster than oneDNN's AVX-512 Winograd on Zen 4.
 * Elsewhere (Intel's AVX-512, with twice AVX2's FMA width) oneDNN's own
 * Winograd takes nChw16c (conv.c). GCC 12 knows no "znver4". */
static int takes_nchw16c(void) { return __builtin_cpu_is("amdfam19h"); }

int dt_layer_winograd(const dt_layer *l) {
    return l->winograd && l->spec.kind == DT_LAYER_CONV && l->spec.size == 3 && l->spec.stride == 1 &&
           l->spec.pad == 1 && dt_layer_dilation(&l->spec) == 1 && dt_layer_groups(&l->spec) == 1 &&
           l->precision == DT_PRECISION_FP32 && l->out_layout == l->in_layout &&
           (l->in_layout == DT_LAYOUT_NCHW8C || (l->in_layout == DT_LAYOUT_NCHW16C && takes_nchw16c())) &&
           l->in.c % dt_layout_block(l->in_layout) == 0 && l->out.c % dt_layout_block(l->in_layout) == 0 &&
           l->in.c <= MAX_CHANNELS && l->out.c <= MAX_CHANNELS &&
           cpu_has_avx2_fma();
}

/* Zeroes the rows n.. of a block's TB rows of tile_stride(c) floats: the
 * padding rows, whose products are computed and dropped. */
static void zero_rows_past(float *rows, int n, int TB, int c) {
    memset(rows + (size_t)n * tile_stride(c), 0, sizeof(float) * (size_t)(TB - n) * tile_stride(c));
}

/* ---- transforms of 8 channels at a time --------------------------------- */

/* The cells [i0, i1) x [j0, j1) of tile (th, tw)'s 6x6 inputs, from (4th
 * - 1, 4tw - 1), that lie inside the image. */
typedef struct {
    int i0, i1, j0, j1;
} tile_span;

static tile_span tile_span_of(const wino_grid *g, int th, int tw) {
    int ih0 = TILE_OUT * th - 1, iw0 = TILE_OUT * tw - 1;
    return (tile_span){ih0 < 0 ? -ih0 : 0, g->H - ih0 < TILE_IN ? g->H - ih0 : TILE_IN, iw0 < 0 ? -iw0 : 0,
                       g->W - iw0 < TILE_IN ? g->W - iw0 : TILE_IN};
}

static int span_is_whole(tile_span sp) { return sp.i0 == 0 && sp.i1 == TILE_IN && sp.j0 == 0 && sp.j1 == TILE_IN; }

/* Asks for the cells of tile (th, tw) of one channel group's plane x (H,
 * W, from group_at) that lie inside the image, some time ahead of their
 * use (the transforms' reads miss the caches otherwise): a cache line
 * holds 2 cells of nChw8c, 1 of nChw16c. */
static void prefetch_tile(const float *x, const wino_grid *g, int th, int tw) {
    int ih0 = TILE_OUT * th - 1, iw0 = TILE_OUT * tw - 1;
    tile_span sp = tile_span_of(g, th, tw);
    for (int i = sp.i0; i < sp.i1; i++) {
        long row = ((long)(ih0 + i) * g->W + iw0) * g->lb; /* cell (i, 0)'s offset, before x when iw0 < 0 */
        for (int j = sp.j0; j < sp.j1; j += 16 / g->lb) __builtin_prefetch(x + (row + g->lb * j));
        __builtin_prefetch(x + (row + g->lb * (sp.j1 - 1)));
    }
}

/* r <- B^T d for 6 values d (8 channels each):
 * B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *        0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]. */
AVX2 static inline void input_1d(__m256 r[TILE_IN], const __m256 d[TILE_IN]) {
    const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), five = _mm256_set1_ps(5);
    __m256 a = _mm256_fnmadd_ps(four, d[2], d[4]), b = _mm256_fnmadd_ps(four, d[1], d[3]); /* d4 - 4d2, d3 - 4d1 */
    __m256 c = _mm256_sub_ps(d[4], d[2]), e = _mm256_mul_ps(two, _mm256_sub_ps(d[3], d[1]));
    r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
    r[1] = _mm256_add_ps(a, b);
    r[2] = _mm256_sub_ps(a, b);
    r[3] = _mm256_add_ps(c, e);
    r[4] = _mm256_sub_ps(c, e);
    r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
}

/* v[xi ld] <- B^T d B for tile (th, tw) of one channel group's plane x
 * (from group_at), cells outside its span sp zero (the padding): each row
 * through B, then each column of that through B^T. Inlined twice: `edge`
 * 0 for tiles whose span is whole, whose loads need no tests. */
AVX2 static inline __attribute__((always_inline)) void input_tile(const float *x, const wino_grid *g, int th, int tw,
                                                                  tile_span sp, int edge, float *v, size_t ld) {
    int ih0 = TILE_OUT * th - 1, iw0 = TILE_OUT * tw - 1;
    __m256 t[TILE_IN][TILE_IN], d[TILE_IN], r[TILE_IN];
    for (int i = 0; i < TILE_IN; i++) {
        long row = ((long)(ih0 + i) * g->W + iw0) * g->lb; /* cell (i, 0)'s offset, outside x at the edges */
        for (int j = 0; j < TILE_IN; j++)
            d[j] = !edge || (i >= sp.i0 && i < sp.i1 && j >= sp.j0 && j < sp.j1) ? _mm256_loadu_ps(x + (row + g->lb * j))
                                                                                  : _mm256_setzero_ps();
        input_1d(t[i], d);
    }
    for (int j = 0; j < TILE_IN; j++) {
        for (int i = 0; i < TILE_IN; i++) d[i] = t[i][j];
        input_1d(r, d);
        for (int i = 0; i < TILE_IN; i++) _mm256_storeu_ps(v + (size_t)(TILE_IN * i + j) * ld, r[i]);
    }
}

/* A place in transform_inputs' walk over a block: tile r (at p) of
 * 8-channel group cb (group_at). */
typedef struct {
    tile_pos p;
    int r, cb;
} walk_pos;

/* The place after w in block blk's walk of n tiles a channel block. */
static void walk_next(const wino_grid *g, long blk, int n, walk_pos *w) {
    next_tile(g, &w->p);
    if (++w->r < n) return;
    w->r = 0, w->cb++, w->p = block_start(g, blk);
}

/* V rows of block blk's tiles <- B^T d B of x (B, Cin, H, W) nChw8c or
 * nChw16c, 8 channels at a time: consecutive tiles read consecutive cells of one
 * plane. A block's run in each plane is too short for the hardware
 * prefetchers, so the tile AHEAD places further along the walk is asked
 * for before each transform. */
AVX2 static void transform_inputs(const float *x, int Cin, const wino_grid *g, long blk, float *V) {
    size_t ld = (size_t)Cin, pad = tile_stride(Cin) - (size_t)XI * ld;
    int n = block_tiles(g, blk), nb = Cin / 8;
    zero_rows_past(V, n, g->TB, Cin);
    for (int r = 0; r < n; r++) /* each row's padding, which backward-weights' last rows read */
        memset(V + (size_t)r * tile_stride(Cin) + (size_t)XI * ld, 0, sizeof(float) * pad);
    walk_pos w = {block_start(g, blk), 0, 0}, ahead = w;
    for (int k = 0; k < AHEAD; k++) walk_next(g, blk, n, &ahead);
    for (; w.cb < nb; walk_next(g, blk, n, &w)) {
        if (ahead.cb < nb) {
            prefetch_tile(x + group_at(g, Cin, ahead.p.b, ahead.cb), g, ahead.p.th, ahead.p.tw);
            walk_next(g, blk, n, &ahead);
        }
        const float *x0 = x + group_at(g, Cin, w.p.b, w.cb);
        float *v = V + (size_t)w.r * tile_stride(Cin) + (size_t)w.cb * 8;
        tile_span sp = tile_span_of(g, w.p.th, w.p.tw);
        if (span_is_whole(sp))
            input_tile(x0, g, w.p.th, w.p.tw, sp, 0, v, ld);
        else
            input_tile(x0, g, w.p.th, w.p.tw, sp, 1, v, ld);
    }
}

/* o <- A^T m for 6 values m: A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0;
 * 0 1 1 4 4 0; 0 1 -1 8 -8 1]. */
AVX2 static inline void output_1d(__m256 o[TILE_OUT], const __m256 m[TILE_IN]) {
    const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), eight = _mm256_set1_ps(8);
    __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
    __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
    o[1] = _mm256_fmadd_ps(two, d, b);
    o[2] = _mm256_fmadd_ps(four, c, a);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(eight, d, b), m[5]);
}

/* Tiles of block blk in y (B, Cout, H, W) nChw8c or nChw16c <- A^T M A (+ bias);
 * cells outside the image are dropped. */
AVX2 static void transform_outputs(const float *M, int Cout, const wino_grid *g, long blk, const float *bias,
                                   float *y) {
    size_t ld = (size_t)Cout;
    int n = block_tiles(g, blk);
    for (int fb = 0; fb < Cout / 8; fb++) {
        __m256 bv = bias ? _mm256_loadu_ps(bias + (size_t)fb * 8) : _mm256_setzero_ps();
        tile_pos p = block_start(g, blk);
        for (int r = 0; r < n; r++, next_tile(g, &p)) {
            int oh = TILE_OUT * p.th, ow = TILE_OUT * p.tw;
            int rows = g->H - oh < TILE_OUT ? g->H - oh : TILE_OUT, cols = g->W - ow < TILE_OUT ? g->W - ow : TILE_OUT;
            const float *m = M + (size_t)r * tile_stride(Cout) + (size_t)fb * 8;
            __m256 s[TILE_OUT][TILE_IN], col[TILE_IN], o[TILE_OUT]; /* s = A^T m */
            for (int j = 0; j < TILE_IN; j++) {
                for (int i = 0; i < TILE_IN; i++) col[i] = _mm256_loadu_ps(m + (size_t)(TILE_IN * i + j) * ld);
                output_1d(o, col);
                for (int i = 0; i < TILE_OUT; i++) s[i][j] = o[i];
            }
            float *out = y + group_at(g, Cout, p.b, fb);
            for (int i = 0; i < rows; i++) {
                output_1d(o, s[i]);
                for (int j = 0; j < cols; j++)
                    _mm256_storeu_ps(out + ((size_t)(oh + i) * (size_t)g->W + (size_t)(ow + j)) * (size_t)g->lb,
                                     _mm256_add_ps(o[j], bv));
            }
        }
    }
}

/* q <- A e for 4 values e (A = A^T^T): e0, e0 + e1 + e2 + e3,
 * e0 - e1 + e2 - e3, e0 + 2e1 + 4e2 + 8e3, e0 - 2e1 + 4e2 - 8e3, e3. */
AVX2 static inline void grad_1d(__m256 q[TILE_IN], const __m256 e[TILE_OUT]) {
    const __m256 four = _mm256_set1_ps(4), eight = _mm256_set1_ps(8);
    __m256 s = _mm256_add_ps(e[0], e[2]), t = _mm256_add_ps(e[1], e[3]);
    __m256 s4 = _mm256_fmadd_ps(four, e[2], e[0]), t8 = _mm256_fmadd_ps(eight, e[3], _mm256_add_ps(e[1], e[1]));
    q[0] = e[0];
    q[1] = _mm256_add_ps(s, t);
    q[2] = _mm256_sub_ps(s, t);
    q[3] = _mm256_add_ps(s4, t8);
    q[4] = _mm256_sub_ps(s4, t8);
    q[5] = e[3];
}

/* dM rows of block blk <- A dy A^T for the 4x4 output gradients of each
 * tile of dy (B, F, H, W) nChw8c or nChw16c (zero outside the image). */
AVX2 static void transform_grads(const float *dy, int F, const wino_grid *g, long blk, float *dM) {
    size_t ld = (size_t)F;
    int n = block_tiles(g, blk);
    zero_rows_past(dM, n, g->TB, F);
    for (int fb = 0; fb < F / 8; fb++) {
        tile_pos p = block_start(g, blk);
        for (int r = 0; r < n; r++, next_tile(g, &p)) {
            int oh = TILE_OUT * p.th, ow = TILE_OUT * p.tw;
            float *dm = dM + (size_t)r * tile_stride(F) + (size_t)fb * 8;
            const float *src = dy + group_at(g, F, p.b, fb);
            __m256 q[TILE_IN][TILE_OUT], e[TILE_OUT], row[TILE_IN]; /* q = A e */
            for (int j = 0; j < TILE_OUT; j++) {
                for (int i = 0; i < TILE_OUT; i++)
                    e[i] = oh + i < g->H && ow + j < g->W
                               ? _mm256_loadu_ps(src + ((size_t)(oh + i) * (size_t)g->W + (size_t)(ow + j)) * (size_t)g->lb)
                               : _mm256_setzero_ps();
                grad_1d(row, e);
                for (int i = 0; i < TILE_IN; i++) q[i][j] = row[i];
            }
            for (int i = 0; i < TILE_IN; i++) {
                grad_1d(row, q[i]);
                for (int j = 0; j < TILE_IN; j++) _mm256_storeu_ps(dm + (size_t)(TILE_IN * i + j) * ld, row[j]);
            }
        }
    }
}

/* ---- the products ------------------------------------------------------- */

/* The left operand of the product kernels, 6 rows of K values: value (r,
 * k) at p[r row + k step]. The forward products read rows of V (row: a
 * tile row, step 1); backward-weights' read V down its columns (row 1,
 * step: a tile row), so that one kernel serves both. */
typedef struct {
    const float *p;
    size_t row, step;
} rows6;

/* Row r of the kernels: x = a(r, k) times 16 (or 8) columns of b's row k. */
#define FMA_ROW16(r)                                                                                                  \
    x = _mm256_broadcast_ss(a.p + (size_t)(r) * a.row + (size_t)k * a.step);                                          \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                                                        \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1)
#define FMA_ROW8(r)                                                                                                   \
    x = _mm256_broadcast_ss(a.p + (size_t)(r) * a.row + (size_t)k * a.step);                                          \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0)

/* 8 floats of c to start a sum from: c's own (add) or zero. */
AVX2 static inline __m256 start(const float *c, int add) { return add ? _mm256_loadu_ps(c) : _mm256_setzero_ps(); }

/* c (6 rows of 16, ldc) <- (add ? c : 0) + a . b, b (K rows of 16, ldb):
 * 12 accumulators, two FMAs per broadcast. */
AVX2 static inline __attribute__((always_inline)) void fma_6x16(rows6 a, const float *b, size_t ldb, float *c, size_t ldc, int K, int add) {
    __m256 c00 = start(c, add), c01 = start(c + 8, add), c10 = start(c + ldc, add), c11 = start(c + ldc + 8, add);
    __m256 c20 = start(c + 2 * ldc, add), c21 = start(c + 2 * ldc + 8, add), c30 = start(c + 3 * ldc, add);
    __m256 c31 = start(c + 3 * ldc + 8, add), c40 = start(c + 4 * ldc, add), c41 = start(c + 4 * ldc + 8, add);
    __m256 c50 = start(c + 5 * ldc, add), c51 = start(c + 5 * ldc + 8, add);
    for (int k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(b + (size_t)k * ldb), b1 = _mm256_loadu_ps(b + (size_t)k * ldb + 8), x;
        FMA_ROW16(0);
        FMA_ROW16(1);
        FMA_ROW16(2);
        FMA_ROW16(3);
        FMA_ROW16(4);
        FMA_ROW16(5);
    }
    __m256 sum[ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < ROWS; r++) {
        _mm256_storeu_ps(c + (size_t)r * ldc, sum[r][0]);
        _mm256_storeu_ps(c + (size_t)r * ldc + 8, sum[r][1]);
    }
}

/* The same for the last 8 columns when there are not 16. */
AVX2 static inline __attribute__((always_inline)) void fma_6x8(rows6 a, const float *b, size_t ldb, float *c, size_t ldc, int K, int add) {
    __m256 c00 = start(c, add), c10 = start(c + ldc, add), c20 = start(c + 2 * ldc, add);
    __m256 c30 = start(c + 3 * ldc, add), c40 = start(c + 4 * ldc, add), c50 = start(c + 5 * ldc, add);
    for (int k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(b + (size_t)k * ldb), x;
        FMA_ROW8(0);
        FMA_ROW8(1);
        FMA_ROW8(2);
        FMA_ROW8(3);
        FMA_ROW8(4);
        FMA_ROW8(5);
    }
    __m256 sum[ROWS] = {c00, c10, c20, c30, c40, c50};
    for (int r = 0; r < ROWS; r++) _mm256_storeu_ps(c + (size_t)r * ldc, sum[r]);
}

/* c (6 rows of n = 8 or 16 columns) as fma_6x16/fma_6x8. */
AVX2 static inline __attribute__((always_inline)) void fma_6xn(rows6 a, const float *b, size_t ldb, float *c, size_t ldc, int K, int add, int n) {
    if (n == 16) fma_6x16(a, b, ldb, c, ldc, K, add);
    else fma_6x8(a, b, ldb, c, ldc, K, add);
}

/* M (TB, 36, Cout) <- V (TB, 36, Cin) . U (36, Cin, Cout), by position. */
AVX2 static void multiply_block(const float *V, const float *U, float *M, int TB, int Cin, int Cout) {
    size_t ldv = tile_stride(Cin), ldm = tile_stride(Cout);
    for (int xi = 0; xi < XI; xi++) {
        const float *v = V + (size_t)xi * Cin, *u = U + (size_t)xi * Cin * Cout;
        float *m = M + (size_t)xi * Cout;
        for (int f = 0; f < Cout; f += 16)
            for (int r = 0; r < TB; r += ROWS) {
                rows6 vr = {v + (size_t)r * ldv, ldv, 1};
                fma_6xn(vr, u + f, (size_t)Cout, m + (size_t)r * ldm + f, ldm, Cin, 0, Cout - f < 16 ? 8 : 16);
            }
    }
}

/* C rounded up to whole 6-row groups: dU's rows per position. The rows
 * past C read the next position's first channels (or, after the last, at
 * most 4 floats of a tile row's 16 of padding, inside the buffer) and are
 * never used. */
static int padded_rows(int C) { return (C + ROWS - 1) / ROWS * ROWS; }

/* dU (36, padded_rows(C), F) += V^T . dM over the block's tiles (V (TB,
 * 36, C), dM (TB, 36, F)), by position. */
AVX2 static void accumulate_block(const float *V, const float *dM, float *dU, int TB, int C, int F) {
    size_t ldv = tile_stride(C), ldm = tile_stride(F), Cp = (size_t)padded_rows(C);
    for (int xi = 0; xi < XI; xi++) {
        const float *v = V + (size_t)xi * C, *dm = dM + (size_t)xi * F;
        float *du = dU + (size_t)xi * Cp * F;
        for (int c = 0; c < C; c += ROWS)
            for (int f = 0; f < F; f += 16) {
                rows6 vc = {v + c, 1, ldv}; /* channels c.. of each tile row */
                fma_6xn(vc, dm + f, ldm, du + (size_t)c * F + f, (size_t)F, TB, 1, F - f < 16 ? 8 : 16);
            }
    }
}

/* ---- weights ------------------------------------------------------------ */

/* G, the weights' transform: u = G k G^T (6x6) for a 3x3 kernel k. */
static const float G[TILE_IN][3] = {{1.0f / 4, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};

/* u[xi stride + n] (6x6, n < 8) <- G k G^T for 8 kernels k (3x3,
 * row-major, kernel n at w + n kstride; rotated by 180 degrees when
 * `flip`). */
AVX2 static void transform_weights8(float *u, size_t stride, const float *w, int kstride, int flip) {
    const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(kstride));
    __m256 k[9], t[TILE_IN][3]; /* t = G k */
    for (int i = 0; i < 9; i++) k[i] = _mm256_i32gather_ps(w + (flip ? 8 - i : i), at, 4);
    for (int i = 0; i < TILE_IN; i++)
        for (int j = 0; j < 3; j++)
            t[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(G[i][0]), k[j],
                                      _mm256_fmadd_ps(_mm256_set1_ps(G[i][1]), k[3 + j],
                                                      _mm256_mul_ps(_mm256_set1_ps(G[i][2]), k[6 + j])));
    for (int i = 0; i < TILE_IN; i++)
        for (int j = 0; j < TILE_IN; j++)
            _mm256_storeu_ps(u + (size_t)(TILE_IN * i + j) * stride,
                             _mm256_fmadd_ps(t[i][0], _mm256_set1_ps(G[j][0]),
                                             _mm256_fmadd_ps(t[i][1], _mm256_set1_ps(G[j][1]),
                                                             _mm256_mul_ps(t[i][2], _mm256_set1_ps(G[j][2])))));
}

/* 8 kernels' dw (3x3, kernel n at dw + n kstride) <- G^T du G for
 * du[xi stride + n] (6x6): the adjoint of transform_weights8. */
AVX2 static void weight_gradients8(float *dw, size_t kstride, const float *du, size_t stride) {
    __m256 t[3][TILE_IN]; /* G^T du */
    for (int j = 0; j < TILE_IN; j++) {
        __m256 s[TILE_IN];
        for (int i = 0; i < TILE_IN; i++) s[i] = _mm256_loadu_ps(du + (size_t)(TILE_IN * i + j) * stride);
        for (int k = 0; k < 3; k++) {
            t[k][j] = _mm256_setzero_ps();
            for (int i = 0; i < TILE_IN; i++) t[k][j] = _mm256_fmadd_ps(_mm256_set1_ps(G[i][k]), s[i], t[k][j]);
        }
    }
    float out[9][8];
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 3; l++) {
            __m256 sum = _mm256_setzero_ps();
            for (int j = 0; j < TILE_IN; j++) sum = _mm256_fmadd_ps(t[k][j], _mm256_set1_ps(G[j][l]), sum);
            _mm256_storeu_ps(out[3 * k + l], sum);
        }
    for (int n = 0; n < 8; n++)
        for (int e = 0; e < 9; e++) dw[(size_t)n * kstride + (size_t)e] = out[e][n];
}

/* ---- the passes --------------------------------------------------------- */

/* y (B, Cout, H, W) <- x (B, Cin, H, W) convolved by the transformed
 * weights U (36, Cin, Cout), plus bias unless NULL; blocked by lb channels. */
static dt_status convolve(const float *x, int Cin, float *y, int Cout, const float *U, const float *bias, int batch,
                          int H, int W, int lb) {
    wino_grid g = grid_of(batch, H, W, lb, Cin, Cout);
    int nt = omp_get_max_threads();
    size_t per = (size_t)g.TB * (tile_stride(Cin) + tile_stride(Cout));
    float *scratch;
    DT_TRY(dt_alloc_scratch_floats(&scratch, per * (size_t)nt, "Winograd tiles"));
#pragma omp parallel num_threads(nt) if (g.blocks > 1)
    {
        float *V = scratch + per * (size_t)omp_get_thread_num(), *M = V + (size_t)g.TB * tile_stride(Cin);
#pragma omp for schedule(dynamic, 1)
        for (long blk = 0; blk < g.blocks; blk++) {
            transform_inputs(x, Cin, &g, blk, V);
            multiply_block(V, U, M, g.TB, Cin, Cout);
            transform_outputs(M, Cout, &g, blk, bias, y);
        }
    }
    dt_free(scratch);
    return DT_OK;
}

/* The weights of a pass, U (36, Cin, Cout), into a new buffer: the
 * forward's (Cin = C, Cout = F), or backward-data's (flip: Cin = F, Cout =
 * C, the kernel rotated by 180 degrees). */
static dt_status transformed_weights(const dt_layer *l, int flip, float **U) {
    int C = l->in.c, F = l->out.c, rows = flip ? F : C, cols = flip ? C : F;
    float *u;
    DT_TRY(dt_alloc_scratch_floats(&u, (size_t)XI * (size_t)C * (size_t)F, "Winograd weights"));
    /* Row by row of U, so that each position's writes are consecutive. */
#pragma omp parallel for schedule(static) if ((long)C * F >= WEIGHTS_PAR)
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k += 8) {
            size_t f = (size_t)(flip ? r : k), c = (size_t)(flip ? k : r);
            transform_weights8(u + (size_t)r * cols + k, (size_t)C * F, l->w + (f * (size_t)C + c) * 9,
                               flip ? 9 : 9 * C, flip);
        }
    *U = u;
    return DT_OK;
}

dt_status dt_winograd_forward(const dt_layer *l, float *out, const float *in, int batch) {
    float *U;
    DT_TRY(transformed_weights(l, 0, &U));
    dt_status st = convolve(in, l->in.c, out, l->out.c, U, l->nb ? l->b : NULL, batch, l->in.h, l->in.w,
                            dt_layout_block(l->in_layout));
    dt_free(U);
    return st;
}

/* db (F) <- the sums of dy (B, F, H, W), blocked by lb channels, over
 * images and cells. */
static void bias_gradient(float *db, const float *dy, int F, int batch, size_t plane, int lb) {
    for (int f = 0; f < F; f++) {
        double s = 0;
        for (int b = 0; b < batch; b++) {
            const float *p = dy + ((size_t)b * (size_t)(F / lb) + (size_t)(f / lb)) * plane * (size_t)lb + f % lb;
            for (size_t i = 0; i < plane; i++) s += p[i * (size_t)lb];
        }
        db[f] = (float)s;
    }
}

/* Backward, one pass over the blocks: each block's tiles of x and dy go
 * into dU (the weight gradients' sums), and, when din is wanted, dy's
 * tiles through the flipped weights Uf (36, F, C) into din; dy is read
 * from memory once. A thread's scratch: V (TB rows of tile_stride(max(C,
 * F))), dM and M (TB rows of tile_stride(F), tile_stride(C)), dU (36, C', F). */
typedef struct {
    const float *x, *dy, *Uf;
    float *din;
    int C, F;
    wino_grid g;
    size_t per, ndu; /* a thread's scratch floats; dU's at its end */
} backward_pass;

static void backward_blocks(const backward_pass *bp, float *scratch, long first, long end) {
    const wino_grid *g = &bp->g;
    int C = bp->C, F = bp->F;
    float *V = scratch, *dM = V + (size_t)g->TB * tile_stride(g->widest), *M = dM + (size_t)g->TB * tile_stride(F);
    float *dU = scratch + bp->per - bp->ndu;
    memset(dU, 0, sizeof(float) * bp->ndu);
    for (long blk = first; blk < end; blk++) {
        transform_inputs(bp->x, C, g, blk, V);
        transform_grads(bp->dy, F, g, blk, dM);
        accumulate_block(V, dM, dU, g->TB, C, F);
        if (!bp->din) continue;
        transform_inputs(bp->dy, F, g, blk, V);
        multiply_block(V, bp->Uf, M, g->TB, F, C);
        transform_outputs(M, C, g, blk, NULL, bp->din);
    }
}

dt_status dt_winograd_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch) {
    int C = l->in.c, F = l->out.c, nt = omp_get_max_threads();
    int lb = dt_layout_block(l->in_layout);
    backward_pass bp = {in, dout, NULL, din, C, F, grid_of(batch, l->in.h, l->in.w, lb, C, F), 0, 0};
    bp.ndu = (size_t)XI * (size_t)padded_rows(C) * (size_t)F;
    bp.per = (size_t)bp.g.TB * (tile_stride(bp.g.widest) + tile_stride(F) + tile_stride(C)) + bp.ndu;
    float *scratch, *Uf = NULL;
    DT_TRY(dt_alloc_scratch_floats(&scratch, bp.per * (size_t)nt, "Winograd tiles"));
    dt_status st = din ? transformed_weights(l, 1, &Uf) : DT_OK;
    if (st != DT_OK) {
        dt_free(scratch);
        return st;
    }
    bp.Uf = Uf;
    /* Contiguous runs of blocks, one per thread, so that which tiles went
     * into which dU depends on the thread count only. */
    int ran = 1; /* threads that ran: the dU that were written */
#pragma omp parallel num_threads(nt) if (bp.g.blocks > 1)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        if (id == 0) ran = n;
        backward_blocks(&bp, scratch + bp.per * (size_t)id, bp.g.blocks * id / n, bp.g.blocks * (id + 1) / n);
    }
    float *dU = scratch + bp.per - bp.ndu; /* thread 0's, plus the others' in order */
#pragma omp parallel for schedule(static) if (ran > 1 && (long)C * F >= WEIGHTS_PAR)
    for (long k = 0; k < (long)bp.ndu; k++)
        for (int i = 1; i < ran; i++) dU[k] += scratch[bp.per * (size_t)(i + 1) - bp.ndu + (size_t)k];
#pragma omp parallel for schedule(static) if ((long)C * F >= WEIGHTS_PAR)
    for (int c = 0; c < C; c++)
        for (int f = 0; f < F; f += 8)
            weight_gradients8(l->dw + ((size_t)f * C + c) * 9, (size_t)C * 9, dU + (size_t)c * F + f,
                              (size_t)padded_rows(C) * F);
    dt_free(scratch), dt_free(Uf);
    if (l->nb) bias_gradient(l->db, dout, F, batch, (size_t)l->in.h * (size_t)l->in.w, lb);
    return DT_OK;
}

#else /* not x86: no AVX2, so no layer runs here */

int dt_layer_winograd(const dt_layer *l) {
    (void)l;
    return 0;
}

dt_status dt_winograd_forward(const dt_layer *l, float *out, const float *in, int batch) {
    (void)l, (void)out, (void)in, (void)batch;
    return dt_fail(DT_ERR_CONFIG, "Winograd convolutions need an x86 CPU with AVX2");
}

dt_status dt_winograd_backward(dt_layer *l, float *din, const float *dout, const float *in, int batch) {
    (void)l, (void)din, (void)dout, (void)in, (void)batch;
    return dt_fail(DT_ERR_CONFIG, "Winograd convolutions need an x86 CPU with AVX2");
}

#endif
