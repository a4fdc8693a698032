/* dtrain info MODEL.cfg [--json | --dot | --plan]: per-layer shapes,
 * parameters, FLOPs, or the network graph for visualisation, as JSON (nodes
 * and edges) or as Graphviz DOT (dot -Tsvg draws it); with --plan, the SACP
 * communication plan for P workers and S servers at batch K. */
#include <stdio.h>
#include <string.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/plan.h"
#include "dtrain/json.h"
#include "dtrain/net.h"

/* The graph id of layer i's input k: "input" for the data, else "L<n>". */
static const char *input_id(char *buf, size_t cap, const dt_layer *l, int k) {
    if (l->spec.inputs[k] < 0) return "input";
    snprintf(buf, cap, "L%d", l->spec.inputs[k]);
    return buf;
}

/* Layer i's inputs for the table: "-" when it is the previous layer alone
 * (a chain), else "in" / "L3" / "L3,L5". */
static void inputs_text(char *buf, size_t cap, const dt_layer *l, int i) {
    char id[16];
    if (l->ninputs == 1 && l->spec.inputs[0] == i - 1) {
        snprintf(buf, cap, "-");
        return;
    }
    buf[0] = '\0';
    for (int k = 0; k < l->ninputs; k++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", k ? "," : "", input_id(id, sizeof id, l, k));
    }
}

/* ", Winograd" when layer l of info's net (built in fp32 to infer shapes)
 * runs Winograd's algorithm in the file's precision: dtrain's (nChw8c, or
 * nChw16c on Zen 4) or oneDNN's (nChw16c). */
static const char *winograd_text(const dt_layer *l, const dt_model_spec *spec) {
    if (dt_layer_precision(l, spec->precision) != DT_PRECISION_FP32) return "";
    return dt_layer_winograd(l) ? ", Winograd" : dt_layer_dnnl_winograd(l) ? ", Winograd (oneDNN)" : "";
}

/* How the engine runs layer l: "folded into L<n>" for a ReLU done by the
 * layer it reads, "nChw8c"/"nChw16c" for an output in a blocked layout,
 * else "-"; ", Winograd" after a convolution that runs Winograd's algorithm. */
static const char *engine_text(char *buf, size_t cap, const dt_layer *l, const dt_model_spec *spec) {
    if (l->folded)
        snprintf(buf, cap, "folded into L%d", l->spec.inputs[0]);
    else
        snprintf(buf, cap, "%s%s", l->out_layout == DT_LAYOUT_NCHW ? "-" : dt_layout_name(l->out_layout),
                 winograd_text(l, spec));
    return buf;
}

static void print_table(const dt_net *net, const dt_model_spec *spec) {
    printf("%s: input %dx%dx%d, batch %d, precision %s\n", spec->path, net->input.c, net->input.h,
           net->input.w, spec->batch, dt_precision_name(spec->precision));
    printf("%-3s %-14s %-5s %-12s %-16s %12s %12s  %s\n", "#", "layer", "line", "inputs", "output (CxHxW)",
           "params", "MFLOPs/img", "engine");
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        char shape[32], inputs[96], engine[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", l->out.c, l->out.h, l->out.w);
        inputs_text(inputs, sizeof inputs, l, i);
        printf("%-3d %-14s %-5d %-12s %-16s %12zu %12.3f  %s\n", i, l->ops->name, l->spec.line, inputs, shape,
               l->nw + l->nb, (double)l->ops->flops(l) / 1e6, engine_text(engine, sizeof engine, l, spec));
    }
    printf("total: %zu parameters (%.2f MB), %.3f MFLOPs per image forward, %.1f MB at batch %d\n",
           net->nparams, (double)net->nparams * 4 / 1e6, (double)dt_net_flops(net) / 1e6,
           (double)dt_net_bytes(net) / 1e6, spec->batch);
}

/* The shape of layer l's parameter block `which` (0: w, 1: b) or state block
 * (2: running mean, 3: running var) as the layer stores it: conv weights
 * (F, C/groups, K, K), connected (out, in), everything else one axis. */
static void print_tensor_shape(const dt_layer *l, int which) {
    size_t dims[4];
    int n = which == 0 && l->ops->weight_dims ? l->ops->weight_dims(l, dims) : 0;
    if (!n) {
        printf("[%zu]", which == 0 ? l->nw : which == 1 ? l->nb : l->nstate / 2);
        return;
    }
    for (int k = 0; k < n; k++) printf("%c%zu", k ? ',' : '[', dims[k]);
    printf("]");
}

/* "tensors": the layer's parameter and state blocks in checkpoint order
 * (PyTorch's names for them), so that tools can slice a checkpoint. */
static void print_tensors(const dt_layer *l) {
    static const char *const names[] = {"weight", "bias", "running_mean", "running_var"};
    size_t sizes[] = {l->nw, l->nb, l->nstate / 2, l->nstate / 2};
    const char *sep = "";
    printf(",\"tensors\":[");
    for (int k = 0; k < 4; k++) {
        if (!sizes[k]) continue;
        printf("%s{\"name\":\"%s\",\"block\":\"%s\",\"shape\":", sep, names[k],
               k < 2 ? "params" : "state");
        print_tensor_shape(l, k);
        printf("}");
        sep = ",";
    }
    printf("]");
}

static void print_json(const dt_net *net, const dt_model_spec *spec) {
    char model[1024];
    printf("{\"model\":\"%s\",\"input\":[%d,%d,%d],\"precision\":\"%s\",\"params\":%zu,\"flops\":%llu,"
           "\"shape_hash\":\"%016llx\",\"nodes\":[",
           dt_json_escape(model, sizeof model, spec->path), net->input.c, net->input.h, net->input.w,
           dt_precision_name(spec->precision), net->nparams,
           (unsigned long long)dt_net_flops(net), (unsigned long long)net->shape_hash);
    printf("{\"id\":\"input\",\"type\":\"input\",\"output\":[%d,%d,%d]}", net->input.c, net->input.h,
           net->input.w);
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        printf(",{\"id\":\"L%d\",\"type\":\"%s\",\"line\":%d,\"output\":[%d,%d,%d],\"params\":%zu,"
               "\"flops\":%llu,\"layout\":\"%s\",\"folded\":%s,\"winograd\":%s",
               i, l->ops->name, l->spec.line, l->out.c, l->out.h, l->out.w, l->nw + l->nb,
               (unsigned long long)l->ops->flops(l), dt_layout_name(l->out_layout),
               l->folded ? "true" : "false", *winograd_text(l, spec) ? "true" : "false");
        print_tensors(l);
        printf("}");
    }
    printf("],\"edges\":[");
    char from[16];
    const char *sep = "";
    for (int i = 0; i < net->nlayers; i++)
        for (int k = 0; k < net->layers[i].ninputs; k++, sep = ",")
            printf("%s[\"%s\",\"L%d\"]", sep, input_id(from, sizeof from, &net->layers[i], k), i);
    printf("]}\n");
}

/* src as the inside of a DOT string: quotes and backslashes escaped, control
 * characters (which DOT strings cannot hold) as spaces. */
static char *dot_escape(char *dst, size_t cap, const char *src) {
    size_t o = 0;
    for (const char *p = src; *p && o + 3 < cap; p++) {
        if (*p == '"' || *p == '\\') dst[o++] = '\\';
        dst[o++] = (unsigned char)*p < 0x20 ? ' ' : *p;
    }
    dst[o] = '\0';
    return dst;
}

/* One node per layer (and one for the input) labelled with its type, output
 * shape and parameter count; edges in forward order, skip edges (any but
 * from the layer before) dashed. */
static void print_dot(const dt_net *net, const dt_model_spec *spec) {
    char model[2048];
    printf("digraph dtrain {\n  label=\"%s: %zu parameters\";\n  labelloc=t;\n"
           "  fontname=\"sans-serif\";\n",
           dot_escape(model, sizeof model, spec->path), net->nparams);
    printf("  node [shape=box, style=rounded, fontname=\"sans-serif\"];\n");
    printf("  input [label=\"input\\n%dx%dx%d\"];\n", net->input.c, net->input.h, net->input.w);
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        printf("  L%d [label=\"L%d %s\\n%dx%dx%d\\n%zu params\"];\n", i, i, l->ops->name, l->out.c,
               l->out.h, l->out.w, l->nw + l->nb);
    }
    char from[16];
    for (int i = 0; i < net->nlayers; i++)
        for (int k = 0; k < net->layers[i].ninputs; k++) {
            int skip = net->layers[i].spec.inputs[k] != i - 1;
            printf("  %s -> L%d%s;\n", input_id(from, sizeof from, &net->layers[i], k), i,
                   skip ? " [style=dashed]" : "");
        }
    printf("}\n");
}

/* Poseidon's per-layer choice for --sacp, and what each server carries. */
static dt_status print_plan(const dt_net *net, const dt_model_spec *spec, const char *mode_name, int workers,
                            int servers, const char *compression) {
    int m = dt_mode_from_name(mode_name);
    char list[160];
    dt_mode_list(DT_MF_FACTORS, list, sizeof list);
    if (m < 0 || !(dt_mode_info_of((dt_mode)m)->flags & DT_MF_FACTORS))
        return dt_fail(DT_ERR_USAGE, "--mode: the plan is for %s, not '%s'", list, mode_name);
    dt_grad_codec codec;
    DT_TRY(dt_grad_codec_parse(compression, &codec));
    dt_dist_cfg cfg = {.mode = (dt_mode)m, .sfb = DT_SFB_AUTO, .group_size = 1, .codec = codec};
    DT_TRY(dt_dist_cfg_check(&cfg, workers)); /* what train would refuse, the plan does too */
    dt_comm_plan plan;
    DT_TRY(dt_comm_plan_create(&plan, net, (dt_mode)m, DT_SFB_AUTO, workers, spec->batch, &codec));
    printf("plan: %s, %s, %d workers x batch %d", spec->path, mode_name, workers, spec->batch);
    if (dt_mode_is_ps((dt_mode)m)) printf(", %d server%s", servers, servers == 1 ? "" : "s");
    char name[32];
    if (codec.kind != DT_GC_NONE) printf(", gradients as %s", dt_grad_codec_name(&codec, name, sizeof name));
    printf("; bytes per worker per step, sent + received\n");
    dt_comm_plan_write(stdout, &plan, net);
    if (dt_mode_is_ps((dt_mode)m))
        printf("plan: each server moves %.3f MB per step (its shard of %zu floats to and from %d workers)\n",
               2 * workers * dt_ps_bytes_each_way(&codec, plan.ps_n) / servers / 1e6,
               plan.ps_n / (size_t)servers, workers);
    dt_comm_plan_free(&plan);
    return DT_OK;
}

static const char info_usage[] =
    "usage: dtrain info MODEL.cfg [flags]\n"
    "  the network: each layer's output shape, parameters and FLOPs (a table by default)\n"
    "  --json            the network graph (nodes, edges) as JSON\n"
    "  --dot             the same as a Graphviz drawing (| dot -Tsvg -o net.svg)\n"
    "  --plan            the communication plan: per layer, bytes the usual way and as\n"
    "                    sufficient factors, and what --sacp picks\n"
    "  --workers P       --plan: workers (default 2)\n"
    "  --servers S       --plan: parameter servers (default 1)\n"
    "  --mode M          --plan: ps-sync (default) or allreduce\n"
    "  --grad-compression C  --plan: none (default), bf16, fp16, topk:R (allreduce only)\n"
    "  --batch N         batch per worker (default: the model file's)\n";

/* The flags only --plan reads are errors without it, not ignored. */
static dt_status check_plan_flags(const dt_opt *flags, int n) {
    static const char *const plan_only[] = {"--workers", "--servers", "--mode", "--grad-compression"};
    for (size_t i = 0; i < sizeof plan_only / sizeof *plan_only; i++)
        if (dt_opt_find(flags, n, plan_only[i])->seen)
            return dt_fail(DT_ERR_USAGE, "info: %s applies to --plan (the communication plan); add --plan",
                           plan_only[i]);
    return DT_OK;
}

int cmd_info(int argc, char **argv, const cli_env *env) {
    int json = 0, dot = 0, batch = 0, plan = 0, workers = 2, servers = 1, help = 0;
    const char *mode = "ps-sync", *compression = "none";
    dt_opt flags[] = {
        {"--help", DT_OPT_FLAG, &help, 0, 0, 0},
        {"--json", DT_OPT_FLAG, &json, 0, 0, 0},
        {"--dot", DT_OPT_FLAG, &dot, 0, 0, 0},
        {"--batch", DT_OPT_INT, &batch, 1, 1 << 20, 0},
        {"--plan", DT_OPT_FLAG, &plan, 0, 0, 0},
        {"--workers", DT_OPT_INT, &workers, 1, 1 << 20, 0},
        {"--servers", DT_OPT_INT, &servers, 1, 1024, 0},
        {"--mode", DT_OPT_STR, &mode, 0, 0, 0},
        {"--grad-compression", DT_OPT_STR, &compression, 0, 0, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && help) {
        fputs(info_usage, stdout);
        return 0;
    }
    if (s == DT_OK && npos != 1) s = dt_fail(DT_ERR_USAGE, "info: expected one MODEL.cfg (see dtrain info --help)");
    if (s == DT_OK && json + dot + plan > 1)
        s = dt_fail(DT_ERR_USAGE, "info: --json, --dot and --plan exclude each other");
    if (s == DT_OK && !plan) s = check_plan_flags(flags, (int)(sizeof flags / sizeof *flags));
    dt_model_spec spec;
    if (s == DT_OK) s = dt_setup_model(&spec, pos[0], batch, 0, 0);
    dt_net *net = NULL;
    /* info describes the file's precision on any CPU: the net it builds to
     * infer shapes runs no products. */
    dt_model_spec shapes = spec;
    shapes.precision = DT_PRECISION_FP32;
    if (s == DT_OK) s = dt_net_create(&net, &shapes, spec.batch, 1);
    if (s == DT_OK && env->rank == 0) {
        if (plan)
            s = print_plan(net, &spec, mode, workers, servers, compression);
        else if (json)
            print_json(net, &spec);
        else if (dot)
            print_dot(net, &spec);
        else
            print_table(net, &spec);
    }
    dt_net_free(net);
    return cli_report(s, env);
}
