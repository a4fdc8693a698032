/* SGD update and learning-rate schedules against hand-computed values. */
#include <math.h>

#include "dtrain/optim.h"
#include "testutil.h"

static dt_lr_schedule sched(dt_schedule_kind kind) {
    dt_lr_schedule s = {.kind = kind, .base_lr = 0.1, .gamma = 0.1, .warmup_start_factor = 0.1};
    return s;
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

static void test_sgd(void) {
    /* Two steps by hand: w=1, g=0.5, decay 0.1, momentum 0.9, lr 0.1.
     * step 1: g' = 0.5 + 0.1 = 0.6, v = 0.6, w = 1 - 0.06 = 0.94
     * step 2: g' = 0.5 + 0.094 = 0.594, v = 0.54 + 0.594 = 1.134, w = 0.94 - 0.1134 = 0.8266 */
    dt_sgd_cfg c = {0.9, 0.1, 0};
    float w = 1, v = 0, g = 0.5f;
    dt_sgd_update(&c, 0.1f, &w, &v, &g, 1);
    CHECK_CLOSE(w, 0.94, 1e-6, 0);
    dt_sgd_update(&c, 0.1f, &w, &v, &g, 1);
    CHECK_CLOSE(v, 1.134, 1e-6, 0);
    CHECK_CLOSE(w, 0.8266, 1e-6, 0);

    /* Nesterov: step 1: g' = 0.6, v = 0.6, w = 1 - 0.1 * (0.6 + 0.54) = 0.886 */
    dt_sgd_cfg n = {0.9, 0.1, 1};
    w = 1, v = 0;
    dt_sgd_update(&n, 0.1f, &w, &v, &g, 1);
    CHECK_CLOSE(w, 0.886, 1e-6, 0);
}

int main(void) {
    test_schedules();
    test_linear_scaling();
    test_sgd();
    return dt_test_finish("test_optim");
}
