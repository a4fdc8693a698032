/* Confusion matrix and top-k of an evaluation (metrics.h). */
#include "dtrain/metrics.h"

#include "dtrain/mem.h"

/* *p = n zeroed longs. */
static dt_status zeros(long **p, size_t n, const char *what) {
    DT_TRY(dt_alloc_bytes((void **)p, n * sizeof **p, what));
    for (size_t i = 0; i < n; i++) (*p)[i] = 0;
    return DT_OK;
}

dt_status dt_confusion_init(dt_confusion *c, int classes, int k, int matrix) {
    *c = (dt_confusion){classes, k < 1 ? 1 : k > classes ? classes : k, 0, 0, NULL, NULL, NULL};
    if (matrix && classes > DT_CONFUSION_MAX_MATRIX)
        return dt_fail(DT_ERR_USAGE, "a confusion matrix of %d classes is too large (at most %d)", classes,
                       DT_CONFUSION_MAX_MATRIX);
    dt_status s = zeros(&c->support, (size_t)classes, "class counts");
    if (s == DT_OK) s = zeros(&c->right, (size_t)classes, "class counts");
    if (s == DT_OK && matrix) s = zeros(&c->counts, (size_t)classes * (size_t)classes, "confusion matrix");
    if (s != DT_OK) dt_confusion_free(c);
    return s;
}

void dt_confusion_free(dt_confusion *c) {
    dt_free(c->support);
    dt_free(c->right);
    dt_free(c->counts);
    c->support = c->right = c->counts = NULL;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Logits larger than the label's own. */
static int rank_of(const float *x, int n, int label) {
    int above = 0;
    for (int i = 0; i < n; i++) above += x[i] > x[label];
    return above;
}

void dt_confusion_add(dt_confusion *c, const float *logits, const dt_label *labels, int n) {
    for (int b = 0; b < n; b++) {
        const float *x = logits + (size_t)b * (size_t)c->classes;
        int y = labels[b], p = argmax(x, c->classes);
        if (y < 0 || y >= c->classes) continue; /* a label the model cannot output: the data set was checked before */
        c->support[y]++;
        c->right[y] += p == y;
        if (c->counts) c->counts[(size_t)y * (size_t)c->classes + (size_t)p]++;
        c->topk += rank_of(x, c->classes, y) < c->k;
        c->n++;
    }
}

long dt_confusion_support(const dt_confusion *c, int label) { return c->support[label]; }

double dt_confusion_class_accuracy(const dt_confusion *c, int label) {
    long s = c->support[label];
    return s ? (double)c->right[label] / (double)s : -1;
}

double dt_confusion_accuracy(const dt_confusion *c) {
    long right = 0;
    for (int i = 0; i < c->classes; i++) right += c->right[i];
    return c->n ? (double)right / (double)c->n : 0;
}

double dt_confusion_topk(const dt_confusion *c) { return c->n ? (double)c->topk / (double)c->n : 0; }
