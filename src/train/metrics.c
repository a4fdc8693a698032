/* Confusion matrix and top-k of an evaluation (metrics.h). */
#include "dtrain/metrics.h"

#include "dtrain/mem.h"

dt_status dt_confusion_init(dt_confusion *c, int classes, int k) {
    *c = (dt_confusion){classes, k < 1 ? 1 : k > classes ? classes : k, 0, 0, NULL};
    size_t cells = (size_t)classes * (size_t)classes;
    DT_TRY(dt_alloc_bytes((void **)&c->counts, cells * sizeof *c->counts, "confusion matrix"));
    for (size_t i = 0; i < cells; i++) c->counts[i] = 0;
    return DT_OK;
}

void dt_confusion_free(dt_confusion *c) {
    dt_free(c->counts);
    c->counts = NULL;
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

void dt_confusion_add(dt_confusion *c, const float *logits, const uint8_t *labels, int n) {
    for (int b = 0; b < n; b++) {
        const float *x = logits + (size_t)b * (size_t)c->classes;
        int y = labels[b];
        if (y >= c->classes) continue; /* a label the model cannot output: the data set was checked before */
        c->counts[(size_t)y * (size_t)c->classes + (size_t)argmax(x, c->classes)]++;
        c->topk += rank_of(x, c->classes, y) < c->k;
        c->n++;
    }
}

long dt_confusion_support(const dt_confusion *c, int label) {
    long s = 0;
    for (int p = 0; p < c->classes; p++) s += c->counts[(size_t)label * (size_t)c->classes + (size_t)p];
    return s;
}

double dt_confusion_class_accuracy(const dt_confusion *c, int label) {
    long s = dt_confusion_support(c, label);
    return s ? (double)c->counts[(size_t)label * (size_t)c->classes + (size_t)label] / (double)s : -1;
}

double dt_confusion_accuracy(const dt_confusion *c) {
    long right = 0;
    for (int i = 0; i < c->classes; i++) right += c->counts[(size_t)i * (size_t)c->classes + (size_t)i];
    return c->n ? (double)right / (double)c->n : 0;
}

double dt_confusion_topk(const dt_confusion *c) { return c->n ? (double)c->topk / (double)c->n : 0; }
