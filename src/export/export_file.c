/* A trained net written in the format its file's extension names
 * (export.h): ONNX or Darknet weights. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dtrain/darknet_weights.h"
#include "dtrain/export.h"

/* The formats export writes, by the extension of -o. */
static const struct {
    const char *ext, *format;
} export_formats[] = {{".onnx", "onnx"}, {".weights", "darknet"}};
enum { NFORMATS = (int)(sizeof export_formats / sizeof *export_formats) };

dt_status dt_export_format_of(const char **format, const char *out) {
    const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
    char known[128] = "";
    for (int i = 0; i < NFORMATS; i++) {
        if (dot && (!slash || dot > slash) && strcasecmp(dot, export_formats[i].ext) == 0) {
            *format = export_formats[i].format;
            return DT_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", export_formats[i].ext);
    }
    return dt_fail(DT_ERR_USAGE, "%s: unknown extension (known: %s; for PyTorch run "
                   "scripts/export_torch.py)", out, known);
}

int dt_export_format_known(const char *format) {
    for (int i = 0; i < NFORMATS; i++)
        if (strcmp(format, export_formats[i].format) == 0) return 1;
    return 0;
}

dt_status dt_export_file(const dt_net *net, const char *path, const dt_export_info *info, uint64_t seen) {
    const char *format;
    DT_TRY(dt_export_format_of(&format, path));
    if (strcmp(format, "darknet") == 0) return dt_darknet_weights_save(path, net, seen);
    return dt_export_onnx(net, path, info);
}
