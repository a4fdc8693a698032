/* dtrain train MODEL.cfg [flags] */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cmd_train.h"
#include "dtrain/ckptdir.h"
#include "paths.h"

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
    "  --momentum M, --decay D   momentum in [0, 1) (sgd, lars) and weight decay (override the file)\n"
    "  --beta1 B, --beta2 B  adam, adamw, lamb: moment decay rates in [0, 1) (0.9, 0.999)\n"
    "  --eps E               adam, adamw, lamb: > 0 (1e-8; lamb 1e-6)\n"
    "  --trust-coefficient T lars: eta of the trust ratio, > 0 (0.001)\n"
    "  --exclude-bias-bn 0|1 1: biases and batch-norm parameters without decay and trust\n"
    "                        ratio (Darknet's default); 0: decay on every parameter (PyTorch's)\n"
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

/* "this job has 3 ranks" for a train run, "a trial has 3 ranks
 * (--ranks-per-trial)" for a sweep's. */
static const char *ranks_said(char *buf, size_t cap, int ranks, int in_sweep) {
    snprintf(buf, cap, "%s has %d rank%s%s", in_sweep ? "a trial" : "this job", ranks, ranks == 1 ? "" : "s",
             in_sweep ? " (--ranks-per-trial)" : "");
    return buf;
}

/* --mode/--servers/--sfb/--sacp/--group-size against the run's ranks. */
static dt_status resolve_mode(dt_dist_cfg *dc, const char *name, int servers, int ranks, int in_sweep) {
    char has[64], list[160];
    if (!name) name = ranks > 1 ? "allreduce" : "serial";
    int m = dt_mode_from_name(name);
    if (m < 0)
        return dt_fail(DT_ERR_USAGE, "--mode: unknown mode '%s' (%s)", name, dt_mode_list(0, list, sizeof list));
    dc->mode = (dt_mode)m;
    if (dt_mode_info_of(dc->mode)->one_rank && ranks > 1)
        return dt_fail(DT_ERR_USAGE, "--mode %s runs on one rank, %s (use allreduce or ps-sync)", name,
                       ranks_said(has, sizeof has, ranks, in_sweep));
    dc->servers = dt_mode_is_ps(dc->mode) ? servers : 0;
    if (dt_mode_is_ps(dc->mode) && ranks < servers + 1)
        return dt_fail(DT_ERR_USAGE, "--mode %s --servers %d needs at least %d ranks, %s%s", name, servers,
                       servers + 1, ranks_said(has, sizeof has, ranks, in_sweep),
                       in_sweep ? "" : " (start it with dtrain launch -n N or mpirun -np N)");
    return dt_dist_cfg_check(dc, ranks - dc->servers);
}

/* "A:B" with A in [amin, amax] and B >= 0 (--straggle P:MS, --slow-worker RANK:MS). */
static dt_status parse_pair(const char *arg, const char *flag, const char *form, double amin, double amax,
                            double *a, double *b) {
    char *end;
    *a = strtod(arg, &end);
    if (end == arg || *end != ':' || !(*a >= amin && *a <= amax))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (first part in [%g, %g])", flag, arg, form, amin,
                       amax);
    const char *rest = end + 1;
    *b = strtod(rest, &end);
    if (end == rest || *end != '\0' || !(*b >= 0 && *b <= 1e7))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s (milliseconds >= 0)", flag, arg, form);
    return DT_OK;
}

dt_status cli_train_parse(cli_train_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->servers = 1;
    a->server_nice = 19;
    a->staleness = 3;
    a->seed = 1;
    a->fusion_mb = 4;
    a->stall_timeout = 60;
    a->stall_abort = -1;
    a->group_size = 1;
    a->momentum = a->decay = a->warmup_epochs = -1;
    a->beta1 = a->beta2 = a->eps = a->trust = -1;
    a->exclude = -1;
    a->keep = 3;
    a->max_loss_ratio = 100;
    a->cache_mb = -1;
    cli_flag flags[] = {
        {"--dataset", ARG_STR, &a->dataset, 0, 0, 0},
        {"--data-dir", ARG_STR, &a->data_dir, 0, 0, 0},
        {"--data", ARG_STR, &a->data, 0, 0, 0},
        {"--epochs", ARG_INT, &a->epochs, 1, 100000, 0},
        {"--max-steps", ARG_LONG, &a->max_steps, 1, 1e15, 0},
        {"--batch", ARG_INT, &a->batch, 1, 1 << 20, 0},
        {"--lr", ARG_DOUBLE, &a->lr, 1e-12, 1e6, 0},
        {"--lr-scaling", ARG_STR, &a->lr_scaling, 0, 0, 0},
        {"--warmup-epochs", ARG_DOUBLE, &a->warmup_epochs, 0, 100000, 0},
        {"--momentum", ARG_DOUBLE, &a->momentum, 0, 1, 0},
        {"--decay", ARG_DOUBLE, &a->decay, 0, 1e6, 0},
        {"--optimizer", ARG_STR, &a->optimizer, 0, 0, 0},
        {"--beta1", ARG_DOUBLE, &a->beta1, 0, 1, 0},
        {"--beta2", ARG_DOUBLE, &a->beta2, 0, 1, 0},
        {"--eps", ARG_DOUBLE, &a->eps, 1e-30, 1, 0},
        {"--trust-coefficient", ARG_DOUBLE, &a->trust, 1e-12, 1e6, 0},
        {"--exclude-bias-bn", ARG_INT, &a->exclude, 0, 1, 0},
        {"--accumulate", ARG_INT, &a->accumulate, 1, 1024, 0},
        {"--precision", ARG_STR, &a->precision, 0, 0, 0},
        {"--seed", ARG_LONG, &a->seed, 0, 9.2e18, 0},
        {"--threads", ARG_INT, &a->threads, 1, 1024, 0},
        {"--log", ARG_STR, &a->log, 0, 0, 0},
        {"--checkpoint", ARG_STR, &a->ckpt, 0, 0, 0},
        {"--checkpoint-every", ARG_LONG, &a->ckpt_every, 1, 1e15, 0},
        {"--checkpoint-dir", ARG_STR, &a->ckpt_dir, 0, 0, 0},
        {"--keep", ARG_INT, &a->keep, 1, 1000000, 0},
        {"--keep-fewer", ARG_FLAG, &a->keep_fewer, 0, 0, 0},
        {"--max-loss-ratio", ARG_DOUBLE, &a->max_loss_ratio, 0, 1e30, 0},
        {"--resume", ARG_STR, &a->resume, 0, 0, 0},
        {"--keep-global-batch", ARG_FLAG, &a->keep_global_batch, 0, 0, 0},
        {"--weights", ARG_STR, &a->weights, 0, 0, 0},
        {"--partial", ARG_FLAG, &a->partial, 0, 0, 0},
        {"--freeze", ARG_INT, &a->freeze, 1, DT_MAX_LAYERS, 0},
        {"--no-prefetch", ARG_FLAG, &a->no_prefetch, 0, 0, 0},
        {"--quiet", ARG_FLAG, &a->quiet, 0, 0, 0},
        {"--help", ARG_FLAG, &a->help, 0, 0, 0},
        {"--mode", ARG_STR, &a->mode, 0, 0, 0},
        {"--servers", ARG_INT, &a->servers, 1, 1024, 0},
        {"--server-nice", ARG_INT, &a->server_nice, 0, 19, 0},
        {"--fusion-mb", ARG_DOUBLE, &a->fusion_mb, 0, 4096, 0},
        {"--allreduce-algo", ARG_STR, &a->ar_algo, 0, 0, 0},
        {"--grad-compression", ARG_STR, &a->grad_compression, 0, 0, 0},
        {"--stall-timeout", ARG_DOUBLE, &a->stall_timeout, 0.1, 1e6, 0},
        {"--stall-abort", ARG_DOUBLE, &a->stall_abort, 0, 1e7, 0},
        {"--staleness", ARG_INT, &a->staleness, 0, 1000, 0},
        {"--straggle", ARG_STR, &a->straggle, 0, 0, 0},
        {"--slow-worker", ARG_STR, &a->slow, 0, 0, 0},
        {"--sfb", ARG_FLAG, &a->sfb, 0, 0, 0},
        {"--sacp", ARG_FLAG, &a->sacp, 0, 0, 0},
        {"--group-size", ARG_INT, &a->group_size, 1, 1 << 20, 0},
        {"--timeline", ARG_STR, &a->timeline, 0, 0, 0},
        {"--loader-threads", ARG_INT, &a->loader_threads, 1, 256, 0},
        {"--cache-mb", ARG_LONG, &a->cache_mb, 0, 1e9, 0},
        {"--skip-bad-images", ARG_FLAG, &a->skip_bad, 0, 0, 0},
        {"--val-split", ARG_DOUBLE, &a->val_split, 1e-6, 1 - 1e-6, 0},
    };
    /* Then every model-file key without a flag of its own, as --KEY. */
    cli_flag all[sizeof flags / sizeof *flags + CLI_NET_KEYS_MAX];
    int npos, n = (int)(sizeof flags / sizeof *flags);
    memcpy(all, flags, sizeof flags);
    const char *key;
    for (int i = 0; i < CLI_NET_KEYS_MAX && (key = dt_model_net_key(i)) != NULL; i++)
        if (cli_net_key_flag(key, a->net_flags[i], sizeof a->net_flags[i]) == 1)
            all[n++] = (cli_flag){a->net_flags[i], ARG_STR, &a->net_vals[i], 0, 0, 0};
    DT_TRY(cli_parse(argc, argv, all, n, &a->model, 1, &npos));
    memcpy(flags, all, sizeof flags); /* their ->seen */
    a->given_servers = cli_flag_get(flags, n, "--servers")->seen;
    a->given_server_nice = cli_flag_get(flags, n, "--server-nice")->seen;
    a->given_staleness = cli_flag_get(flags, n, "--staleness")->seen;
    a->given_fusion = cli_flag_get(flags, n, "--fusion-mb")->seen;
    a->given_group = cli_flag_get(flags, n, "--group-size")->seen;
    a->given_keep = cli_flag_get(flags, n, "--keep")->seen;
    if (a->help) return DT_OK;
    if (npos != 1) return dt_fail(DT_ERR_USAGE, "expected one MODEL.cfg (see --help)");
    return DT_OK;
}

/* The model file with the [net] keys given as flags over it, and --lr and --epochs. */
static dt_status load_model(dt_model_spec *spec, const cli_train_args *a) {
    dt_model_override ov[CLI_NET_KEYS_MAX];
    char flag[CLI_NET_KEYS_MAX][CLI_NET_FLAG_MAX];
    int n = 0;
    for (int i = 0; i < CLI_NET_KEYS_MAX; i++) {
        if (!a->net_vals[i]) continue;
        const char *key = dt_model_net_key(i);
        cli_net_key_flag(key, flag[n], sizeof flag[n]);
        ov[n] = (dt_model_override){key, a->net_vals[i], flag[n]};
        n++;
    }
    DT_TRY(cli_load_model_over(spec, a->model, ov, n, 0, a->lr, a->epochs));
    return dt_model_check_loss(spec);
}

/* The generated flags of [net] keys, for --help. */
static void print_net_flags(FILE *out) {
    fputs("  --KEY VALUE           any other [net] key of the model file, over the file's value\n"
          "                        (docs/MODEL_FILES.md; a policy given so replaces the file's schedule):\n"
          "                       ", out);
    char flag[CLI_NET_FLAG_MAX];
    const char *key;
    int col = 23;
    for (int i = 0; (key = dt_model_net_key(i)) != NULL; i++) {
        if (cli_net_key_flag(key, flag, sizeof flag) != 1) continue;
        if (col + (int)strlen(flag) + 2 > 92) {
            fputs("\n                       ", out);
            col = 23;
        }
        col += fprintf(out, " %s", flag);
    }
    fputs("\n", out);
}

/* --checkpoint, --checkpoint-dir, --keep, --checkpoint-every, --resume auto. */
static dt_status check_checkpoint_flags(const cli_train_args *a) {
    if (a->ckpt && a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--checkpoint and --checkpoint-dir exclude each other (one file, or a "
                       "directory of them)");
    if (a->ckpt_every && !a->ckpt && !a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--checkpoint-every needs --checkpoint FILE or --checkpoint-dir DIR");
    if (a->given_keep && !a->ckpt_dir) return dt_fail(DT_ERR_USAGE, "--keep needs --checkpoint-dir DIR");
    if (a->keep_fewer && !a->ckpt_dir) return dt_fail(DT_ERR_USAGE, "--keep-fewer needs --checkpoint-dir DIR");
    if (a->resume && a->weights && strcmp(a->resume, "auto") != 0)
        return dt_fail(DT_ERR_USAGE, "--weights goes with --resume auto only (the weights start the run until "
                       "--checkpoint-dir has a checkpoint); with --resume %s the run continues that checkpoint",
                       a->resume);
    if (a->resume && strcmp(a->resume, "auto") == 0 && !a->ckpt_dir)
        return dt_fail(DT_ERR_USAGE, "--resume auto needs --checkpoint-dir DIR (it resumes from there)");
    return DT_OK;
}

/* Flags that would do nothing in the mode chosen are errors, not ignored. */
static dt_status check_mode_flags(const cli_train_args *a, const dt_dist_cfg *dc) {
    const struct {
        int given;
        unsigned reads;
        const char *flag;
    } given[] = {{a->given_servers, DT_MF_SERVERS, "--servers"},
                 {a->given_server_nice, DT_MF_SERVERS, "--server-nice"},
                 {a->given_staleness, DT_MF_STALENESS, "--staleness"},
                 {a->ar_algo != NULL, DT_MF_ALGO, "--allreduce-algo"},
                 {a->given_fusion, DT_MF_ALGO, "--fusion-mb"},
                 {a->given_group, DT_MF_GROUPS, "--group-size"}};
    for (size_t i = 0; i < sizeof given / sizeof *given; i++)
        if (given[i].given) DT_TRY(dt_mode_check_flag(dc->mode, given[i].reads, given[i].flag));
    if (a->given_fusion && (dc->ar_algo == DT_AR_SHM || dc->ar_algo == DT_AR_HIER))
        return dt_fail(DT_ERR_USAGE, "--fusion-mb applies to --allreduce-algo auto, ring or mpi (buckets), not %s",
                       dt_ar_algo_name(dc->ar_algo));
    return DT_OK;
}

/* --optimizer over the model file's: the file's keys for the old one that
 * the new one would not read are an error, as in the file itself; but
 * momentum=, which nearly every file writes (for sgd), only gets a note in
 * *note (switching a file's optimiser from the command line is what the flag
 * is for). */
static dt_status switch_optimizer(dt_model_spec *spec, const char *name, char *note, size_t cap) {
    dt_optim_cfg *o = &spec->optim;
    int k = dt_optim_kind_from_name(name);
    if (k < 0) return dt_fail(DT_ERR_USAGE, "--optimizer: unknown optimizer '%s' (sgd, adam, adamw, lars, lamb)", name);
    o->kind = (dt_optim_kind)k;
    const struct {
        const char *key, *hyper;
        int written;
    } file[] = {{"beta1", "beta1", o->beta1 >= 0}, {"beta2", "beta2", o->beta2 >= 0}, {"eps", "eps", o->eps >= 0},
                {"trust_coefficient", "trust", o->trust >= 0}, {"nesterov", "nesterov", o->nesterov != 0}};
    for (size_t i = 0; i < sizeof file / sizeof *file; i++)
        if (file[i].written && !dt_optim_uses(o->kind, file[i].hyper))
            return dt_fail(DT_ERR_USAGE, "--optimizer %s: %s sets %s=, which %s does not read (remove it)", name,
                           spec->path, file[i].key, name);
    char who[64];
    if (spec->momentum_line && !dt_optim_uses(o->kind, "momentum")) {
        dt_optim_users(who, sizeof who, "momentum");
        snprintf(note, cap, "note: %s:%d: momentum= applies only to optimizer=%s (--optimizer is %s): ignored\n",
                 spec->path, spec->momentum_line, who, name);
    }
    return DT_OK;
}

/* --optimizer and its hyperparameters over the model file's; a flag the
 * optimiser would not read is an error. */
static dt_status apply_optimizer_flags(dt_model_spec *spec, const cli_train_args *a, char *note, size_t cap) {
    dt_optim_cfg *o = &spec->optim;
    if (a->optimizer) DT_TRY(switch_optimizer(spec, a->optimizer, note, cap));
    const struct {
        const char *flag, *hyper;
        double value;
        double *field;
        int below_one; /* the parser's range includes 1 */
    } given[] = {{"--momentum", "momentum", a->momentum, &o->momentum, 1}, {"--beta1", "beta1", a->beta1, &o->beta1, 1},
                 {"--beta2", "beta2", a->beta2, &o->beta2, 1},             {"--eps", "eps", a->eps, &o->eps, 0},
                 {"--trust-coefficient", "trust", a->trust, &o->trust, 0}};
    for (size_t i = 0; i < sizeof given / sizeof *given; i++) {
        if (given[i].value < 0) continue;
        if (!dt_optim_uses(o->kind, given[i].hyper)) {
            char who[64];
            dt_optim_users(who, sizeof who, given[i].hyper);
            return dt_fail(DT_ERR_USAGE, "%s applies only to --optimizer %s (the optimizer is %s)", given[i].flag,
                           who, dt_optim_kind_name(o->kind));
        }
        if (given[i].below_one && given[i].value >= 1)
            return dt_fail(DT_ERR_USAGE, "%s: %g is not below 1", given[i].flag, given[i].value);
        *given[i].field = given[i].value;
    }
    if (a->decay >= 0) o->decay = a->decay;
    if (a->exclude >= 0) o->exclude = a->exclude;
    return DT_OK;
}

/* --partial and --freeze. */
static dt_status apply_finetune_flags(dt_model_spec *spec, const cli_train_args *a) {
    if (a->partial && !a->weights)
        return dt_fail(DT_ERR_USAGE, "--partial needs --weights CHECKPOINT (the layers it loads)");
    if (a->freeze >= spec->nlayers)
        return dt_fail(DT_ERR_USAGE, "--freeze %d: %s has %d layers, the last (its softmax) included: nothing would "
                       "train", a->freeze, spec->path, spec->nlayers);
    spec->optim.freeze = a->freeze;
    return DT_OK;
}

/* Combinations of optimiser, accumulation and mode that cannot run. */
static dt_status check_mode_optimizer(const dt_model_spec *spec, const dt_dist_cfg *dc) {
    if ((dt_mode_info_of(dc->mode)->flags & DT_MF_STALENESS) && dc->staleness > 0 && spec->optim.kind != DT_OPT_SGD)
        return dt_fail(DT_ERR_USAGE, "--mode ps-ssp --staleness %d runs only with --optimizer sgd: its read-my-writes "
                       "re-applies a worker's own gradients as plain gradient steps, and a %s step is not one (use "
                       "ps-sync, ps-async or --staleness 0)", dc->staleness, dt_optim_kind_name(spec->optim.kind));
    if (spec->optim.freeze && (dt_mode_info_of(dc->mode)->flags & DT_MF_STALENESS) && dc->staleness > 0)
        return dt_fail(DT_ERR_USAGE, "--freeze does not run with --mode ps-ssp --staleness %d: its read-my-writes "
                       "steps a worker's copy of every layer between replies, so frozen layers would drift there "
                       "(use ps-sync, ps-async or --staleness 0)", dc->staleness);
    if (spec->accumulate > 1 && dc->sfb != DT_SFB_OFF)
        return dt_fail(DT_ERR_USAGE, "--accumulate %d does not run with --sfb/--sacp: sufficient factors are the "
                       "last pass's samples only", spec->accumulate);
    return DT_OK;
}

static dt_status read_meta(const char *path, void *ctx) { return dt_checkpoint_verify(path, ctx); }

/* --keep-global-batch: resumed on another number of workers, a step keeps
 * the checkpoint's samples G (its schedule and place in the epoch count in
 * them): G / workers a worker, in the fewest passes (--accumulate) of at
 * most the batch that divide it. */
static dt_status keep_global_batch(cli_train_plan *p, int workers) {
    dt_model_spec *spec = &p->spec;
    if (!p->opts.resume_path)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch keeps the global batch of the checkpoint a run resumes "
                       "from: give --resume");
    struct stat st;
    if (strcmp(p->opts.resume_path, "auto") == 0 && p->opts.checkpoint_dir && stat(p->opts.checkpoint_dir, &st) != 0)
        return DT_OK; /* no directory yet: nothing to resume */
    dt_ckpt_meta m;
    char from[4096];
    DT_TRY(dt_resume_find(&p->opts, read_meta, NULL, &m, from, sizeof from));
    long global = (long)m.step_samples, mine = (long)dt_model_step_batch(spec) * workers;
    if (!from[0] || global == 0 || global == mine) return DT_OK; /* nothing to resume, or nothing to change */
    if (spec->subdivisions > 1)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch: %s sets subdivisions=%d; the passes of a step are "
                       "chosen here instead: remove it", spec->path, spec->subdivisions);
    if (global % workers != 0)
        return dt_fail(DT_ERR_USAGE, "--keep-global-batch: the checkpoint's steps of %ld samples (%s) do not divide "
                       "among %d workers", global, from, workers);
    int each = (int)(global / workers), passes = 1;
    while (each % passes != 0 || each / passes > spec->batch) passes++;
    spec->batch = each / passes;
    spec->accumulate = passes;
    p->dist.batch = spec->batch;
    return DT_OK;
}

dt_status cli_train_prepare(cli_train_plan *p, const cli_train_args *a, int ranks, int in_sweep) {
    memset(p, 0, sizeof *p);
    DT_TRY(check_checkpoint_flags(a));
    int rule = dt_lr_scaling_from_name(a->lr_scaling ? a->lr_scaling : "none");
    if (rule < 0)
        return dt_fail(DT_ERR_USAGE, "--lr-scaling: unknown rule '%s' (linear, none)", a->lr_scaling);
    p->scaling = (dt_lr_scaling)rule;
    dt_model_spec *spec = &p->spec;
    DT_TRY(load_model(spec, a));
    if (a->epochs > 0 && spec->sched.max_batches > 0)
        return dt_fail(DT_ERR_USAGE, "--epochs: %s sets max_batches=%d, the run's length in steps (--max-steps "
                       "stops earlier)", spec->path, spec->sched.max_batches);
    if ((int64_t)spec->batch * spec->accumulate > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "%s: batch=%d x accumulate=%d is too large a batch", spec->path, spec->batch,
                       spec->accumulate);
    p->base_batch = dt_model_step_batch(spec); /* the file's step's batch */
    if (a->batch > 0) spec->batch = a->batch;
    DT_TRY(apply_optimizer_flags(spec, a, p->notes, sizeof p->notes));
    DT_TRY(apply_finetune_flags(spec, a));
    DT_TRY(cli_precision(spec, a->precision));
    if (a->accumulate > 0 && spec->subdivisions > 1)
        return dt_fail(DT_ERR_USAGE, "--accumulate: %s sets subdivisions=%d (its batch is the step's); change "
                       "subdivisions= there instead", spec->path, spec->subdivisions);
    if (a->accumulate > 0) spec->accumulate = a->accumulate;
    if ((int64_t)spec->batch * spec->accumulate * ranks > INT_MAX)
        return dt_fail(DT_ERR_USAGE, "--batch %d x --accumulate %d x %d ranks is too large a global batch", spec->batch,
                       spec->accumulate, ranks);
    if (a->warmup_epochs > 0 && spec->sched.burn_in > 0)
        return dt_fail(DT_ERR_USAGE, "--warmup-epochs: %s has burn_in=%d, Darknet's warmup; give one of them",
                       spec->path, spec->sched.burn_in);
    if (a->warmup_epochs >= 0) spec->sched.warmup_epochs = a->warmup_epochs;
    dt_train_opts *o = &p->opts;
    DT_TRY(cli_data_source(&o->dataset, &o->data_dir, a->data, a->dataset, a->data_dir, spec));
    DT_TRY(cli_folder_flags(o->dataset, o->data_dir, a->cache_mb, a->skip_bad));
    DT_TRY(cli_val_split_flag(o->dataset, a->val_split));
    if (a->sfb && a->sacp) return dt_fail(DT_ERR_USAGE, "--sfb and --sacp exclude each other");
    dt_dist_cfg dc = {.mode = DT_MODE_SERIAL,
                      .fusion_mb = a->fusion_mb,
                      .stall = {.report = a->stall_timeout,
                                .abort = a->stall_abort < 0 ? 10 * a->stall_timeout : a->stall_abort,
                                .give_up = cli_end_stalled_job},
                      .staleness = a->staleness,
                      .sfb = a->sfb ? DT_SFB_ALL : a->sacp ? DT_SFB_AUTO : DT_SFB_OFF,
                      .batch = spec->batch,
                      .group_size = a->group_size,
                      .ar_algo = DT_AR_AUTO,
                      .codec = {DT_GC_NONE, 0},
                      .server_nice = a->server_nice};
    int algo = dt_ar_algo_from_name(a->ar_algo ? a->ar_algo : "auto");
    char list[64];
    if (algo < 0)
        return dt_fail(DT_ERR_USAGE, "--allreduce-algo: unknown algorithm '%s' (%s)", a->ar_algo,
                       dt_ar_algo_list(list, sizeof list));
    dc.ar_algo = (dt_ar_algo)algo;
    if (a->grad_compression) DT_TRY(dt_grad_codec_parse(a->grad_compression, &dc.codec));
    DT_TRY(resolve_mode(&dc, a->mode, a->servers, ranks, in_sweep));
    DT_TRY(check_mode_flags(a, &dc));
    DT_TRY(check_mode_optimizer(spec, &dc));
    p->dist = dc;
    dt_straggle_cfg *sc = &p->straggle;
    if (a->straggle) DT_TRY(parse_pair(a->straggle, "--straggle", "P:MS", 0, 1, &sc->p, &sc->ms));
    double slow_rank = 0;
    if (a->slow) DT_TRY(parse_pair(a->slow, "--slow-worker", "RANK:MS", 0, 65535, &slow_rank, &sc->slow_ms));
    sc->slow_rank = (int)slow_rank;
    if (a->slow && (sc->slow_rank < dc.servers || sc->slow_rank >= ranks))
        return dt_fail(DT_ERR_USAGE, "--slow-worker %s: rank %d is not a worker (the workers are ranks %d to %d)",
                       a->slow, sc->slow_rank, dc.servers, ranks - 1);
    o->epochs = spec->epochs;
    o->max_steps = a->max_steps;
    o->seed = (uint64_t)a->seed;
    o->log_path = a->log;
    o->checkpoint_path = a->ckpt;
    o->checkpoint_every = a->ckpt_every;
    o->checkpoint_dir = a->ckpt_dir;
    if (a->ckpt_dir && a->ckpt_dir == a->backup) {
        size_t used = strlen(p->notes);
        snprintf(p->notes + used, sizeof p->notes - used, "note: checkpoints in %s (backup= of %s)\n", a->ckpt_dir,
                 a->data);
    }
    o->keep = a->keep;
    o->keep_fewer = a->keep_fewer;
    o->max_loss_ratio = a->max_loss_ratio;
    o->resume_path = a->resume;
    o->weights_path = a->weights;
    o->partial = a->partial;
    o->quiet = a->quiet;
    o->prefetch = !a->no_prefetch;
    o->loader_threads = a->loader_threads ? a->loader_threads : cli_default_loader_threads(o->dataset);
    o->skip_bad = a->skip_bad;
    o->val_split = a->val_split;
    p->cache_mb = a->cache_mb;
    p->timeline_path = a->timeline;
    p->threads = a->threads;
    if (a->keep_global_batch) DT_TRY(keep_global_batch(p, ranks - dc.servers));
    return DT_OK;
}

/* Flushes (and, when the run allows it, merges) the timeline after the
 * run, which ended with status run; the run's own error stays the one
 * returned, a timeline error after a failed run is only printed. */
static dt_status close_timeline(dt_timeline *tl, const dt_comm *comm, dt_status run, const cli_env *env) {
    if (!tl) return run;
    if (run == DT_OK) return dt_comm_timeline_close(tl, comm, run);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    dt_status s = dt_comm_timeline_close(tl, comm, run);
    if (s != DT_OK) cli_report(s, env);
    return dt_fail(run, "%s", msg);
}

/* Every rank must have built the same network (same model file). */
/* Every rank reads the same model file, and the checkpoint to resume from
 * fits it (the workers read it; servers get the parameters from worker 0):
 * verdicts every rank shares, so that a wrong file ends the job in order
 * (one message) rather than by one worker's failure aborting all. */
static dt_status check_model(const dt_comm *comm, const cli_train_plan *p) {
    if (comm->size == 1) return DT_OK;
    dt_net *net = NULL;
    /* A net one rank cannot build (its file differs) fails on every rank. */
    dt_status s = dt_comm_agree(comm, dt_net_create(&net, &p->spec, 1, 1));
    if (s != DT_OK) {
        dt_net_free(net);
        return s;
    }
    s = dt_comm_check_model(comm, net->shape_hash, p->spec.path);
    /* The run's last step where it is known before the data set: lockstep
     * modes' --max-steps or max_batches (asynchronous workers share a budget). */
    long last = p->spec.sched.max_batches;
    if (p->opts.max_steps > 0 && (last == 0 || p->opts.max_steps < last)) last = p->opts.max_steps;
    if (dt_mode_is_async(p->dist.mode)) last = 0;
    if (s == DT_OK)
        s = dt_comm_agree(comm, comm->worker >= 0 ? dt_resume_check(&p->opts, net,
                                                                   (long)dt_model_step_batch(&p->spec) *
                                                                       comm->nworkers, last)
                                                 : DT_OK);
    dt_net_free(net);
    return s;
}

/* ", augmentation: ..." of the start-up line (nothing without any). */
static void print_augment(FILE *out, const dt_model_spec *spec) {
    const dt_augment *a = &spec->augment;
    if (!spec->flip && !spec->crop_pad && !a->crop && !a->resized_crop && !dt_augment_distorts(a) && !spec->erase)
        return;
    const char *sep = ", augmentation:";
    if (a->resized_crop)
        fprintf(out, "%s RandomResizedCrop (scale %g..%g, ratio %g..%g)", sep, (double)a->scale[0],
                (double)a->scale[1], (double)a->ratio[0], (double)a->ratio[1]), sep = ",";
    if (spec->flip) fprintf(out, "%s flip", sep), sep = ",";
    if (spec->crop_pad) fprintf(out, "%s crop padded by %d", sep, spec->crop_pad), sep = ",";
    if (a->crop)
        fprintf(out, "%s Darknet crop (shorter side %d..%d, aspect %g, angle %g)", sep, a->min_crop, a->max_crop,
                (double)a->aspect, (double)a->angle), sep = ",";
    if (dt_augment_distorts(a))
        fprintf(out, "%s hue %g, saturation %g, exposure %g", sep, (double)a->hue, (double)a->saturation,
                (double)a->exposure), sep = ",";
    if (spec->erase) fprintf(out, "%s random erasing (p %g)", sep, (double)spec->erase);
}

/* The start-up line: what is trained, on what, and where its learning rate
 * comes from (the recipe's base rate, factor and warmup). */
static void print_start(FILE *out, const cli_train_plan *p, const dt_comm *comm, int nthreads) {
    const dt_model_spec *spec = &p->spec;
    const dt_lr_schedule *ls = &spec->sched;
    fprintf(out, "dtrain: training %s on %s: %d layers, batch %d per worker", spec->path,
            dt_dataset_kind_name(p->opts.dataset), spec->nlayers, spec->batch);
    if (spec->accumulate > 1) fprintf(out, " x %d passes per step", spec->accumulate);
    if (comm->nworkers > 1)
        fprintf(out, " x %d workers = %d global", comm->nworkers, dt_model_step_batch(spec) * comm->nworkers);
    if (ls->max_batches > 0)
        fprintf(out, ", %d steps (max_batches)", ls->max_batches);
    else
        fprintf(out, ", %d epochs", spec->epochs);
    fprintf(out, ", %s, lr %g", dt_optim_kind_name(spec->optim.kind), ls->base_lr / ls->lr_scale);
    if (p->scaling == DT_LR_SCALING_LINEAR)
        fprintf(out, " x %g = %g (linear scaling from base batch %d, ", ls->lr_scale, ls->base_lr, p->base_batch);
    else
        fprintf(out, " (");
    if (ls->warmup_epochs > 0)
        fprintf(out, "warmup %g epochs from %g, then ", ls->warmup_epochs, ls->warmup_start_factor * ls->base_lr);
    if (ls->burn_in > 0) fprintf(out, "burn_in %d steps (power %g), then ", ls->burn_in, ls->power);
    fprintf(out, "%s), %s, %d thread%s, mode %s", dt_schedule_kind_name(ls->kind),
            dt_precision_name(spec->precision), nthreads, nthreads == 1 ? "" : "s", dt_mode_name(p->dist.mode));
    if (dt_mode_is_ps(p->dist.mode)) fprintf(out, " with %d server%s", p->dist.servers, p->dist.servers == 1 ? "" : "s");
    if (dt_mode_info_of(p->dist.mode)->flags & DT_MF_STALENESS) fprintf(out, ", staleness %d", p->dist.staleness);
    if (p->dist.sfb != DT_SFB_OFF) fprintf(out, ", %s", dt_sfb_policy_name(p->dist.sfb));
    if (p->dist.group_size > 1)
        fprintf(out, ", %d groups of %d workers", comm->nworkers / p->dist.group_size, p->dist.group_size);
    char codec[32];
    if (p->dist.codec.kind != DT_GC_NONE)
        fprintf(out, ", gradients as %s", dt_grad_codec_name(&p->dist.codec, codec, sizeof codec));
    print_augment(out, spec);
    fprintf(out, "\n%s", p->notes);
    /* Darknet's [connected] defaults to logistic: squashed logits train
     * worse (cnn: 0.686 against 0.753 test accuracy after 300 steps). */
    if (spec->logistic_head_line)
        fprintf(out, "note: %s:%d: the [connected] before [softmax] has no activation=, so Darknet's default "
                "logistic squashes its logits into (0, 1), which costs accuracy; write activation=linear there for "
                "plain logits (PyTorch's nn.Linear)\n", spec->path, spec->logistic_head_line);
}

/* Whether to redraw a progress bar on out. Under mpirun every rank's
 * output is a pty whatever the user's is, so there only `dtrain launch`
 * knows (DT_PROGRESS_TTY); plain mpirun gets plain lines. */
static int progress_tty(FILE *out) {
    const char *said = getenv("DT_PROGRESS_TTY");
    if (said) return strcmp(said, "1") == 0;
    return !getenv("OMPI_COMM_WORLD_SIZE") && isatty(fileno(out));
}

/* The trainers' set-up (data, the checkpoint's place in an epoch) and the
 * strategy's creation, agreed by every rank: a failure there is everyone's,
 * said once, with no MPI_Abort. Servers agree with DT_OK. */
typedef struct {
    const dt_comm *comm;
    cli_train_plan *plan;
} setup_agreement;

static dt_status agree_setup(void *ctx, dt_status local) {
    setup_agreement *a = ctx;
    dt_status s = dt_comm_agree(a->comm, local);
    a->plan->agreed_failure = s != DT_OK && s != DT_ERR_MPI;
    return s;
}

/* opened: whether this rank's timeline part could be created (a failure is
 * agreed with the set-up's). */
static dt_status run_worker(cli_train_plan *p, const dt_comm *comm, const cli_env *env,
                            cli_signals *sig, FILE *out, dt_train_summary *sum, dt_status opened) {
    setup_agreement agreement = {comm, p};
    if (opened != DT_OK) return agree_setup(&agreement, opened);
    int nthreads = cli_set_threads(p->threads, env);
    dt_train_opts *o = &p->opts;
    o->cache_bytes = cli_cache_bytes(p->cache_mb, env);
    o->progress_tty = out && progress_tty(out);
    o->worker = comm->worker;
    o->workers = comm->nworkers;
    o->stop = &sig->stop;
    o->progress_request = &sig->progress;
    o->out = comm->worker == 0 ? out : NULL;
    if (!o->quiet && o->out) {
        print_start(o->out, p, comm, nthreads);
        p->dist.plan_out = o->out;
    }
    o->agree_setup = agree_setup;
    o->agree_ctx = &agreement;
    dt_sync *sync = NULL;
    dt_status s = dt_mode_info_of(p->dist.mode)->create(&sync, comm, &p->dist);
    dt_straggle_cfg sc = p->straggle;
    sc.seed = o->seed;
    sc.world_rank = comm->rank;
    sc.timeline = o->timeline;
    if (s == DT_OK) s = dt_sync_straggle_wrap(&sync, &sc);
    if (s == DT_OK)
        s = dt_train_run(&p->spec, o, sync, sum);
    else
        s = agree_setup(&agreement, s);
    o->agree_setup = NULL; /* the plan outlives this frame (sweeps reuse it) */
    o->agree_ctx = NULL;
    s = close_timeline(p->dist.timeline, comm, s, env);
    if (sync) sync->free(sync); /* before the timeline: its threads record until it is freed */
    return s;
}

dt_status cli_train_run(cli_train_plan *p, MPI_Comm world, const cli_env *env,
                        cli_signals *sig, FILE *out, dt_train_summary *sum) {
    dt_comm comm;
    dt_status s = dt_comm_create(&comm, world, p->dist.servers);
    if (s == DT_OK) {
        s = check_model(&comm, p);
        p->agreed_failure = s != DT_OK && s != DT_ERR_MPI; /* the same verdict on every rank */
    }
    /* The recipe needs the global batch, known once the ranks are split. */
    if (s == DT_OK)
        s = dt_lr_scale(&p->spec.sched, p->scaling, p->base_batch,
                        dt_model_step_batch(&p->spec) * comm.nworkers);
    /* Before anything trains, so a bad path stops the run at once: a rank
     * that cannot create its part fails at the set-up agreement, in order. */
    dt_status opened = DT_OK;
    if (s == DT_OK && p->timeline_path) opened = dt_comm_timeline_open(&p->dist.timeline, &comm, p->timeline_path);
    if (opened == DT_ERR_MPI) s = opened;
    p->opts.timeline = p->dist.timeline;
    p->dist.stop = &sig->stop;
    if (s == DT_OK && comm.worker < 0) {
        cli_set_threads(1, env); /* a server only sums and steps its shard */
        setup_agreement agreement = {&comm, p};
        s = agree_setup(&agreement, opened);
        if (s == DT_OK) s = dt_server_run(&comm, &p->dist, &p->spec);
        s = close_timeline(p->dist.timeline, &comm, s, env);
    } else if (s == DT_OK) {
        s = run_worker(p, &comm, env, sig, out, sum, opened);
    }
    dt_timeline_free(p->dist.timeline);
    p->dist.timeline = NULL;
    dt_comm_free(&comm);
    return s;
}

/* The run, once every rank agreed that it can start. */
static int train_started(cli_train_plan *p, cli_env *env, cli_signals *sig) {
    dt_train_summary sum;
    dt_status s = cli_train_run(p, MPI_COMM_WORLD, env, sig, stdout, &sum);
    /* Interrupted or diverged, every rank ends by itself: no MPI_Abort. */
    env->orderly = dt_run_ended_together(s) || p->agreed_failure;
    if (p->agreed_failure && env->rank != 0) return dt_status_exit_code(s); /* rank 0 says it */
    return cli_report(s, env);
}

/* --data's backup= is the run's --checkpoint-dir when neither
 * --checkpoint nor --checkpoint-dir is given (Darknet writes its weights
 * there). */
static dt_status use_backup(cli_train_args *a) {
    if (!a->data || a->ckpt || a->ckpt_dir) return DT_OK;
    dt_darknet_data d;
    DT_TRY(dt_darknet_data_read(&d, a->data));
    dt_status s = DT_OK;
    if (d.backup && (size_t)snprintf(a->backup, sizeof a->backup, "%s", d.backup) >= sizeof a->backup)
        s = dt_fail(DT_ERR_USAGE, "%s: backup= is too long a path", a->data);
    if (s == DT_OK && d.backup) a->ckpt_dir = a->backup;
    dt_darknet_data_free(&d);
    return s;
}

int cmd_train(int argc, char **argv, cli_env *env, cli_signals *sig) {
    cli_train_args a;
    dt_status s = cli_train_parse(&a, argc, argv);
    if (s == DT_OK && !a.help) s = use_backup(&a);
    if (s == DT_OK && a.help) {
        fputs(train_usage, stdout);
        dt_mode_usage(stdout, train_usage_mode);
        fputs(train_usage_dist, stdout);
        dt_ar_algo_usage(stdout, train_usage_algo);
        fputs(train_usage_tail, stdout);
        print_net_flags(stdout);
        return 0;
    }
    cli_train_plan p;
    if (s == DT_OK) s = cli_train_prepare(&p, &a, env->world, 0);
    if (s == DT_OK) s = cli_check_path_collisions(&a);
    /* Worker 0 writes the log and the checkpoints, and owns the directory
     * while it runs (released when this process ends, however it ends). */
    int lock = -1;
    if (s == DT_OK && env->rank == p.dist.servers) s = cli_check_outputs_writable(&a);
    if (s == DT_OK && env->rank == p.dist.servers && a.ckpt_dir) s = dt_ckptdir_lock(a.ckpt_dir, &lock);
    int code = cli_agree_start(s, env);
    if (code == 0) code = train_started(&p, env, sig);
    if (lock >= 0) close(lock);
    return code;
}
