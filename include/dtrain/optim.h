/* Optimisers: one seam for every mode.
 *
 * An optimiser is a row of a table (src/optim/optimizer.c): its name, how
 * many floats of state it keeps per parameter (slots), whether its step
 * needs per-tensor norms, and a step over one piece of one parameter
 * tensor. Everything else is shared:
 *   - State is slot-major next to the parameters it belongs to: for a
 *     vector of n parameters, slot k of parameter i is state[k * stride + i]
 *     (stride n on workers; a server's shard has its own n). So allreduce,
 *     the shared-memory window, every ps-* server and checkpoints move and
 *     store any optimiser's state as nslots flat blocks without knowing it.
 *   - A dt_optim knows the parameter tensors of one flat vector (the net's,
 *     or the servers' vector, which leaves SFB layers out): each layer's
 *     weights, then its bias; batch-norm scale and shift count as "plain"
 *     (excluded from decay and trust ratios when cfg.exclude says so).
 *   - dt_optim_update runs one step over any range [lo, hi) of that vector.
 *     LARS and LAMB scale each weight tensor by a trust ratio made of the
 *     whole tensor's norms; a range must then hold each such tensor whole
 *     or not at all. dt_optim_align moves shard cuts that way for the
 *     parameter servers and the shared-memory window (every other caller
 *     updates whole layers).
 *
 * Formulas (g the gradient, w the weights, t the 1-based step count, wd the
 * decay, 0 on plain tensors when excluded):
 *   sgd   (torch.optim.SGD) g' = g + wd w; v = mu v + g';
 *         w -= lr (nesterov ? g' + mu v : v)
 *   adam  (torch.optim.Adam, L2 decay) g' = g + wd w;
 *         m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
 *         w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *   adamw (torch.optim.AdamW) w *= 1 - lr wd, then adam with g' = g
 *   lars  (You et al. 2017) per weight tensor: q = trust ||w|| / (||g|| + wd ||w||)
 *         (1 when either norm is 0, or on a plain tensor when excluded);
 *         v = mu v + lr q (g + wd w); w -= v
 *   lamb  (You et al. 2019) m, v as adam with g; r = m^ / (sqrt(v^) + eps);
 *         u = r + wd w; per weight tensor q = ||w|| / ||u|| (1 when either
 *         is 0, or plain and excluded); w -= lr q u */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include <stddef.h>

#include "dtrain/schedule.h"
#include "dtrain/status.h"

typedef enum { DT_OPT_SGD = 0, DT_OPT_ADAM, DT_OPT_ADAMW, DT_OPT_LARS, DT_OPT_LAMB, DT_OPT_COUNT } dt_optim_kind;

#define DT_OPT_MAX_SLOTS 2

/* Hyperparameters. The model file and flags leave the optimiser-dependent
 * ones unset (< 0) unless given; dt_optim_create fills them with the
 * chosen optimiser's defaults (dt_optim_resolve), so a flag that changes
 * the optimiser also changes its defaults. */
typedef struct {
    dt_optim_kind kind;
    double momentum;  /* sgd, lars: 0.9 */
    double decay;     /* sgd, adam: L2; adamw, lamb: decoupled; lars: in the trust ratio; 5e-4 */
    int nesterov;     /* sgd */
    double beta1;     /* adam, adamw, lamb: 0.9 */
    double beta2;     /* adam, adamw, lamb: 0.999 */
    double eps;       /* adam, adamw: 1e-8; lamb: 1e-6 */
    double trust;     /* lars: eta, 0.001 */
    int exclude;      /* 1 (the default): biases and batch-norm parameters get no decay and no
                       * trust ratio (Darknet decays weights only; LARS and LAMB's papers);
                       * 0: every tensor alike (PyTorch's weight_decay) */
    int freeze;       /* the first `freeze` layers' tensors are never stepped: no gradient, decay or
                       * moment moves them, and their state stays as it is (train --freeze) */
} dt_optim_cfg;

/* Fills what is unset (< 0) with kind's defaults. */
void dt_optim_resolve(dt_optim_cfg *cfg);

/* "sgd" | "adam" | "adamw" | "lars" | "lamb" -> kind, -1 if unknown. */
int dt_optim_kind_from_name(const char *name);
const char *dt_optim_kind_name(dt_optim_kind kind);
/* Whether the step needs whole-tensor norms (lars, lamb). */
int dt_optim_needs_norms(dt_optim_kind kind);

/* The hyperparameters, one row each (optimizer.c's table): the model
 * file's [net] key (whose row in model.c's key table has its bounds and
 * default), which is also train's flag (--KEY, '-' for '_'), a sweep's axis,
 * the job API's option and the run log's config field; its field in
 * dt_optim_cfg; the optimisers that read it; its line of train's usage.
 * A new hyperparameter is its field, its model-file key and its row. */
typedef struct {
    const char *key;     /* "beta1" */
    size_t offset;       /* of its field in dt_optim_cfg */
    int integer;         /* the field is an int (else a double) */
    unsigned users;      /* bit 1 << kind of each optimiser that reads it */
    const char *value;   /* its value's name in the usage, "B" */
    const char *usage;   /* what it is, for train --help */
} dt_optim_hyper;

#define DT_OPT_MAX_HYPERS 16

/* Row i of the table (NULL past the last), and the row of `key` (a [net]
 * key, '-' or '_' alike; NULL: none). */
const dt_optim_hyper *dt_optim_hyper_at(int i);
const dt_optim_hyper *dt_optim_hyper_of(const char *key);
/* Its value in c, and set. */
double dt_optim_hyper_get(const dt_optim_cfg *c, const dt_optim_hyper *h);
void dt_optim_hyper_set(dt_optim_cfg *c, const dt_optim_hyper *h, double v);

/* Whether kind reads the hyperparameter `key` (a row's key; any other
 * key: every optimiser does). */
int dt_optim_uses(dt_optim_kind kind, const char *key);
/* The optimisers that read key, as "adam, adamw or lamb" (for messages). */
void dt_optim_users(char *buf, size_t cap, const char *key);

/* One flat vector and its state: w[i], g[i] and state[k * stride + i] are
 * element base + i of the vector the dt_optim was made for. */
typedef struct {
    float *w;
    const float *g;
    float *state;
    size_t stride;
    size_t base;
} dt_optim_vec;

typedef struct dt_optim dt_optim;
struct dt_net;

/* An optimiser for a vector laid out as net's parameters (offset NULL) or
 * as the vector whose layer i occupies [offset[i], offset[i + 1]) (the
 * servers' vector: SFB layers empty). cfg is copied and resolved
 * (dt_optim_config returns the result). */
dt_status dt_optim_create(dt_optim **out, const dt_optim_cfg *cfg, const struct dt_net *net,
                          const size_t *offset);
void dt_optim_free(dt_optim *o);
const dt_optim_cfg *dt_optim_config(const dt_optim *o);
int dt_optim_nslots(const dt_optim *o);

/* One step with rate lr, the t-th (1-based: Adam's bias correction) on
 * elements [lo, hi) of v. Weight tensors whose norms the step needs must
 * lie wholly inside or wholly outside the range. */
void dt_optim_update(const dt_optim *o, float lr, long t, dt_optim_vec v, size_t lo, size_t hi);

/* For tools that step a whole net alone (bench, the simulator's profile):
 * an optimiser over net's vector and its zeroed state (nslots x nparams);
 * free them with dt_optim_free and dt_free. */
dt_status dt_optim_create_for_net(dt_optim **out, float **state, const dt_optim_cfg *cfg, const struct dt_net *net);
/* Step t of net's parameters [lo, hi) from its gradients, state as above. */
void dt_optim_update_net(const dt_optim *o, float lr, long t, struct dt_net *net, float *state, size_t lo,
                         size_t hi);

/* A cut between two ranges of the vector (a shard boundary), moved to the
 * nearer end of a tensor whose norms the step needs if it falls inside one
 * (unchanged otherwise). Cuts stay in order, so ranges cut by
 * dt_shard_range and aligned at both ends still tile the vector. */
size_t dt_optim_align(const dt_optim *o, size_t cut);

#endif
