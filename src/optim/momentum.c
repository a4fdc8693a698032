/* Momentum optimisers: sgd (PyTorch's) and lars (You et al. 2017). */
#include <math.h>

#include "optim_impl.h"

static void sgd_step(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]) {
    (void)sums;
    float *restrict w = p->w, *restrict v = p->s0;
    const float *restrict g = p->g;
    const float mu = (float)c->momentum, wd = p->wd, lr = p->lr;
    if (c->nesterov) {
        for (size_t i = 0; i < p->n; i++) {
            float gi = g[i] + wd * w[i];
            v[i] = mu * v[i] + gi;
            w[i] -= lr * (gi + mu * v[i]);
        }
    } else {
        for (size_t i = 0; i < p->n; i++) {
            v[i] = mu * v[i] + g[i] + wd * w[i];
            w[i] -= lr * v[i];
        }
    }
}

/* ||w||^2 and ||g||^2. */
static void lars_sums(const dt_optim_cfg *c, const dt_optim_piece *p, double sums[2]) {
    (void)c;
    double ww = 0, gg = 0;
    for (size_t i = 0; i < p->n; i++) {
        ww += (double)p->w[i] * p->w[i];
        gg += (double)p->g[i] * p->g[i];
    }
    sums[0] += ww;
    sums[1] += gg;
}

static void lars_step(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]) {
    double wn = sqrt(sums[0]), gn = sqrt(sums[1]);
    double q = p->trust ? dt_optim_ratio(c->trust * wn, gn + p->wd * wn) : 1.0;
    float *restrict w = p->w, *restrict v = p->s0;
    const float *restrict g = p->g;
    const float mu = (float)c->momentum, wd = p->wd, step = (float)(p->lr * q);
    for (size_t i = 0; i < p->n; i++) {
        v[i] = mu * v[i] + step * (g[i] + wd * w[i]);
        w[i] -= v[i];
    }
}

const dt_optim_row dt_optim_row_sgd = {"sgd", 1, 0, NULL, sgd_step};
const dt_optim_row dt_optim_row_lars = {"lars", 1, 1, lars_sums, lars_step};
