/* dtrain info MODEL.cfg [--json]: per-layer shapes, parameters, FLOPs, or the
 * network graph as JSON (nodes and edges) for visualisation; with --plan,
 * the SACP communication plan for P workers and S servers at batch K. */
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "dtrain/dist.h"
#include "dtrain/json.h"
#include "dtrain/net.h"

static void print_table(const dt_net *net, const dt_model_spec *spec) {
    printf("%s: input %dx%dx%d, batch %d\n", spec->path, net->input.c, net->input.h, net->input.w,
           spec->batch);
    printf("%-3s %-14s %-5s %-16s %12s %12s\n", "#", "layer", "line", "output (CxHxW)", "params",
           "MFLOPs/img");
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%d", l->out.c, l->out.h, l->out.w);
        printf("%-3d %-14s %-5d %-16s %12zu %12.3f\n", i, l->ops->name, l->spec.line, shape,
               l->nw + l->nb, (double)l->ops->flops(l) / 1e6);
    }
    printf("total: %zu parameters (%.2f MB), %.3f MFLOPs per image forward, %.1f MB at batch %d\n",
           net->nparams, (double)net->nparams * 4 / 1e6, (double)dt_net_flops(net) / 1e6,
           (double)dt_net_bytes(net) / 1e6, spec->batch);
}

static void print_json(const dt_net *net, const dt_model_spec *spec) {
    char model[1024];
    printf("{\"model\":\"%s\",\"input\":[%d,%d,%d],\"params\":%zu,\"flops\":%llu,\"nodes\":[",
           dt_json_escape(model, sizeof model, spec->path), net->input.c, net->input.h, net->input.w, net->nparams,
           (unsigned long long)dt_net_flops(net));
    printf("{\"id\":\"input\",\"type\":\"input\",\"output\":[%d,%d,%d]}", net->input.c, net->input.h,
           net->input.w);
    for (int i = 0; i < net->nlayers; i++) {
        const dt_layer *l = &net->layers[i];
        printf(",{\"id\":\"L%d\",\"type\":\"%s\",\"line\":%d,\"output\":[%d,%d,%d],\"params\":%zu,"
               "\"flops\":%llu}",
               i, l->ops->name, l->spec.line, l->out.c, l->out.h, l->out.w, l->nw + l->nb,
               (unsigned long long)l->ops->flops(l));
    }
    printf("],\"edges\":[");
    for (int i = 0; i < net->nlayers; i++) {
        if (i == 0)
            printf("[\"input\",\"L0\"]");
        else
            printf(",[\"L%d\",\"L%d\"]", i - 1, i);
    }
    printf("]}\n");
}

/* Poseidon's per-layer choice for --sacp, and what each server carries. */
static dt_status print_plan(const dt_net *net, const dt_model_spec *spec, const char *mode_name, int workers,
                            int servers) {
    int m = dt_mode_from_name(mode_name);
    if (m != DT_MODE_ALLREDUCE && m != DT_MODE_PS_SYNC)
        return dt_fail(DT_ERR_USAGE, "--mode: the plan is for allreduce or ps-sync, not '%s'", mode_name);
    dt_comm_plan plan;
    DT_TRY(dt_comm_plan_create(&plan, net, (dt_mode)m, DT_SFB_AUTO, workers, spec->batch));
    printf("plan: %s, %s, %d workers x batch %d", spec->path, mode_name, workers, spec->batch);
    if (m == DT_MODE_PS_SYNC) printf(", %d server%s", servers, servers == 1 ? "" : "s");
    printf("; bytes per worker per step, sent + received\n");
    dt_comm_plan_write(stdout, &plan, net);
    if (m == DT_MODE_PS_SYNC)
        printf("plan: each server moves %.3f MB per step (its shard of %zu floats to and from %d workers)\n",
               2.0 * workers * (double)plan.ps_n / servers * sizeof(float) / 1e6, plan.ps_n / (size_t)servers,
               workers);
    dt_comm_plan_free(&plan);
    return DT_OK;
}

int cmd_info(int argc, char **argv, const cli_env *env) {
    int json = 0, batch = 0, plan = 0, workers = 2, servers = 1;
    const char *mode = "ps-sync";
    cli_flag flags[] = {
        {"--json", ARG_FLAG, &json, 0, 0, 0},
        {"--batch", ARG_INT, &batch, 1, 1 << 20, 0},
        {"--plan", ARG_FLAG, &plan, 0, 0, 0},
        {"--workers", ARG_INT, &workers, 1, 1 << 20, 0},
        {"--servers", ARG_INT, &servers, 1, 1024, 0},
        {"--mode", ARG_STR, &mode, 0, 0, 0},
    };
    const char *pos[1];
    int npos;
    dt_status s = cli_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), pos, 1, &npos);
    if (s == DT_OK && npos != 1) s = dt_fail(DT_ERR_USAGE, "usage: dtrain info MODEL.cfg [--json] [--batch N] "
                                                  "[--plan [--workers P] [--servers S] [--mode M]]");
    dt_model_spec spec;
    if (s == DT_OK) s = cli_load_model(&spec, pos[0], batch, 0, 0);
    dt_net *net = NULL;
    if (s == DT_OK) s = dt_net_create(&net, &spec, spec.batch, 1);
    if (s == DT_OK && env->rank == 0) {
        if (plan)
            s = print_plan(net, &spec, mode, workers, servers);
        else if (json)
            print_json(net, &spec);
        else
            print_table(net, &spec);
    }
    dt_net_free(net);
    return cli_report(s, env);
}
