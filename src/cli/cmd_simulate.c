/* dtrain simulate MODEL.cfg: predicted step time, throughput and speedup on
 * 1..N nodes per synchronisation mode, from compute measured here (or a
 * profile from dtrain bench --profile-out) and an alpha-beta network. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "dtrain/json.h"
#include "dtrain/net.h"
#include "dtrain/sim.h"

#define MAX_POINTS 64

static const char simulate_usage[] =
    "usage: dtrain simulate MODEL.cfg [flags]   (or: dtrain simulate --profile F.json [flags])\n"
    "  --nodes LIST          worker counts (default 1,2,4,8,16,32,64)\n"
    "  --bandwidth B         per-node link, each direction: 100Mbps, 1Gbps, 10Gbps, 25Gbps, 3GB/s\n"
    "                        (default 10Gbps)\n"
    "  --latency L           per message: 20us, 1ms, 500ns (default 20us)\n"
    "  --modes LIST          of allreduce, ps-sync, ps-async, ps-ssp, each of the first two\n"
    "                        also as MODE+sfb (every fully connected layer by sufficient\n"
    "                        factors, as dtrain train --sfb) or MODE+sacp (where that is\n"
    "                        faster, as --sacp) (default allreduce,ps-sync,ps-sync+sfb,\n"
    "                        ps-sync+sacp)\n"
    "  --batch K             batch per worker (default: the model file's)\n"
    "  --servers S           parameter servers of every mode but allreduce (default 1)\n"
    "  --staleness S         ps-ssp's bound, as dtrain train's (default 3; 0 is ps-sync)\n"
    "  --fusion-mb X         allreduce fusion bucket size in MiB (default 4; 0 = per layer)\n"
    "  --no-overlap          transfers start after backward (no wait-free backprop)\n"
    "  --grad-compression C  gradients on the wire as none (default), bf16, fp16 (every mode)\n"
    "                        or topk:R (allreduce), as dtrain train's flag\n"

    "  --profile F.json      per-layer compute from dtrain bench --profile-out instead of\n"
    "                        measuring it now\n"
    "  --threads T           threads of the compute measured now (default: all cores)\n"
    "  --reps N              timed repetitions of the measurement, medians (default 10)\n"
    "  --measure-workers K   measure with K workers computing at once, their steps begun\n"
    "                        together, as a synchronous job on one machine runs them: a\n"
    "                        synchronous mode then waits for the slowest (default: with\n"
    "                        --shared-cores C, the largest of --nodes up to C / threads;\n"
    "                        else 1, alone)\n"
    "  --shared-cores C      all workers run on this one machine of C cores (to validate\n"
    "                        against dtrain launch): with P x T > C, compute and transfers\n"
    "                        slow by P x T / C; with no core to spare, a transfer during\n"
    "                        backward takes turns with the compute, and a server's work\n"
    "                        runs at its share beside it (--server-nice)\n"
    "  --kernel-rate R       with --shared-cores: the bytes moved per second of compute they\n"
    "                        cost (as --bandwidth; bench/mpi_link measures it with a compute\n"
    "                        thread beside the transfers): a byte a worker or server sends\n"
    "                        or receives while the workers compute costs them 1/R of a core\n"
    "                        (default: not priced)\n"
    "  --busy-bandwidth B    with --shared-cores: the rate a transfer keeps while the workers\n"
    "                        compute (as --bandwidth; measure it with every core busy, as\n"
    "                        bench/mpi_link does); the compute then loses only the kernel's\n"
    "                        copies (default: the transfer takes turns with the compute)\n"
    "  --fan-in-share F      the share of a server's link the first of the workers pushing\n"
    "                        into it at once takes until its push is in (0-1; the others\n"
    "                        share the rest evenly; measure it with bench/mpi_link on 3\n"
    "                        ranks): a synchronous clock waits for the slowest (default:\n"
    "                        an even share)\n"
    "  --server-nice N       the servers' nice value, as dtrain train's (0-19, default 19):\n"
    "                        with --shared-cores and no core to spare, a server's work while\n"
    "                        the workers compute gets the share of a core the kernel gives\n"
    "                        that value beside them (19: 15/1039)\n"
    "  --json                one JSON object per prediction instead of the table\n";

/* Calls item() for each entry of a comma-separated list. */
static dt_status each_item(const char *list, const char *flag, dt_status (*item)(const char *, void *),
                           void *ctx) {
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char buf[64];
        if (n == 0 || n >= sizeof buf) return dt_fail(DT_ERR_USAGE, "%s: bad list '%s'", flag, list);
        memcpy(buf, p, n);
        buf[n] = '\0';
        DT_TRY(item(buf, ctx));
        if (!comma) return DT_OK;
        p = comma + 1;
    }
}

typedef struct {
    int v[MAX_POINTS];
    int n;
} int_list;

/* --modes: each a mode and its factors. */
typedef struct {
    dt_mode mode[MAX_POINTS];
    dt_sfb_policy factors[MAX_POINTS];
    int n;
} mode_list;

static dt_status add_nodes(const char *s, void *ctx) {
    int_list *l = ctx;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1 << 20)
        return dt_fail(DT_ERR_USAGE, "--nodes: '%s' is not a node count (1 to %d)", s, 1 << 20);
    if (l->n == MAX_POINTS) return dt_fail(DT_ERR_USAGE, "--nodes: more than %d values", MAX_POINTS);
    l->v[l->n++] = (int)v;
    return DT_OK;
}

static dt_status add_mode(const char *s, void *ctx) {
    mode_list *l = ctx;
    if (l->n == MAX_POINTS) return dt_fail(DT_ERR_USAGE, "--modes: more than %d values", MAX_POINTS);
    DT_TRY(dt_sim_parse_mode(s, "--modes", &l->mode[l->n], &l->factors[l->n]));
    l->n++;
    return DT_OK;
}

/* The workers that compute at once in the largest job on C shared cores
 * (each of `threads`); 1 (alone) on machines of their own. */
static int default_workers(const int_list *nodes, int shared_cores, int threads) {
    int most = 1;
    for (int i = 0; i < nodes->n; i++) most = nodes->v[i] > most ? nodes->v[i] : most;
    int fit = shared_cores / threads;
    most = most < fit ? most : fit;
    if (most > DT_PROFILE_MAX_WORKERS) most = DT_PROFILE_MAX_WORKERS;
    return most > 1 ? most : 1;
}

/* A profile must describe the model it is used with. */
static dt_status check_profile_model(const dt_profile *p, const dt_model_spec *spec, const char *path) {
    dt_model_spec shapes = *spec; /* ~125 KB (up to 1024 layers); only shapes are compared, no products run */
    shapes.precision = DT_PRECISION_FP32;
    dt_net *net;
    DT_TRY(dt_net_create(&net, &shapes, 1, 1));
    dt_status s = DT_OK;
    if (net->nlayers != p->nlayers)
        s = dt_fail(DT_ERR_USAGE, "--profile %s has %d layers, %s has %d", path, p->nlayers, spec->path,
                    net->nlayers);
    for (int i = 0; s == DT_OK && i < net->nlayers; i++)
        if (net->layers[i].nw + net->layers[i].nb != p->layers[i].params)
            s = dt_fail(DT_ERR_USAGE, "--profile %s: layer %d has %zu parameters, in %s %zu", path, i,
                        p->layers[i].params, spec->path, net->layers[i].nw + net->layers[i].nb);
    dt_net_free(net);
    return s;
}

static void print_header(const dt_profile *p, const dt_sim_cfg *c, const char *bw, const char *lat,
                         const char *source) {
    double step = dt_profile_step_s(p);
    printf("dtrain simulate: %s, batch %d per worker; compute %s at %d thread%s (serial step %.2f ms, "
           "%.0f img/s)",
           p->model, p->batch, source, p->threads, p->threads == 1 ? "" : "s", step * 1e3, p->batch / step);
    if (p->workers > 1)
        printf(", %d workers at once, the slowest %.1f%% later", p->workers, (p->straggler - 1) * 100);
    printf("\n");
    printf("network: %s per link, %s per message; allreduce buckets of %g MiB; %d server%s; ps-ssp staleness "
           "%d; %s", bw, lat, c->fusion_mb, c->servers, c->servers == 1 ? "" : "s", c->staleness,
           c->overlap ? "communication overlapped with backprop" : "no overlap");
    if (c->shared_cores) printf("; workers share %d cores", c->shared_cores);
    char codec[32];
    if (c->codec.kind != DT_GC_NONE)
        printf("; gradients as %s", dt_grad_codec_name(&c->codec, codec, sizeof codec));
    printf("\n%5s  %-14s %9s %9s %8s %10s %9s\n", "nodes", "mode", "step ms", "img/s", "speedup",
           "comm share", "MB sent");
}

static void print_result(const dt_profile *p, const dt_sim_cfg *c, const dt_sim_result *r, int json) {
    char name[64];
    if (!json) {
        printf("%5d  %-14s %9.2f %9.0f %8.2f %9.1f%% %9.2f\n", c->nodes,
               dt_sim_mode_name(c->mode, c->factors, name, sizeof name),
               r->step_s * 1e3, r->images_per_sec, r->speedup, r->comm_share * 100, r->bytes_sent / 1e6);
        return;
    }
    char model[1024];
    printf("{\"event\":\"simulate\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d,\"nodes\":%d,"
           "\"mode\":\"%s\",\"servers\":%d,\"staleness\":%d,\"bandwidth_gbps\":%.6g,\"latency_us\":%.6g,\"fusion_mb\":%g,"
           "\"overlap\":%s,\"shared_cores\":%d,\"compute_scale\":%.4g,\"step_ms\":%.4f,"
           "\"images_per_sec\":%.1f,\"speedup\":%.4f,\"comm_share\":%.4f,\"compute_ms\":%.4f,"
           "\"link_busy_ms\":%.4f,\"mb_sent\":%.4f,\"fc_sfb\":%d,\"factors\":\"%s\",\"measured_workers\":%d,"
           "\"straggler\":%.4f}\n",
           dt_json_escape(model, sizeof model, p->model), p->batch, p->threads, c->nodes,
           dt_mode_name(c->mode), c->servers, c->staleness, c->bandwidth * 8 / 1e9, c->latency * 1e6, c->fusion_mb,
           c->overlap ? "true" : "false", c->shared_cores, r->compute_scale, r->step_s * 1e3,
           r->images_per_sec, r->speedup, r->comm_share, r->compute_s * 1e3, r->link_busy_s * 1e3,
           r->bytes_sent / 1e6, r->fc_sfb,
           dt_sfb_policy_name(c->factors), p->workers, r->straggler);
}

static dt_status simulate(const dt_profile *p, dt_sim_cfg *c, const int_list *nodes, const mode_list *modes,
                          int json, const char *bw, const char *lat, const char *source) {
    if (!json) print_header(p, c, bw, lat, source);
    for (int i = 0; i < nodes->n; i++)
        for (int m = 0; m < modes->n; m++) {
            c->nodes = nodes->v[i];
            c->mode = modes->mode[m];
            c->factors = modes->factors[m];
            dt_sim_result r;
            DT_TRY(dt_sim_run(&r, p, c));
            print_result(p, c, &r, json);
        }
    return DT_OK;
}

/* simulate's flags as given (defaults in read_flags). */
typedef struct {
    const char *model; /* MODEL.cfg, or NULL with --profile */
    const char *nodes, *modes, *bandwidth, *latency, *profile, *compression, *kernel_rate, *busy_bandwidth;
    int batch, servers, staleness, threads, reps, shared_cores, json, no_overlap, help, measure_workers,
        server_nice;
    double fusion_mb, fan_in_share;
} sim_args;

/* The flags and the model file or profile; with --help nothing more is checked. */
static dt_status read_flags(int argc, char **argv, sim_args *a) {
    *a = (sim_args){.nodes = "1,2,4,8,16,32,64", .modes = "allreduce,ps-sync,ps-sync+sfb,ps-sync+sacp",
                    .bandwidth = "10Gbps", .latency = "20us", .compression = "none", .servers = 1,
                    .staleness = 3, .reps = 10, .server_nice = 19, .fusion_mb = 4};
    dt_opt flags[] = {
        {"--nodes", DT_OPT_STR, &a->nodes, 0, 0, 0},
        {"--bandwidth", DT_OPT_STR, &a->bandwidth, 0, 0, 0},
        {"--latency", DT_OPT_STR, &a->latency, 0, 0, 0},
        {"--modes", DT_OPT_STR, &a->modes, 0, 0, 0},
        {"--batch", DT_OPT_INT, &a->batch, 1, 1 << 20, 0},
        {"--servers", DT_OPT_INT, &a->servers, 1, 1 << 16, 0},
        {"--staleness", DT_OPT_INT, &a->staleness, 0, 1000, 0},
        {"--fusion-mb", DT_OPT_DOUBLE, &a->fusion_mb, 0, 4096, 0},
        {"--no-overlap", DT_OPT_FLAG, &a->no_overlap, 0, 0, 0},
        {"--grad-compression", DT_OPT_STR, &a->compression, 0, 0, 0},
        {"--profile", DT_OPT_STR, &a->profile, 0, 0, 0},
        {"--threads", DT_OPT_INT, &a->threads, 1, 1024, 0},
        {"--reps", DT_OPT_INT, &a->reps, 1, 100000, 0},
        {"--measure-workers", DT_OPT_INT, &a->measure_workers, 1, DT_PROFILE_MAX_WORKERS, 0},
        {"--shared-cores", DT_OPT_INT, &a->shared_cores, 1, 1 << 16, 0},
        {"--kernel-rate", DT_OPT_STR, &a->kernel_rate, 0, 0, 0},
        {"--busy-bandwidth", DT_OPT_STR, &a->busy_bandwidth, 0, 0, 0},
        {"--fan-in-share", DT_OPT_DOUBLE, &a->fan_in_share, 0, 1, 0},
        {"--server-nice", DT_OPT_INT, &a->server_nice, 0, 19, 0},
        {"--json", DT_OPT_FLAG, &a->json, 0, 0, 0},
        {"--help", DT_OPT_FLAG, &a->help, 0, 0, 0},
    };
    int nflags = (int)(sizeof flags / sizeof *flags);
    const char *pos[1];
    int npos;
    DT_TRY(dt_opts_parse(argc, argv, flags, nflags, pos, 1, &npos));
    if (a->help) return DT_OK;
    a->model = npos == 1 ? pos[0] : NULL;
    if (!a->model && !a->profile)
        return dt_fail(DT_ERR_USAGE, "simulate: expected MODEL.cfg or --profile F.json\n%s", simulate_usage);
    if (a->profile && (dt_opt_find(flags, nflags, "--threads")->seen ||
                       dt_opt_find(flags, nflags, "--reps")->seen || a->measure_workers))
        return dt_fail(DT_ERR_USAGE, "--threads, --reps and --measure-workers set the measurement; --profile %s "
                       "was measured already", a->profile);
    return DT_OK;
}

/* The simulated job's configuration but its points: servers, links, cores. */
static dt_status read_links(const sim_args *a, dt_sim_cfg *c) {
    *c = (dt_sim_cfg){.servers = a->servers, .staleness = a->staleness, .fusion_mb = a->fusion_mb,
                      .overlap = !a->no_overlap, .shared_cores = a->shared_cores,
                      .fan_in_share = a->fan_in_share, .server_nice = a->server_nice};
    DT_TRY(dt_sim_parse_bandwidth(a->bandwidth, "--bandwidth", &c->bandwidth));
    DT_TRY(dt_sim_parse_latency(a->latency, &c->latency));
    if (a->kernel_rate && !a->shared_cores)
        return dt_fail(DT_ERR_USAGE, "--kernel-rate prices the kernel's copies on shared cores: it needs "
                       "--shared-cores");
    if (a->kernel_rate) DT_TRY(dt_sim_parse_bandwidth(a->kernel_rate, "--kernel-rate", &c->kernel_rate));
    if (a->busy_bandwidth && !a->shared_cores)
        return dt_fail(DT_ERR_USAGE, "--busy-bandwidth is a transfer's rate while the workers compute on shared "
                       "cores: it needs --shared-cores");
    if (a->busy_bandwidth)
        DT_TRY(dt_sim_parse_bandwidth(a->busy_bandwidth, "--busy-bandwidth", &c->busy_bandwidth));
    return DT_OK;
}

/* The points to predict (--nodes by --modes) and the gradients' encoding. */
static dt_status read_points(const sim_args *a, int_list *nodes, mode_list *modes, dt_sim_cfg *c) {
    DT_TRY(each_item(a->nodes, "--nodes", add_nodes, nodes));
    DT_TRY(each_item(a->modes, "--modes", add_mode, modes));
    DT_TRY(dt_grad_codec_parse(a->compression, &c->codec));
    int has_allreduce = 0;
    for (int i = 0; i < modes->n; i++) has_allreduce |= modes->mode[i] == DT_MODE_ALLREDUCE;
    if (c->codec.kind == DT_GC_TOPK && !has_allreduce)
        return dt_fail(DT_ERR_USAGE, "--grad-compression %s applies to allreduce, which --modes %s leaves out",
                       a->compression, a->modes);
    return DT_OK;
}

/* The per-layer compute: read from --profile (checked against the model
 * file when both are given) or measured now on the model. */
static dt_status load_compute(const sim_args *a, const int_list *nodes, dt_model_spec *spec, dt_profile *prof,
                              const cli_env *env) {
    if (a->model) DT_TRY(dt_setup_model(spec, a->model, a->batch, 0, 0));
    if (a->model) DT_TRY(dt_model_check_loss(spec));
    if (a->profile) {
        DT_TRY(dt_profile_read(prof, a->profile));
        if (a->batch && a->batch != prof->batch)
            return dt_fail(DT_ERR_USAGE, "--batch %d: --profile %s was measured at batch %d", a->batch,
                           a->profile, prof->batch);
        return a->model ? check_profile_model(prof, spec, a->profile) : DT_OK;
    }
    int t = dt_setup_threads(a->threads, env->local_ranks);
    return dt_profile_measure(prof, spec, t, a->reps,
                              a->measure_workers ? a->measure_workers
                                                 : default_workers(nodes, a->shared_cores, t));
}

int cmd_simulate(int argc, char **argv, const cli_env *env) {
    sim_args a;
    dt_status s = read_flags(argc, argv, &a);
    if (s == DT_OK && a.help) {
        fputs(simulate_usage, stdout);
        return 0;
    }
    dt_sim_cfg c;
    int_list nodes = {.n = 0};
    mode_list modes = {.n = 0};
    if (s == DT_OK) s = read_links(&a, &c);
    if (s == DT_OK) s = read_points(&a, &nodes, &modes, &c);
    dt_model_spec *spec = NULL;
    dt_profile *prof = NULL;
    if (s == DT_OK) s = (spec = malloc(sizeof *spec)) && (prof = malloc(sizeof *prof))
                            ? DT_OK : dt_fail(DT_ERR_NOMEM, "simulate: out of memory");
    if (s == DT_OK) s = load_compute(&a, &nodes, spec, prof, env);
    if (s == DT_OK)
        s = simulate(prof, &c, &nodes, &modes, a.json, a.bandwidth, a.latency,
                     a.profile ? "from the profile" : "measured here");
    free(spec);
    free(prof);
    return cli_report(s, env);
}
