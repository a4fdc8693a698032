/* dtrain predict MODEL.cfg --weights CHECKPOINT IMAGE|FOLDER... [--list F]:
 * the top-k classes of each image with their probabilities, one block per
 * image or with --json one JSON object per image; --features: the net's
 * output vector per image instead (a feature extractor's, or a
 * classifier's logits). The work is the library's (dt_infer_predict):
 * each image preprocessed as eval preprocesses a folder's. */
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/infer.h"
#include "dtrain/json.h"

/* The image's k first classes (most probable first). */
static void print_image(int json, const char *path, const dt_scored *top, int k, const dt_class_names *nm) {
    char esc[8192], name[1024];
    if (json) printf("{\"image\":\"%s\",\"top\":[", dt_json_escape(esc, sizeof esc, path));
    else printf("%s\n", path);
    for (int j = 0; j < k; j++) {
        int c = top[j].c;
        const char *cname = c < nm->n ? nm->names[c] : NULL;
        if (json) {
            printf("%s{\"class\":%d", j ? "," : "", c);
            if (cname) printf(",\"name\":\"%s\"", dt_json_escape(name, sizeof name, cname));
            printf(",\"p\":%.6f}", top[j].p);
        } else {
            printf("  %8.4f%%  %d%s%s\n", 100 * top[j].p, c, cname ? " " : "", cname ? cname : "");
        }
    }
    if (json) printf("]}\n");
}

/* --features: each image's n values (%.9g: floats read back exactly), a
 * line "PATH v0 v1 ..." or {"image":PATH,"features":[v0,...]}. */
static void print_features(int json, const char *path, const float *v, int n) {
    char esc[8192];
    if (json) printf("{\"image\":\"%s\",\"features\":[", dt_json_escape(esc, sizeof esc, path));
    else fputs(path, stdout);
    for (int j = 0; j < n; j++) printf("%s%.9g", json ? (j ? "," : "") : " ", (double)v[j]);
    puts(json ? "]}" : "");
}

/* Each image's result as the library hands it on; ctx: --json. */
static dt_status print_result(void *ctx, const char *path, const dt_scored *top, int k, const float *features, int n,
                              const dt_class_names *names) {
    int json = *(const int *)ctx;
    if (top) print_image(json, path, top, k, names);
    else print_features(json, path, features, n);
    return DT_OK;
}

static const char predict_usage[] =
    "usage: dtrain predict MODEL.cfg --weights CHECKPOINT IMAGE|FOLDER... [--list F] [flags]\n"
    "  the most probable classes of each image and their probabilities (the softmax of\n"
    "  the logits), each image preprocessed as dtrain eval preprocesses a folder's;\n"
    "  classes named by the checkpoint's class names (a folder data set's), else by index\n"
    "  IMAGE             a .jpg, .jpeg or .png file (by content)\n"
    "  FOLDER            its image files and those of its subfolders (a test split's class\n"
    "                    folders), in bytewise order of names, as eval reads a folder\n"
    "  --list F          also the images named in F, one path a line\n"
    "  --data F.data     Darknet's data file: classes named by its names= (else labels=),\n"
    "                    top= for --top; with no images given, those of its valid= list\n"
    "  --top K           classes per image (default: --data's top=, else 5; at most the\n"
    "                    model's outputs)\n"
    "  --json            one JSON object a line per image: {\"image\":PATH,\"top\":[{\"class\":I,\n"
    "                    \"name\":NAME,\"p\":P},...]} (\"name\" when the checkpoint has names)\n"
    "  --features        the net's output per image instead, \"PATH v0 v1 ...\" (--json:\n"
    "                    {\"image\":PATH,\"features\":[...]}): a feature extractor's output (a\n"
    "                    model without [softmax]), a classifier's logits\n"
    "  --weights F       checkpoint file (of a checkpoint directory: D/latest or D/best.ckpt),\n"
    "                    or Darknet weights of the model file (recognised by content); with\n"
    "                    --features it may be left out: a run's initial parameters\n"
    "  --batch N         images per forward pass (default: the model file's)\n"
    "  --threads N       threads (default: all cores)\n"
    "  --loader-threads N  threads decoding images (default 2)\n"
    "  --precision P     fp32 | bf16 (default: the model file's precision=, else fp32)\n";

int cmd_predict(int argc, char **argv, const cli_env *env) {
    dt_predict_args a = {.loader_threads = 2};
    int help = 0, json = 0, threads = 0;
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--weights", DT_OPT_STR, &a.weights, 0, 0, 0},
        {"--list", DT_OPT_STR, &a.list, 0, 0, 0},
        {"--data", DT_OPT_STR, &a.data, 0, 0, 0},
        {"--top", DT_OPT_INT, &a.top, 1, DT_DATA_MAX_CLASSES, 0},
        {"--json", DT_OPT_FLAG, &json, 0, 0, 0},
        {"--features", DT_OPT_FLAG, &a.features, 0, 0, 0},
        {"--batch", DT_OPT_INT, &a.batch, 1, 1 << 20, 0},
        {"--threads", DT_OPT_INT, &threads, 1, 1024, 0},
        {"--loader-threads", DT_OPT_INT, &a.loader_threads, 1, 256, 0},
        {"--precision", DT_OPT_STR, &a.precision, 0, 0, 0},
    };
    const char **pos = malloc(sizeof *pos * (size_t)(argc > 0 ? argc : 1));
    if (!pos) return cli_report(dt_fail(DT_ERR_NOMEM, "predict: out of memory"), env);
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, argc, &npos);
    if (s == DT_OK && help) {
        fputs(predict_usage, stdout);
        free(pos);
        return 0;
    }
    if (s == DT_OK && (npos < 1 || (!a.weights && !a.features) || (npos < 2 && !a.list && !a.data)))
        s = dt_fail(DT_ERR_USAGE, "predict: needs MODEL.cfg, --weights CHECKPOINT and images, folders, --list F "
                    "or --data F.data (see dtrain predict --help)");
    if (s == DT_OK) {
        a.model = pos[0], a.inputs = pos + 1, a.ninputs = npos - 1;
        dt_setup_threads(threads, env->local_ranks);
        s = dt_infer_predict(&a, print_result, &json);
    }
    free(pos);
    return cli_report(s, env);
}
