/* Classification metrics over a whole evaluation: per-class counts, top-k
 * hits and, when asked for, the confusion matrix, filled batch by batch
 * from logits (dtrain eval's summary). Counts only; rates are read with the
 * functions below. */
#ifndef DTRAIN_METRICS_H
#define DTRAIN_METRICS_H

#include <stdint.h>

#include "dtrain/layer.h"
#include "dtrain/status.h"

/* The largest class count a confusion matrix is kept for: 4096^2 longs are
 * 128 MiB, while ImageNet-22K's 21841^2 would be 3.8 GB (per-class counts
 * cost 16 bytes a class at any size). */
#define DT_CONFUSION_MAX_MATRIX 4096

typedef struct {
    int classes;   /* the model's outputs: labels and predictions are in [0, classes) */
    int k;         /* top-k counted (1..classes) */
    long n;        /* samples added */
    long topk;     /* samples whose label is among the k highest logits */
    long *support; /* (classes) owned: samples of each label */
    long *right;   /* (classes) owned: of them, predicted right */
    long *counts;  /* (classes, classes) owned, or NULL when not kept: counts[label * classes + prediction] */
} dt_confusion;

/* An empty record for `classes` outputs, counting top-k hits (k clamped to
 * [1, classes]), with the matrix when `matrix` is set (DT_ERR_USAGE over
 * DT_CONFUSION_MAX_MATRIX classes). dt_confusion_free(c) releases it;
 * freeing an empty one is a no-op. */
dt_status dt_confusion_init(dt_confusion *c, int classes, int k, int matrix);
void dt_confusion_free(dt_confusion *c);

/* Adds n samples: logits (n, classes) and labels (n). The prediction is
 * the first largest logit (as dt_net_count_correct counts it); the label
 * is in the top k when fewer than k logits are larger than its own. */
void dt_confusion_add(dt_confusion *c, const float *logits, const dt_label *labels, int n);

/* Samples of class `label`, and the share of them predicted right (-1 when
 * there are none). */
long dt_confusion_support(const dt_confusion *c, int label);
double dt_confusion_class_accuracy(const dt_confusion *c, int label);
/* Share of all samples predicted right, and in the top k (0 when empty). */
double dt_confusion_accuracy(const dt_confusion *c);
double dt_confusion_topk(const dt_confusion *c);

#endif
