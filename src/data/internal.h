/* Helpers shared by the dataset readers in src/data/ (not public API).
 *
 * Files are read through zlib's gz* functions, which read plain and
 * gzip-compressed files alike (detected from the content). Payloads are read
 * into a buffer that grows only as data actually arrives, so a header that
 * claims far more data than the file holds is reported as truncation after
 * at most twice the file's real size has been allocated. */
#ifndef DTRAIN_DATA_INTERNAL_H
#define DTRAIN_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "dtrain/data.h"

/* Growing byte buffer: p holds len valid bytes of cap allocated. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} dt_data_buf;

/* Opens path read-only into *fd; DT_ERR_IO "cannot open PATH: reason" on failure. */
dt_status dt_data_open(int *fd, const char *path);

/* A reader of fd's bytes from its current offset, plain or gzip. It reads
 * through its own duplicate of fd, so gzclose(*f) leaves fd to the caller. */
dt_status dt_data_gz(gzFile *f, int fd, const char *name);

/* Appends bytes from f to b until end of file or until b->len == max.
 * A gzip stream that ends early counts as end of file (the caller reports
 * the truncation in its own units); other read errors are DT_ERR_IO. */
dt_status dt_data_read(dt_data_buf *b, gzFile f, size_t max, const char *path);

/* 1 if f has at least one more byte, 0 at end of file. */
int dt_data_more(gzFile f);

void dt_data_buf_free(dt_data_buf *b);

/* Shrinks b's allocation to its length (a list kept for a whole run
 * should not keep doubling's slack, up to half its size). */
dt_status dt_data_buf_fit(dt_data_buf *b, const char *what);
/* Appends n bytes to b (growing it by doubling). */
dt_status dt_data_buf_put(dt_data_buf *b, const void *bytes, size_t n, const char *what);

/* A dataset with zeroed images (n, C, H, W) and labels (n), normalisation
 * mean 0 / std 1 (x = byte / 255, as the PyTorch reference scripts). */
dt_status dt_data_new(dt_dataset **out, int n, dt_shape shape, int classes);
/* The same without images (NULL: the caller provides them or a fetch). */
dt_status dt_data_new_labels(dt_dataset **out, int n, dt_shape shape, int classes);

/* The image files at paths (n), labelled (labels[i] < names->n), as a
 * folder data set is made of its scan (folder.c): decoded once with
 * o->threads threads, held within o->cache_bytes or fetched per batch,
 * o->skip_bad honoured; ds->class_names a copy of names. */
dt_status dt_data_list_dataset(dt_dataset **out, const char *const *paths, const dt_label *labels, int n,
                               dt_shape shape, const dt_class_names *names, const dt_folder_opts *o);

/* 1 if C is 1..DT_DATA_MAX_CHANNELS and H, W are 1..DT_DATA_MAX_DIM. */
int dt_data_shape_ok(dt_shape s);

/* DT_ERR_FORMAT naming path and the index of the first label byte >= classes
 * in a file's bytes: label i is bytes[i * stride] (stride 1, or the record
 * size of files that interleave labels and images). */
dt_status dt_data_check_label_bytes(const uint8_t *bytes, size_t n, size_t stride, int classes, const char *path);
/* The same for a data set's labels (n): each in [0, classes). */
dt_status dt_data_check_labels(const dt_label *labels, size_t n, int classes, const char *path);

/* dt_dataset_synthetic with a sample stream: the class templates depend on
 * seed only, the samples on (seed, stream), so a train set (stream 0) and a
 * test set (stream 1) share their classes but not their samples. Its images
 * are held when they take at most held_bytes (DT_SYNTHETIC_HELD_BYTES;
 * tests pass 0 to have a small set generated per sample). */
dt_status dt_data_synthetic(dt_dataset **out, dt_shape shape, int classes, int n, uint64_t seed,
                            uint64_t stream, size_t held_bytes);

#endif
