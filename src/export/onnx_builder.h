/* An ONNX model under construction: nodes, initializers, the graph's inputs
 * and outputs and metadata, as protobuf-c messages of ONNX's own onnx.proto
 * (generated at build time from libonnx-dev's copy), serialised with
 * protobuf-c. The exporter (onnx_export.c) says what goes in; this module
 * owns the messages' memory and the file.
 *
 * Memory: every message, string and array belongs to the builder and is
 * freed by dt_onnx_free. Float initializers point at the caller's data (the
 * net's parameters), which must outlive dt_onnx_write.
 *
 * Errors: the adders do not return a status. The first failed allocation
 * marks the builder and later calls do nothing; dt_onnx_write (or
 * dt_onnx_status) then reports DT_ERR_NOMEM. So an exporter emits a whole
 * graph and checks once. */
#ifndef DTRAIN_EXPORT_ONNX_BUILDER_H
#define DTRAIN_EXPORT_ONNX_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/status.h"

typedef struct dt_onnx dt_onnx;

/* Dimension value meaning "the symbolic batch size" in dt_onnx_input/output. */
#define DT_ONNX_BATCH (-1)

dt_status dt_onnx_create(dt_onnx **out);
void dt_onnx_free(dt_onnx *m);

/* DT_OK, or DT_ERR_NOMEM once any allocation has failed. */
dt_status dt_onnx_status(const dt_onnx *m);

/* A printf-formatted string owned by the builder (tensor and node names);
 * "" after a failure, so callers can pass it on unchecked. */
const char *dt_onnx_name(dt_onnx *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends node op(inputs) -> output (names copied) and returns its handle
 * for attributes (NULL after a failure; the attribute adders accept it). */
void *dt_onnx_node(dt_onnx *m, const char *op, const char *const *inputs, int ninputs,
                   const char *output);
void dt_onnx_attr_int(dt_onnx *m, void *node, const char *name, int64_t v);
void dt_onnx_attr_float(dt_onnx *m, void *node, const char *name, float v);
void dt_onnx_attr_ints(dt_onnx *m, void *node, const char *name, const int64_t *v, int n);

/* Float initializer `name` of shape dims[ndims] over data (not copied). */
void dt_onnx_init_floats(dt_onnx *m, const char *name, const int64_t *dims, int ndims,
                         const float *data);
/* Float initializer of shape dims, every value v (owned by the builder). */
void dt_onnx_init_fill(dt_onnx *m, const char *name, const int64_t *dims, int ndims, float v);
/* 1-D int64 initializer (copied): shapes, pads and axes that opset 13 takes
 * as inputs. */
void dt_onnx_init_int64s(dt_onnx *m, const char *name, const int64_t *v, int n);

/* Float graph input / output of shape dims[ndims]; DT_ONNX_BATCH is the
 * symbolic dimension "batch". */
void dt_onnx_input(dt_onnx *m, const char *name, const int64_t *dims, int ndims);
void dt_onnx_output(dt_onnx *m, const char *name, const int64_t *dims, int ndims);

/* A metadata_props entry (both strings copied). */
void dt_onnx_meta(dt_onnx *m, const char *key, const char *value);

/* Serialises the model (IR version 7, opset 13 of the default domain,
 * producer "dtrain" producer_version, graph graph_name, doc) to path by way
 * of path.tmp, fsync and rename: a failure leaves any earlier file at path
 * as it was. */
dt_status dt_onnx_write(dt_onnx *m, const char *path, const char *graph_name,
                        const char *producer_version, const char *doc);

#endif
