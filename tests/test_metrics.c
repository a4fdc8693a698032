/* dt_confusion against matrices worked out by hand: 3 classes, 6 samples
 * (two batches), a tie (the first largest logit is the prediction, as
 * dt_net_count_correct counts it), a class with no samples; top-2. */
#include <string.h>

#include "dtrain/metrics.h"
#include "testutil.h"

static void test_hand_matrix(void) {
    dt_confusion c;
    if (!CHECK_OK(dt_confusion_init(&c, 4, 2, 1))) return;
    /* label: logits -> prediction, label's rank (logits above it)
     *   0: 3 1 0 0  -> 0, 0      0: 1 2 3 0 -> 2, 2 (not in top 2)
     *   1: 2 2 0 0  -> 0 (tie), 0  (nothing above the label: in top 2)
     *   1: 0 5 1 0  -> 1, 0      2: 0 4 1 0 -> 1, 1
     *   2: 0 0 9 0  -> 2, 0
     * matrix rows label 0..3, columns prediction:
     *   0: 1 0 1 0   1: 1 1 0 0   2: 0 1 1 0   3: 0 0 0 0 */
    const float b1[3 * 4] = {3, 1, 0, 0, 2, 2, 0, 0, 0, 5, 1, 0};
    const dt_label l1[3] = {0, 1, 1};
    const float b2[4 * 4] = {1, 2, 3, 0, 0, 4, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0};
    const dt_label l2[4] = {0, 2, 2, 9}; /* 9: not an output of this model, not counted */
    dt_confusion_add(&c, b1, l1, 3);
    dt_confusion_add(&c, b2, l2, 4);
    const long want[16] = {1, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    CHECK(memcmp(c.counts, want, sizeof want) == 0);
    CHECK(c.n == 6 && c.topk == 5);
    CHECK(dt_confusion_support(&c, 1) == 2 && dt_confusion_support(&c, 3) == 0);
    CHECK_CLOSE(dt_confusion_class_accuracy(&c, 0), 0.5, 0, 0);
    CHECK_CLOSE(dt_confusion_class_accuracy(&c, 1), 0.5, 0, 0);
    CHECK_CLOSE(dt_confusion_class_accuracy(&c, 2), 0.5, 0, 0);
    CHECK(dt_confusion_class_accuracy(&c, 3) == -1);
    CHECK_CLOSE(dt_confusion_accuracy(&c), 3.0 / 6, 1e-15, 0);
    CHECK_CLOSE(dt_confusion_topk(&c), 5.0 / 6, 1e-15, 0);
    dt_confusion_free(&c);
    dt_confusion_free(&c); /* freeing twice is a no-op */
}

/* k is clamped to [1, classes]; an empty matrix reads as 0. */
static void test_edges(void) {
    dt_confusion c;
    if (!CHECK_OK(dt_confusion_init(&c, 3, 5, 0))) return;
    CHECK(c.k == 3 && dt_confusion_accuracy(&c) == 0 && dt_confusion_topk(&c) == 0);
    dt_confusion_free(&c);
    if (!CHECK_OK(dt_confusion_init(&c, 3, 0, 0))) return;
    CHECK(c.k == 1 && !c.counts);
    dt_confusion_free(&c);
    CHECK(dt_confusion_init(&c, DT_CONFUSION_MAX_MATRIX + 1, 5, 1) == DT_ERR_USAGE);
    dt_confusion_free(&c);
}

/* Labels above 255 (32-bit): 300 classes without a matrix, per-class
 * counts and top-k as with one. */
static void test_many_classes(void) {
    enum { C = 300 };
    static float logits[2 * C];
    const dt_label y[2] = {299, 256};
    logits[299] = 1;          /* sample 0: predicts 299 (right) */
    logits[C + 257] = 1;      /* sample 1: predicts 257, label 256 ties for second */
    dt_confusion c;
    if (!CHECK_OK(dt_confusion_init(&c, C, 2, 0))) return;
    dt_confusion_add(&c, logits, y, 2);
    CHECK(c.n == 2 && c.topk == 2 && dt_confusion_support(&c, 299) == 1 && dt_confusion_support(&c, 256) == 1);
    CHECK(dt_confusion_class_accuracy(&c, 299) == 1 && dt_confusion_class_accuracy(&c, 256) == 0);
    CHECK_CLOSE(dt_confusion_accuracy(&c), 0.5, 0, 0);
    dt_confusion_free(&c);
}

int main(void) {
    test_hand_matrix();
    test_edges();
    test_many_classes();
    return dt_test_finish("test_metrics");
}
