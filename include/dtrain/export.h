/* Exporting a trained network for inference outside dtrain.
 *
 * ONNX (opset 13, IR 7): one graph input "input", float32 (batch, C, H, W)
 * with a symbolic batch dimension, holding what dtrain's loader feeds the
 * net: each pixel byte / 255 (every dataset dtrain reads has per-channel
 * mean 0 and std 1), channels in the data set's order (grey; or R, G, B).
 * Two outputs, both (batch, classes): "logits", the input of the softmax
 * layer, and "probabilities", its output; a feature extractor (no
 * [softmax]) has one, "features", its last layer's output (batch, C, H, W)
 * or (batch, C H W) after a connected layer. Layers map to operators as
 * docs/EXPORT.md lists: convolutions to Conv, connected layers to
 * Flatten + Gemm (transB), batch norm to BatchNormalization in inference
 * form (the running statistics), dropout to nothing, shortcut and route to
 * Add/Slice/Pad and Concat. Parameters are written as initializers named
 * "l<index>.weight", "l<index>.bias", "l<index>.running_mean", ...; layer
 * indices are dtrain's (`dtrain info`). */
#ifndef DTRAIN_EXPORT_H
#define DTRAIN_EXPORT_H

#include "dtrain/net.h"
#include "dtrain/status.h"

typedef struct {
    const char *model_path;  /* the model file (recorded in the doc string) */
    const char *weights_path; /* the checkpoint the parameters came from */
    const char *version;     /* dtrain's version (producer_version) */
    const char *const *class_names; /* (nclass_names) names of outputs 0.., or NULL */
    int nclass_names;        /* <= the net's classes (a folder may hold fewer) */
    const dt_channel_values *mean, *std; /* the model file's normalisation (NULL or n 0: none),
                                           * said in the preprocessing note */
} dt_export_info;

/* Writes net (its current parameters and batch-norm statistics) to path as
 * an ONNX model, atomically (path.tmp, fsync, rename). A layer the exporter
 * cannot express is DT_ERR_CONFIG "MODEL:LINE: [kind] ... cannot be
 * exported to ONNX: why" and nothing is written. */
dt_status dt_export_onnx(const dt_net *net, const char *path, const dt_export_info *info);

/* The format path's extension names: "onnx" (.onnx) or "darknet"
 * (.weights); another is refused (a .pt file of ONNX bytes would mislead
 * whoever loads it), naming path and the known extensions. */
dt_status dt_export_format_of(const char **format, const char *path);
/* Whether format is "onnx" or "darknet". */
int dt_export_format_known(const char *format);
/* net written to path in the format of its extension: ONNX with info, or
 * Darknet weights recording `seen` images trained on. */
dt_status dt_export_file(const dt_net *net, const char *path, const dt_export_info *info, uint64_t seen);

#endif
