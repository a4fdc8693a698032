/* What an optimiser's kernels see (optimizer.c dispatches to them). */
#ifndef DTRAIN_OPTIM_IMPL_H
#define DTRAIN_OPTIM_IMPL_H

#include "dtrain/optim.h"

/* One piece of one parameter tensor: n elements of w, g and the state
 * slots s0, s1 (s1 NULL for one-slot optimisers). */
typedef struct {
    float *w;
    const float *g;
    float *s0, *s1;
    size_t n;
    float lr;
    long t;     /* 1-based step count */
    float wd;   /* decay on this tensor: cfg.decay, or 0 on a plain tensor when excluded */
    int trust;  /* norms-based optimisers: scale this tensor by its trust ratio */
} dt_optim_piece;

/* A row of the optimiser table. sums adds the piece's two squared norms
 * (the pair each optimiser's trust ratio is made of) and is called only
 * when `norms` and p->trust; step then gets the whole tensor's sums
 * (zeros otherwise). */
typedef struct {
    const char *name;
    int nslots;
    int norms;
    void (*sums)(const dt_optim_cfg *c, const dt_optim_piece *p, double sums[2]);
    void (*step)(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]);
} dt_optim_row;

/* The rows, by the file that defines them. */
extern const dt_optim_row dt_optim_row_sgd, dt_optim_row_lars;                       /* momentum.c */
extern const dt_optim_row dt_optim_row_adam, dt_optim_row_adamw, dt_optim_row_lamb;  /* adam.c */

/* sqrt(a) / (sqrt(a) + sqrt(b)) style ratios: num / den, or 1 when either is 0. */
static inline double dt_optim_ratio(double num, double den) { return num > 0 && den > 0 ? num / den : 1.0; }

#endif
