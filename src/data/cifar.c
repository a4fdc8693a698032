/* CIFAR-10 binary batches: records of 1 label byte + 3x32x32 image bytes
 * (channel-major: 1024 red, 1024 green, 1024 blue), no header. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/internal.h"
#include "dtrain/mem.h"

enum { CIFAR_SIDE = 32, CIFAR_IMAGE = 3 * 32 * 32, CIFAR_RECORD = 1 + 3 * 32 * 32,
       CIFAR_CLASSES = 10, CIFAR_TRAIN_BATCHES = 5 };

/* Appends the records of one batch file to raw and checks them; the labels
 * are checked here so that errors give the index within this file. */
static dt_status read_batch(dt_data_buf *raw, int fd, const char *name) {
    gzFile f;
    DT_TRY(dt_data_gz(&f, fd, name));
    size_t before = raw->len;
    dt_status s = dt_data_read(raw, f, DT_MAX_ALLOC, name);
    if (s == DT_OK && raw->len == DT_MAX_ALLOC && dt_data_more(f))
        s = dt_fail(DT_ERR_NOMEM, "%s: CIFAR-10 data over the %zu GiB limit", name,
                    DT_MAX_ALLOC >> 30);
    gzclose(f);
    DT_TRY(s);
    size_t bytes = raw->len - before;
    if (bytes == 0 || bytes % CIFAR_RECORD != 0)
        return dt_fail(DT_ERR_FORMAT,
                       "%s: size %zu bytes is not a positive multiple of the %d-byte CIFAR-10 record",
                       name, bytes, CIFAR_RECORD);
    return dt_data_check_label_bytes(raw->p + before, bytes / CIFAR_RECORD, CIFAR_RECORD, CIFAR_CLASSES,
                                name);
}

static dt_status read_batch_file(dt_data_buf *raw, const char *path) {
    int fd;
    DT_TRY(dt_data_open(&fd, path));
    dt_status s = read_batch(raw, fd, path);
    close(fd);
    return s;
}

/* Reads the batch files of the split into raw (records back to back). */
static dt_status read_split(dt_data_buf *raw, const char *dir, int train) {
    char path[4096];
    if (!train) {
        snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        return read_batch_file(raw, path);
    }
    int found = 0;
    for (int i = 1; i <= CIFAR_TRAIN_BATCHES; i++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i);
        if (access(path, F_OK) != 0) continue;
        DT_TRY(read_batch_file(raw, path));
        found++;
    }
    if (!found)
        return dt_fail(DT_ERR_IO, "cannot open %s/data_batch_1.bin .. data_batch_%d.bin: no such file",
                       dir, CIFAR_TRAIN_BATCHES);
    return DT_OK;
}

/* *out = the dataset of the records in raw if s (the status of reading
 * them) is DT_OK; frees raw either way and returns the outcome. */
static dt_status to_dataset(dt_dataset **out, dt_data_buf *raw, dt_status s) {
    *out = NULL;
    if (s == DT_OK) {
        dt_shape shape = {3, CIFAR_SIDE, CIFAR_SIDE};
        s = dt_data_new(out, (int)(raw->len / CIFAR_RECORD), shape, CIFAR_CLASSES);
    }
    if (s == DT_OK) {
        dt_dataset *ds = *out;
        for (int i = 0; i < ds->n; i++) {
            const uint8_t *rec = raw->p + (size_t)i * CIFAR_RECORD;
            ds->labels[i] = rec[0];
            memcpy(ds->images + (size_t)i * CIFAR_IMAGE, rec + 1, CIFAR_IMAGE);
        }
    }
    dt_data_buf_free(raw);
    return s;
}

dt_status dt_dataset_load_cifar10(dt_dataset **out, const char *dir, int train) {
    dt_data_buf raw = {0};
    dt_status s = read_split(&raw, dir, train);
    return to_dataset(out, &raw, s);
}

dt_status dt_dataset_load_cifar10_fd(dt_dataset **out, int fd, const char *name) {
    dt_data_buf raw = {0};
    dt_status s = read_batch(&raw, fd, name);
    return to_dataset(out, &raw, s);
}
