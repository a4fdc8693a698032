/* Darknet's .weights files (darknet_weights.h): the net's sections as a
 * list of arrays in the file's order, which loading fills and saving
 * writes, so that the two directions cannot disagree about the order. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/checkpoint.h"
#include "dtrain/darknet_weights.h"
#include "dtrain/mem.h"
#include "dtrain/net.h"

/* One array of the file: n floats of the net at a (a view of its parameter
 * or state block), of the section that starts with dtrain layer `layer`.
 * rows x cols: a connected layer's weights (outputs, inputs), 0 x 0 for
 * the others. absent: a [batchnorm]'s shift, not in the file (0). */
typedef struct {
    float *a;
    size_t n, rows, cols;
    int layer, absent;
} chunk;

/* Room for the most chunks a net of nlayers layers has (4 per section). */
typedef struct {
    chunk *c;
    int n;
} plan;

static void add(plan *p, float *a, size_t n, int layer) {
    p->c[p->n++] = (chunk){a, n, 0, 0, layer, 0};
}

/* "the [convolutional] section of line 12 (dtrain layer 3)" */
static const char *section_name(char *buf, size_t cap, const dt_net *net, int layer) {
    const dt_layer *l = &net->layers[layer];
    snprintf(buf, cap, "the [%s] section of line %d (dtrain layer %d)", l->ops->name, l->spec.line, layer);
    return buf;
}

/* The arrays of the net's sections in Darknet's order (the plan's chunks
 * are allocated: dt_free(p->c); NULL after a failure). A conv or connected
 * layer followed by a batch norm of the same section (model-file line) is
 * one section with batch_normalize=1: the batch norm's beta is Darknet's
 * biases. */
static dt_status make_plan(plan *p, const dt_net *net, const char *path) {
    void *mem;
    DT_TRY(dt_alloc_bytes(&mem, 4 * (size_t)net->nlayers * sizeof(chunk), "Darknet weights plan"));
    p->c = mem;
    p->n = 0;
    char sec[160];
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        dt_layer_kind kind = l->spec.kind;
        if (l->nw + l->nb + l->nstate == 0) continue;
        const dt_layer *bn = i + 1 < net->nlayers && net->layers[i + 1].spec.kind == DT_LAYER_BATCHNORM &&
                                     net->layers[i + 1].spec.line == l->spec.line
                                 ? &net->layers[i + 1]
                                 : NULL;
        if (kind == DT_LAYER_CONV || kind == DT_LAYER_DENSE) {
            /* The section's own bias when it has no batch norm, else none */
            if ((bn != NULL) == (l->nb != 0)) {
                dt_free(p->c);
                p->c = NULL;
                return dt_fail(DT_ERR_CONFIG, "%s: %s has %s bias and %s batch norm: not a Darknet section",
                               path, section_name(sec, sizeof sec, net, i), l->nb ? "a" : "no", bn ? "a" : "no");
            }
            float *bias = bn ? bn->b : l->b;
            size_t nout = bn ? bn->nb : l->nb;
            add(p, bias, nout, i);
            if (kind == DT_LAYER_CONV && bn) {
                add(p, bn->w, bn->nw, i);
                add(p, bn->state, bn->nstate / 2, i);
                add(p, bn->state + bn->nstate / 2, bn->nstate / 2, i);
            }
            add(p, l->w, l->nw, i);
            if (kind == DT_LAYER_DENSE) {
                chunk *w = &p->c[p->n - 1];
                w->rows = nout, w->cols = l->nw / nout;
                if (bn) {
                    add(p, bn->w, bn->nw, i);
                    add(p, bn->state, bn->nstate / 2, i);
                    add(p, bn->state + bn->nstate / 2, bn->nstate / 2, i);
                }
            }
            i += bn != NULL;
        } else if (kind == DT_LAYER_BATCHNORM) {
            add(p, l->w, l->nw, i);
            add(p, l->state, l->nstate / 2, i);
            add(p, l->state + l->nstate / 2, l->nstate / 2, i);
            add(p, l->b, l->nb, i);
            p->c[p->n - 1].absent = 1;
        } else {
            dt_free(p->c);
            p->c = NULL;
            return dt_fail(DT_ERR_CONFIG, "%s: %s has parameters that Darknet's weights files do not hold", path,
                           section_name(sec, sizeof sec, net, i));
        }
    }
    return DT_OK;
}

static size_t plan_floats(const plan *p) {
    size_t n = 0;
    for (int k = 0; k < p->n; k++) n += p->c[k].absent ? 0 : p->c[k].n;
    return n;
}

int dt_darknet_weights_is(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int32_t h[3];
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got != sizeof h || memcmp(h, DT_CKPT_MAGIC, DT_CKPT_MAGIC_BYTES / 2) == 0) return 0;
    for (int k = 0; k < 3; k++)
        if (h[k] < 0 || h[k] >= 65536) return 0;
    return 1;
}

/* path open for reading at its start in *f, its size in *n. */
static dt_status open_sized(FILE **f, size_t *n, const char *path) {
    *f = fopen(path, "rb");
    if (!*f) return dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    long size = -1;
    if (fseek(*f, 0, SEEK_END) == 0) size = ftell(*f);
    if (size < 0 || fseek(*f, 0, SEEK_SET) != 0) {
        dt_status s = dt_fail(DT_ERR_IO, "%s: cannot find its size: %s", path, strerror(errno));
        fclose(*f);
        return s;
    }
    *n = (size_t)size;
    return DT_OK;
}

static dt_status read_exact(FILE *f, void *buf, size_t n, const char *path) {
    if (fread(buf, 1, n, f) == n) return DT_OK;
    return dt_fail(DT_ERR_IO, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "file shrank while read");
}

/* Darknet's header: its bytes (20, or 16 with seen as i32), seen, and
 * whether connected weights are stored transposed. */
typedef struct {
    int32_t major, minor, revision;
    uint64_t seen;
    size_t bytes;
    int transpose;
} header;

/* buf: the file's first 20 bytes (zeros beyond its end), n: its size. */
static dt_status parse_header(header *h, const unsigned char buf[20], size_t n, const char *path) {
    int32_t v[3];
    if (n < 16)
        return dt_fail(DT_ERR_FORMAT, "%s: %zu bytes, shorter than a Darknet weights header (16)", path, n);
    memcpy(v, buf, sizeof v);
    h->major = v[0], h->minor = v[1], h->revision = v[2];
    /* parser.c: seen is a size_t from version 0.2 on, unless major or minor
     * is 1000 or more (files whose connected weights are transposed) */
    int wide = (int64_t)h->major * 10 + h->minor >= 2 && h->major < 1000 && h->minor < 1000;
    h->transpose = h->major > 1000 || h->minor > 1000;
    if (wide) {
        memcpy(&h->seen, buf + 12, sizeof h->seen);
        h->bytes = 20;
    } else {
        int32_t seen;
        memcpy(&seen, buf + 12, sizeof seen);
        h->seen = (uint64_t)(uint32_t)seen;
        h->bytes = 16;
    }
    if (n < h->bytes)
        return dt_fail(DT_ERR_FORMAT, "%s: %zu bytes, shorter than its Darknet %d.%d header (%zu)", path, n,
                       h->major, h->minor, h->bytes);
    return DT_OK;
}

/* The file's floats must be exactly the plan's: a short file names the
 * section it ends in, a long one the bytes left over. */
static dt_status check_size(const plan *p, const dt_net *net, const header *h, size_t n, const char *path) {
    size_t have = n - h->bytes, need = plan_floats(p) * sizeof(float), at = 0;
    char sec[160];
    if (have < need) {
        for (int k = 0; k < p->n; k++) {
            at += p->c[k].absent ? 0 : p->c[k].n * sizeof(float);
            if (at > have)
                return dt_fail(DT_ERR_FORMAT, "%s: Darknet weights end inside %s: the model needs %zu bytes of "
                               "arrays after the %zu-byte header, the file holds %zu (truncated, or another model "
                               "file's weights)", path, section_name(sec, sizeof sec, net, p->c[k].layer), need,
                               h->bytes, have);
        }
    }
    if (have != need)
        return dt_fail(DT_ERR_FORMAT, "%s: %zu bytes left after the last section's arrays: the model needs %zu "
                       "bytes after the %zu-byte header, the file holds %zu (another model file's weights?)", path,
                       have - need, need, h->bytes, have);
    return DT_OK;
}

/* Reads the file whole and checks its size against the net's sections
 * before anything is copied into the net. */
dt_status dt_darknet_weights_load(const char *path, const dt_net *net, uint64_t *seen) {
    FILE *f = NULL;
    size_t n = 0;
    DT_TRY(open_sized(&f, &n, path));
    unsigned char head[20] = {0}, *body = NULL;
    plan p = {NULL, 0};
    header h = {0};
    dt_status s = read_exact(f, head, n < sizeof head ? n : sizeof head, path);
    if (s == DT_OK) s = parse_header(&h, head, n, path);
    if (s == DT_OK) s = make_plan(&p, net, path);
    if (s == DT_OK) s = check_size(&p, net, &h, n, path);
    void *mem = NULL;
    if (s == DT_OK) s = dt_alloc_bytes(&mem, n - h.bytes, "Darknet weights");
    if (s == DT_OK && fseek(f, (long)h.bytes, SEEK_SET) != 0)
        s = dt_fail(DT_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    if (s == DT_OK) s = read_exact(f, mem, n - h.bytes, path);
    fclose(f);
    body = mem;
    for (int k = 0; s == DT_OK && k < p.n; k++) {
        const chunk *c = &p.c[k];
        if (c->absent) {
            memset(c->a, 0, c->n * sizeof(float));
            continue;
        }
        if (h.transpose && c->rows) { /* stored (inputs, outputs) */
            for (size_t o = 0; o < c->rows; o++)
                for (size_t i = 0; i < c->cols; i++)
                    memcpy(&c->a[o * c->cols + i], body + (i * c->rows + o) * sizeof(float), sizeof(float));
        } else {
            memcpy(c->a, body, c->n * sizeof(float));
        }
        body += c->n * sizeof(float);
    }
    if (s == DT_OK) *seen = h.seen;
    dt_free(p.c);
    dt_free(mem);
    return s;
}

dt_status dt_darknet_weights_save(const char *path, const dt_net *net, uint64_t seen) {
    plan p;
    DT_TRY(make_plan(&p, net, path));
    char sec[160];
    dt_status s = DT_OK;
    for (int k = 0; s == DT_OK && k < p.n; k++)
        for (size_t j = 0; p.c[k].absent && j < p.c[k].n && s == DT_OK; j++)
            if (p.c[k].a[j] != 0.0f)
                s = dt_fail(DT_ERR_CONFIG, "%s: %s has a learned shift (beta of channel %zu is %g), which Darknet's "
                            "[batchnorm] neither learns nor stores", path,
                            section_name(sec, sizeof sec, net, p.c[k].layer), j, (double)p.c[k].a[j]);
    size_t bytes = 20 + plan_floats(&p) * sizeof(float);
    void *mem = NULL;
    if (s == DT_OK) s = dt_alloc_bytes(&mem, bytes, "Darknet weights file");
    if (s == DT_OK) {
        unsigned char *buf = mem, *at = buf + 20;
        const int32_t version[3] = {0, 2, 0}; /* what Darknet's save_weights_upto writes */
        memcpy(buf, version, sizeof version);
        memcpy(buf + 12, &seen, sizeof seen);
        for (int k = 0; k < p.n; k++) {
            if (p.c[k].absent) continue;
            memcpy(at, p.c[k].a, p.c[k].n * sizeof(float));
            at += p.c[k].n * sizeof(float);
        }
        s = dt_write_file_atomic(path, buf, bytes);
    }
    dt_free(mem);
    dt_free(p.c);
    return s;
}
