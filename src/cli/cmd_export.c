/* dtrain export MODEL.cfg --weights CHECKPOINT -o model.onnx|model.weights */
#include <stdio.h>
#include <string.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/paths.h"
#include "dtrain/checkpoint.h"
#include "dtrain/export.h"
#include "dtrain/infer.h"
#include "dtrain/net.h"

static const char export_usage[] =
    "usage: dtrain export MODEL.cfg --weights CHECKPOINT -o FILE.onnx|FILE.weights\n"
    "  writes the trained network for inference as an ONNX model (opset 13): input\n"
    "  \"input\" (batch, C, H, W) = pixel bytes / 255; outputs \"logits\" and\n"
    "  \"probabilities\" (batch, classes), or a feature extractor's \"features\" (its\n"
    "  last layer's output). Dropout is removed, batch norm uses its\n"
    "  running statistics. See docs/EXPORT.md (also for PyTorch: scripts/export_torch.py)\n"
    "  Or as Darknet weights for the same model file (darknet classifier valid/predict\n"
    "  MODEL.cfg FILE.weights; docs/MODEL_FILES.md)\n"
    "  --weights F   checkpoint file (of a checkpoint directory: D/latest or D/best.ckpt)\n"
    "                or Darknet weights\n"
    "  -o F          output file, written whole or not at all; its extension names the\n"
    "                format: .onnx or .weights (another extension is refused)\n"
    "  --format F    onnx (default) or darknet, as -o's extension names it\n";

static dt_status export_run(const char *model, const char *weights, const char *out) {
    dt_model_spec spec;
    DT_TRY(dt_setup_model(&spec, model, 1, 0, 0));
    spec.precision = DT_PRECISION_FP32; /* the weights are fp32 in either; no products run */
    dt_net *net = NULL;
    dt_ckpt_meta meta;
    dt_class_names names = {0, NULL}; /* a folder data set's, saved in the checkpoint */
    dt_status s = dt_infer_net(&net, &names, &meta, &spec, weights, 0);
    dt_export_info info = {model, weights, DT_VERSION, (const char *const *)names.names,
                           names.n, &spec.mean, &spec.std};
    if (s == DT_OK) s = dt_export_file(net, out, &info, meta.seen);
    dt_class_names_free(&names);
    if (s == DT_OK && meta.darknet)
        printf("export: %s (%d layers, %zu parameters, Darknet weights %s, %llu images seen) -> %s\n", model,
               net->nlayers, net->nparams, weights, (unsigned long long)meta.seen, out);
    else if (s == DT_OK)
        printf("export: %s (%d layers, %zu parameters, step %llu of %s) -> %s\n", model,
               net->nlayers, net->nparams, (unsigned long long)meta.step, weights, out);
    dt_net_free(net);
    return s;
}

int cmd_export(int argc, char **argv) {
    const char *weights = NULL, *out = NULL, *format = NULL, *by_ext = NULL;
    int help = 0;
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--weights", DT_OPT_STR, &weights, 0, 0, 0},
        {"-o", DT_OPT_STR, &out, 0, 0, 0},
        {"--format", DT_OPT_STR, &format, 0, 0, 0},
    };
    const cli_env env = {0, 1, 1, 0};
    const char *pos[1];
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(export_usage, stdout);
        return 0;
    }
    if (s == DT_OK && (npos != 1 || !weights || !out))
        s = dt_fail(DT_ERR_USAGE,
                    "export: needs MODEL.cfg, --weights CHECKPOINT and -o FILE (see dtrain export --help)");
    const dt_path paths[] = {{"MODEL.cfg", pos[0], "the model file", 0},
                              {"--weights", weights, "the checkpoint given to --weights", 0},
                              {"-o", out, NULL, 0}};
    const int npaths = (int)(sizeof paths / sizeof *paths);
    if (s == DT_OK && format && !dt_export_format_known(format))
        s = dt_fail(DT_ERR_USAGE,
                    "export: --format %s: dtrain writes onnx and darknet; for PyTorch run scripts/export_torch.py",
                    format);
    if (s == DT_OK) s = dt_paths_check(paths, npaths);
    if (s == DT_OK && dt_export_format_of(&by_ext, out) != DT_OK) {
        char why[256]; /* dt_fail writes the buffer dt_last_error reads */
        snprintf(why, sizeof why, "%s", dt_last_error());
        s = dt_fail(DT_ERR_USAGE, "export: -o %s", why);
    }
    if (s == DT_OK && format && strcmp(format, by_ext) != 0)
        s = dt_fail(DT_ERR_USAGE, "export: --format %s but -o %s names %s", format, out, by_ext);
    if (s == DT_OK) s = dt_paths_make_parents(paths, npaths);
    if (s != DT_OK) return cli_report(s, &env);
    return cli_report(export_run(pos[0], weights, out), &env);
}
