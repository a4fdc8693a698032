/* Classification metrics over a whole evaluation: a confusion matrix and
 * top-k hits, filled batch by batch from logits (dtrain eval's summary).
 * Counts only; rates are read with the functions below. */
#ifndef DTRAIN_METRICS_H
#define DTRAIN_METRICS_H

#include <stdint.h>

#include "dtrain/status.h"

typedef struct {
    int classes;  /* the model's outputs: labels and predictions are in [0, classes) */
    int k;        /* top-k counted (1..classes) */
    long n;       /* samples added */
    long topk;    /* samples whose label is among the k highest logits */
    long *counts; /* (classes, classes) owned: counts[label * classes + prediction] */
} dt_confusion;

/* An empty matrix for `classes` outputs, counting top-k hits (k clamped to
 * [1, classes]). dt_confusion_free(c) releases it; freeing an empty one is
 * a no-op. */
dt_status dt_confusion_init(dt_confusion *c, int classes, int k);
void dt_confusion_free(dt_confusion *c);

/* Adds n samples: logits (n, classes) and labels (n). The prediction is
 * the first largest logit (as dt_net_count_correct counts it); the label
 * is in the top k when fewer than k logits are larger than its own. */
void dt_confusion_add(dt_confusion *c, const float *logits, const uint8_t *labels, int n);

/* Samples of class `label`, and the share of them predicted right (-1 when
 * there are none). */
long dt_confusion_support(const dt_confusion *c, int label);
double dt_confusion_class_accuracy(const dt_confusion *c, int label);
/* Share of all samples predicted right, and in the top k (0 when empty). */
double dt_confusion_accuracy(const dt_confusion *c);
double dt_confusion_topk(const dt_confusion *c);

#endif
