/* Model files: Darknet-style INI, parsed strictly, separate from building.
 *
 *   [net]                       input shape, batch, optimiser, schedule
 *   (defaults are Darknet's: docs/MODEL_FILES.md has every key)
 *   batch=1  accumulate=1 | subdivisions=1  channels= height= width=
 *   learning_rate=0.001 optimizer=sgd|adam|adamw|lars|lamb decay=0.0001
 *   momentum=0.9 nesterov=0 beta1 beta2 eps trust_coefficient exclude_bias_bn=1
 *   epochs=1 policy=constant|step|multistep|cosine|steps|poly|exp|sigmoid
 *   step_epochs=..  step=1 scale=1  gamma=1  milestones=30,60  min_lr=0
 *   warmup_epochs=0  warmup_start_factor=0.1
 *   dataset=fashion-mnist  flip=0  crop_pad=0  erase=0  precision=fp32|bf16  winograd=1
 *   augment=darknet|resized_crop  crop_scale=0.08,1  crop_ratio=0.75,1.3333  eval_resize=0
 *   mean=0.485,0.456,0.406  std=0.229,0.224,0.225   (one per channel; default none)
 *   [convolutional] filters size stride pad activation=logistic batch_normalize
 *   [connected] output activation=logistic batch_normalize
 *   [maxpool] / [avgpool] size stride pad
 *   [activation] activation (relu|leaky|tanh|sigmoid|linear) slope (leaky)
 *   [dropout] probability
 *   [lrn] size alpha beta kappa
 *   [batchnorm] momentum eps
 *   [softmax]   (last)
 * Comments start with '#' or ';'. Every section and key must be known and
 * every value valid; errors read "FILE:LINE: message". A conv/connected
 * section with batch_normalize=1 or activation= expands to separate layers
 * (conv, batchnorm, activation), all carrying the section's line. */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#include <string.h>

#include "dtrain/data.h"
#include "dtrain/layer.h"
#include "dtrain/optim.h"
#include "dtrain/status.h"

#define DT_MAX_LAYERS 1024

/* mean= and std= of [net]: one value per input channel (n 0: not given). */
typedef struct {
    int n;
    float v[DT_DATA_MAX_CHANNELS];
} dt_channel_values;

typedef struct {
    char path[512];         /* file the spec came from (for messages) */
    dt_shape input;         /* channels, height, width */
    int batch;              /* per-worker batch; also base batch for LR scaling */
    int epochs;
    int accumulate;         /* forward/backward passes of `batch` per optimiser step */
    int subdivisions;       /* Darknet's, as written: the file's batch was the step's,
                               batch and accumulate above already account for it */
    dt_optim_cfg optim;     /* as written: unset values < 0 (dt_optim_create resolves them) */
    int hyper_line[DT_OPT_MAX_HYPERS]; /* line of [net]'s hyperparameter i (optim.h's table; 0: not written) */
    dt_lr_schedule sched;   /* total_epochs = epochs unless set */
    char dataset[32];       /* default dataset name ("" = fashion-mnist) */
    int flip, crop_pad;     /* training augmentation */
    float erase;            /* training: probability of random erasing (0: none) */
    dt_augment augment;     /* Darknet's augmentation keys, resolved (crop set when a crop key is
                               given; then the dataset's images may be of another size), and
                               RandomResizedCrop's (augment=resized_crop, crop_scale=, crop_ratio=) */
    int eval_resize;        /* folders: the shorter side resized to this before the centre crop
                               (dt_folder_opts.resize); 0: resized to just cover the input */
    dt_channel_values mean, std; /* the input's normalisation, x = (byte / 255 - mean) / std per
                               channel, as torchvision's Normalize (n 0: mean 0, std 1) */
    dt_precision precision; /* of convolutions and connected layers (dt_net_create checks it) */
    int winograd;           /* 1: 3x3 stride-1 convolutions run Winograd's algorithm where it applies
                               (dt_layer_winograd, else oneDNN's on AVX-512); 0: never */
    int plain_engine;       /* not from model files: NCHW activations and no fused ReLUs (tests
                               compare the engine's fast paths with this) */
    int logistic_head_line; /* line of a [connected] right before [softmax] without activation=,
                               so Darknet's default logistic (0: none); train notes it */
    int nlayers;
    dt_layer_spec layers[DT_MAX_LAYERS];
} dt_model_spec;

/* DT_OK when the net ends in [softmax], its loss; else a feature
 * extractor (Darknet's vgg-conv.cfg): DT_ERR_CONFIG "FILE:LINE: ... no
 * loss layer" naming its last section, for train, eval, bench and simulate
 * to refuse it (info, export and predict --features take it). */
dt_status dt_model_check_loss(const dt_model_spec *m);

/* Images per worker in one optimiser step: `accumulate` passes of `batch`
 * (callers check the product fits an int: dt_job_prepare does). */
static inline int dt_model_step_batch(const dt_model_spec *m) { return m->batch * m->accumulate; }

/* Parse a model file. On error returns DT_ERR_CONFIG ("FILE:LINE: ...") or
 * DT_ERR_IO (unreadable file). */
dt_status dt_model_parse_file(dt_model_spec *out, const char *path);

/* Parse text; `name` stands in for the file name in messages. */
dt_status dt_model_parse_string(dt_model_spec *out, const char *text, const char *name);

/* A [net] key given outside the file (train's --policy cosine, a sweep's
 * grid): it replaces the file's value and is checked as if the file said
 * it; errors about it read "FLAG VALUE (over FILE): message". */
typedef struct {
    const char *key;   /* a [net] key, "policy" */
    const char *value; /* "cosine" */
    const char *flag;  /* how the user gave it, "--policy" */
} dt_model_override;

/* dt_model_parse_file with n overrides applied at the end of [net]. When
 * the policy is overridden, the file's keys of its own policy that the new
 * one does not read are left unread (the command line replaced the
 * schedule); keys given as overrides must fit the policy. */
dt_status dt_model_parse_file_over(dt_model_spec *out, const char *path, const dt_model_override *ov, int n);
/* Whether a model given as a string is its text rather than a file's path
 * (the job API takes either, dtrain.h): text holds a newline. */
static inline int dt_model_is_text(const char *model) { return strchr(model, '\n') != NULL; }
/* The same over text, `name` standing in for the file name in messages. */
dt_status dt_model_parse_string_over(dt_model_spec *out, const char *text, const char *name,
                                     const dt_model_override *ov, int n);

/* The i-th [net] key of the model file format (NULL past the last), and
 * whether its values are plain numbers (not names or lists). */
const char *dt_model_net_key(int i);
int dt_model_net_key_is_number(const char *key);
/* The range a [net] key's number must be in, [lo, hi] or open at either
 * end; -1 when key is no [net] key. */
int dt_model_net_key_range(const char *key, double *lo, double *hi, int *lo_open, int *hi_open);

#endif
