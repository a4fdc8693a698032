/* Datasets and the training/evaluation loader.
 *
 * A dataset is held in memory as images (N, C, H, W) uint8 and labels (N)
 * dt_label (int32: ImageNet-22K's classes fit), plus the per-channel normalisation applied when a batch is made:
 * x = (byte / 255 - mean[c]) / std[c]. A folder dataset too large for its
 * memory budget keeps only its labels and a fetch callback that decodes a
 * sample's bytes when the loader's threads build a batch; everything after
 * those bytes (sharding, augmentation, normalisation) is the same code.
 *
 * Sharding (what makes distributed runs equal to serial ones): in epoch e the
 * loader draws one permutation of 0..N-1 from (seed, e), the same on every
 * worker. Global step t of the epoch covers perm[t*B*W, (t+1)*B*W); worker r takes
 * the slice [t*B*W + r*B, t*B*W + (r+1)*B). So the W shards of a step are
 * disjoint, together they are exactly the batch a serial run with batch B*W
 * takes, and across the epoch every sample is seen at most once (the last
 * N mod (B*W) samples are dropped when drop_last is set, as in PyTorch).
 * Without shuffle (evaluation) worker r takes the contiguous range
 * [r*N/W, (r+1)*N/W) in batches of B, the last one short; no sample is
 * dropped, so a reduced evaluation covers the test set exactly once.
 *
 * Augmentation (random crop with zero padding, horizontal flip, Darknet's
 * scaled/rotated crops and colour distortion) is drawn per sample from
 * (seed, epoch, sample index), so it does not depend on thread timing, worker
 * count or resume point. */
#ifndef DTRAIN_DATA_H
#define DTRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/image.h"
#include "dtrain/layer.h"
#include "dtrain/status.h"
#include "dtrain/timeline.h"

/* Bounds applied to file headers before any allocation. */
#define DT_DATA_MAX_SAMPLES 100000000 /* 1e8 */
#define DT_DATA_MAX_DIM 4096          /* per image side */
#define DT_DATA_MAX_CHANNELS 64

/* Classes of a data set or model (labels are dt_label, 32-bit): room for
 * ImageNet-22K's 21841 and beyond, small enough that a checkpoint's names
 * (DT_CKPT_MAX_NAME_BYTES) stay a bounded read. */
#define DT_DATA_MAX_CLASSES 100000

/* Class names, index = label (a folder dataset's, a checkpoint's). */
typedef struct {
    int n;
    char **names; /* (n) NUL-terminated, owned */
} dt_class_names;

/* Copies src into *dst (which must be empty or freed); an empty src gives
 * {0, NULL}. */
dt_status dt_class_names_copy(dt_class_names *dst, const dt_class_names *src);
/* *dup = a name that c holds twice, NULL when its names are distinct
 * (sorts a copy of the pointers: O(n log n) for ImageNet-22K's 21841). */
dt_status dt_class_names_repeated(const dt_class_names *c, const char **dup);
/* Frees and empties c; an empty c is a no-op. */
void dt_class_names_free(dt_class_names *c);

/* Decodes sample idx of an on-demand dataset into out (C, H, W). Called
 * from several loader threads at once: it must be thread-safe. */
typedef dt_status (*dt_fetch_fn)(void *ctx, int idx, uint8_t *out);

/* Decodes sample idx's whole image for a sample of out_h x out_w pixels
 * taken from the region that pick chooses (asked with the image's full
 * size): *img the decoded image (owned by the caller), *r the region in its
 * pixels, which may be a reduced-scale decoding (dt_image_load_region).
 * Thread-safe, as dt_fetch_fn. */
typedef dt_status (*dt_fetch_region_fn)(void *ctx, int idx, int out_h, int out_w, dt_pick_fn pick, void *pick_ctx,
                                        dt_image *img, dt_rect *r);

typedef struct {
    int n;            /* samples */
    dt_shape shape;   /* per-sample C, H, W */
    int classes;      /* labels are in [0, classes) */
    uint8_t *images;  /* (n, C, H, W), or NULL when fetch decodes each sample on demand */
    dt_label *labels; /* (n), always in memory */
    float mean[DT_DATA_MAX_CHANNELS], std[DT_DATA_MAX_CHANNELS]; /* default 0 and 1 */
    dt_fetch_fn fetch;              /* when images is NULL */
    void *fetch_ctx;                /* owned: freed by fetch_free when the dataset is */
    void (*fetch_free)(void *ctx);
    dt_fetch_region_fn fetch_region; /* folder datasets loaded with regions: the whole images
                                        (fetch_ctx), for RandomResizedCrop; else NULL */
    dt_class_names class_names;     /* folder datasets: the name of each label (n = classes) */
    int skipped;                    /* folder datasets: files left out by skip_bad */
    char *skipped_first;            /* ... the first one's error (NULL when none) */
    int ignored;                    /* folder datasets: files not of an image extension (README,
                                       Thumbs.db), left out as torchvision's ImageFolder does */
    char *ignored_first;            /* ... the first one's path (NULL when none) */
    const float *fimages;           /* arrays data sets: (n, C, H, W) floats, taken as byte / 255
                                       would be (no scaling), or NULL (images then holds bytes) */
    int borrowed;                   /* images, fimages and labels are the caller's (arrays data
                                       sets, dt_dataset_of_arrays): not freed with the data set */
    double scan_s;                  /* folder datasets: seconds spent listing the class folders */
    size_t list_bytes;              /* folder datasets: bytes of the file list (paths, offsets,
                                       labels) built by the scan, kept while images are fetched */
} dt_dataset;

typedef enum {
    DT_DATASET_FASHION_MNIST = 0,
    DT_DATASET_MNIST,
    DT_DATASET_CIFAR10,
    DT_DATASET_SYNTHETIC,
    DT_DATASET_FOLDER,
    DT_DATASET_DARKNET, /* Darknet's FILE.data (--data): image lists labelled by label strings */
    DT_DATASET_ARRAYS,  /* the caller's arrays in memory (the job API, dtrain.h): never a file */
    DT_DATASET_KIND_COUNT
} dt_dataset_kind;

/* "fashion-mnist" | "mnist" | "cifar10" | "synthetic" | "folder" |
 * "darknet" -> kind, -1 if unknown. */
int dt_dataset_kind_from_name(const char *name);
const char *dt_dataset_kind_name(dt_dataset_kind kind);
/* 1 for the kinds read from image files of any size (folder, darknet):
 * decoded and fitted to the model's input, by the folder code. */
int dt_dataset_kind_decodes(dt_dataset_kind kind);
/* Default directory of a kind (Fashion-MNIST: /usr/share/datasets/fashion-mnist). */
const char *dt_dataset_default_dir(dt_dataset_kind kind);

/* One IDX image file (magic 0x00000803, uint8, N x H x W) and its label file
 * (magic 0x00000801, N), each plain or gzip-compressed (detected from the
 * content, not the name). Errors name the file: missing, truncated, wrong
 * magic, counts that disagree, labels >= 10. */
dt_status dt_dataset_load_idx(dt_dataset **out, const char *images_path, const char *labels_path);

/* The same from descriptors open for reading, each read from its current
 * offset to its end and left open; the names stand for the files in
 * messages. dt_dataset_load_idx opens the files and calls this. */
dt_status dt_dataset_load_idx_fd(dt_dataset **out, int images_fd, const char *images_name,
                                 int labels_fd, const char *labels_name);

/* CIFAR-10 binary batches in dir: train = data_batch_1..5.bin (those present,
 * at least one), test = test_batch.bin. Each record: 1 label byte + 3072
 * bytes (3x32x32, channel-major). A file size not a multiple of 3073, or a
 * label >= 10, is an error naming the file. */
dt_status dt_dataset_load_cifar10(dt_dataset **out, const char *dir, int train);

/* One CIFAR-10 batch file from a descriptor open for reading (read from its
 * current offset to its end, left open); name stands for it in messages.
 * The directory loader reads each of its files the same way. */
dt_status dt_dataset_load_cifar10_fd(dt_dataset **out, int fd, const char *name);

/* Seeded synthetic data of any shape: n samples, labels uniform in
 * [0, classes), images random bytes biased by label so it is learnable.
 * A set of at most DT_SYNTHETIC_HELD_BYTES of images is held in memory
 * (Fashion-MNIST's 60000 x 784 bytes: 47 MB, generated at load in well
 * under a second); a larger one keeps its labels only and generates each
 * sample when the loader needs it (fetch: the same bytes, from the seed and
 * the sample's index), so an ImageNet-shaped set (70000 x 3x224x224 would
 * be 10.5 GB) costs O(1) memory and starts at once. */
#define DT_SYNTHETIC_HELD_BYTES ((size_t)64 << 20)
dt_status dt_dataset_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed);

/* How a folder dataset is read (dt_dataset_load_folder). */
typedef struct {
    int threads;         /* decoding threads at load (< 1: one) */
    size_t cache_bytes;  /* the decoded set is held in memory when it needs at most this many
                          * bytes; otherwise each sample is decoded when a batch needs it */
    int skip_bad;        /* leave out files that cannot be read or decoded (counted in
                          * dt_dataset.skipped) instead of failing on the first */
    /* Label the class folders by these names (a checkpoint's, or the train
     * set's for the test set): NULL: the split's own folders, sorted. */
    const dt_class_names *classes;
    int all_classes;     /* with classes: every one must have a folder (else a subset may) */
    const char *classes_from; /* with classes: where they come from, for messages */
    /* A folder with no test split (--val-split F): both splits are read from
     * DIR/train, the test split being the share F of each class's files (at
     * least one, and one left to train), drawn from `seed`. To
     * dt_dataset_load: F in (0, 1), 0 for none. To dt_dataset_load_folder:
     * F loads the held-out files, -F the others. */
    double val_split;
    uint64_t seed;
    int resize;          /* > 0: the shorter side is resized to this, then the centre crop of
                          * the shape is taken (torchvision's Resize(resize) + CenterCrop);
                          * 0: resized to just cover the shape (image.h) */
    int regions;         /* 1: the loader takes regions of the whole images (RandomResizedCrop):
                          * nothing is cached; at load each file is only checked, decoded at
                          * libjpeg-turbo's smallest scale; fetch_region set */
} dt_folder_opts;

/* A quarter of physical memory shared by `ranks` processes: the default
 * cache_bytes of one rank. */
size_t dt_folder_default_cache(int ranks);

/* The images of dir/<class>/ *.jpg|*.jpeg|*.png (case-insensitive
 * extensions; names starting with '.' are ignored), decoded and fitted to
 * shape (image.h; shape.c 1 or 3). Classes are the subfolders sorted
 * bytewise, samples sorted by (class, file name), so every rank and every
 * run sees the same order. Every file is decoded once at load, with
 * o->threads threads: into the dataset when the decoded set fits
 * o->cache_bytes, else only to check it (the dataset then decodes each
 * sample again from its file when a batch needs it, through fetch, bit for
 * bit the same bytes). Files of other extensions, among the class folders
 * or in them, are counted in ds->ignored (not read). Errors name the file
 * or folder: a missing dir, a class folder with no images, a subfolder, an unreadable or undecodable file (those two
 * skipped under skip_bad), a class not among o->classes or missing from
 * dir, more than DT_DATA_MAX_CLASSES classes. x = byte / 255 (mean 0,
 * std 1), as torchvision's ToTensor; callers set ds->mean and std
 * (dt_data_normalise: the model file's mean= and std=). */
dt_status dt_dataset_load_folder(dt_dataset **out, const char *dir, dt_shape shape, const dt_folder_opts *o);

/* 1 if a file of this name is read as an image (.jpg, .jpeg, .png in any
 * case, as torchvision's ImageFolder chooses them), else 0. */
int dt_folder_is_image_name(const char *name);

/* The image files at paths (n >= 1), in that order, as a data set of
 * `classes` classes whose labels are all 0 (dtrain predict): each file is
 * decoded when the loader needs it, by the code and to the shape of a
 * folder data set (shape.c 1 or 3), so a batch is what eval makes of the
 * same file (side: dt_folder_opts.resize). A file that cannot be decoded
 * fails the batch naming it. */
dt_status dt_dataset_of_files(dt_dataset **out, const char *const *paths, int n, dt_shape shape, int side,
                              int classes);

/* Darknet's data file, FILE.data: `key=value` lines read as Darknet's
 * read_data_cfg reads them (spaces and tabs removed wherever they are;
 * empty lines and lines starting with '#' or ';' skipped), a trailing '\r'
 * dropped. Paths are used as written: a relative one is relative to the
 * current directory, where Darknet's fopen() finds it. Keys: classes
 * (required, 1..DT_DATA_MAX_CLASSES), train, valid, labels, names, backup,
 * top (>= 1); eval, map, results, leaves and test (read by Darknet's
 * detector and segmenter) are accepted and unused. Errors name the file and
 * line: not key=value, no value, a key given twice, an unknown key, tree=
 * (hierarchical softmax) and tag=1 (labels from tag files), which dtrain
 * does not do. */
typedef struct {
    char *path;     /* the file read (a copy) */
    int classes;
    int top;        /* 0: not given */
    char *train, *valid, *labels, *names, *backup; /* NULL: not given */
    char *tree;     /* Darknet's hierarchical softmax's tree file (NULL: not given): labels= must list
                       its nodes' names in its order, an image's label being its node */
} dt_darknet_data;

dt_status dt_darknet_data_read(dt_darknet_data *d, const char *path);
/* Frees and empties d (a zeroed d is a no-op). */
void dt_darknet_data_free(dt_darknet_data *d);

/* The names classes are shown by: names= one a line, else labels= (as
 * Darknet's classifier predict does); classes= of them. */
dt_status dt_darknet_class_names(dt_class_names *out, const dt_darknet_data *d);

/* The images of d's train= (train 1) or valid= list, one path a line
 * (blank lines skipped), each labelled as Darknet's fill_truth labels it:
 * by the one label of labels= (one a line, classes= of them, none empty
 * or repeated) that occurs in the path as a substring. A path holding
 * none or two, a missing list, an empty list and (without o->skip_bad) a
 * missing image are errors naming the list and the line. Read as a folder
 * data set (o, NULL: one thread, the default cache), with
 * dt_darknet_class_names as class names. */
dt_status dt_dataset_load_darknet(dt_dataset **out, const dt_darknet_data *d, int train, dt_shape shape,
                                  const dt_folder_opts *o);

/* Dispatch on kind: IDX files train-images-idx3-ubyte[.gz] etc. in dir for
 * the MNIST kinds, CIFAR-10 batches for cifar10. Synthetic uses `shape`,
 * `classes` classes (the model's outputs; 0: 10; the other kinds ignore
 * it), 60000/10000 samples for train/test. Folder reads dir/train
 * or dir/test with fo (NULL: one thread, the default cache, no skipping,
 * the folder's own classes), or with fo->val_split both from dir/train (a
 * dir/test is then an error). */
dt_status dt_dataset_load(dt_dataset **out, dt_dataset_kind kind, const char *dir, int train,
                          dt_shape shape, int classes, uint64_t seed, const dt_folder_opts *fo);

void dt_dataset_free(dt_dataset *ds);

/* Images and labels in the caller's memory: n samples of shape, as bytes
 * (u8, scaled by 1/255 as IDX images are) or floats (f32, taken as they
 * are; RandomResizedCrop needs bytes), exactly one of the two; labels in
 * [0, classes). */
typedef struct {
    int n;
    dt_shape shape;
    const uint8_t *u8;     /* (n, C, H, W) or NULL */
    const float *f32;      /* (n, C, H, W) or NULL */
    const dt_label *labels; /* (n) */
} dt_array_set;

/* A run's arrays: its training set and test set (test.n == 0: none). */
typedef struct {
    dt_array_set train, test;
} dt_arrays;

/* A data set over a's memory, not copied (borrowed: a must outlive it),
 * with `classes` classes; DT_ERR_USAGE naming `what` for a shape, count or
 * label that does not fit. */
dt_status dt_dataset_of_arrays(dt_dataset **out, const dt_array_set *a, int classes, const char *what);

/* Darknet's classifier augmentation, its [net] keys of the same names
 * (src/data/augment.h has the formulas). Neutral: crop 0, angle 0, aspect
 * 1, hue 0, saturation 1, exposure 1. */
typedef struct {
    int crop;               /* 1: a scaled (and rotated, stretched) random crop of the output's
                               size, which may differ from the images' */
    int min_crop, max_crop; /* the scaled image's shorter side, drawn in [min, max] */
    float angle;            /* rotation drawn in [-angle, angle] degrees */
    float aspect;           /* width stretch drawn in [1, aspect] or its inverse */
    float hue;              /* hue shift drawn in [-hue, hue] of the full circle (3 channels) */
    float saturation;       /* saturation factor drawn in [1, s] or its inverse (3 channels) */
    float exposure;         /* value (brightness) factor, likewise */
    /* torchvision's RandomResizedCrop (augment=resized_crop): a region of a
     * random share of the image's area in [scale[0], scale[1]] and aspect
     * ratio (w / h) log-uniform in [ratio[0], ratio[1]], resized
     * bilinearly to the output's size (dt_augment_rrc_pick,
     * dt_augment_resize_region in src/data/augment.h). */
    int resized_crop;
    float scale[2], ratio[2];
} dt_augment;

/* 1 when a's colour distortion changes anything. */
static inline int dt_augment_distorts(const dt_augment *a) {
    return a->hue != 0 || a->saturation != 1 || a->exposure != 1;
}

typedef struct {
    int batch;          /* samples per batch on this worker */
    int worker, workers; /* this worker's shard (worker index r in 0..W-1) among W workers */
    uint64_t seed;      /* shuffle and augmentation */
    int shuffle;        /* 1: training order (permutation per epoch, drop_last) */
    int flip;           /* 1: random horizontal flip (training) */
    int crop_pad;       /* >0: random crop of the original size from the image zero-padded by this */
    float erase;        /* training: probability of random erasing, after the other augmentation
                           (dt_augment_erase in src/data/augment.h; 0: none) */
    const dt_augment *augment; /* training: Darknet's augmentation (NULL: none); must outlive
                                  the loader */
    dt_shape out;       /* per-sample shape of the batches; zero: the dataset's. It may differ
                           from the dataset's in H and W only: training then needs augment.crop
                           or augment.resized_crop,
                           evaluation resizes and centre-crops as Darknet's classifier does */
    int prefetch;       /* 1: build the next batch in a background thread */
    int threads;        /* threads building a batch's samples, the builder's own included
                         * (< 1: one); they decode on-demand datasets' samples */
    dt_timeline *timeline; /* the prefetch thread's batches (NULL: off) */
} dt_loader_cfg;

typedef struct dt_loader dt_loader;

/* The dataset must outlive the loader. */
dt_status dt_loader_create(dt_loader **out, const dt_dataset *ds, const dt_loader_cfg *cfg);

/* Batches this worker gets in one epoch (training: N / (B*W); eval: ceil of
 * this worker's range / B). */
int dt_loader_steps_per_epoch(const dt_loader *l);

/* Position the loader at (epoch, step within epoch): the next batch is that
 * one. Used at start (0, 0) and on resume. */
dt_status dt_loader_seek(dt_loader *l, int epoch, int step);

/* The next batch: *x (n, C, H, W) normalised floats, *y (n) labels, *n the
 * count (== batch except the eval tail). Pointers stay valid until the next
 * call. At the end of an epoch returns *n = 0 once; the call after that
 * starts the next epoch. Fails only when an on-demand dataset cannot
 * decode a sample (the position then stays at that batch). */
dt_status dt_loader_next(dt_loader *l, const float **x, const dt_label **y, int *n);

/* Current position (epoch, step of the batch the next call returns). */
void dt_loader_position(const dt_loader *l, int *epoch, int *step);

void dt_loader_free(dt_loader *l);

#endif
