/* The optimisers and learning-rate schedules against hand-computed values. */
#include <math.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/net.h"
#include "dtrain/optim.h"
#include "testutil.h"

static dt_lr_schedule sched(dt_schedule_kind kind) {
    dt_lr_schedule s = {.kind = kind, .base_lr = 0.1, .gamma = 0.1, .warmup_start_factor = 0.1};
    return s;
}

/* Darknet's get_current_rate, worked out by hand: the update after b
 * batches (step b - 1) has b as its batch number. */
static void test_darknet_schedules(void) {
    /* steps=10,20 scales=0.5,0.1: x0.5 from b = 10, x0.05 from b = 20. */
    dt_lr_schedule s = sched(DT_SCHED_STEPS);
    s.nsteps = s.nscales = 2;
    s.steps[0] = 10, s.steps[1] = 20, s.scales[0] = 0.5, s.scales[1] = 0.1;
    CHECK_CLOSE(dt_lr_at(&s, 8, 5), 0.1, 1e-12, 0);   /* b = 9 */
    CHECK_CLOSE(dt_lr_at(&s, 9, 5), 0.05, 1e-12, 0);  /* b = 10 */
    CHECK_CLOSE(dt_lr_at(&s, 19, 5), 0.005, 1e-12, 0);
    /* poly: 0.1 (1 - b/100)^4; burn_in 10 in front: 0.1 (b/10)^4. */
    s = sched(DT_SCHED_POLY);
    s.max_batches = 100, s.power = 4, s.burn_in = 10;
    CHECK_CLOSE(dt_lr_at(&s, 0, 7), 0.1 * 1e-4, 1e-15, 0);           /* b = 1: (1/10)^4 */
    CHECK_CLOSE(dt_lr_at(&s, 4, 7), 0.1 * 0.0625, 1e-12, 0);         /* b = 5: (1/2)^4 */
    CHECK_CLOSE(dt_lr_at(&s, 9, 7), 0.1 * pow(0.9, 4), 1e-12, 0);    /* b = 10: poly */
    CHECK_CLOSE(dt_lr_at(&s, 49, 7), 0.1 * 0.0625, 1e-12, 0);        /* b = 50 */
    CHECK_CLOSE(dt_lr_at(&s, 99, 7), 0.0, 1e-12, 0);                 /* b = 100 */
    /* exp: 0.1 * 0.9^b; sigmoid: 0.1 / (1 + exp(0.5 (b - 20))). */
    s = sched(DT_SCHED_EXP);
    s.gamma = 0.9;
    CHECK_CLOSE(dt_lr_at(&s, 2, 7), 0.1 * 0.729, 1e-12, 0);
    /* step, Darknet's form: 0.1 * 0.5^floor(b / 3). */
    s = sched(DT_SCHED_STEP);
    s.step_batches = 3, s.step_scale = 0.5;
    CHECK_CLOSE(dt_lr_at(&s, 1, 7), 0.1, 1e-12, 0);   /* b = 2 */
    CHECK_CLOSE(dt_lr_at(&s, 2, 7), 0.05, 1e-12, 0);  /* b = 3 */
    CHECK_CLOSE(dt_lr_at(&s, 8, 7), 0.0125, 1e-12, 0); /* b = 9 */
    s = sched(DT_SCHED_SIGMOID);
    s.gamma = 0.5, s.step_batches = 20;
    CHECK_CLOSE(dt_lr_at(&s, 19, 7), 0.05, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 21, 7), 0.1 / (1 + exp(1.0)), 1e-12, 0);
    /* cosine over max_batches steps rather than epochs. */
    s = sched(DT_SCHED_COSINE);
    s.max_batches = 40, s.total_epochs = 1000;
    CHECK_CLOSE(dt_lr_at(&s, 20, 7), 0.05, 1e-12, 0);
    CHECK(dt_schedule_kind_from_name("sigmoid") == DT_SCHED_SIGMOID &&
          dt_schedule_kind_from_name("poly") == DT_SCHED_POLY);
}

static void test_schedules(void) {
    dt_lr_schedule s = sched(DT_SCHED_CONSTANT);
    CHECK_CLOSE(dt_lr_at(&s, 12345, 10), 0.1, 1e-12, 0);

    s = sched(DT_SCHED_STEP);
    s.step_epochs = 2;
    CHECK_CLOSE(dt_lr_at(&s, 19, 10), 0.1, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 20, 10), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 45, 10), 0.001, 1e-12, 0);

    s = sched(DT_SCHED_MULTISTEP);
    s.nmilestones = 2;
    s.milestones[0] = 1;
    s.milestones[1] = 3;
    CHECK_CLOSE(dt_lr_at(&s, 9, 10), 0.1, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 10, 10), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 29, 10), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 30, 10), 0.001, 1e-12, 0);

    s = sched(DT_SCHED_COSINE);
    s.total_epochs = 4;
    s.min_lr = 0.001;
    CHECK_CLOSE(dt_lr_at(&s, 0, 10), 0.1, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 20, 10), 0.001 + 0.099 * 0.5, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 10, 10), 0.001 + 0.099 * 0.5 * (1 + cos(3.14159265358979 / 4)), 1e-9, 0);
    CHECK_CLOSE(dt_lr_at(&s, 40, 10), 0.001, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 55, 10), 0.001, 1e-12, 0); /* past the horizon: floor */

    /* Warmup over 1 epoch (10 steps) from 0.1 * 0.1 to the schedule's 0.1. */
    s = sched(DT_SCHED_CONSTANT);
    s.warmup_epochs = 1;
    CHECK_CLOSE(dt_lr_at(&s, 0, 10), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 5, 10), 0.055, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 9, 10), 0.091, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 10, 10), 0.1, 1e-12, 0);

    /* Warmup in front of a step schedule hands over to it. */
    s = sched(DT_SCHED_STEP);
    s.step_epochs = 1;
    s.warmup_epochs = 0.5;
    CHECK_CLOSE(dt_lr_at(&s, 0, 10), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 5, 10), 0.1, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 10, 10), 0.01, 1e-12, 0);

    CHECK(dt_schedule_kind_from_name("cosine") == DT_SCHED_COSINE);
    CHECK(dt_schedule_kind_from_name("linear") == -1);
    test_darknet_schedules();
}

/* Goyal et al.'s recipe on cnn.cfg's numbers: base lr 0.01 at batch 64,
 * global batch 1024 (k = 16, scaled lr 0.16), warmup 0.5 epochs of 100
 * steps = 50 steps from 0.01 to the schedule's value at step 50. */
static dt_lr_schedule small_batch(dt_schedule_kind kind) {
    dt_lr_schedule s = {.kind = kind, .base_lr = 0.01, .gamma = 0.1, .warmup_start_factor = 0.1,
                        .warmup_epochs = 0.5, .lr_scale = 1};
    return s;
}

static void test_linear_scaling(void) {
    dt_lr_schedule s = small_batch(DT_SCHED_CONSTANT);
    CHECK(dt_lr_scale(&s, DT_LR_SCALING_LINEAR, 64, 1024) == DT_OK);
    CHECK_CLOSE(s.base_lr, 0.16, 1e-12, 0);
    CHECK_CLOSE(s.lr_scale, 16, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 0, 100), 0.01, 1e-12, 0);            /* starts at the base rate */
    CHECK_CLOSE(dt_lr_at(&s, 25, 100), 0.085, 1e-12, 0);          /* 0.01 + 0.15 * 25/50 */
    CHECK_CLOSE(dt_lr_at(&s, 49, 100), 0.157, 1e-12, 0);          /* 0.01 + 0.15 * 49/50 */
    CHECK_CLOSE(dt_lr_at(&s, 50, 100), 0.16, 1e-12, 0);           /* warmup done */
    CHECK_CLOSE(dt_lr_at(&s, 150, 100), 0.16, 1e-12, 0);

    /* A step schedule (x0.1 every epoch) on the scaled rate after warmup. */
    s = small_batch(DT_SCHED_STEP);
    s.step_epochs = 1;
    CHECK(dt_lr_scale(&s, DT_LR_SCALING_LINEAR, 64, 1024) == DT_OK);
    CHECK_CLOSE(dt_lr_at(&s, 25, 100), 0.085, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 50, 100), 0.16, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 99, 100), 0.16, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 100, 100), 0.016, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 250, 100), 0.0016, 1e-12, 0);

    /* Cosine over 2 epochs, floor 0.001 scaled to 0.016. The ramp ends at
     * the cosine's value at epoch 0.5: 0.016 + 0.144 * (1 + cos(pi/4)) / 2. */
    s = small_batch(DT_SCHED_COSINE);
    s.total_epochs = 2;
    s.min_lr = 0.001;
    CHECK(dt_lr_scale(&s, DT_LR_SCALING_LINEAR, 64, 1024) == DT_OK);
    double end = 0.016 + 0.144 * 0.5 * (1 + cos(3.14159265358979323846 / 4)); /* 0.13891169 */
    CHECK_CLOSE(dt_lr_at(&s, 0, 100), 0.01, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 25, 100), 0.01 + (end - 0.01) * 0.5, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 50, 100), end, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 100, 100), 0.088, 1e-12, 0);         /* half way: 0.016 + 0.072 */
    CHECK_CLOSE(dt_lr_at(&s, 200, 100), 0.016, 1e-12, 0);

    /* none: the file's schedule with its own warmup from 0.1 x lr. */
    s = small_batch(DT_SCHED_CONSTANT);
    CHECK(dt_lr_scale(&s, DT_LR_SCALING_NONE, 64, 1024) == DT_OK);
    CHECK_CLOSE(dt_lr_at(&s, 0, 100), 0.001, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 50, 100), 0.01, 1e-12, 0);
    CHECK_CLOSE(s.lr_scale, 1, 0, 0);

    /* A smaller global batch scales down, without a ramp. */
    s = small_batch(DT_SCHED_CONSTANT);
    CHECK(dt_lr_scale(&s, DT_LR_SCALING_LINEAR, 64, 32) == DT_OK);
    CHECK_CLOSE(dt_lr_at(&s, 0, 100), 0.005, 1e-12, 0);
    CHECK_CLOSE(dt_lr_at(&s, 60, 100), 0.005, 1e-12, 0);

    CHECK(dt_lr_scale(&s, DT_LR_SCALING_LINEAR, 0, 64) == DT_ERR_USAGE);
    CHECK(dt_lr_scaling_from_name("linear") == DT_LR_SCALING_LINEAR);
    CHECK(dt_lr_scaling_from_name("none") == DT_LR_SCALING_NONE);
    CHECK(dt_lr_scaling_from_name("sqrt") == -1);
}

/* A net of one dense layer 2 -> 2: tensors w (4 floats, decayed) then b
 * (2, plain). */
static dt_net *tiny_net(void) {
    static const char text[] = "[net]\nchannels=1\nheight=1\nwidth=2\n[connected]\noutput=2\n[softmax]\n";
    dt_model_spec spec;
    dt_net *net = NULL;
    if (!CHECK_OK(dt_model_parse_string(&spec, text, "tiny")) || !CHECK_OK(dt_net_create(&net, &spec, 1, 1)))
        return NULL;
    return net;
}

/* One update of the whole tiny net with w and g set to the given values. */
static void step_tiny(dt_net *net, const dt_optim_cfg *c, float lr, long t, const float w[6], const float g[6],
                      float *state, float out[6]) {
    dt_optim *o;
    if (!CHECK_OK(dt_optim_create(&o, c, net, NULL))) return;
    memcpy(net->params, w, sizeof(float) * 6);
    memcpy(net->grads, g, sizeof(float) * 6);
    dt_optim_update_net(o, lr, t, net, state, 0, 6);
    memcpy(out, net->params, sizeof(float) * 6);
    dt_optim_free(o);
}

/* exclude 0: every tensor decays (the tests below set 1 where they mean it). */
static dt_optim_cfg cfg_of(dt_optim_kind kind, double decay) {
    dt_optim_cfg c = {kind, 0.9, decay, 0, -1, -1, -1, -1, 0, 0};
    return c;
}

static void test_sgd(dt_net *net) {
    /* Two steps by hand: w=1, g=0.5, decay 0.1, momentum 0.9, lr 0.1.
     * step 1: g' = 0.5 + 0.1 = 0.6, v = 0.6, w = 1 - 0.06 = 0.94
     * step 2: g' = 0.5 + 0.094 = 0.594, v = 0.54 + 0.594 = 1.134, w = 0.94 - 0.1134 = 0.8266
     * With exclude 0 sgd decays biases too (PyTorch). */
    dt_optim_cfg c = cfg_of(DT_OPT_SGD, 0.1);
    float w[6] = {1, 1, 1, 1, 1, 1}, g[6] = {.5f, .5f, .5f, .5f, .5f, .5f}, v[6] = {0}, out[6];
    step_tiny(net, &c, 0.1f, 1, w, g, v, out);
    CHECK_CLOSE(out[0], 0.94, 1e-6, 0);
    CHECK_CLOSE(out[5], 0.94, 1e-6, 0);
    step_tiny(net, &c, 0.1f, 2, out, g, v, out);
    CHECK_CLOSE(v[0], 1.134, 1e-6, 0);
    CHECK_CLOSE(out[0], 0.8266, 1e-6, 0);
    /* Excluded: the bias steps without decay, w = 1 - 0.1 * 0.5. */
    c.exclude = 1;
    memset(v, 0, sizeof v);
    step_tiny(net, &c, 0.1f, 1, w, g, v, out);
    CHECK_CLOSE(out[0], 0.94, 1e-6, 0);
    CHECK_CLOSE(out[4], 0.95, 1e-6, 0);

    /* Nesterov: step 1: g' = 0.6, v = 0.6, w = 1 - 0.1 * (0.6 + 0.54) = 0.886 */
    c = cfg_of(DT_OPT_SGD, 0.1);
    c.nesterov = 1;
    memset(v, 0, sizeof v);
    step_tiny(net, &c, 0.1f, 1, w, g, v, out);
    CHECK_CLOSE(out[0], 0.886, 1e-6, 0);
}

static void test_adam(dt_net *net) {
    /* Step 1 of adam without decay: m^ = g, v^ = g^2, w -= lr g / (|g| + eps). */
    dt_optim_cfg c = cfg_of(DT_OPT_ADAM, 0);
    float w[6] = {1, 2, 3, 4, 5, 6}, g[6] = {.5f, -.25f, 2, -1, 1e-3f, 0}, st[12] = {0}, out[6];
    step_tiny(net, &c, 0.01f, 1, w, g, st, out);
    for (int i = 0; i < 6; i++)
        CHECK_CLOSE(out[i], w[i] - 0.01 * g[i] / (fabs(g[i]) + 1e-8), 1e-6, 0);
    CHECK_CLOSE(st[0], 0.1 * 0.5, 1e-7, 0);        /* m = (1 - b1) g */
    CHECK_CLOSE(st[6], 0.001 * 0.25, 1e-8, 0);     /* v = (1 - b2) g^2 (1 - b2 in float) */
    /* adamw: w *= 1 - lr wd first, then the same step (decay 0.1). */
    c = cfg_of(DT_OPT_ADAMW, 0.1);
    memset(st, 0, sizeof st);
    step_tiny(net, &c, 0.01f, 1, w, g, st, out);
    for (int i = 0; i < 5; i++)
        CHECK_CLOSE(out[i], w[i] * (1 - 0.001) - 0.01 * g[i] / (fabs(g[i]) + 1e-8), 1e-6, 0);
    /* adam with L2: the gradient is g + wd w (step 1: still lr sign(g')). */
    c = cfg_of(DT_OPT_ADAM, 1);
    memset(st, 0, sizeof st);
    step_tiny(net, &c, 0.01f, 1, w, g, st, out);
    CHECK_CLOSE(out[1], 2 - 0.01, 1e-6, 0); /* g' = -0.25 + 2 > 0 */
}

static void test_lars(dt_net *net) {
    /* Weights (3, 4, 0, 0): ||w|| = 5; g (0.6, 0.8, 0, 0): ||g|| = 1; decay
     * 0.1: q = 0.001 * 5 / (1 + 0.5) = 1/300. Step 1: v = lr q (g + wd w),
     * w -= v. The bias (plain, excluded): q = 1, no decay: w -= lr g. */
    dt_optim_cfg c = cfg_of(DT_OPT_LARS, 0.1);
    c.exclude = 1;
    float w[6] = {3, 4, 0, 0, 1, 1}, g[6] = {.6f, .8f, 0, 0, .5f, -.5f}, v[6] = {0}, out[6];
    step_tiny(net, &c, 2.0f, 1, w, g, v, out);
    double q = 0.001 * 5 / 1.5;
    CHECK_CLOSE(out[0], 3 - 2 * q * (0.6 + 0.3), 1e-6, 0);
    CHECK_CLOSE(out[1], 4 - 2 * q * (0.8 + 0.4), 1e-6, 0);
    CHECK_CLOSE(out[4], 1 - 2 * 0.5, 1e-6, 0);
    CHECK_CLOSE(out[5], 1 + 2 * 0.5, 1e-6, 0);
}

static void test_lamb(dt_net *net) {
    /* Step 1: r = g / (|g| + eps) = sign(g); u = r + wd w; q = ||w|| / ||u||. */
    dt_optim_cfg c = cfg_of(DT_OPT_LAMB, 0.5);
    c.exclude = 1;
    float w[6] = {3, 4, 0, 0, 1, 1}, g[6] = {1, -1, 0, 0, .5f, -.5f}, st[12] = {0}, out[6];
    step_tiny(net, &c, 0.1f, 1, w, g, st, out);
    double u[4] = {1 + 1.5, -1 + 2, 0, 0}, un = sqrt(u[0] * u[0] + u[1] * u[1]), q = 5 / un;
    CHECK_CLOSE(out[0], 3 - 0.1 * q * u[0], 1e-5, 0);
    CHECK_CLOSE(out[1], 4 - 0.1 * q * u[1], 1e-5, 0);
    CHECK_CLOSE(out[4], 1 - 0.1, 1e-5, 0); /* bias: q = 1, no decay */
}

/* A step over a range in pieces equals one over the whole range, cut
 * anywhere for the element-wise optimisers and between tensors for LARS
 * and LAMB (dt_optim_align moves cuts there). */
static void test_ranges(dt_net *net) {
    for (int k = 0; k < DT_OPT_COUNT; k++) {
        dt_optim_cfg c = cfg_of((dt_optim_kind)k, 0.01);
        dt_optim *o;
        if (!CHECK_OK(dt_optim_create(&o, &c, net, NULL))) continue;
        int adam_family = k == DT_OPT_ADAM || k == DT_OPT_ADAMW || k == DT_OPT_LAMB;
        CHECK(dt_optim_nslots(o) == (adam_family ? 2 : 1));
        float w0[6] = {1, -2, 3, .5f, .1f, -.3f}, g[6] = {.2f, .1f, -.4f, .3f, .05f, .5f};
        float whole[6], part[6], s1[12] = {0}, s2[12] = {0};
        memcpy(net->grads, g, sizeof g);
        memcpy(net->params, w0, sizeof w0);
        dt_optim_update_net(o, 0.1f, 3, net, s1, 0, 6);
        memcpy(whole, net->params, sizeof whole);
        memcpy(net->params, w0, sizeof w0);
        size_t cut = dt_optim_align(o, 3); /* inside w [0, 4): 4 for lars and lamb */
        CHECK(cut == (dt_optim_needs_norms(c.kind) ? 4u : 3u));
        dt_optim_update_net(o, 0.1f, 3, net, s2, 0, cut);
        dt_optim_update_net(o, 0.1f, 3, net, s2, cut, 6);
        memcpy(part, net->params, sizeof part);
        CHECK_ALLCLOSE(part, whole, 6, 0, 0);
        CHECK_ALLCLOSE(s2, s1, 12, 0, 0);
        dt_optim_free(o);
    }
}

/* freeze 1 on 2 -> 2 -> 2 connected layers: every optimiser, with decay
 * and a gradient on every tensor, leaves layer 0's weights, biases and
 * state bit for bit as they were, whole or as a server's shard from the
 * middle of layer 0 (base 3), and moves layer 1's. */
static void test_freeze(void) {
    static const char text[] = "[net]\nchannels=1\nheight=1\nwidth=2\n[connected]\noutput=2\n"
                               "[connected]\noutput=2\n[softmax]\n";
    dt_model_spec spec;
    dt_net *net = NULL;
    if (!CHECK_OK(dt_model_parse_string(&spec, text, "two")) || !CHECK_OK(dt_net_create(&net, &spec, 1, 1))) return;
    CHECK(net->nparams == 12 && net->param_offset[1] == 6);
    for (int k = 0; k < DT_OPT_COUNT; k++) {
        dt_optim_cfg c = cfg_of((dt_optim_kind)k, 0.1);
        c.freeze = 1;
        dt_optim *o;
        if (!CHECK_OK(dt_optim_create(&o, &c, net, NULL))) continue;
        for (size_t base = 0; base <= 3; base += 3) {
            float w[12], g[12], st[24], w0[12], st0[24];
            for (int i = 0; i < 12; i++) w[i] = 0.5f + 0.1f * (float)i, g[i] = 0.3f - 0.05f * (float)i;
            for (int i = 0; i < 24; i++) st[i] = 0.01f * (float)(i + 1);
            memcpy(w0, w, sizeof w), memcpy(st0, st, sizeof st);
            size_t n = 12 - base; /* the shard [base, 12) */
            dt_optim_vec v = {w + base, g + base, st + base, 12, base};
            dt_optim_update(o, 0.1f, 2, v, 0, n);
            CHECK(memcmp(w, w0, 6 * sizeof *w) == 0);
            CHECK(memcmp(st, st0, 6 * sizeof *st) == 0 && memcmp(st + 12, st0 + 12, 6 * sizeof *st) == 0);
            int moved = 0;
            for (int i = 6; i < 12; i++) moved += w[i] != w0[i];
            CHECK(moved == 6);
        }
        dt_optim_free(o);
    }
    dt_net_free(net);
}

/* Cuts move to the nearer end of a tensor whose norms matter. */
static void test_align(dt_net *net) {
    dt_optim_cfg c = cfg_of(DT_OPT_LAMB, 0);
    c.exclude = 1;
    dt_optim *o;
    if (!CHECK_OK(dt_optim_create(&o, &c, net, NULL))) return;
    CHECK(dt_optim_align(o, 0) == 0 && dt_optim_align(o, 1) == 0 && dt_optim_align(o, 3) == 4);
    CHECK(dt_optim_align(o, 5) == 5 && dt_optim_align(o, 6) == 6); /* bias excluded: cut anywhere */
    dt_optim_free(o);
    c.exclude = 0; /* biases with trust ratios: whole too */
    if (!CHECK_OK(dt_optim_create(&o, &c, net, NULL))) return;
    CHECK(dt_optim_align(o, 5) == 4);
    dt_optim_free(o);
    c = cfg_of(DT_OPT_ADAM, 0);
    if (!CHECK_OK(dt_optim_create(&o, &c, net, NULL))) return;
    CHECK(dt_optim_align(o, 3) == 3);
    dt_optim_free(o);
}

static void test_names(void) {
    CHECK(dt_optim_kind_from_name("lamb") == DT_OPT_LAMB && dt_optim_kind_from_name("Adam") == -1);
    CHECK(dt_optim_uses(DT_OPT_LARS, "momentum") && !dt_optim_uses(DT_OPT_ADAM, "momentum"));
    char who[64];
    dt_optim_users(who, sizeof who, "beta1");
    CHECK(strcmp(who, "adam, adamw or lamb") == 0);
    /* Unset (-1): exclude 1 for every optimiser (Darknet decays weights only). */
    dt_optim_cfg c = cfg_of(DT_OPT_LAMB, 0);
    c.exclude = -1;
    dt_optim_resolve(&c);
    CHECK(c.eps == 1e-6 && c.exclude == 1 && c.beta2 == 0.999);
    c = cfg_of(DT_OPT_ADAM, 0);
    c.exclude = -1;
    dt_optim_resolve(&c);
    CHECK(c.eps == 1e-8 && c.exclude == 1);
}

int main(void) {
    test_schedules();
    test_linear_scaling();
    test_names();
    test_freeze();
    dt_net *net = tiny_net();
    if (net) {
        test_sgd(net);
        test_adam(net);
        test_lars(net);
        test_lamb(net);
        test_ranges(net);
        test_align(net);
    }
    dt_net_free(net);
    return dt_test_finish("test_optim");
}
