/* Adaptive-moment optimisers: adam and adamw (PyTorch's, same order of
 * float operations) and lamb (You et al. 2019). Slot 0 holds the first
 * moment m, slot 1 the second v. */
#include <math.h>

#include "optim_impl.h"

/* Bias corrections of step t: lr / (1 - b1^t) and sqrt(1 - b2^t). */
static void corrections(const dt_optim_cfg *c, const dt_optim_piece *p, float *step_size, float *bc2_sqrt) {
    double t = (double)p->t;
    *step_size = (float)(p->lr / (1.0 - pow(c->beta1, t)));
    *bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, t));
}

/* decoupled: AdamW's w *= 1 - lr wd first, else decay added to g (L2). */
static void adam_moments_step(const dt_optim_cfg *c, const dt_optim_piece *p, int decoupled) {
    float *restrict w = p->w, *restrict m = p->s0, *restrict v = p->s1;
    const float *restrict g = p->g;
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    const float l2 = decoupled ? 0.0f : p->wd, shrink = decoupled ? (float)(1.0 - (double)p->lr * p->wd) : 1.0f;
    float step_size, bc2_sqrt;
    corrections(c, p, &step_size, &bc2_sqrt);
    for (size_t i = 0; i < p->n; i++) {
        float gi = g[i] + l2 * w[i];
        m[i] = m[i] * b1 + (1 - b1) * gi;
        v[i] = v[i] * b2 + (1 - b2) * gi * gi;
        w[i] = w[i] * shrink - step_size * (m[i] / (sqrtf(v[i]) / bc2_sqrt + eps));
    }
}

static void adam_step(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]) {
    (void)sums;
    adam_moments_step(c, p, 0);
}

static void adamw_step(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]) {
    (void)sums;
    adam_moments_step(c, p, 1);
}

/* LAMB's update direction u_i = r_i + wd w_i from the moments this step
 * will have; *m_out and *v_out receive them. */
static inline float lamb_direction(const dt_optim_cfg *c, const dt_optim_piece *p, size_t i, float inv_bc1,
                                   float inv_bc2, float *m_out, float *v_out) {
    const float b1 = (float)c->beta1, b2 = (float)c->beta2;
    float gi = p->g[i];
    float m = p->s0[i] * b1 + (1 - b1) * gi, v = p->s1[i] * b2 + (1 - b2) * gi * gi;
    *m_out = m;
    *v_out = v;
    return m * inv_bc1 / (sqrtf(v * inv_bc2) + (float)c->eps) + p->wd * p->w[i];
}

static void lamb_factors(const dt_optim_cfg *c, long t, float *inv_bc1, float *inv_bc2) {
    *inv_bc1 = (float)(1.0 / (1.0 - pow(c->beta1, (double)t)));
    *inv_bc2 = (float)(1.0 / (1.0 - pow(c->beta2, (double)t)));
}

/* ||w||^2 and ||u||^2, the moments left as they are (step recomputes them). */
static void lamb_sums(const dt_optim_cfg *c, const dt_optim_piece *p, double sums[2]) {
    float inv_bc1, inv_bc2, m, v;
    lamb_factors(c, p->t, &inv_bc1, &inv_bc2);
    double ww = 0, uu = 0;
    for (size_t i = 0; i < p->n; i++) {
        float u = lamb_direction(c, p, i, inv_bc1, inv_bc2, &m, &v);
        ww += (double)p->w[i] * p->w[i];
        uu += (double)u * u;
    }
    sums[0] += ww;
    sums[1] += uu;
}

static void lamb_step(const dt_optim_cfg *c, const dt_optim_piece *p, const double sums[2]) {
    float inv_bc1, inv_bc2;
    lamb_factors(c, p->t, &inv_bc1, &inv_bc2);
    double q = p->trust ? dt_optim_ratio(sqrt(sums[0]), sqrt(sums[1])) : 1.0;
    const float step = (float)(p->lr * q);
    for (size_t i = 0; i < p->n; i++) {
        float u = lamb_direction(c, p, i, inv_bc1, inv_bc2, &p->s0[i], &p->s1[i]);
        p->w[i] -= step * u;
    }
}

const dt_optim_row dt_optim_row_adam = {"adam", 2, 0, NULL, adam_step};
const dt_optim_row dt_optim_row_adamw = {"adamw", 2, 0, NULL, adamw_step};
const dt_optim_row dt_optim_row_lamb = {"lamb", 2, 1, lamb_sums, lamb_step};
