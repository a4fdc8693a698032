/* The train job's options: one table of flags (name, type, field of
 * dt_job_args, bounds) that `dtrain train`'s argv, sweeps' trials and the
 * job API's options by name (dtrain.h) are all read through, and the
 * usage text printed from the same file. */
#include <stdio.h>
#include <string.h>

#include "dtrain/job.h"

static const char train_usage[] =
    "usage: dtrain train MODEL.cfg [flags]\n"
    "  --dataset fashion-mnist|mnist|cifar10|synthetic|folder   (default: the model file's)\n"
    "  --data-dir DIR        dataset directory (default /usr/share/datasets/fashion-mnist);\n"
    "                        folder: DIR/train/<class>/*.jpg|*.jpeg|*.png and DIR/test/<class>/\n"
    "  --data F.data         Darknet's data file instead: images of its train= list (test set:\n"
    "                        valid=) labelled by the labels= string in their paths; its backup=\n"
    "                        is the default --checkpoint-dir (docs/IMAGES.md)\n"
    "  --loader-threads N    threads building each batch: decoding images of a folder data set\n"
    "                        too large for the cache, and every image once at load (default:\n"
    "                        2 for folder, 1 otherwise)\n"
    "  --cache-mb N          folder: keep the decoded images in memory while they fit N MiB\n"
    "                        (default: a quarter of memory over the ranks on the node; 0: always\n"
    "                        decode per batch)\n"
    "  --skip-bad-images     folder: skip files that cannot be read or decoded (counted) instead\n"
    "                        of stopping at the first\n"
    "  --val-split F         folder without test/: hold out the share F of each class of\n"
    "                        DIR/train as the test set, drawn from --seed (stratified)\n"
    "  --epochs N            override the model file's epochs\n"
    "  --max-steps N         stop after N optimiser steps\n"
    "  --batch N             batch per worker (overrides the model file)\n"
    "  --lr X                base learning rate (overrides the model file)\n"
    "  --lr-scaling R        linear | none (default): linear multiplies the learning rate by\n"
    "                        global batch / the model file's batch x accumulate (Goyal)\n"
    "  --warmup-epochs W     ramp the rate linearly, per step, over W epochs (with linear\n"
    "                        scaling: from the base rate to the scaled one)\n"
    "  --optimizer O         sgd | adam | adamw | lars | lamb (default: the model file's, else sgd)\n"
    ;
/* (the optimiser's hyperparameters: print_hypers) */
static const char train_usage_rest[] =
    "  --precision P         fp32 | bf16: the arithmetic of convolutions and connected layers\n"
    "                        (default: the model file's precision=, else fp32; bf16 needs\n"
    "                        AVX512_BF16 or AMX; weights, optimiser and loss stay fp32)\n"
    "  --accumulate N        N forward/backward passes of --batch per optimiser step (one\n"
    "                        exchange per step: a step's batch is N x --batch per worker)\n"
    "  --seed N              seed of init, data order, augmentation, dropout (default 1)\n"
    "  --threads N           BLAS threads per rank (default: cores / ranks on the node)\n"
    "  --log F.jsonl         one JSON object per line: config, steps, evaluations, summary\n"
    "  --checkpoint F        write a checkpoint here (at the end and every --checkpoint-every)\n"
    "  --checkpoint-dir D    or keep checkpoints in D: step-N.ckpt (the last --keep), latest\n"
    "                        (a link to the newest) and best.ckpt (best test accuracy)\n"
    "  --keep K              --checkpoint-dir: step-N.ckpt files kept (default 3); before\n"
    "                        training the directory's file system must have room for K, the\n"
    "                        one being written and best.ckpt, or the run is refused\n"
    "  --keep-fewer          without room for --keep K: keep as many as fit (at least 1)\n"
    "  --checkpoint-every N  also every N steps\n"
    "  --max-loss-ratio R    a checkpoint whose smoothed training loss is over R x the run's\n"
    "                        best is not written (the good ones stay; default 100, 0 = off)\n"
    "  --weights F           start from checkpoint F's parameters and batch-norm statistics\n"
    "                        (this model's; any batch; or Darknet weights of the model file):\n"
    "                        optimiser, step and schedule afresh;\n"
    "                        with --resume auto, until --checkpoint-dir has a checkpoint\n"
    "  --keep-global-batch   with --resume on another number of workers: --batch and\n"
    "                        --accumulate chosen to keep the checkpoint's global batch (a\n"
    "                        worker's share in the fewest passes of at most --batch)\n"
    "  --partial             with --weights: load only the layers that match the checkpoint's in\n"
    "                        place, kind and shapes (fine-tuning a new head); the rest start as\n"
    "                        in a fresh run; a table of what was loaded is printed\n"
    "  --freeze N            the first N layers (as the --partial table numbers them) are not\n"
    "                        trained: no update, decay or momentum moves their parameters\n"
    "  --resume F|D|auto     continue exactly from checkpoint F, from the newest complete one\n"
    "                        in directory D, or (auto) in --checkpoint-dir if it has one;\n"
    "                        --log then appends to the existing log\n"
    "  --no-prefetch         build batches in the training thread\n"
    ;
static const char train_usage_mode[] =
    "  --mode M              how workers share gradients (default: serial, or allreduce when\n"
    "                        started on several ranks):\n";
static const char train_usage_dist[] =
    "  --staleness S         ps-ssp: the fastest worker runs at most S clocks ahead (default 3)\n"
    "  --straggle P:MS       every worker sleeps MS ms in a step with probability P\n"
    "  --slow-worker R:MS    world rank R sleeps MS ms in every step\n"
    "  --servers S           ps-* modes: the first S ranks are parameter servers (default 1)\n"
    "  --server-nice N       ps-* modes: servers run at nice N, 0-19 (default 19: beside workers\n"
    "                        on the same cores they take a core only when the compute leaves one)\n"
    "  --fusion-mb X         allreduce: fusion bucket size in MiB (default 4; 0 = per layer)\n"
    ;
static const char train_usage_algo[] =
    "  --allreduce-algo A    allreduce: how gradients are summed (default auto; docs/CLUSTER.md):\n";
static const char train_usage_tail[] =
    "  --grad-compression C  allreduce, ps-*: how gradients travel: none (default), bf16 or\n"
    "                        fp16 (half the bytes; sums and the servers' weights stay fp32),\n"
    "                        topk:R (allreduce: the fraction R, as topk:0.01 or topk:1%, of\n"
    "                        largest gradients per bucket; the rest is carried to the next step)\n"
    "  --sfb                 allreduce, ps-sync: fully connected layers exchange sufficient\n"
    "                        factors between workers instead of their gradients\n"
    "  --sacp                allreduce, ps-sync: per layer, whichever of the two moves fewer\n"
    "                        bytes (the plan is printed at start; see dtrain info --plan)\n"
    "  --group-size K        ps-sync, ps-async: groups of K workers average their gradients\n"
    "                        among themselves; one per group talks to the servers (SINGA)\n"
    "  --timeline F.json     trace of every rank's layers, communication, waits, data, eval and\n"
    "                        checkpoints (chrome://tracing, ui.perfetto.dev)\n"
    "  --stall-timeout S     name the missing ranks after S seconds of waiting (default 60)\n"
    "  --stall-abort S       a rank that has waited S seconds for other ranks ends the whole\n"
    "                        job with exit status 3, naming the ranks and hosts it waited for\n"
    "                        (default 10 x --stall-timeout; 0: wait for ever). S must outlast\n"
    "                        the longest evaluation or checkpoint pause of the run\n"
    "  --quiet               only the final summary line\n";

/* The generated flags of [net] keys, for --help. */
static void print_net_flags(FILE *out) {
    fputs("  --KEY VALUE           any other [net] key of the model file, over the file's value\n"
          "                        (docs/MODEL_FILES.md; a policy given so replaces the file's schedule):\n"
          "                       ", out);
    char flag[DT_NETKEY_FLAG_MAX];
    const char *key;
    int col = 23;
    for (int i = 0; (key = dt_model_net_key(i)) != NULL; i++) {
        if (dt_netkey_flag(key, flag, sizeof flag) != 1) continue;
        if (col + (int)strlen(flag) + 2 > 92) {
            fputs("\n                       ", out);
            col = 23;
        }
        col += fprintf(out, " %s", flag);
    }
    fputs("\n", out);
}

/* "  --beta1 B             adam, ...": each hyperparameter's line (optim.h's
 * table), its text wrapped at 92 columns under column 24. */
static void print_hypers(FILE *out) {
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        char flag[DT_NETKEY_FLAG_MAX];
        dt_netkey_flag(h->key, flag, sizeof flag);
        int col = fprintf(out, "  %s %s", flag, h->value);
        const char *text = h->usage;
        while (*text) {
            fprintf(out, "%*s", col < 24 ? 24 - col : 1, "");
            col = col < 24 ? 24 : col + 1;
            size_t fit = strlen(text);
            if (col + (int)fit > 92) { /* the last space that fits */
                fit = (size_t)(92 - col);
                while (fit > 0 && text[fit] != ' ') fit--;
            }
            fprintf(out, "%.*s\n", (int)fit, text);
            text += fit;
            while (*text == ' ') text++;
            col = 0;
        }
    }
}

void dt_job_usage(FILE *out) {
    fputs(train_usage, out);
    print_hypers(out);
    fputs(train_usage_rest, out);
    dt_mode_usage(out, train_usage_mode);
    fputs(train_usage_dist, out);
    dt_ar_algo_usage(out, train_usage_algo);
    fputs(train_usage_tail, out);
    print_net_flags(out);
}

void dt_job_args_init(dt_job_args *a) {
    memset(a, 0, sizeof *a);
    a->servers = 1;
    a->server_nice = 19;
    a->staleness = 3;
    a->seed = 1;
    a->fusion_mb = 4;
    a->stall_timeout = 60;
    a->stall_abort = -1;
    a->group_size = 1;
    a->warmup_epochs = -1;
    for (int i = 0; i < DT_OPT_MAX_HYPERS; i++) a->hyper[i] = -1;
    a->keep = 3;
    a->max_loss_ratio = 100;
    a->cache_mb = -1;
}

int dt_job_opts(dt_job_args *a, dt_opt *out) {
    const dt_opt flags[] = {
        {"--dataset", DT_OPT_STR, &a->dataset, 0, 0, 0},
        {"--data-dir", DT_OPT_STR, &a->data_dir, 0, 0, 0},
        {"--data", DT_OPT_STR, &a->data, 0, 0, 0},
        {"--epochs", DT_OPT_INT, &a->epochs, 1, 100000, 0},
        {"--max-steps", DT_OPT_LONG, &a->max_steps, 1, 1e15, 0},
        {"--batch", DT_OPT_INT, &a->batch, 1, 1 << 20, 0},
        {"--lr", DT_OPT_DOUBLE, &a->lr, 1e-12, 1e6, 0},
        {"--lr-scaling", DT_OPT_STR, &a->lr_scaling, 0, 0, 0},
        {"--warmup-epochs", DT_OPT_DOUBLE, &a->warmup_epochs, 0, 100000, 0},
        {"--optimizer", DT_OPT_STR, &a->optimizer, 0, 0, 0},
        {"--accumulate", DT_OPT_INT, &a->accumulate, 1, 1024, 0},
        {"--precision", DT_OPT_STR, &a->precision, 0, 0, 0},
        {"--seed", DT_OPT_LONG, &a->seed, 0, 9.2e18, 0},
        {"--threads", DT_OPT_INT, &a->threads, 1, 1024, 0},
        {"--log", DT_OPT_STR, &a->log, 0, 0, 0},
        {"--checkpoint", DT_OPT_STR, &a->ckpt, 0, 0, 0},
        {"--checkpoint-every", DT_OPT_LONG, &a->ckpt_every, 1, 1e15, 0},
        {"--checkpoint-dir", DT_OPT_STR, &a->ckpt_dir, 0, 0, 0},
        {"--keep", DT_OPT_INT, &a->keep, 1, 1000000, 0},
        {"--keep-fewer", DT_OPT_FLAG, &a->keep_fewer, 0, 0, 0},
        {"--max-loss-ratio", DT_OPT_DOUBLE, &a->max_loss_ratio, 0, 1e30, 0},
        {"--resume", DT_OPT_STR, &a->resume, 0, 0, 0},
        {"--keep-global-batch", DT_OPT_FLAG, &a->keep_global_batch, 0, 0, 0},
        {"--weights", DT_OPT_STR, &a->weights, 0, 0, 0},
        {"--partial", DT_OPT_FLAG, &a->partial, 0, 0, 0},
        {"--freeze", DT_OPT_INT, &a->freeze, 1, DT_MAX_LAYERS, 0},
        {"--no-prefetch", DT_OPT_FLAG, &a->no_prefetch, 0, 0, 0},
        {"--quiet", DT_OPT_FLAG, &a->quiet, 0, 0, 0},
        {"--help", DT_OPT_FLAG, &a->help, 0, 0, 0},
        {"--mode", DT_OPT_STR, &a->mode, 0, 0, 0},
        {"--servers", DT_OPT_INT, &a->servers, 1, 1024, 0},
        {"--server-nice", DT_OPT_INT, &a->server_nice, 0, 19, 0},
        {"--fusion-mb", DT_OPT_DOUBLE, &a->fusion_mb, 0, 4096, 0},
        {"--allreduce-algo", DT_OPT_STR, &a->ar_algo, 0, 0, 0},
        {"--grad-compression", DT_OPT_STR, &a->grad_compression, 0, 0, 0},
        {"--stall-timeout", DT_OPT_DOUBLE, &a->stall_timeout, 0.1, 1e6, 0},
        {"--stall-abort", DT_OPT_DOUBLE, &a->stall_abort, 0, 1e7, 0},
        {"--staleness", DT_OPT_INT, &a->staleness, 0, 1000, 0},
        {"--straggle", DT_OPT_STR, &a->straggle, 0, 0, 0},
        {"--slow-worker", DT_OPT_STR, &a->slow, 0, 0, 0},
        {"--sfb", DT_OPT_FLAG, &a->sfb, 0, 0, 0},
        {"--sacp", DT_OPT_FLAG, &a->sacp, 0, 0, 0},
        {"--group-size", DT_OPT_INT, &a->group_size, 1, 1 << 20, 0},
        {"--timeline", DT_OPT_STR, &a->timeline, 0, 0, 0},
        {"--loader-threads", DT_OPT_INT, &a->loader_threads, 1, 256, 0},
        {"--cache-mb", DT_OPT_LONG, &a->cache_mb, 0, 1e9, 0},
        {"--skip-bad-images", DT_OPT_FLAG, &a->skip_bad, 0, 0, 0},
        {"--val-split", DT_OPT_DOUBLE, &a->val_split, 1e-6, 1 - 1e-6, 0},
    };
    int n = (int)(sizeof flags / sizeof *flags);
    memcpy(out, flags, sizeof flags);
    /* The optimiser's hyperparameters (optim.h's table), each --KEY in its
     * model-file key's range (open ends: job_prepare.c). */
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        double lo, hi;
        int lo_open, hi_open;
        dt_netkey_flag(h->key, a->hyper_flags[i], sizeof a->hyper_flags[i]);
        dt_model_net_key_range(h->key, &lo, &hi, &lo_open, &hi_open);
        out[n++] = (dt_opt){a->hyper_flags[i], DT_OPT_DOUBLE, &a->hyper[i], lo, hi, 0};
    }
    /* Then every model-file key without a flag of its own, as --KEY. */
    const char *key;
    for (int i = 0; i < DT_NETKEYS_MAX && (key = dt_model_net_key(i)) != NULL; i++)
        if (dt_netkey_flag(key, a->net_flags[i], sizeof a->net_flags[i]) == 1)
            out[n++] = (dt_opt){a->net_flags[i], DT_OPT_STR, &a->net_vals[i], 0, 0, 0};
    return n;
}

void dt_job_note_given(dt_job_args *a, const dt_opt *opts, int n) {
    a->given_servers = dt_opt_find(opts, n, "--servers")->seen;
    a->given_server_nice = dt_opt_find(opts, n, "--server-nice")->seen;
    a->given_staleness = dt_opt_find(opts, n, "--staleness")->seen;
    a->given_fusion = dt_opt_find(opts, n, "--fusion-mb")->seen;
    a->given_group = dt_opt_find(opts, n, "--group-size")->seen;
    a->given_keep = dt_opt_find(opts, n, "--keep")->seen;
}

dt_status dt_job_parse(dt_job_args *a, int argc, char **argv) {
    dt_job_args_init(a);
    dt_opt opts[DT_JOB_MAX_OPTS];
    int npos, n = dt_job_opts(a, opts);
    DT_TRY(dt_opts_parse(argc, argv, opts, n, &a->model, 1, &npos));
    dt_job_note_given(a, opts, n);
    if (a->help) return DT_OK;
    if (npos != 1) return dt_fail(DT_ERR_USAGE, "expected one MODEL.cfg (see --help)");
    return DT_OK;
}
