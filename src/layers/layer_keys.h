/* The model-file keys of a layer kind: what a kind declares about its
 * section (dt_layer_ops.keys, .end_section) and what it may ask of the
 * parser (src/net/model.c implements the dt_section_* functions).
 *
 * A section's keys are a table: one generic handler in the parser parses,
 * range-checks and stores every value, and the tables are the format's
 * documentation (docs/MODEL_FILES.md). Values land in a dt_section_vals:
 * spec fields directly, keys that are not spec fields in the kind's own
 * scratch record (`own`), which its end_section hook turns into the spec. */
#ifndef DT_LAYERS_LAYER_KEYS_H
#define DT_LAYERS_LAYER_KEYS_H

#include <stddef.h>

#include "dtrain/layer.h"
#include "dtrain/status.h"

typedef enum {
    DT_KEY_INT,        /* int */
    DT_KEY_FLOAT,      /* float */
    DT_KEY_DOUBLE,     /* double */
    DT_KEY_ENUM,       /* int-sized enum, named through `choices` */
    DT_KEY_DATASET,    /* [net]: canonical dataset name into dt_model_spec.dataset */
    DT_KEY_MILESTONES, /* [net]: comma lists into a dt_lr_schedule (off points at it): */
    DT_KEY_STEPS,      /*   ascending epochs / Darknet's ascending batches, */
    DT_KEY_SCALES,     /*   Darknet's scales */
    DT_KEY_LAYERS,     /* comma list of section indices into a dt_key_layers */
    DT_KEY_CHANNELS,   /* [net]: comma list of one float per input channel into a dt_channel_values */
    DT_KEY_PATH,       /* a file's path, kept by the parser (dt_section_key_path; off unused) */
    DT_KEY_RANGE       /* "lo,hi": two floats, lo <= hi, into a float[2]; not given: {0, 0} */
} dt_key_type;

enum { DT_KEY_REQUIRED = 1, DT_KEY_LO_OPEN = 2, DT_KEY_HI_OPEN = 4 };

/* Largest size, filter count, output count or batch a key accepts. */
#define DT_KEY_DIM_MAX (1 << 24)

typedef struct {
    int (*from_name)(const char *name); /* -1 if unknown */
    const char *(*name)(int value);
    int count;                          /* values are 0..count-1 */
} dt_key_choices;

typedef struct dt_key_def {
    const char *name;
    dt_key_type type;
    size_t off;              /* into the section's record (DT_SPEC_KEY, DT_OWN_KEY) */
    double def;              /* used when the key is absent and not DT_KEY_REQUIRED */
    double lo, hi;           /* allowed range (hi = INFINITY: unbounded) */
    unsigned flags;
    const dt_key_choices *choices;
} dt_key_def;

/* A DT_KEY_LAYERS value: Darknet section indices as written (negative:
 * relative to this section), resolved by dt_section_layer. */
typedef struct {
    int n;
    int ref[DT_LAYER_MAX_INPUTS];
} dt_key_layers;

/* Where one layer section's values go. The fused keys (DT_FUSED_KEYS) are
 * the parser's: activation= becomes an [activation] layer after the
 * section's layer, batch_normalize=1 a [batchnorm] before that (and the
 * layer's bias is dropped: the batch norm's shift is the bias, Darknet's
 * layout). */
typedef struct dt_section_vals {
    dt_layer_spec spec;
    dt_activation fused_act;
    float fused_slope;
    int batch_normalize;
    union {
        max_align_t align;
        unsigned char bytes[64];
    } own; /* the kind's scratch record (a struct of its own, read by its end_section) */
} dt_section_vals;

#define DT_SPEC_KEY(field) offsetof(dt_section_vals, spec.field)
#define DT_OWN_KEY(type, field) (offsetof(dt_section_vals, own) + offsetof(type, field))
/* A kind's scratch record must fit `own`. */
#define DT_OWN_FITS(type) _Static_assert(sizeof(type) <= sizeof(((dt_section_vals *)0)->own), #type " too big")

extern const dt_key_choices dt_activation_choices;

/* Rows of key tables (columns: name, type, offset, default, lo, hi, flags,
 * choices). DT_ACT_KEYS: an activation applied after the layer, by default
 * linear (none), as Darknet's [shortcut]; DT_FUSED_KEYS: one that defaults
 * to logistic, as Darknet's [convolutional] and [connected], and
 * batch_normalize=. */
#define DT_ACTIVATION_KEY(def) \
    {"activation", DT_KEY_ENUM, offsetof(dt_section_vals, fused_act), def, 0, 0, 0, &dt_activation_choices}
#define DT_SLOPE_KEY {"slope", DT_KEY_FLOAT, offsetof(dt_section_vals, fused_slope), 0.1, 0, 1, 0, NULL}
#define DT_ACT_KEYS DT_ACTIVATION_KEY(DT_ACT_LINEAR), DT_SLOPE_KEY
#define DT_FUSED_KEYS                                                                                  \
    DT_ACTIVATION_KEY(DT_ACT_SIGMOID),                                                                \
        {"batch_normalize", DT_KEY_INT, offsetof(dt_section_vals, batch_normalize), 0, 0, 1, 0, NULL}, \
        DT_SLOPE_KEY

/* The parser's view of the section being read. */
typedef struct dt_section dt_section;

/* The file named by the section's DT_KEY_PATH key (a section has at most
 * one) as Darknet opens it, relative to the working directory, or else, if
 * no file is there, relative to the model file's folder's parent (Darknet's
 * layout: cfg/ beside data/); NULL if the key is absent. The buffer lives
 * until the section ends. */
const char *dt_section_key_path(const dt_section *s);

/* Line key (one of the section's keys) was given on; 0 if absent. */
int dt_section_key_line(const dt_section *s, const char *key);
/* Records DT_ERR_CONFIG "<file>:<line>: <message>" and returns it. */
dt_status dt_section_error(const dt_section *s, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* *layer = the net's layer index of the output of Darknet section `ref`
 * (negative: relative to this section, else absolute) as given in key `key`;
 * an error naming the key when no such section comes before this one. key
 * NULL asks for the previous section (ref -1), an error when there is none. */
dt_status dt_section_layer(const dt_section *s, const char *key, int ref, int *layer);

#endif
