/* The optimiser table, the tensors of a flat vector, and the dispatch of a
 * step over a range of it to each tensor's piece (optim.h). */
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "optim_impl.h"

/* Indexed by dt_optim_kind. A new optimiser: a row in its file, its kind
 * and a line here (and its keys in model.c and flags in cmd_train.c if it
 * brings new hyperparameters). */
static const dt_optim_row *const rows[DT_OPT_COUNT] = {&dt_optim_row_sgd, &dt_optim_row_adam,
                                                       &dt_optim_row_adamw, &dt_optim_row_lars,
                                                       &dt_optim_row_lamb};

int dt_optim_kind_from_name(const char *name) {
    for (int k = 0; k < DT_OPT_COUNT; k++)
        if (strcmp(name, rows[k]->name) == 0) return k;
    return -1;
}

const char *dt_optim_kind_name(dt_optim_kind kind) { return rows[kind]->name; }
int dt_optim_needs_norms(dt_optim_kind kind) { return rows[kind]->norms; }

void dt_optim_resolve(dt_optim_cfg *c) {
    if (c->beta1 < 0) c->beta1 = 0.9;
    if (c->beta2 < 0) c->beta2 = 0.999;
    if (c->eps < 0) c->eps = c->kind == DT_OPT_LAMB ? 1e-6 : 1e-8;
    if (c->trust < 0) c->trust = 0.001;
    if (c->exclude < 0) c->exclude = 1; /* Darknet's decay reaches weights only */
}

struct dt_optim {
    dt_optim_cfg cfg;
    const dt_optim_row *row;
    int ntensors;
    size_t *start;          /* (ntensors + 1) tensor k is [start[k], start[k + 1]) of the vector */
    unsigned char *plain;   /* (ntensors) bias, or a batch-norm parameter */
    unsigned char *frozen;  /* (ntensors) of a layer below cfg.freeze: skipped by every step */
};

/* Whether tensor k's step needs its whole-tensor norms. */
static int uses_norms(const dt_optim *o, int k) { return o->row->norms && !(o->plain[k] && o->cfg.exclude); }

dt_status dt_optim_create(dt_optim **out, const dt_optim_cfg *cfg, const dt_net *net, const size_t *offset) {
    *out = NULL;
    dt_optim *o;
    DT_TRY(dt_alloc_bytes((void **)&o, sizeof *o, "optimiser"));
    o->cfg = *cfg;
    dt_optim_resolve(&o->cfg);
    o->row = rows[cfg->kind];
    size_t cap = 2 * (size_t)net->nlayers;
    dt_status s = dt_alloc_bytes((void **)&o->start, (cap + 1) * sizeof(size_t), "optimiser");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&o->plain, cap + 1, "optimiser");
    if (s == DT_OK) s = dt_alloc_bytes((void **)&o->frozen, cap + 1, "optimiser");
    if (s != DT_OK) {
        dt_optim_free(o);
        return s;
    }
    const size_t *off = offset ? offset : net->param_offset;
    int n = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        if (off[i + 1] == off[i]) continue; /* no parameters, or not in this vector (SFB) */
        int scales = (l->ops->caps & DT_LAYER_CAP_SCALES) != 0;
        if (l->nw) {
            o->start[n] = off[i];
            o->frozen[n] = i < cfg->freeze;
            o->plain[n++] = (unsigned char)scales;
        }
        if (l->nb) {
            o->start[n] = off[i] + l->nw;
            o->frozen[n] = i < cfg->freeze;
            o->plain[n++] = 1;
        }
    }
    o->start[n] = off[net->nlayers];
    o->ntensors = n;
    *out = o;
    return DT_OK;
}

void dt_optim_free(dt_optim *o) {
    if (!o) return;
    dt_free(o->start);
    dt_free(o->plain);
    dt_free(o->frozen);
    dt_free(o);
}

const dt_optim_cfg *dt_optim_config(const dt_optim *o) { return &o->cfg; }
int dt_optim_nslots(const dt_optim *o) { return o->row->nslots; }

/* The tensor holding element x (x below the vector's end). */
static int tensor_of(const dt_optim *o, size_t x) {
    int a = 0, b = o->ntensors - 1;
    while (a < b) {
        int mid = (a + b + 1) / 2;
        if (o->start[mid] <= x) a = mid;
        else b = mid - 1;
    }
    return a;
}

/* Moments of parameters whose gradient stays 0 (dead ReLU units) decay
 * geometrically into denormal floats (0.9^k passes 1e-38 after ~830
 * steps), on which x86 arithmetic is about 100 times slower: measured on
 * cnn, Adam's serial run went from 2319 img/s over its first 200 steps to
 * 573 over 2 epochs. So the update runs with flush-to-zero and
 * denormals-are-zero set on the calling thread, and the thread's previous
 * mode is restored after it (the layers keep IEEE arithmetic). A denormal
 * state or step is below any weight's rounding, so results do not move. */
#if defined(__SSE__)
#include <xmmintrin.h>
enum { MXCSR_FTZ_DAZ = 0x8040 };
static unsigned flush_denormals(void) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | MXCSR_FTZ_DAZ);
    return old;
}
static void restore_denormals(unsigned old) { _mm_setcsr(old); }
#else
static unsigned flush_denormals(void) { return 0; }
static void restore_denormals(unsigned old) { (void)old; }
#endif

void dt_optim_update(const dt_optim *o, float lr, long t, dt_optim_vec v, size_t lo, size_t hi) {
    if (hi <= lo) return;
    unsigned mode = flush_denormals();
    size_t end = v.base + hi;
    for (int k = tensor_of(o, v.base + lo); k < o->ntensors && o->start[k] < end; k++) {
        if (o->frozen[k]) continue; /* wherever the step runs (worker, window, server), so it is exact in all */
        size_t a = o->start[k] > v.base + lo ? o->start[k] - v.base : lo;
        size_t b = o->start[k + 1] < end ? o->start[k + 1] - v.base : hi;
        int excluded = o->plain[k] && o->cfg.exclude;
        dt_optim_piece p = {v.w + a, v.g + a, v.state + a, o->row->nslots > 1 ? v.state + v.stride + a : NULL,
                            b - a, lr, t, excluded ? 0.0f : (float)o->cfg.decay, !excluded};
        double sums[2] = {0, 0};
        if (uses_norms(o, k)) o->row->sums(&o->cfg, &p, sums);
        o->row->step(&o->cfg, &p, sums);
    }
    restore_denormals(mode);
}

dt_status dt_optim_create_for_net(dt_optim **out, float **state, const dt_optim_cfg *cfg, const dt_net *net) {
    *state = NULL;
    DT_TRY(dt_optim_create(out, cfg, net, NULL));
    dt_status s = dt_alloc_floats(state, (size_t)(*out)->row->nslots * net->nparams, "optimiser state");
    if (s != DT_OK) {
        dt_optim_free(*out);
        *out = NULL;
    }
    return s;
}

void dt_optim_update_net(const dt_optim *o, float lr, long t, dt_net *net, float *state, size_t lo, size_t hi) {
    dt_optim_vec v = {net->params, net->grads, state, net->nparams, 0};
    dt_optim_update(o, lr, t, v, lo, hi);
}

size_t dt_optim_align(const dt_optim *o, size_t cut) {
    if (!o->row->norms || o->ntensors == 0 || cut >= o->start[o->ntensors]) return cut;
    int k = tensor_of(o, cut);
    if (!uses_norms(o, k) || cut == o->start[k]) return cut;
    return cut - o->start[k] <= o->start[k + 1] - cut ? o->start[k] : o->start[k + 1];
}

#define BIT(k) (1u << (k))
#define ALL_KINDS (BIT(DT_OPT_COUNT) - 1)
#define HYPER(field) offsetof(dt_optim_cfg, field)
#define ADAMS (BIT(DT_OPT_ADAM) | BIT(DT_OPT_ADAMW) | BIT(DT_OPT_LAMB))

/* The hyperparameters (optim.h), in the run log's order. */
static const dt_optim_hyper hypers[] = {
    {"momentum", HYPER(momentum), 0, BIT(DT_OPT_SGD) | BIT(DT_OPT_LARS), "M", "sgd, lars: momentum in [0, 1)"},
    {"decay", HYPER(decay), 0, ALL_KINDS, "D", "weight decay (sgd, adam: L2; adamw, lamb: decoupled)"},
    {"nesterov", HYPER(nesterov), 1, BIT(DT_OPT_SGD), "0|1", "sgd: Nesterov's momentum"},
    {"beta1", HYPER(beta1), 0, ADAMS, "B", "adam, adamw, lamb: first moment decay rate in [0, 1) (0.9)"},
    {"beta2", HYPER(beta2), 0, ADAMS, "B", "adam, adamw, lamb: second moment decay rate in [0, 1) (0.999)"},
    {"eps", HYPER(eps), 0, ADAMS, "E", "adam, adamw, lamb: > 0 (1e-8; lamb 1e-6)"},
    {"trust_coefficient", HYPER(trust), 0, BIT(DT_OPT_LARS), "T", "lars: eta of the trust ratio, > 0 (0.001)"},
    {"exclude_bias_bn", HYPER(exclude), 1, ALL_KINDS, "0|1",
     "1: biases and batch-norm parameters without decay and trust ratio (Darknet's default); 0: decay on every "
     "parameter (PyTorch's)"},
};
enum { NHYPERS = (int)(sizeof hypers / sizeof *hypers) };
_Static_assert(NHYPERS <= DT_OPT_MAX_HYPERS, "DT_OPT_MAX_HYPERS holds every row");

const dt_optim_hyper *dt_optim_hyper_at(int i) { return i >= 0 && i < NHYPERS ? &hypers[i] : NULL; }

/* "trust_coefficient" and "trust-coefficient" are one key. */
static int same_key(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '_' || *a == '-') && (*b == '_' || *b == '-'))) return 0;
    return *a == *b;
}

const dt_optim_hyper *dt_optim_hyper_of(const char *key) {
    for (int i = 0; i < NHYPERS; i++)
        if (same_key(hypers[i].key, key)) return &hypers[i];
    return NULL;
}

double dt_optim_hyper_get(const dt_optim_cfg *c, const dt_optim_hyper *h) {
    const char *at = (const char *)c + h->offset;
    return h->integer ? *(const int *)at : *(const double *)at;
}

void dt_optim_hyper_set(dt_optim_cfg *c, const dt_optim_hyper *h, double v) {
    char *at = (char *)c + h->offset;
    if (h->integer)
        *(int *)at = (int)v;
    else
        *(double *)at = v;
}

static unsigned users_of(const char *key) {
    const dt_optim_hyper *h = dt_optim_hyper_of(key);
    return h ? h->users : ALL_KINDS;
}

int dt_optim_uses(dt_optim_kind kind, const char *key) { return (users_of(key) & BIT(kind)) != 0; }

void dt_optim_users(char *buf, size_t cap, const char *key) {
    unsigned m = users_of(key);
    int total = 0, done = 0;
    for (int k = 0; k < DT_OPT_COUNT; k++) total += (m & BIT(k)) != 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < DT_OPT_COUNT && used < cap; k++) {
        if (!(m & BIT(k))) continue;
        const char *sep = done == 0 ? "" : done == total - 1 ? " or " : ", ";
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", sep, rows[k]->name);
        done++;
    }
}
