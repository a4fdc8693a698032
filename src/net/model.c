/* Strict Darknet-style INI parser for model files (see dtrain/model.h).
 *
 * Every section is described by a table of keys (type, destination, default,
 * allowed range), so one generic handler parses, range-checks and stores all
 * values, and the tables double as the documentation of the format. Values go
 * straight into the dt_model_spec ([net]) or into a per-section scratch
 * record (layers) that is turned into one or more layer specs when the
 * section ends. Section names come from the layer registry, enum names from
 * the modules that own the enums, so the parser repeats none of them. The
 * layer sections' key tables are their kinds' (dt_layer_ops.keys); this file
 * keeps [net]'s and [cost]'s. */
#include "dtrain/model.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/data.h"
#include "dtrain/suggest.h"
#include "dtrain/textfile.h"
#include "layers/layer_keys.h"
#include "net/model_lex.h"
#include "net/model_net.h"

#define MAX_LINE 4096          /* characters per line, without the newline */
#define MAX_FILE (16 << 20)    /* a model file is a few hundred bytes; refuse anything huge */
#define MAX_KEYS 64            /* keys of the largest section ([net]: 41), with room to grow */
/* A model-file error: room for every key of the largest section (no list
 * of valid keys is cut short); dt_fail keeps 2048 bytes. */
#define DT_SECTION_MSG_MAX 1800
#define EPOCHS_MAX 100000

/* ---- key tables (types in layers/layer_keys.h) --------------------------- */

/* Enum fields are written through int pointers by the generic handler. */
_Static_assert(sizeof(dt_schedule_kind) == sizeof(int), "dt_schedule_kind must be int-sized");
_Static_assert(sizeof(dt_optim_kind) == sizeof(int), "dt_optim_kind must be int-sized");
_Static_assert(sizeof(dt_precision) == sizeof(int), "dt_precision must be int-sized");

/* The owners' name functions take their enum type; adapt them to int. */
static const char *schedule_name(int v) { return dt_schedule_kind_name((dt_schedule_kind)v); }
static const char *optim_name(int v) { return dt_optim_kind_name((dt_optim_kind)v); }
static const char *dataset_name(int v) { return dt_dataset_kind_name((dt_dataset_kind)v); }
static const char *precision_name(int v) { return dt_precision_name((dt_precision)v); }

static const dt_key_choices schedules = {dt_schedule_kind_from_name, schedule_name, DT_SCHED_SIGMOID + 1};
static const dt_key_choices optimizers = {dt_optim_kind_from_name, optim_name, DT_OPT_COUNT};
/* Darknet's cost types (get_cost_type); only sse is trained (see [cost]). */
static const char *const cost_names[] = {"sse", "masked", "smooth", "L1", "seg", "wgan", "logistic"};
enum { COST_SSE = 0, COST_MASKED = 1, COST_COUNT = sizeof cost_names / sizeof cost_names[0] };
static int cost_from_name(const char *name) {
    for (int i = 0; i < COST_COUNT; i++)
        if (strcmp(cost_names[i], name) == 0) return i;
    return -1;
}
static const char *cost_name(int v) { return cost_names[v]; }
static const dt_key_choices costs = {cost_from_name, cost_name, COST_COUNT};

static const dt_key_choices precisions = {dt_precision_from_name, precision_name, DT_PRECISION_COUNT};
static const dt_key_choices datasets = {dt_dataset_kind_from_name, dataset_name, DT_DATASET_KIND_COUNT};

/* augment=: darknet (its crop when one of its keys is given), or
 * torchvision's RandomResizedCrop (dt_augment.resized_crop). */
static const char *const augment_names[] = {"darknet", "resized_crop"};
static int augment_from_name(const char *name) {
    for (int i = 0; i < 2; i++)
        if (strcmp(augment_names[i], name) == 0) return i;
    return -1;
}
static const char *augment_name(int v) { return augment_names[v]; }
static const dt_key_choices augments = {augment_from_name, augment_name, 2};

#define NET(field) offsetof(dt_model_spec, field)

/* Columns: name, type, offset, default, lo, hi, flags, choices. */
static const dt_key_def net_keys[] = {
    {"batch", DT_KEY_INT, NET(batch), 1, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"accumulate", DT_KEY_INT, NET(accumulate), 1, 1, 1024, 0, NULL},
    /* Darknet's: batch is the step's, split into subdivisions passes (see
     * apply_subdivisions). */
    {"subdivisions", DT_KEY_INT, NET(subdivisions), 1, 1, 1024, 0, NULL},
    {"channels", DT_KEY_INT, NET(input.c), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"height", DT_KEY_INT, NET(input.h), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"width", DT_KEY_INT, NET(input.w), 0, 1, DT_KEY_DIM_MAX, DT_KEY_REQUIRED, NULL},
    {"learning_rate", DT_KEY_DOUBLE, NET(sched.base_lr), 0.001, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"optimizer", DT_KEY_ENUM, NET(optim.kind), DT_OPT_SGD, 0, 0, 0, &optimizers},
    {"momentum", DT_KEY_DOUBLE, NET(optim.momentum), 0.9, 0, 1, DT_KEY_HI_OPEN, NULL},
    {"decay", DT_KEY_DOUBLE, NET(optim.decay), 1e-4, 0, INFINITY, 0, NULL},
    {"nesterov", DT_KEY_INT, NET(optim.nesterov), 0, 0, 1, 0, NULL},
    /* -1: the optimiser's default (dt_optim_resolve) */
    {"beta1", DT_KEY_DOUBLE, NET(optim.beta1), -1, 0, 1, DT_KEY_HI_OPEN, NULL},
    {"beta2", DT_KEY_DOUBLE, NET(optim.beta2), -1, 0, 1, DT_KEY_HI_OPEN, NULL},
    {"eps", DT_KEY_DOUBLE, NET(optim.eps), -1, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"trust_coefficient", DT_KEY_DOUBLE, NET(optim.trust), -1, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"exclude_bias_bn", DT_KEY_INT, NET(optim.exclude), -1, 0, 1, 0, NULL},
    {"epochs", DT_KEY_INT, NET(epochs), 1, 1, EPOCHS_MAX, 0, NULL},
    {"policy", DT_KEY_ENUM, NET(sched.kind), DT_SCHED_CONSTANT, 0, 0, 0, &schedules},
    {"step_epochs", DT_KEY_DOUBLE, NET(sched.step_epochs), 0, 0, EPOCHS_MAX, DT_KEY_LO_OPEN, NULL},
    {"gamma", DT_KEY_DOUBLE, NET(sched.gamma), 1, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"milestones", DT_KEY_MILESTONES, NET(sched), 0, 0, EPOCHS_MAX, DT_KEY_LO_OPEN, NULL},
    {"min_lr", DT_KEY_DOUBLE, NET(sched.min_lr), 0, 0, INFINITY, 0, NULL},
    {"warmup_epochs", DT_KEY_DOUBLE, NET(sched.warmup_epochs), 0, 0, EPOCHS_MAX, 0, NULL},
    {"warmup_start_factor", DT_KEY_DOUBLE, NET(sched.warmup_start_factor), 0.1, 0, 1, 0, NULL},
    /* Darknet's schedule keys, in optimiser steps (its "batches"). */
    /* max_batches=0 is Darknet's "no limit" (its default; extraction22k.cfg writes it): the
     * run's length is then epochs=, as without the key. */
    {"max_batches", DT_KEY_INT, NET(sched.max_batches), 0, 0, INT_MAX, 0, NULL},
    {"burn_in", DT_KEY_INT, NET(sched.burn_in), 0, 0, INT_MAX, 0, NULL},
    {"power", DT_KEY_DOUBLE, NET(sched.power), 4, 0, INFINITY, 0, NULL},
    {"steps", DT_KEY_STEPS, NET(sched), 0, 1, INT_MAX, 0, NULL},
    {"scales", DT_KEY_SCALES, NET(sched), 0, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"step", DT_KEY_INT, NET(sched.step_batches), 1, 0, INT_MAX, 0, NULL},
    {"scale", DT_KEY_DOUBLE, NET(sched.step_scale), 1, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {"dataset", DT_KEY_DATASET, NET(dataset), DT_DATASET_FASHION_MNIST, 0, 0, 0, &datasets},
    {"flip", DT_KEY_INT, NET(flip), 0, 0, 1, 0, NULL},
    {"crop_pad", DT_KEY_INT, NET(crop_pad), 0, 0, 1024, 0, NULL},
    {"erase", DT_KEY_FLOAT, NET(erase), 0, 0, 1, 0, NULL},
    /* Darknet's classifier augmentation (see resolve_augment); 0: unset. */
    {"min_crop", DT_KEY_INT, NET(augment.min_crop), 0, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"max_crop", DT_KEY_INT, NET(augment.max_crop), 0, 1, DT_KEY_DIM_MAX, 0, NULL},
    {"angle", DT_KEY_FLOAT, NET(augment.angle), 0, 0, 180, 0, NULL},
    {"aspect", DT_KEY_FLOAT, NET(augment.aspect), 1, 0, 100, DT_KEY_LO_OPEN, NULL},
    {"hue", DT_KEY_FLOAT, NET(augment.hue), 0, 0, 1, 0, NULL},
    {"saturation", DT_KEY_FLOAT, NET(augment.saturation), 1, 0, 100, DT_KEY_LO_OPEN, NULL},
    {"exposure", DT_KEY_FLOAT, NET(augment.exposure), 1, 0, 100, DT_KEY_LO_OPEN, NULL},
    /* torchvision's RandomResizedCrop (see resolve_augment); ranges {0, 0}: unset. */
    {"augment", DT_KEY_ENUM, NET(augment.resized_crop), 0, 0, 0, 0, &augments},
    {"crop_scale", DT_KEY_RANGE, NET(augment.scale), 0, 0, 1, DT_KEY_LO_OPEN, NULL},
    {"crop_ratio", DT_KEY_RANGE, NET(augment.ratio), 0, 0, 100, DT_KEY_LO_OPEN, NULL},
    /* Evaluation of a folder: the shorter side resized to this, then the
     * centre crop (torchvision's Resize + CenterCrop); 0: just cover it. */
    {"eval_resize", DT_KEY_INT, NET(eval_resize), 0, 0, DT_KEY_DIM_MAX, 0, NULL},
    {"precision", DT_KEY_ENUM, NET(precision), DT_PRECISION_FP32, 0, 0, 0, &precisions},
    {"winograd", DT_KEY_INT, NET(winograd), 1, 0, 1, 0, NULL},
    /* dtrain's: torchvision's Normalize of the input, one value per channel. */
    {"mean", DT_KEY_CHANNELS, NET(mean), 0, -1, 1, 0, NULL},
    {"std", DT_KEY_CHANNELS, NET(std), 0, 0, INFINITY, DT_KEY_LO_OPEN, NULL},
    {0}};

/* [cost] after [softmax]: Darknet's default sse there trains softmax
 * cross-entropy (the softmax layer's delta is truth - p and the cost layer
 * passes it on); other types would train another loss (refused). */
typedef struct {
    int type;
} cost_own_keys;
DT_OWN_FITS(cost_own_keys);

static const dt_key_def cost_keys[] = {
    {"type", DT_KEY_ENUM, DT_OWN_KEY(cost_own_keys, type), COST_SSE, 0, 0, 0, &costs},
    {0}};

/* ---- parser state -------------------------------------------------------- */

enum { SEC_COST = -3, SEC_NONE = -2, SEC_NET = -1 }; /* otherwise a dt_layer_kind */

/* The parser; layer kinds see it as the section being read (layer_keys.h). */
struct dt_section {
    dt_model_spec *m;
    const char *name;         /* file name for messages */
    int line;                 /* current line, 1-based */
    int kind;                 /* current section */
    char sec_name[32];        /* its name, for messages */
    int sec_line;
    const dt_key_def *keys;      /* its key table */
    void *target;             /* where its values go: m or &vals */
    int seen[MAX_KEYS];       /* line of each key given in this section, 0 if absent */
    char path[PATH_MAX];      /* its DT_KEY_PATH key's file, resolved ("" if absent) */
    dt_section_vals vals;
    int net_line, softmax_line, cost_line;
    int default_act_line;     /* the last section: a [connected] without activation= (its line), else 0 */
    /* Darknet numbers sections (one layer each there); section s's output
     * is layer sec_out[s] of the built net (its last layer here). */
    int nsections;
    int sec_out[DT_MAX_LAYERS];
    /* [net] keys given outside the file; key k's "line" is -(k + 1). */
    const dt_model_override *ov;
    int nov;
};

dt_status dt_section_error(const dt_section *p, int line, const char *fmt, ...) {
    char msg[DT_SECTION_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line < 0) { /* an override: a usage error of the flag that gave it */
        const dt_model_override *o = &p->ov[-line - 1];
        return dt_fail(DT_ERR_USAGE, "%s %.64s (over %s): %s", o->flag, o->value, p->name, msg);
    }
    return dt_fail(DT_ERR_CONFIG, "%s:%d: %s", p->name, line, msg);
}

/* Appends s to buf (size n) with ", " between items; truncates safely. */
static void append_item(char *buf, size_t n, const char *s) {
    size_t len = strlen(buf);
    if (len < n) snprintf(buf + len, n - len, "%s%s", len ? ", " : "", s);
}

static void list_keys(char *buf, size_t n, const dt_key_def *keys) {
    buf[0] = '\0';
    for (const dt_key_def *k = keys; k->name; k++) append_item(buf, n, k->name);
}

static void list_choices(char *buf, size_t n, const dt_key_choices *e) {
    buf[0] = '\0';
    for (int i = 0; i < e->count; i++) append_item(buf, n, e->name(i));
}

/* What a valid value of k looks like, for error messages. */
static void describe(char *buf, size_t n, const dt_key_def *k) {
    if (k->choices) {
        char names[256];
        list_choices(names, sizeof names, k->choices);
        snprintf(buf, n, "one of %s", names);
        return;
    }
    const char *what = k->type == DT_KEY_INT          ? "an integer"
                       : k->type == DT_KEY_MILESTONES ? "a comma list of ascending epochs, each"
                       : k->type == DT_KEY_STEPS      ? "a comma list of ascending steps, each"
                       : k->type == DT_KEY_SCALES     ? "a comma list of numbers, each"
                       : k->type == DT_KEY_LAYERS     ? "a comma list of layer indices, each"
                       : k->type == DT_KEY_CHANNELS   ? "a comma list of one number per channel, each"
                       : k->type == DT_KEY_RANGE      ? "two numbers lo,hi (lo <= hi), each"
                                                 : "a number";
    if (k->type == DT_KEY_INT && k->lo == 0 && k->hi == 1)
        snprintf(buf, n, "0 or 1");
    else if (isinf(k->hi))
        snprintf(buf, n, "%s %s %.10g", what, k->flags & DT_KEY_LO_OPEN ? ">" : ">=", k->lo);
    else
        snprintf(buf, n, "%s in %c%.10g, %.10g%c", what, k->flags & DT_KEY_LO_OPEN ? '(' : '[', k->lo,
                 k->hi, k->flags & DT_KEY_HI_OPEN ? ')' : ']');
}

static int in_range(const dt_key_def *k, double v) {
    if (!isfinite(v)) return 0;
    if (k->flags & DT_KEY_LO_OPEN ? v <= k->lo : v < k->lo) return 0;
    return k->flags & DT_KEY_HI_OPEN ? v < k->hi : v <= k->hi;
}

static dt_status bad_value(const dt_section *p, const dt_key_def *k, const char *val) {
    char want[300];
    describe(want, sizeof want, k);
    return dt_section_error(p, p->line, "bad value '%.64s' for %s: expected %s", val, k->name, want);
}

static dt_status out_of_range(const dt_section *p, const dt_key_def *k, const char *val) {
    char want[300];
    describe(want, sizeof want, k);
    return dt_section_error(p, p->line, "%s=%.64s is out of range: expected %s", k->name, val, want);
}

/* ---- values -------------------------------------------------------------- */

static void store(void *target, const dt_key_def *k, double v) {
    char *dst = (char *)target + k->off;
    switch (k->type) {
    case DT_KEY_INT:
    case DT_KEY_ENUM: *(int *)dst = (int)v; break;
    case DT_KEY_FLOAT: *(float *)dst = (float)v; break;
    case DT_KEY_DOUBLE: *(double *)dst = v; break;
    case DT_KEY_DATASET:
        snprintf(dst, sizeof((dt_model_spec *)0)->dataset, "%s", k->choices->name((int)v));
        break;
    case DT_KEY_MILESTONES: /* only the defaults: empty lists */
    case DT_KEY_STEPS:
    case DT_KEY_SCALES: {
        dt_lr_schedule *sc = (dt_lr_schedule *)(void *)dst;
        if (k->type == DT_KEY_MILESTONES) sc->nmilestones = 0;
        if (k->type == DT_KEY_STEPS) sc->nsteps = 0;
        if (k->type == DT_KEY_SCALES) sc->nscales = 0;
        break;
    }
    case DT_KEY_LAYERS: /* only the default: no layers (the key is required) */
        ((dt_key_layers *)(void *)dst)->n = 0;
        break;
    case DT_KEY_CHANNELS: /* only the default: not given */
        ((dt_channel_values *)(void *)dst)->n = 0;
        break;
    case DT_KEY_PATH: break; /* kept in the dt_section */
    case DT_KEY_RANGE: /* only the default: not given */
        ((float *)(void *)dst)[0] = ((float *)(void *)dst)[1] = 0;
        break;
    }
}

static void set_defaults(void *target, const dt_key_def *keys) {
    for (const dt_key_def *k = keys; k->name; k++)
        if (!(k->flags & DT_KEY_REQUIRED)) store(target, k, k->def);
}

/* Parses one number of k's type from s; *end is set past it. 0 on bad syntax. */
static int parse_number(const dt_key_def *k, const char *s, char **end, double *v) {
    errno = 0;
    if (k->type == DT_KEY_INT || k->type == DT_KEY_LAYERS || k->type == DT_KEY_STEPS) {
        long x = strtol(s, end, 10);
        /* An overflowing long is out of range, not malformed: clamp it so the
         * range check reports it. */
        *v = errno == ERANGE ? (x < 0 ? -INFINITY : INFINITY) : (double)x;
    } else {
        *v = strtod(s, end);
        if (!isfinite(*v) && errno != ERANGE) return 0; /* "nan", "inf" written out */
        if (k->type == DT_KEY_FLOAT) *v = (double)(float)*v; /* check what will be stored */
    }
    return *end != s;
}

/* A comma list of up to max numbers of k's type and range into v[*n]. */
static dt_status parse_list(dt_section *p, const dt_key_def *k, const char *val, double *v, int max, int *n) {
    const char *c = val;
    *n = 0;
    for (;;) {
        char *end;
        double x;
        while (isspace((unsigned char)*c)) c++;
        if (!parse_number(k, c, &end, &x)) return bad_value(p, k, val);
        if (!in_range(k, x)) return out_of_range(p, k, val);
        if (*n == max) return dt_section_error(p, p->line, "%s= takes at most %d values", k->name, max);
        v[(*n)++] = x;
        c = end;
        while (isspace((unsigned char)*c)) c++;
        if (*c == '\0') return DT_OK;
        if (*c++ != ',') return bad_value(p, k, val);
    }
}

/* milestones=, steps= (both ascending) and scales= into the schedule. */
static dt_status set_schedule_list(dt_section *p, const dt_key_def *k, const char *val) {
    dt_lr_schedule *s = (dt_lr_schedule *)((char *)p->target + k->off);
    double *v = k->type == DT_KEY_MILESTONES ? s->milestones : k->type == DT_KEY_STEPS ? s->steps : s->scales;
    int *n = k->type == DT_KEY_MILESTONES ? &s->nmilestones : k->type == DT_KEY_STEPS ? &s->nsteps : &s->nscales;
    DT_TRY(parse_list(p, k, val, v, DT_MAX_MILESTONES, n));
    for (int i = 1; k->type != DT_KEY_SCALES && i < *n; i++)
        if (v[i] <= v[i - 1])
            return dt_section_error(p, p->line, "%s must be strictly ascending (%.10g after %.10g)", k->name,
                                    v[i], v[i - 1]);
    return DT_OK;
}

static dt_status set_layers(dt_section *p, const dt_key_def *k, const char *val) {
    dt_key_layers *refs = (dt_key_layers *)(void *)((char *)p->target + k->off);
    double v[DT_LAYER_MAX_INPUTS];
    DT_TRY(parse_list(p, k, val, v, DT_LAYER_MAX_INPUTS, &refs->n));
    for (int i = 0; i < refs->n; i++) refs->ref[i] = (int)v[i];
    return DT_OK;
}

static dt_status set_channels(dt_section *p, const dt_key_def *k, const char *val) {
    dt_channel_values *c = (dt_channel_values *)(void *)((char *)p->target + k->off);
    double v[DT_DATA_MAX_CHANNELS];
    DT_TRY(parse_list(p, k, val, v, DT_DATA_MAX_CHANNELS, &c->n));
    for (int i = 0; i < c->n; i++) c->v[i] = (float)v[i];
    return DT_OK;
}

/* val as Darknet opens it (relative to the working directory), else
 * beside the model file's folder: <dir of dir of the file>/val. */
static dt_status set_path(dt_section *p, const char *val) {
    char alt[PATH_MAX];
    const char *slash = strrchr(p->name, '/');
    int dir = slash ? (int)(slash - p->name) : 0; /* the model file's folder: p->name[0, dir) */
    snprintf(alt, sizeof alt, "%.*s%s../%s", dir, p->name, slash ? "/" : "", val);
    const char *use = val[0] == '/' || access(val, F_OK) == 0 || access(alt, F_OK) != 0 ? val : alt;
    if (strlen(use) >= sizeof p->path) return dt_section_error(p, p->line, "path too long: %.64s...", use);
    snprintf(p->path, sizeof p->path, "%s", use);
    return DT_OK;
}

const char *dt_section_key_path(const dt_section *p) { return p->path[0] ? p->path : NULL; }

static dt_status set_range(dt_section *p, const dt_key_def *k, const char *val) {
    float *r = (float *)(void *)((char *)p->target + k->off);
    double v[2];
    int n;
    DT_TRY(parse_list(p, k, val, v, 2, &n));
    if (n != 2 || v[0] > v[1]) return bad_value(p, k, val);
    r[0] = (float)v[0], r[1] = (float)v[1];
    return DT_OK;
}

static dt_status set_value(dt_section *p, const dt_key_def *k, const char *val) {
    if (k->type == DT_KEY_PATH) return set_path(p, val);
    if (k->type == DT_KEY_MILESTONES || k->type == DT_KEY_STEPS || k->type == DT_KEY_SCALES)
        return set_schedule_list(p, k, val);
    if (k->type == DT_KEY_CHANNELS) return set_channels(p, k, val);
    if (k->type == DT_KEY_RANGE) return set_range(p, k, val);
    if (k->type == DT_KEY_LAYERS) return set_layers(p, k, val);
    double v;
    if (k->choices) {
        int i = k->choices->from_name(val);
        if (i < 0) return bad_value(p, k, val);
        v = i;
    } else {
        char *end;
        if (!parse_number(k, val, &end, &v) || *end != '\0') return bad_value(p, k, val);
        if (!in_range(k, v)) return out_of_range(p, k, val);
    }
    store(p->target, k, v);
    return DT_OK;
}

/* ---- sections ------------------------------------------------------------ */

static int find_key(const dt_key_def *keys, const char *name) {
    for (int i = 0; keys[i].name; i++)
        if (strcmp(keys[i].name, name) == 0) return i;
    return -1;
}

int dt_section_key_line(const dt_section *p, const char *key) {
    int i = find_key(p->keys, key);
    DT_ASSERT(i >= 0);
    return p->seen[i];
}

static dt_status push_layer(dt_section *p, const dt_layer_spec *s) {
    dt_model_spec *m = p->m;
    if (m->nlayers == DT_MAX_LAYERS)
        return dt_section_error(p, p->sec_line,
                       "more than %d layers (batch_normalize= and activation= add one each)",
                       DT_MAX_LAYERS);
    m->layers[m->nlayers++] = *s;
    return DT_OK;
}

dt_status dt_section_layer(const dt_section *p, const char *key, int ref, int *layer) {
    if (!key && p->nsections == 0) return dt_section_error(p, p->sec_line, "[%s] needs a layer before it", p->sec_name);
    int sec = ref < 0 ? p->nsections + ref : ref;
    if (sec < 0 || sec >= p->nsections)
        return dt_section_error(p, dt_section_key_line(p, key),
                                "%s=%d names section %d, but only sections 0..%d come before this one "
                                "(sections after [net] count from 0, this one is %d)",
                                key, ref, sec, p->nsections - 1, p->nsections);
    *layer = p->sec_out[sec];
    return DT_OK;
}

/* A layer section becomes its kind's layer (finished by its end_section
 * hook), then a batch norm for batch_normalize=1 and an activation layer
 * for activation= (the fused keys, layer_keys.h), so each layer kind does
 * one operation. */
static dt_status emit_layers(dt_section *p) {
    const dt_section_vals *v = &p->vals;
    const dt_layer_ops *ops = dt_layer_ops_of(v->spec.kind);
    dt_layer_spec layer = v->spec;
    if (ops->end_section) DT_TRY(ops->end_section(p, v, &layer));
    layer.no_bias = v->batch_normalize;
    DT_TRY(push_layer(p, &layer));
    /* memset, not an initialiser: the bytes of the spec's union past the
     * kind's member are then zero too, so equal models compare equal byte
     * for byte (fuzz_model's file-against-string check). */
    dt_section_vals extra;
    if (v->batch_normalize) {
        memset(&extra, 0, sizeof extra);
        extra.spec.kind = DT_LAYER_BATCHNORM, extra.spec.line = p->sec_line;
        set_defaults(&extra, dt_layer_ops_of(DT_LAYER_BATCHNORM)->keys);
        DT_TRY(push_layer(p, &extra.spec));
    }
    if (v->fused_act != DT_ACT_LINEAR) {
        memset(&extra, 0, sizeof extra);
        extra.spec.kind = DT_LAYER_ACT, extra.spec.line = p->sec_line;
        extra.spec.act.fn = v->fused_act, extra.spec.act.slope = v->fused_slope;
        DT_TRY(push_layer(p, &extra.spec));
    }
    return DT_OK;
}

/* [net] keys an optimiser may not read: written for another one, they are
 * an error (the user meant something that would not happen). */
static dt_status finish_cost(dt_section *p) {
    int type = ((const cost_own_keys *)(const void *)&p->vals.own)->type;
    if (type == COST_SSE) return DT_OK;
    /* masked after a hierarchical softmax is its mask of the groups off the label's path (Darknet's
     * darknet9000.cfg): part of that softmax's loss, which dt_softmax_tree_loss applies. */
    const dt_layer_spec *last = &p->m->layers[p->m->nlayers - 1];
    if (type == COST_MASKED && last->kind == DT_LAYER_SOFTMAX && last->softmax.tree_nodes) return DT_OK;
    return dt_section_error(p, dt_section_key_line(p, "type"),
                   "[cost] type=%s would train another loss; after [softmax] dtrain trains "
                   "softmax cross-entropy, which is Darknet's type=sse (the default) there",
                   cost_name(type));
}

static int find_key(const dt_key_def *keys, const char *name);

/* The overrides, each as if its key were the section's last line. */
static dt_status apply_overrides(dt_section *p) {
    int line = p->line;
    for (int k = 0; k < p->nov; k++) {
        int i = find_key(net_keys, p->ov[k].key);
        if (i < 0) return dt_fail(DT_ERR_USAGE, "%s: '%s' is not a [net] key", p->ov[k].flag, p->ov[k].key);
        p->seen[i] = p->line = -(k + 1);
        DT_TRY(set_value(p, &net_keys[i], p->ov[k].value));
    }
    p->line = line;
    return DT_OK;
}

static dt_status end_section(dt_section *p) {
    if (p->kind == SEC_NONE) return DT_OK;
    if (p->kind == SEC_NET) DT_TRY(apply_overrides(p));
    for (int i = 0; p->keys[i].name; i++)
        if ((p->keys[i].flags & DT_KEY_REQUIRED) && !p->seen[i])
            return dt_section_error(p, p->sec_line, "[%s] needs %s=", p->sec_name, p->keys[i].name);
    if (p->kind == SEC_NET) return dt_model_finish_net(p, p->m);
    if (p->kind == SEC_COST) return finish_cost(p);
    DT_TRY(emit_layers(p));
    p->default_act_line = p->kind == DT_LAYER_DENSE && !dt_section_key_line(p, "activation") ? p->sec_line : 0;
    p->sec_out[p->nsections++] = p->m->nlayers - 1;
    return DT_OK;
}

static dt_status unknown_section(const dt_section *p, const char *name) {
    char valid[DT_SECTION_MSG_MAX - 200] = "net";
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++)
        append_item(valid, sizeof valid, dt_layer_ops_of((dt_layer_kind)k)->name);
    append_item(valid, sizeof valid, "cost");
    dt_suggest sg;
    dt_suggest_init(&sg, name);
    dt_suggest_offer(&sg, "net");
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++) dt_suggest_offer(&sg, dt_layer_ops_of((dt_layer_kind)k)->name);
    dt_suggest_offer(&sg, "cost");
    char hint[96];
    return dt_section_error(p, p->line, "unknown section [%.64s]%s (valid: %s)", name,
                            dt_suggest_text(&sg, hint, sizeof hint), valid);
}

/* [cost]: only once, right after [softmax]. */
static dt_status begin_cost(dt_section *p) {
    if (p->cost_line)
        return dt_section_error(p, p->line, "second [cost] section (the first is at line %d)", p->cost_line);
    if (!p->softmax_line)
        return dt_section_error(p, p->line, "[cost] must follow [softmax] (dtrain trains softmax cross-entropy)");
    p->cost_line = p->line;
    p->keys = cost_keys;
    memset(&p->vals, 0, sizeof p->vals);
    p->target = &p->vals;
    return DT_OK;
}

/* Darknet's other names of sections (string_to_layer_type in parser.c). */
static const char *canonical_section(const char *name) {
    static const char *const aliases[][2] = {{"network", "net"},    {"conv", "convolutional"}, {"conn", "connected"},
                                             {"max", "maxpool"},    {"avg", "avgpool"},        {"soft", "softmax"},
                                             {"normalization", "lrn"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i][0]) == 0) return aliases[i][1];
    return name;
}

static dt_status begin_section(dt_section *p, const char *name) {
    name = canonical_section(name);
    int is_net = strcmp(name, "net") == 0, is_cost = strcmp(name, "cost") == 0;
    int kind = is_net ? SEC_NET : is_cost ? SEC_COST : dt_layer_kind_from_name(name);
    if (is_net) {
        if (p->net_line)
            return dt_section_error(p, p->line, "second [net] section (the first is at line %d)",
                           p->net_line);
        p->net_line = p->line;
        p->keys = net_keys;
        p->target = p->m;
    } else if (is_cost) {
        DT_TRY(begin_cost(p));
    } else {
        if (kind < 0) return unknown_section(p, name);
        if (!p->net_line)
            return dt_section_error(p, p->line, "[%s] before [net]; the file must start with [net]", name);
        if (p->softmax_line)
            return dt_section_error(p, p->line, "[%s] after [softmax] (line %d); [softmax] must be last "
                           "(only [cost] may follow it)",
                           name, p->softmax_line);
        if (kind == DT_LAYER_SOFTMAX) p->softmax_line = p->line, p->m->logistic_head_line = p->default_act_line;
        p->keys = dt_layer_ops_of((dt_layer_kind)kind)->keys;
        DT_ASSERT(p->keys); /* every kind of the registry declares its keys */
        memset(&p->vals, 0, sizeof p->vals);
        p->vals.spec.kind = (dt_layer_kind)kind;
        p->vals.spec.line = p->line;
        p->target = &p->vals;
    }
    int nkeys = 0;
    while (p->keys[nkeys].name) nkeys++;
    DT_ASSERT(nkeys <= MAX_KEYS); /* p->seen has a slot per key */
    p->kind = kind;
    p->sec_line = p->line;
    snprintf(p->sec_name, sizeof p->sec_name, "%s", name);
    memset(p->seen, 0, sizeof p->seen);
    p->path[0] = '\0';
    set_defaults(p->target, p->keys);
    return DT_OK;
}

/* ---- lines --------------------------------------------------------------- */

static dt_status parse_header(dt_section *p, char *s) {
    size_t n = strlen(s);
    if (n < 3 || s[n - 1] != ']' || strcspn(s + 1, " \t[]") != n - 2)
        return dt_section_error(p, p->line, "malformed section header '%.64s' (expected [name])", s);
    s[n - 1] = '\0';
    DT_TRY(end_section(p));
    return begin_section(p, s + 1);
}

/* Every key of the section (no list is cut short) and the nearest to key. */
static dt_status unknown_key(const dt_section *p, const char *key) {
    char valid[DT_SECTION_MSG_MAX - 200], hint[96];
    list_keys(valid, sizeof valid, p->keys);
    if (!valid[0]) return dt_section_error(p, p->line, "[%s] takes no keys (got %.64s=)", p->sec_name, key);
    dt_suggest sg;
    dt_suggest_init(&sg, key);
    for (int i = 0; p->keys[i].name; i++) dt_suggest_offer(&sg, p->keys[i].name);
    return dt_section_error(p, p->line, "unknown key '%.64s' in [%s]%s (valid: %s)", key, p->sec_name,
                            dt_suggest_text(&sg, hint, sizeof hint), valid);
}

static dt_status parse_assignment(dt_section *p, char *key, char *val) {
    if (!val) return dt_section_error(p, p->line, "expected key=value or [section], got '%.64s'", key);
    if (!*key) return dt_section_error(p, p->line, "missing key before '='");
    if (!*val) return dt_section_error(p, p->line, "empty value for %s", key);
    if (p->kind == SEC_NONE)
        return dt_section_error(p, p->line, "%.64s= before any section; the file must start with [net]",
                       key);
    int i = find_key(p->keys, key);
    if (i < 0) return unknown_key(p, key);
    if (p->seen[i])
        return dt_section_error(p, p->line, "duplicate key %s in [%s] (first at line %d)", key,
                       p->sec_name, p->seen[i]);
    p->seen[i] = p->line;
    return set_value(p, &p->keys[i], val);
}

static dt_status parse_line(dt_section *p, char *line) {
    char *key, *val;
    switch (dt_model_line_cut(line, &key, &val)) {
    case DT_MODEL_LINE_HEADER: return parse_header(p, key);
    case DT_MODEL_LINE_PAIR: return parse_assignment(p, key, val);
    default: return DT_OK;
    }
}

/* Darknet's layers that dtrain does not build by design, with the reason. */
static const struct {
    const char *name, *why;
} darknet_refused[] = {
    {"[yolo]", "detection"}, {"[region]", "detection"}, {"[detection]", "detection"}, {"[iseg]", "detection"},
    {"[rnn]", "recurrent"},  {"[gru]", "recurrent"},    {"[lstm]", "recurrent"},      {"[crnn]", "recurrent"},
};

/* A detection or recurrent file is refused for that, at its first such
 * section, before any other error its keys (of [net]: Darknet's rnn.cfg's
 * inputs=) would give. */
static dt_status refuse_darknet_kinds(const dt_section *p, const char *text) {
    int line = 1;
    for (const char *s = text; *s; line++) {
        s += strspn(s, " \t");
        for (size_t i = 0; i < sizeof darknet_refused / sizeof *darknet_refused; i++) {
            size_t n = strlen(darknet_refused[i].name);
            if (strncmp(s, darknet_refused[i].name, n) == 0 && strchr(" \t\r\n#;", s[n]))
                return dt_section_error(p, line, "%s is Darknet's %s layer: dtrain builds classifiers and feature "
                                        "extractors only", darknet_refused[i].name, darknet_refused[i].why);
        }
        const char *nl = strchr(s, '\n');
        if (!nl) break;
        s = nl + 1;
    }
    return DT_OK;
}

static dt_status parse_text(dt_section *p, const char *text) {
    char buf[MAX_LINE + 1];
    const char *s = text;
    DT_TRY(refuse_darknet_kinds(p, text));
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        const char *next = nl ? nl + 1 : s + len;
        if (len && s[len - 1] == '\r') len--; /* CRLF files */
        p->line++;
        if (len > MAX_LINE)
            return dt_section_error(p, p->line, "line longer than %d characters", MAX_LINE);
        memcpy(buf, s, len);
        buf[len] = '\0';
        DT_TRY(parse_line(p, buf));
        s = next;
    }
    DT_TRY(end_section(p));
    if (!p->net_line)
        return dt_section_error(p, p->line ? p->line : 1, "no [net] section (the file must start with it)");
    if (!p->m->nlayers) return dt_section_error(p, p->net_line, "no layer sections after [net]");
    if (p->softmax_line && p->m->nlayers < 2)
        return dt_section_error(p, p->softmax_line, "[softmax] needs a layer before it (whose outputs are "
                       "the logits)");
    return DT_OK;
}

dt_status dt_model_check_loss(const dt_model_spec *m) {
    const dt_layer_spec *last = &m->layers[m->nlayers - 1];
    if (last->kind == DT_LAYER_SOFTMAX) return DT_OK;
    return dt_fail(DT_ERR_CONFIG, "%s:%d: the net ends in [%s], not [softmax]: a feature extractor has no loss "
                   "layer to train or evaluate (info, export and predict --features take it)", m->path, last->line,
                   dt_layer_ops_of(last->kind)->name);
}

static dt_status parse_over(dt_model_spec *out, const char *text, const char *name, const dt_model_override *ov,
                            int nov) {
    if (!name) name = "<string>";
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", name);
    dt_section p = {.m = out, .name = name, .kind = SEC_NONE, .ov = ov, .nov = nov};
    return parse_text(&p, text);
}

dt_status dt_model_parse_string(dt_model_spec *out, const char *text, const char *name) {
    return parse_over(out, text, name, NULL, 0);
}

dt_status dt_model_parse_string_over(dt_model_spec *out, const char *text, const char *name,
                                     const dt_model_override *ov, int n) {
    return parse_over(out, text, name, ov, n);
}

dt_status dt_model_parse_file_over(dt_model_spec *out, const char *path, const dt_model_override *ov, int n) {
    char *text;
    dt_status st = dt_read_text_file(&text, path, MAX_FILE, DT_ERR_CONFIG, "a model file");
    if (st == DT_OK) st = parse_over(out, text, path, ov, n);
    free(text);
    return st;
}

dt_status dt_model_parse_file(dt_model_spec *out, const char *path) { return dt_model_parse_file_over(out, path, NULL, 0); }

const char *dt_model_net_key(int i) {
    return i >= 0 && i < (int)(sizeof net_keys / sizeof *net_keys) ? net_keys[i].name : NULL;
}

int dt_model_net_key_range(const char *key, double *lo, double *hi, int *lo_open, int *hi_open) {
    int i = find_key(net_keys, key);
    if (i < 0) return -1;
    *lo = net_keys[i].lo;
    *hi = net_keys[i].hi;
    *lo_open = (net_keys[i].flags & DT_KEY_LO_OPEN) != 0;
    *hi_open = (net_keys[i].flags & DT_KEY_HI_OPEN) != 0;
    return 0;
}

int dt_model_net_key_is_number(const char *key) {
    int i = find_key(net_keys, key);
    return i >= 0 && !net_keys[i].choices &&
           (net_keys[i].type == DT_KEY_INT || net_keys[i].type == DT_KEY_FLOAT || net_keys[i].type == DT_KEY_DOUBLE);
}
