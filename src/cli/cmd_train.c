/* dtrain train MODEL.cfg [flags] */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "dtrain/train.h"

static const char train_usage[] =
    "usage: dtrain train MODEL.cfg [flags]\n"
    "  --dataset fashion-mnist|mnist|cifar10|synthetic   (default: the model file's)\n"
    "  --data-dir DIR        dataset directory (default /usr/share/datasets/fashion-mnist)\n"
    "  --epochs N            override the model file's epochs\n"
    "  --max-steps N         stop after N optimiser steps\n"
    "  --batch N             batch per worker (overrides the model file)\n"
    "  --lr X                base learning rate (overrides the model file)\n"
    "  --seed N              seed of init, data order, augmentation, dropout (default 1)\n"
    "  --threads N           BLAS threads per rank (default: cores / ranks on the node)\n"
    "  --log F.jsonl         one JSON object per line: config, steps, evaluations, summary\n"
    "  --checkpoint F        write a checkpoint here (at the end and every --checkpoint-every)\n"
    "  --checkpoint-every N  also every N steps\n"
    "  --resume F            continue exactly from checkpoint F\n"
    "  --no-prefetch         build batches in the training thread\n"
    "  --quiet               only the final summary line\n";

int cmd_train(int argc, char **argv, const cli_env *env, volatile sig_atomic_t *stop) {
    const char *dataset = NULL, *data_dir = NULL, *log = NULL, *ckpt = NULL, *resume = NULL;
    int epochs = 0, batch = 0, threads = 0, quiet = 0, help = 0, no_prefetch = 0;
    long max_steps = 0, ckpt_every = 0, seed = 1;
    double lr = 0;
    cli_flag flags[] = {
        {"--dataset", ARG_STR, &dataset, 0, 0, 0},
        {"--data-dir", ARG_STR, &data_dir, 0, 0, 0},
        {"--epochs", ARG_INT, &epochs, 1, 100000, 0},
        {"--max-steps", ARG_LONG, &max_steps, 1, 1e15, 0},
        {"--batch", ARG_INT, &batch, 1, 1 << 20, 0},
        {"--lr", ARG_DOUBLE, &lr, 1e-12, 1e6, 0},
        {"--seed", ARG_LONG, &seed, 0, 9.2e18, 0},
        {"--threads", ARG_INT, &threads, 1, 1024, 0},
        {"--log", ARG_STR, &log, 0, 0, 0},
        {"--checkpoint", ARG_STR, &ckpt, 0, 0, 0},
        {"--checkpoint-every", ARG_LONG, &ckpt_every, 1, 1e15, 0},
        {"--resume", ARG_STR, &resume, 0, 0, 0},
        {"--no-prefetch", ARG_FLAG, &no_prefetch, 0, 0, 0},
        {"--quiet", ARG_FLAG, &quiet, 0, 0, 0},
        {"--help", ARG_FLAG, &help, 0, 0, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(train_usage, stdout);
        return 0;
    }
    if (s == DT_OK && npos != 1) s = dt_fail(DT_ERR_USAGE, "train: expected one MODEL.cfg\n%s", train_usage);
    if (s == DT_OK && ckpt_every && !ckpt)
        s = dt_fail(DT_ERR_USAGE, "--checkpoint-every needs --checkpoint FILE");
    dt_model_spec spec;
    if (s == DT_OK) s = cli_load_model(&spec, pos[0], batch, lr, epochs);
    dt_train_opts o;
    memset(&o, 0, sizeof o);
    if (s == DT_OK) s = cli_dataset_kind(&o.dataset, dataset, &spec);
    if (s != DT_OK) return cli_report(s, env);

    int nthreads = cli_set_threads(threads, env);
    o.data_dir = data_dir;
    o.epochs = spec.epochs;
    o.max_steps = max_steps;
    o.seed = (uint64_t)seed;
    o.log_path = log;
    o.checkpoint_path = ckpt;
    o.checkpoint_every = ckpt_every;
    o.resume_path = resume;
    o.quiet = quiet;
    o.progress_tty = isatty(STDOUT_FILENO);
    o.rank = env->rank;
    o.world = env->world;
    o.prefetch = !no_prefetch;
    o.stop = stop;
    o.out = env->rank == 0 ? stdout : NULL;
    if (!quiet && env->rank == 0)
        printf("dtrain: training %s on %s: %d layers, batch %d, %d epochs, lr %g (%s), %d thread%s\n",
               spec.path, dt_dataset_kind_name(o.dataset), spec.nlayers, spec.batch, spec.epochs,
               spec.sched.base_lr, dt_schedule_kind_name(spec.sched.kind), nthreads,
               nthreads == 1 ? "" : "s");

    dt_sync *sync;
    s = dt_sync_serial_create(&sync);
    if (s != DT_OK) return cli_report(s, env);
    dt_train_summary sum;
    s = dt_train_run(&spec, &o, sync, &sum);
    sync->free(sync);
    return cli_report(s, env);
}
