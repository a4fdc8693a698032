/* ONNX model builder over protobuf-c (see onnx_builder.h). */
#include "export/onnx_builder.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/checkpoint.h"
#include "onnx/onnx.pb-c.h"

/* Most attributes one node gets (Conv: kernel_shape, strides, pads, group, dilations). */
#define MAX_ATTRS 8

/* A growable array of message pointers, handed to protobuf-c as is. */
typedef struct {
    void **v;
    size_t n, cap;
} ptr_vec;

struct dt_onnx {
    int failed;
    ptr_vec allocs;  /* every block the builder allocated (freed at the end) */
    ptr_vec nodes, inits, inputs, outputs, metas;
};

static int vec_push(ptr_vec *v, void *p) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        void **nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv, v->cap = cap;
    }
    v->v[v->n++] = p;
    return 0;
}

/* Zeroed block owned by the builder; NULL (and the builder marked) on failure. */
static void *alloc(dt_onnx *m, size_t n) {
    if (m->failed) return NULL;
    void *p = calloc(1, n ? n : 1);
    if (!p || vec_push(&m->allocs, p) != 0) {
        free(p);
        m->failed = 1;
        return NULL;
    }
    return p;
}

static char *copy_str(dt_onnx *m, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = alloc(m, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends p to v, or marks the builder when p is NULL or v cannot grow. */
static void push(dt_onnx *m, ptr_vec *v, void *p) {
    if (!p || vec_push(v, p) != 0) m->failed = 1;
}

dt_status dt_onnx_create(dt_onnx **out) {
    *out = calloc(1, sizeof **out);
    return *out ? DT_OK : dt_fail(DT_ERR_NOMEM, "export: out of memory");
}

void dt_onnx_free(dt_onnx *m) {
    if (!m) return;
    for (size_t i = 0; i < m->allocs.n; i++) free(m->allocs.v[i]);
    ptr_vec *vs[] = {&m->allocs, &m->nodes, &m->inits, &m->inputs, &m->outputs, &m->metas};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) free(vs[i]->v);
    free(m);
}

dt_status dt_onnx_status(const dt_onnx *m) {
    return m->failed ? dt_fail(DT_ERR_NOMEM, "export: out of memory building the ONNX graph")
                     : DT_OK;
}

const char *dt_onnx_name(dt_onnx *m, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    DT_ASSERT(n >= 0 && n < (int)sizeof buf); /* the exporter's names are short */
    const char *s = m->failed ? NULL : copy_str(m, buf);
    return s ? s : "";
}

void *dt_onnx_node(dt_onnx *m, const char *op, const char *const *inputs, int ninputs,
                   const char *output) {
    Onnx__NodeProto *n = alloc(m, sizeof *n);
    char **in = alloc(m, (size_t)ninputs * sizeof *in);
    char **out = alloc(m, sizeof *out);
    Onnx__AttributeProto **attrs = alloc(m, MAX_ATTRS * sizeof *attrs);
    if (!n || !in || !out || !attrs) return NULL;
    onnx__node_proto__init(n);
    for (int i = 0; i < ninputs; i++) in[i] = copy_str(m, inputs[i]);
    out[0] = copy_str(m, output);
    n->op_type = copy_str(m, op);
    n->name = copy_str(m, output); /* one output per node: its name names the node */
    n->input = in, n->n_input = (size_t)ninputs;
    n->output = out, n->n_output = 1;
    n->attribute = attrs;
    push(m, &m->nodes, n);
    return m->failed ? NULL : n;
}

static Onnx__AttributeProto *new_attr(dt_onnx *m, void *node, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    Onnx__NodeProto *n = node;
    if (!n || m->failed) return NULL;
    DT_ASSERT(n->n_attribute < MAX_ATTRS);
    Onnx__AttributeProto *a = alloc(m, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = copy_str(m, name);
    a->has_type = 1, a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void dt_onnx_attr_int(dt_onnx *m, void *node, const char *name, int64_t v) {
    Onnx__AttributeProto *a = new_attr(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
}

void dt_onnx_attr_float(dt_onnx *m, void *node, const char *name, float v) {
    Onnx__AttributeProto *a = new_attr(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = v;
}

void dt_onnx_attr_ints(dt_onnx *m, void *node, const char *name, const int64_t *v, int n) {
    Onnx__AttributeProto *a = new_attr(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *vals = alloc(m, (size_t)n * sizeof *vals);
    if (!a || !vals) return;
    memcpy(vals, v, (size_t)n * sizeof *vals);
    a->ints = vals, a->n_ints = (size_t)n;
}

static Onnx__TensorProto *new_init(dt_onnx *m, const char *name, const int64_t *dims, int ndims,
                                   Onnx__TensorProto__DataType type) {
    Onnx__TensorProto *t = alloc(m, sizeof *t);
    int64_t *d = alloc(m, (size_t)ndims * sizeof *d);
    if (!t || !d) return NULL;
    onnx__tensor_proto__init(t);
    memcpy(d, dims, (size_t)ndims * sizeof *d);
    t->dims = d, t->n_dims = (size_t)ndims;
    t->has_data_type = 1, t->data_type = type;
    t->name = copy_str(m, name);
    push(m, &m->inits, t);
    return m->failed ? NULL : t;
}

void dt_onnx_init_floats(dt_onnx *m, const char *name, const int64_t *dims, int ndims,
                         const float *data) {
    Onnx__TensorProto *t = new_init(m, name, dims, ndims, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    if (!t) return;
    size_t n = 1;
    for (int i = 0; i < ndims; i++) n *= (size_t)dims[i];
    /* protobuf-c only reads the array while packing; the const is kept in spirit. */
    t->float_data = (float *)(uintptr_t)data, t->n_float_data = n;
}

void dt_onnx_init_fill(dt_onnx *m, const char *name, const int64_t *dims, int ndims, float v) {
    size_t n = 1;
    for (int i = 0; i < ndims; i++) n *= (size_t)dims[i];
    float *data = alloc(m, n * sizeof *data);
    if (!data) return;
    for (size_t i = 0; i < n; i++) data[i] = v;
    dt_onnx_init_floats(m, name, dims, ndims, data);
}

void dt_onnx_init_int64s(dt_onnx *m, const char *name, const int64_t *v, int n) {
    int64_t dim = n;
    Onnx__TensorProto *t = new_init(m, name, &dim, 1, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    int64_t *vals = alloc(m, (size_t)n * sizeof *vals);
    if (!t || !vals) return;
    memcpy(vals, v, (size_t)n * sizeof *vals);
    t->int64_data = vals, t->n_int64_data = (size_t)n;
}

/* name: float tensor of shape dims (DT_ONNX_BATCH -> "batch"). */
static Onnx__ValueInfoProto *value_info(dt_onnx *m, const char *name, const int64_t *dims,
                                        int ndims) {
    Onnx__ValueInfoProto *vi = alloc(m, sizeof *vi);
    Onnx__TypeProto *type = alloc(m, sizeof *type);
    Onnx__TypeProto__Tensor *tt = alloc(m, sizeof *tt);
    Onnx__TensorShapeProto *shape = alloc(m, sizeof *shape);
    Onnx__TensorShapeProto__Dimension **dv = alloc(m, (size_t)ndims * sizeof *dv);
    if (!vi || !type || !tt || !shape || !dv) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(type);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(shape);
    for (int i = 0; i < ndims; i++) {
        Onnx__TensorShapeProto__Dimension *d = alloc(m, sizeof *d);
        if (!d) return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] == DT_ONNX_BATCH) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = copy_str(m, "batch");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        dv[i] = d;
    }
    shape->dim = dv, shape->n_dim = (size_t)ndims;
    tt->has_elem_type = 1, tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = shape;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    vi->name = copy_str(m, name);
    vi->type = type;
    return vi;
}

void dt_onnx_input(dt_onnx *m, const char *name, const int64_t *dims, int ndims) {
    push(m, &m->inputs, value_info(m, name, dims, ndims));
}

void dt_onnx_output(dt_onnx *m, const char *name, const int64_t *dims, int ndims) {
    push(m, &m->outputs, value_info(m, name, dims, ndims));
}

void dt_onnx_meta(dt_onnx *m, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = alloc(m, sizeof *e);
    if (!e) return;
    onnx__string_string_entry_proto__init(e);
    e->key = copy_str(m, key);
    e->value = copy_str(m, value);
    push(m, &m->metas, e);
}

dt_status dt_onnx_write(dt_onnx *m, const char *path, const char *graph_name,
                        const char *producer_version, const char *doc) {
    Onnx__GraphProto *g = alloc(m, sizeof *g);
    Onnx__ModelProto *model = alloc(m, sizeof *model);
    Onnx__OperatorSetIdProto *opset = alloc(m, sizeof *opset);
    Onnx__OperatorSetIdProto **opsets = alloc(m, sizeof *opsets);
    DT_TRY(dt_onnx_status(m));
    onnx__graph_proto__init(g);
    g->name = copy_str(m, graph_name);
    g->node = (Onnx__NodeProto **)m->nodes.v, g->n_node = m->nodes.n;
    g->initializer = (Onnx__TensorProto **)m->inits.v, g->n_initializer = m->inits.n;
    g->input = (Onnx__ValueInfoProto **)m->inputs.v, g->n_input = m->inputs.n;
    g->output = (Onnx__ValueInfoProto **)m->outputs.v, g->n_output = m->outputs.n;
    onnx__operator_set_id_proto__init(opset);
    opset->domain = copy_str(m, "");
    opset->has_version = 1, opset->version = 13;
    opsets[0] = opset;
    onnx__model_proto__init(model);
    model->has_ir_version = 1, model->ir_version = 7; /* the IR of opset 13 */
    model->opset_import = opsets, model->n_opset_import = 1;
    model->producer_name = copy_str(m, "dtrain");
    model->producer_version = copy_str(m, producer_version);
    model->doc_string = copy_str(m, doc);
    model->graph = g;
    model->metadata_props = (Onnx__StringStringEntryProto **)m->metas.v;
    model->n_metadata_props = m->metas.n;
    DT_TRY(dt_onnx_status(m));
    size_t n = onnx__model_proto__get_packed_size(model);
    /* Protobuf readers (onnx.load, ONNX Runtime) refuse a message over 2 GiB. */
    if (n > INT32_MAX)
        return dt_fail(DT_ERR_USAGE, "export: %s would be %.1f GiB; ONNX files hold at most 2 GiB "
                       "(external weight files are not written)", path, (double)n / (1 << 30));
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return dt_fail(DT_ERR_NOMEM, "export: cannot allocate %zu bytes for %s", n, path);
    size_t packed = onnx__model_proto__pack(model, buf);
    dt_status s = packed == n ? dt_write_file_atomic(path, buf, n)
                              : dt_fail(DT_ERR_INTERNAL, "export: protobuf-c packed %zu of %zu bytes",
                                        packed, n);
    free(buf);
    return s;
}
