/* Winograd F(2x2, 3x3) convolutions on nChw8c activations (winograd.h).
 *
 * Buffer shapes, for a block of TB tiles (TB a multiple of ROWS, the
 * matrix kernels' rows; a block's rows past the last tile are zero and
 * their products dropped):
 *   V  (TB, 16, Cin)   the block's input tiles, B^T d B, by position xi
 *                      (tile-major: a tile's transform writes one run;
 *                      rows tile_stride(Cin) apart);
 *   U  (16, Cin, Cout) the weights, G g G^T, by position;
 *   M  (TB, 16, Cout)  V . U, position by position; A^T M A gives the 2x2
 *                      outputs of each tile;
 *   dM (TB, 16, F)     backward-weights: A dy A^T of the output gradients;
 *   dU (16, C', F)     backward-weights: sum over tiles of V^T . dM, one
 *                      per thread, brought to 3x3 by G^T dU G (C' = C
 *                      rounded up to whole 6-row groups).
 * Tiles are numbered (b, th, tw) over each image's ceil(H/2) x ceil(W/2)
 * grid; tile (th, tw) writes outputs (2th.., 2tw..) and reads inputs
 * (2th-1.., 2tw-1..), zero outside the image (the padding of 1).
 *
 * Threads take contiguous ranges of blocks (OpenMP, the threads oneDNN
 * uses), so a result depends on the thread count only through the order of
 * backward-weights' per-thread sums, as oneDNN's does. */
#include "layers/winograd.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "dtrain/mem.h"

#define AVX2 __attribute__((target("avx2,fma")))

enum {
    XI = 16,            /* positions of a 4x4 tile */
    ROWS = 6,           /* rows of the product kernel: 12 accumulators of 16 */
    BLOCK_FLOATS = 1536, /* TB x channels of a block's V or M: 96 KiB for all 16 positions */
    WEIGHTS_PAR = 1024   /* channel pairs from which the weights' transforms use the threads */
};

typedef struct {
    int H, W, TH, TW; /* image and tile grid */
    long T;           /* tiles in the batch: B TH TW */
    int widest;       /* max(Cin, Cout): a tile row of V large enough for either side */
    int TB;           /* tiles per block */
    long blocks;
} wino_grid;

/* Floats from one tile's row of V, M or dM to the next: its 16 positions
 * of c channels, then one cache line more, so that the rows a product
 * kernel walks down are not 4 KiB apart (they would share one L1 set). */
static size_t tile_stride(int c) { return (size_t)XI * (size_t)c + 16; }

/* The tiles of a convolution of Cin into Cout channels over (batch, H, W). */
static wino_grid grid_of(int batch, int H, int W, int Cin, int Cout) {
    wino_grid g = {H, W, (H + 1) / 2, (W + 1) / 2, 0, Cin > Cout ? Cin : Cout, 0, 0};
    g.T = (long)batch * g.TH * g.TW;
    int rows = BLOCK_FLOATS / g.widest / ROWS * ROWS;
    g.TB = rows > ROWS ? rows : ROWS;
    g.blocks = (g.T + g.TB - 1) / g.TB;
    return g;
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

int dt_layer_winograd(const dt_layer *l) {
    return l->winograd && l->spec.kind == DT_LAYER_CONV && l->spec.size == 3 && l->spec.stride == 1 &&
           l->spec.pad == 1 && dt_layer_dilation(&l->spec) == 1 && dt_layer_groups(&l->spec) == 1 &&
           l->precision == DT_PRECISION_FP32 && l->in_layout == DT_LAYOUT_NCHW8C &&
           l->out_layout == DT_LAYOUT_NCHW8C && l->in.c % 8 == 0 && l->out.c % 8 == 0 && cpu_has_avx2_fma();
}

/* ---- transforms of 8 channels at a time --------------------------------- */

/* Where tile (th, tw) of one channel block's plane x (H, W, 8) starts and
 * its row stride in floats: in x itself when the tile lies inside the
 * image, else in `edge` (4x4 cells of 8), a copy with zeros outside it. */
AVX2 static const float *tile_cells(const float *x, const wino_grid *g, int th, int tw, float *edge, size_t *rs) {
    int ih0 = 2 * th - 1, iw0 = 2 * tw - 1;
    if (ih0 >= 0 && iw0 >= 0 && ih0 + 4 <= g->H && iw0 + 4 <= g->W) {
        *rs = (size_t)g->W * 8;
        return x + ((size_t)ih0 * (size_t)g->W + (size_t)iw0) * 8;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int ih = ih0 + i, iw = iw0 + j;
            _mm256_storeu_ps(edge + (4 * i + j) * 8,
                             ih >= 0 && ih < g->H && iw >= 0 && iw < g->W
                                 ? _mm256_loadu_ps(x + ((size_t)ih * (size_t)g->W + (size_t)iw) * 8)
                                 : _mm256_setzero_ps());
        }
    *rs = 32;
    return edge;
}

/* Asks for the two rows of input that the tile below (th, tw) adds to this
 * one's, a grid row ahead of their use: the transforms' reads miss the
 * caches otherwise (plane x as in tile_cells). */
static void prefetch_below(const float *x, const wino_grid *g, int th, int tw) {
    int iw = 2 * tw - 1 < 0 ? 0 : 2 * tw - 1;
    for (int ih = 2 * th + 3; ih <= 2 * th + 4 && ih < g->H; ih++)
        __builtin_prefetch(x + ((size_t)ih * (size_t)g->W + (size_t)iw) * 8);
}

/* Column j of d B for the 4 cells of a row at p (8 floats apart):
 * B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], so d B's columns are
 * d0 - d2, d1 + d2, d2 - d1, d1 - d3. */
AVX2 static inline __m256 input_col(const float *p, int j) {
    static const int first[4] = {0, 1, 2, 1}, second[4] = {2, 2, 1, 3};
    __m256 a = _mm256_loadu_ps(p + 8 * first[j]), b = _mm256_loadu_ps(p + 8 * second[j]);
    return j == 1 ? _mm256_add_ps(a, b) : _mm256_sub_ps(a, b);
}

/* v[xi ld] <- B^T d B for the 4x4 cells d at p (rows rs floats apart), a
 * column of d B at a time: 10 registers, no spills. */
AVX2 static void input_tile(const float *p, size_t rs, float *v, size_t ld) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256 r0 = input_col(p, j), r1 = input_col(p + rs, j);
        __m256 r2 = input_col(p + 2 * rs, j), r3 = input_col(p + 3 * rs, j);
        _mm256_storeu_ps(v + (size_t)j * ld, _mm256_sub_ps(r0, r2));
        _mm256_storeu_ps(v + (size_t)(4 + j) * ld, _mm256_add_ps(r1, r2));
        _mm256_storeu_ps(v + (size_t)(8 + j) * ld, _mm256_sub_ps(r2, r1));
        _mm256_storeu_ps(v + (size_t)(12 + j) * ld, _mm256_sub_ps(r1, r3));
    }
}

/* V rows of block blk's tiles <- B^T d B of x (B, Cin, H, W) nChw8c, a
 * channel block at a time: consecutive tiles read consecutive cells of one
 * plane, which the prefetchers follow. */
AVX2 static void transform_inputs(const float *x, int Cin, const wino_grid *g, long blk, float *V) {
    size_t plane = (size_t)g->H * (size_t)g->W * 8, ld = (size_t)Cin;
    int n = block_tiles(g, blk);
    memset(V + (size_t)n * tile_stride(Cin), 0, sizeof(float) * (size_t)(g->TB - n) * tile_stride(Cin));
    float edge[XI * 8];
    for (int cb = 0; cb < Cin / 8; cb++) {
        tile_pos p = block_start(g, blk);
        for (int r = 0; r < n; r++, next_tile(g, &p)) {
            size_t rs;
            const float *x0 = x + ((size_t)p.b * (size_t)(Cin / 8) + (size_t)cb) * plane;
            const float *cells = tile_cells(x0, g, p.th, p.tw, edge, &rs);
            prefetch_below(x0, g, p.th, p.tw);
            input_tile(cells, rs, V + (size_t)r * tile_stride(Cin) + (size_t)cb * 8, ld);
        }
    }
}

/* Tiles of block blk in y (B, Cout, H, W) nChw8c <- A^T M A (+ bias):
 * A^T = [1 1 1 0; 0 1 -1 -1]; cells outside the image are dropped. */
AVX2 static void transform_outputs(const float *M, int Cout, const wino_grid *g, long blk, const float *bias,
                                   float *y) {
    size_t plane = (size_t)g->H * (size_t)g->W * 8, ld = (size_t)Cout;
    int n = block_tiles(g, blk);
    for (int fb = 0; fb < Cout / 8; fb++) {
        tile_pos p = block_start(g, blk);
        for (int r = 0; r < n; r++, next_tile(g, &p)) {
            int b = p.b, th = p.th, tw = p.tw;
            int rows = 2 * th + 1 < g->H ? 2 : 1, cols = 2 * tw + 1 < g->W ? 2 : 1;
            const float *m = M + (size_t)r * tile_stride(Cout) + (size_t)fb * 8;
            __m256 s[8]; /* A^T m: 2 rows of 4 */
            for (int j = 0; j < 4; j++) {
                __m256 m0 = _mm256_loadu_ps(m + j * ld), m1 = _mm256_loadu_ps(m + (4 + j) * ld);
                __m256 m2 = _mm256_loadu_ps(m + (8 + j) * ld), m3 = _mm256_loadu_ps(m + (12 + j) * ld);
                s[j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
                s[4 + j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
            }
            __m256 bv = bias ? _mm256_loadu_ps(bias + (size_t)fb * 8) : _mm256_setzero_ps();
            float *out = y + ((size_t)b * (size_t)(Cout / 8) + (size_t)fb) * plane;
            for (int i = 0; i < rows; i++) {
                const __m256 *q = s + 4 * i;
                __m256 o[2] = {_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(q[0], q[1]), q[2]), bv),
                               _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(q[1], q[2]), q[3]), bv)};
                for (int j = 0; j < cols; j++)
                    _mm256_storeu_ps(out + ((size_t)(2 * th + i) * (size_t)g->W + (size_t)(2 * tw + j)) * 8, o[j]);
            }
        }
    }
}

/* dM rows of block blk <- A dy A^T for the 2x2 output gradients of each
 * tile of dy (B, F, H, W) nChw8c (zero outside the image); A = A^T^T. */
AVX2 static void transform_grads(const float *dy, int F, const wino_grid *g, long blk, float *dM) {
    size_t plane = (size_t)g->H * (size_t)g->W * 8, ld = (size_t)F;
    int n = block_tiles(g, blk);
    memset(dM + (size_t)n * tile_stride(F), 0, sizeof(float) * (size_t)(g->TB - n) * tile_stride(F));
    for (int fb = 0; fb < F / 8; fb++) {
        tile_pos p = block_start(g, blk);
        for (int r = 0; r < n; r++, next_tile(g, &p)) {
            int b = p.b, th = p.th, tw = p.tw;
            float *dm = dM + (size_t)r * tile_stride(F);
            const float *src = dy + ((size_t)b * (size_t)(F / 8) + (size_t)fb) * plane;
            __m256 e[2][2];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    int oh = 2 * th + i, ow = 2 * tw + j;
                    e[i][j] = oh < g->H && ow < g->W
                                  ? _mm256_loadu_ps(src + ((size_t)oh * (size_t)g->W + (size_t)ow) * 8)
                                  : _mm256_setzero_ps();
                }
            __m256 q[4][2]; /* A e: rows e0, e0 + e1, e0 - e1, -e1 */
            for (int j = 0; j < 2; j++) {
                q[0][j] = e[0][j];
                q[1][j] = _mm256_add_ps(e[0][j], e[1][j]);
                q[2][j] = _mm256_sub_ps(e[0][j], e[1][j]);
                q[3][j] = _mm256_sub_ps(_mm256_setzero_ps(), e[1][j]);
            }
            for (int i = 0; i < 4; i++) {
                float *row = dm + (size_t)(4 * i) * ld + (size_t)fb * 8;
                _mm256_storeu_ps(row, q[i][0]);
                _mm256_storeu_ps(row + ld, _mm256_add_ps(q[i][0], q[i][1]));
                _mm256_storeu_ps(row + 2 * ld, _mm256_sub_ps(q[i][0], q[i][1]));
                _mm256_storeu_ps(row + 3 * ld, _mm256_sub_ps(_mm256_setzero_ps(), q[i][1]));
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

/* M (TB, 16, Cout) <- V (TB, 16, Cin) . U (16, Cin, Cout), by position. */
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

/* dU (16, padded_rows(C), F) += V^T . dM over the block's tiles (V (TB,
 * 16, C), dM (TB, 16, F)), by position. */
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

/* u[xi stride] (4x4) <- G k G^T for the 3x3 kernel k (row-major; rotated
 * by 180 degrees when `flip`): G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
static void transform_weight(const float *g, int flip, float *u, size_t stride) {
    float k[9], t[4][3];
    for (int i = 0; i < 9; i++) k[i] = g[flip ? 8 - i : i];
    for (int j = 0; j < 3; j++) {
        t[0][j] = k[j];
        t[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
        t[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
        t[3][j] = k[6 + j];
    }
    for (int i = 0; i < 4; i++) {
        u[(size_t)(4 * i) * stride] = t[i][0];
        u[(size_t)(4 * i + 1) * stride] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        u[(size_t)(4 * i + 2) * stride] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        u[(size_t)(4 * i + 3) * stride] = t[i][2];
    }
}

/* dw (3x3) <- G^T du G for du[xi stride] (4x4): the adjoint of transform_weight. */
static void weight_gradient(const float *du, size_t stride, float *dw) {
    float t[3][4];
    for (int j = 0; j < 4; j++) {
        float s0 = du[(size_t)j * stride], s1 = du[(size_t)(4 + j) * stride];
        float s2 = du[(size_t)(8 + j) * stride], s3 = du[(size_t)(12 + j) * stride];
        t[0][j] = s0 + 0.5f * (s1 + s2);
        t[1][j] = 0.5f * (s1 - s2);
        t[2][j] = 0.5f * (s1 + s2) + s3;
    }
    for (int i = 0; i < 3; i++) {
        dw[3 * i] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
        dw[3 * i + 1] = 0.5f * (t[i][1] - t[i][2]);
        dw[3 * i + 2] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
    }
}

/* ---- the passes --------------------------------------------------------- */

/* y (B, Cout, H, W) <- x (B, Cin, H, W) convolved by the transformed
 * weights U (16, Cin, Cout), plus bias unless NULL; nChw8c. */
static dt_status convolve(const float *x, int Cin, float *y, int Cout, const float *U, const float *bias, int batch,
                          int H, int W) {
    wino_grid g = grid_of(batch, H, W, Cin, Cout);
    int nt = omp_get_max_threads();
    size_t per = (size_t)g.TB * (tile_stride(Cin) + tile_stride(Cout));
    float *scratch;
    DT_TRY(dt_alloc_floats(&scratch, per * (size_t)nt, "Winograd tiles"));
#pragma omp parallel num_threads(nt) if (g.blocks > 1)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        float *V = scratch + per * (size_t)id, *M = V + (size_t)g.TB * tile_stride(Cin);
        for (long blk = g.blocks * id / n; blk < g.blocks * (id + 1) / n; blk++) {
            transform_inputs(x, Cin, &g, blk, V);
            multiply_block(V, U, M, g.TB, Cin, Cout);
            transform_outputs(M, Cout, &g, blk, bias, y);
        }
    }
    dt_free(scratch);
    return DT_OK;
}

/* The weights of a pass, U (16, Cin, Cout), into a new buffer: the
 * forward's (Cin = C, Cout = F), or backward-data's (flip: Cin = F, Cout =
 * C, the kernel rotated by 180 degrees). */
static dt_status transformed_weights(const dt_layer *l, int flip, float **U) {
    int C = l->in.c, F = l->out.c, rows = flip ? F : C, cols = flip ? C : F;
    float *u;
    DT_TRY(dt_alloc_floats(&u, (size_t)XI * (size_t)C * (size_t)F, "Winograd weights"));
    /* Row by row of U, so that each position's writes are consecutive. */
#pragma omp parallel for schedule(static) if ((long)C * F >= WEIGHTS_PAR)
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) {
            size_t f = (size_t)(flip ? r : k), c = (size_t)(flip ? k : r);
            transform_weight(l->w + (f * (size_t)C + c) * 9, flip, u + (size_t)r * cols + k, (size_t)C * F);
        }
    *U = u;
    return DT_OK;
}

dt_status dt_winograd_forward(const dt_layer *l, float *out, const float *in, int batch) {
    float *U;
    DT_TRY(transformed_weights(l, 0, &U));
    dt_status st = convolve(in, l->in.c, out, l->out.c, U, l->nb ? l->b : NULL, batch, l->in.h, l->in.w);
    dt_free(U);
    return st;
}

/* db (F) <- the sums of dy (B, F, H, W) nChw8c over images and cells. */
static void bias_gradient(float *db, const float *dy, int F, int batch, size_t plane) {
    for (int f = 0; f < F; f++) {
        double s = 0;
        for (int b = 0; b < batch; b++) {
            const float *p = dy + ((size_t)b * (size_t)(F / 8) + (size_t)(f / 8)) * plane * 8 + f % 8;
            for (size_t i = 0; i < plane; i++) s += p[i * 8];
        }
        db[f] = (float)s;
    }
}

/* Backward, one pass over the blocks: each block's tiles of x and dy go
 * into dU (the weight gradients' sums), and, when din is wanted, dy's
 * tiles through the flipped weights Uf (16, F, C) into din; dy is read
 * from memory once. A thread's scratch: V (TB rows of tile_stride(max(C,
 * F))), dM and M (TB rows of tile_stride(F), tile_stride(C)), dU (16, C', F). */
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
    backward_pass bp = {in, dout, NULL, din, C, F, grid_of(batch, l->in.h, l->in.w, C, F), 0, 0};
    bp.ndu = (size_t)XI * (size_t)padded_rows(C) * (size_t)F;
    bp.per = (size_t)bp.g.TB * (tile_stride(bp.g.widest) + tile_stride(F) + tile_stride(C)) + bp.ndu;
    float *scratch, *Uf = NULL;
    DT_TRY(dt_alloc_floats(&scratch, bp.per * (size_t)nt, "Winograd tiles"));
    dt_status st = din ? transformed_weights(l, 1, &Uf) : DT_OK;
    if (st != DT_OK) {
        dt_free(scratch);
        return st;
    }
    bp.Uf = Uf;
#pragma omp parallel num_threads(nt) if (bp.g.blocks > 1) /* every dU starts at zero: dt_alloc zeroes */
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        backward_blocks(&bp, scratch + bp.per * (size_t)id, bp.g.blocks * id / n, bp.g.blocks * (id + 1) / n);
    }
    float *dU = scratch + bp.per - bp.ndu; /* thread 0's, plus the others' in order */
#pragma omp parallel for schedule(static) if (nt > 1 && (long)C * F >= WEIGHTS_PAR)
    for (long k = 0; k < (long)bp.ndu; k++)
        for (int i = 1; i < nt; i++) dU[k] += scratch[bp.per * (size_t)(i + 1) - bp.ndu + (size_t)k];
#pragma omp parallel for schedule(static) if ((long)C * F >= WEIGHTS_PAR)
    for (int c = 0; c < C; c++)
        for (int f = 0; f < F; f++)
            weight_gradient(dU + (size_t)c * F + f, (size_t)padded_rows(C) * F, l->dw + ((size_t)f * C + c) * 9);
    dt_free(scratch), dt_free(Uf);
    if (l->nb) bias_gradient(l->db, dout, F, batch, (size_t)l->in.h * (size_t)l->in.w);
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
