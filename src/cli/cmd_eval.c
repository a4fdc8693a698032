/* dtrain eval MODEL.cfg --weights CHECKPOINT */
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "dtrain/checkpoint.h"
#include "dtrain/net.h"
#include "dtrain/timer.h"
#include "dtrain/train.h"

static dt_status eval_run(const char *model, const char *weights, const char *dataset,
                          const char *data_dir, int batch, const cli_env *env) {
    dt_model_spec spec;
    DT_TRY(cli_load_model(&spec, model, batch, 0, 0));
    dt_dataset_kind kind;
    DT_TRY(cli_dataset_kind(&kind, dataset, &spec));
    dt_net *net;
    DT_TRY(dt_net_create(&net, &spec, spec.batch, 1));
    dt_ckpt_meta meta;
    dt_ckpt_arrays a = {net->params, net->nparams, net->state, net->nstate, NULL, 0, 0};
    dt_dataset *ds = NULL;
    double t0 = 0, acc = 0, loss = 0;
    dt_status s = dt_checkpoint_load(weights, net->shape_hash, &meta, &a);
    if (s == DT_OK) s = dt_dataset_load(&ds, kind, data_dir, 0, spec.input, 1);
    if (s == DT_OK) {
        t0 = dt_now();
        s = dt_evaluate(net, ds, NULL, 0, 1, spec.batch, &acc, &loss);
    }
    if (s == DT_OK && env->rank == 0) {
        double wall = dt_now() - t0;
        printf("{\"event\":\"summary\",\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"steps\":%llu,"
               "\"samples\":%d,\"images_per_sec\":%.1f,\"wall_s\":%.2f}\n",
               acc, loss, (unsigned long long)meta.step, ds->n, wall > 0 ? ds->n / wall : 0, wall);
    }
    dt_dataset_free(ds);
    dt_net_free(net);
    return s;
}

static const char eval_usage[] =
    "usage: dtrain eval MODEL.cfg --weights CHECKPOINT [flags]\n"
    "  test accuracy and loss of a checkpoint's parameters on the test set\n"
    "  --weights F       checkpoint file (of a checkpoint directory: D/latest or D/best.ckpt)\n"
    "  --dataset D       fashion-mnist | mnist | cifar10 | synthetic (default: the model file's)\n"
    "  --data-dir DIR    dataset directory (default /usr/share/datasets/fashion-mnist)\n"
    "  --batch N         evaluation batch (default: the model file's)\n"
    "  --threads N       threads (default: all cores)\n";

int cmd_eval(int argc, char **argv, const cli_env *env) {
    const char *weights = NULL, *dataset = NULL, *data_dir = NULL;
    int batch = 0, threads = 0, help = 0;
    cli_flag flags[] = {
        {"--help", ARG_FLAG, &help, 0, 0, 0},
        {"--weights", ARG_STR, &weights, 0, 0, 0},
        {"--dataset", ARG_STR, &dataset, 0, 0, 0},
        {"--data-dir", ARG_STR, &data_dir, 0, 0, 0},
        {"--batch", ARG_INT, &batch, 1, 1 << 20, 0},
        {"--threads", ARG_INT, &threads, 1, 1024, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(eval_usage, stdout);
        return 0;
    }
    if (s == DT_OK && (npos != 1 || !weights))
        s = dt_fail(DT_ERR_USAGE, "eval: needs MODEL.cfg and --weights CHECKPOINT (see dtrain eval --help)");
    if (s != DT_OK) return cli_report(s, env);
    cli_set_threads(threads, env);
    return cli_report(eval_run(pos[0], weights, dataset, data_dir, batch, env), env);
}
