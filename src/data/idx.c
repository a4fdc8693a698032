/* IDX files (MNIST, Fashion-MNIST): a big-endian header (magic, then one
 * uint32 per dimension), then the uint8 payload, row-major. */
#include <string.h>
#include <unistd.h>

#include "data/internal.h"
#include "dtrain/mem.h"

enum { IDX_MAGIC_IMAGES = 0x00000803, IDX_MAGIC_LABELS = 0x00000801, IDX_CLASSES = 10 };

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Header and payload of an open IDX file. dims (ndims): dims[0] items of
 * dims[1] x ... bytes each. Every dimension is bounded before the payload is
 * read, and the payload buffer only grows as bytes arrive. */
static dt_status parse_idx(gzFile f, const char *path, uint32_t magic, int ndims,
                           const char *unit, uint32_t *dims, dt_data_buf *payload) {
    uint8_t header[16];
    size_t header_len = 4 + 4 * (size_t)ndims;
    /* A buffer over the stack array: max <= cap, so it never grows or frees. */
    dt_data_buf hb = {header, 0, sizeof header};
    DT_TRY(dt_data_read(&hb, f, header_len, path));
    if (hb.len < header_len)
        return dt_fail(DT_ERR_FORMAT, "%s: truncated: the IDX header is %zu bytes, file ends after %zu",
                       path, header_len, hb.len);
    uint32_t found = be32(header);
    if (found != magic)
        return dt_fail(DT_ERR_FORMAT, "%s: bad magic 0x%08x, expected 0x%08x (IDX uint8 %s)", path,
                       found, magic, unit);
    size_t item = 1;
    for (int d = 0; d < ndims; d++) {
        dims[d] = be32(header + 4 + 4 * d);
        if (d == 0 && (dims[0] == 0 || dims[0] > DT_DATA_MAX_SAMPLES))
            return dt_fail(DT_ERR_FORMAT, "%s: header claims %u %s (must be 1..%d)", path, dims[0],
                           unit, DT_DATA_MAX_SAMPLES);
        if (d > 0 && (dims[d] == 0 || dims[d] > DT_DATA_MAX_DIM))
            return dt_fail(DT_ERR_FORMAT, "%s: header claims dimension %d of size %u (must be 1..%d)",
                           path, d, dims[d], DT_DATA_MAX_DIM);
        if (d > 0) item *= dims[d];
    }
    size_t expected;
    DT_TRY(dt_mul_size(&expected, dims[0], item, path));
    DT_TRY(dt_data_read(payload, f, expected, path));
    if (payload->len < expected)
        return dt_fail(DT_ERR_FORMAT, "%s: truncated: expected %u %s, file ends after %zu", path,
                       dims[0], unit, payload->len / item);
    if (dt_data_more(f))
        return dt_fail(DT_ERR_FORMAT, "%s: data after the %u %s the header declares", path,
                       dims[0], unit);
    return DT_OK;
}

static dt_status read_idx(int fd, const char *name, uint32_t magic, int ndims, const char *unit,
                          uint32_t *dims, dt_data_buf *payload) {
    gzFile f;
    DT_TRY(dt_data_gz(&f, fd, name));
    dt_status s = parse_idx(f, name, magic, ndims, unit, dims, payload);
    gzclose(f);
    return s;
}

dt_status dt_dataset_load_idx_fd(dt_dataset **out, int images_fd, const char *images_name,
                                 int labels_fd, const char *labels_name) {
    *out = NULL;
    uint32_t idims[3] = {0, 0, 0}, ldims[1] = {0};
    dt_data_buf images = {0}, labels = {0};
    dt_status s = read_idx(images_fd, images_name, IDX_MAGIC_IMAGES, 3, "images", idims, &images);
    if (s == DT_OK)
        s = read_idx(labels_fd, labels_name, IDX_MAGIC_LABELS, 1, "labels", ldims, &labels);
    if (s == DT_OK && idims[0] != ldims[0])
        s = dt_fail(DT_ERR_FORMAT, "%s has %u images but %s has %u labels", images_name, idims[0],
                    labels_name, ldims[0]);
    if (s == DT_OK) s = dt_data_check_label_bytes(labels.p, labels.len, 1, IDX_CLASSES, labels_name);
    if (s == DT_OK) {
        dt_shape shape = {1, (int)idims[1], (int)idims[2]};
        s = dt_data_new(out, (int)idims[0], shape, IDX_CLASSES);
    }
    if (s == DT_OK) {
        memcpy((*out)->images, images.p, images.len);
        for (size_t i = 0; i < labels.len; i++) (*out)->labels[i] = labels.p[i];
    }
    dt_data_buf_free(&images);
    dt_data_buf_free(&labels);
    return s;
}

dt_status dt_dataset_load_idx(dt_dataset **out, const char *images_path, const char *labels_path) {
    *out = NULL;
    int images_fd, labels_fd;
    DT_TRY(dt_data_open(&images_fd, images_path));
    dt_status s = dt_data_open(&labels_fd, labels_path);
    if (s == DT_OK) {
        s = dt_dataset_load_idx_fd(out, images_fd, images_path, labels_fd, labels_path);
        close(labels_fd);
    }
    close(images_fd);
    return s;
}
