/* Checkpoint files: everything needed to continue a run exactly.
 *
 * Layout (little-endian):
 *   "DTCKPT01" magic (8) | u32 version | u32 optimizer (dt_optim_kind; 0 before version 3)
 *   u64 shape_hash | u64 seed | u64 step | u64 net_step | i32 epoch | i32 step_in_epoch
 *   u64 nparams | u64 nstate | u64 nopt_state
 *   f32 params[nparams] | f32 state[nstate] | f32 opt_state[nopt_state]
 *   version 2 and later: f64 loss | f64 best_loss | f64 best_accuracy
 *   version 4 and later: u32 nclasses | u32 name_bytes | name_bytes bytes:
 *     the class names of a folder data set, label 0 first, each followed by
 *     a NUL (nclasses 0 and name_bytes 0: none); at most DT_DATA_MAX_CLASSES
 *     names, non-empty and distinct, name_bytes <= DT_CKPT_MAX_NAME_BYTES
 *   version 5 and later: u32 nworkers | u32 0 | u64 worker_floats |
 *     f32 worker_state[nworkers][worker_floats]: what each worker of the
 *     run keeps for itself and a resume needs (top-k's residuals of the
 *     gradients not sent yet, worker 0 first; nworkers 0 and worker_floats
 *     0: none)
 *   version 6 and later: u64 step_samples: the samples of one optimiser
 *     step over all workers (batch x accumulate x workers; 0: unknown)
 *   version 7 and later: the epoch's accounting, f64 epoch_loss_sum |
 *     u64 epoch_loss_count | f64 last_epoch_loss | i64 evaluated_step; then
 *     the architecture, u32 nlayers | u32 input c, h, w | per layer u32
 *     kind, in c, h, w, out c, h, w, 0 | u64 nw, nb, nstate (what the shape
 *     hash is made of, edges aside), so that a checkpoint of another model
 *     can say which layer differs
 *   u32 crc32 of every byte before it
 * opt_state is the optimiser's slots, slot-major (optim.h): nslots x
 * nparams. Versions 1 and 2 (SGD's momentum; version 1 without the loss
 * figures) still load, as sgd; versions before 4 load with no class names,
 * before 5 with no worker state, before 6 with step_samples 0, before 7
 * with no epoch accounting (evaluated_step -1, sums 0) and no architecture
 * (a mismatch then names the parameter counts only).
 * Written to "PATH.tmp", fsync'd, renamed over PATH and the directory
 * fsync'd, so a crash at any moment leaves either the old or the new file. */
#ifndef DTRAIN_CHECKPOINT_H
#define DTRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/data.h"
#include "dtrain/status.h"

#define DT_CKPT_VERSION 7
/* The first bytes of every checkpoint (no NUL on disk). */
#define DT_CKPT_MAGIC "DTCKPT01"
#define DT_CKPT_MAGIC_BYTES 8
/* DT_DATA_MAX_CLASSES names of up to 255 bytes and their NULs (25.6 MB):
 * the bound a reader checks before it allocates. Versions 4-7 share this
 * layout, so checkpoints written under the older bound (256 names, 64 KiB)
 * load unchanged. */
#define DT_CKPT_MAX_NAME_BYTES (DT_DATA_MAX_CLASSES * 256)

typedef struct {
    uint64_t shape_hash;   /* must match the net that loads it */
    uint64_t seed;         /* data order and augmentation */
    uint64_t step;         /* optimiser steps done */
    uint64_t net_step;     /* the net's training forward counter (dropout) */
    int32_t epoch;         /* epoch of the next step */
    int32_t step_in_epoch; /* step within that epoch of the next step */
    /* What keeps a bad checkpoint from replacing good ones across a resume
     * (version 1 files load as 0, 0, -1: unknown): */
    double loss;           /* smoothed training loss when it was written (0: unknown) */
    double best_loss;      /* lowest smoothed training loss of the run so far (0: unknown) */
    double best_accuracy;  /* best test accuracy of the run so far (-1: none evaluated) */
    int optimizer;         /* dt_optim_kind of its optimiser state (filled on load) */
    /* Samples of one step over all workers: steps, the schedule and the
     * place in an epoch are counted in such steps (0: unknown). */
    uint64_t step_samples;
    /* Filled on load: the worker state the file holds (0 and 0: none). */
    uint64_t file_nworkers;
    uint64_t file_worker_floats;
    /* The epoch in progress, so that a resumed run reports the epoch's
     * training loss the uninterrupted one does: its summed per-sample loss
     * and samples so far, the last finished epoch's mean, and the step of
     * the last evaluation logged (-1: none; a resume at that step does not
     * repeat it). Before version 7: 0, 0, 0, -1. */
    double epoch_loss_sum;
    uint64_t epoch_loss_count;
    double last_epoch_loss;
    int64_t evaluated_step;
    /* The images the run had trained on: Darknet's `seen`, which Darknet
     * weights carry (dt_checkpoint_load_net), step x step_samples for a
     * checkpoint (0 when step_samples is unknown). */
    uint64_t seen;
    int darknet;           /* 1: read from Darknet weights (only seen is known, the rest 0) */
} dt_ckpt_meta;

/* One layer of the architecture a checkpoint records. */
typedef struct {
    uint32_t kind;        /* dt_layer_kind */
    uint32_t in[3], out[3]; /* c, h, w */
    uint32_t zero;          /* written 0 (no padding in the file) */
    uint64_t nw, nb, nstate;
} dt_ckpt_layer;

#define DT_CKPT_MAX_LAYERS 100000

/* A net's architecture as a checkpoint records it (layers: owned by whoever
 * filled it; see dt_ckpt_arch_of, dt_ckpt_arch_free). */
typedef struct {
    uint32_t input[3];
    int nlayers;
    dt_ckpt_layer *layers;
} dt_ckpt_arch;

struct dt_net;
/* net's architecture into *arch (allocated; dt_ckpt_arch_free). */
dt_status dt_ckpt_arch_of(dt_ckpt_arch *arch, const struct dt_net *net);
void dt_ckpt_arch_free(dt_ckpt_arch *arch);
/* Whether file and model differ where the file records it; if so, the
 * first difference into buf ("layer 7 is connected 3136x1x1 -> 10x1x1, ...
 * in the checkpoint, connected ... -> 3x1x1 ... in this model"). */
int dt_ckpt_arch_diff(char *buf, size_t cap, const dt_ckpt_arch *file, const dt_ckpt_arch *model);

/* The float arrays a checkpoint carries (views, not owned). On load, n* must
 * equal the file's counts and the arrays are filled. */
typedef struct {
    float *params;
    size_t nparams;
    float *state;
    size_t nstate;
    float *opt_state;  /* may be NULL with nopt_state 0 (eval-only readers) */
    size_t nopt_state;
    int optimizer;     /* dt_optim_kind the state belongs to; a load with opt_state checks it */
    /* Save: the class names written (NULL or n = 0: none). Load: NULL, or
     * an empty dt_class_names that receives the file's (n = 0 when it has
     * none; the caller frees it); left empty when the load fails. */
    dt_class_names *classes;
    /* Save: every worker's state, worker_floats each, worker-major (NULL
     * and nworkers 0: none). Load: worker_state (worker_floats floats)
     * receives worker `worker`'s part when the file holds worker_floats for
     * each of nworkers workers, and is left as it is otherwise (the meta
     * says what the file holds); NULL: not read. */
    float *worker_state;
    size_t worker_floats;
    int nworkers, worker;
    /* Save: the architecture written (NULL: none). Load: the model's, which
     * a checkpoint of another model is compared with to name the first
     * layer that differs (NULL: the message names parameter counts). */
    const dt_ckpt_arch *arch;
} dt_ckpt_arrays;

/* A whole checkpoint of any model, as dt_checkpoint_read_file returns it
 * (owned: dt_ckpt_file_free). */
typedef struct {
    float *params;          /* (nparams), then the state: state == params + nparams */
    size_t nparams;
    float *state;           /* (nstate) */
    size_t nstate;
    dt_ckpt_arch arch;      /* its layers; none (0 layers) before version 7 */
} dt_ckpt_file;

dt_status dt_checkpoint_save(const char *path, const dt_ckpt_meta *meta, const dt_ckpt_arrays *a);
/* The bytes dt_checkpoint_save writes for a. */
uint64_t dt_checkpoint_bytes(const dt_ckpt_arrays *a);

/* fsyncs the directory holding path, so that a rename or link made in it
 * is durable (checkpoints, and the checkpoint directory's latest link). */
dt_status dt_sync_dir_of(const char *path);

/* buf (n bytes) to path by way of "path.tmp", fsync'd, renamed over path
 * and the directory fsync'd: path holds the old bytes or all the new ones
 * (checkpoints' way, for every whole file dtrain writes: ONNX, Darknet
 * weights). */
dt_status dt_write_file_atomic(const char *path, const void *buf, size_t n);

/* Reads and verifies (magic, version, CRC, shape hash == expect_hash, sizes)
 * before touching the arrays: a bad file leaves them unchanged. A checkpoint
 * of another model is DT_ERR_FORMAT "PATH: checkpoint is for a different
 * model: " and the first layer that differs from a->arch (see
 * dt_ckpt_arch_diff), or the parameter counts. With
 * a->opt_state == NULL the optimiser's section is verified but not returned;
 * a == NULL verifies the file and returns only meta. */
dt_status dt_checkpoint_load(const char *path, uint64_t expect_hash, dt_ckpt_meta *meta,
                             const dt_ckpt_arrays *a);

/* Loads path for a net: its parameters and state, with net's architecture
 * for the message when the checkpoint is another model's (eval, predict,
 * export, --weights). opt_state, worker state and classes as in a (whose
 * params, state and arch this fills from net). A Darknet weights file
 * (dt_darknet_weights_is) is read as darknet_weights.h says: meta then
 * says so (darknet, seen; step 0, best_accuracy -1), nothing else of a is
 * filled (no class names). */
dt_status dt_checkpoint_load_net(const char *path, const struct dt_net *net, dt_ckpt_meta *meta,
                                 dt_ckpt_arrays *a);

/* Reads and verifies a checkpoint of any model (no shape hash compared)
 * into *out: its parameters, state and architecture, not the optimiser's
 * or workers' state (train --weights --partial). On failure *out is empty. */
dt_status dt_checkpoint_read_file(const char *path, dt_ckpt_meta *meta, dt_ckpt_file *out);
void dt_ckpt_file_free(dt_ckpt_file *f);

/* Whether path is a whole, uncorrupted checkpoint (magic, version, sizes,
 * CRC), whatever model it is for; its meta in *meta. */
dt_status dt_checkpoint_verify(const char *path, dt_ckpt_meta *meta);

/* The same from a descriptor open for reading: the checkpoint runs from its
 * current offset to its end; fd is left open; name stands for the file in
 * messages. dt_checkpoint_load opens the file and calls this. */
dt_status dt_checkpoint_load_fd(int fd, const char *name, uint64_t expect_hash,
                                dt_ckpt_meta *meta, const dt_ckpt_arrays *a);

#endif
