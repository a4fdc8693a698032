/* dtrain: distributed deep-learning training on CPUs over MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: dtrain COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  train MODEL.cfg [flags]   train a model (see dtrain train --help); under mpirun\n"
    "                            with --mode allreduce | ps-sync [--servers S]\n"
    "  sweep MODEL.cfg --grid lr=0.01,0.05 batch=64,128 [--ranks-per-trial n] [--out F]\n"
    "                            [train flags]: every combination as a train run, spread\n"
    "                            over the ranks (see dtrain sweep --help)\n"
    "  eval MODEL.cfg --weights CHECKPOINT [--dataset D] [--data-dir DIR]\n"
    "  predict MODEL.cfg --weights CHECKPOINT IMAGE|FOLDER... [--list F] [--top K] [--json]\n"
    "                            the top-k classes of each image with their probabilities\n"
    "  export MODEL.cfg --weights CHECKPOINT -o FILE.onnx\n"
    "                            the trained network as an ONNX model (docs/EXPORT.md)\n"
    "  info MODEL.cfg [--json | --dot | --plan --workers P --servers S --batch K]\n"
    "                            layer shapes, parameters and FLOPs; the network graph\n"
    "                            as JSON or Graphviz DOT; the SFB/PS communication plan\n"
    "  bench MODEL.cfg [--batch N] [--steps N] [--threads N] [--profile-out F.json]\n"
    "  bench MODEL.cfg --data-only [--dataset D] [--data-dir DIR] [--loader-threads N]\n"
    "                            the loader alone: decoded, augmented img/s\n"
    "  simulate MODEL.cfg [--nodes 1,2,4,..] [--bandwidth 10Gbps] [--latency 20us] [flags]\n"
    "                            predicted step time, img/s and speedup per mode on N nodes\n"
    "                            (see dtrain simulate --help)\n"
    "  plot RUN.jsonl [RUN2.jsonl ...] -o FILE.svg|FILE.png [--data-out F.tsv]\n"
    "                            loss and test accuracy of training logs against step and time\n"
    "  launch -n N [--hostfile F] [--max-restarts K] -- train|sweep MODEL.cfg [flags]\n"
    "                            run N ranks with mpirun (restarting a failed train run\n"
    "                            from its --checkpoint-dir up to K times)\n"
    "\n"
    "  --version                 version, build options and library versions\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage or input error (model file, run log)\n"
    "  (sweep: 0 if at least one trial succeeded)\n";

/* The subcommands, by when they run: before anything (no MPI, no signal
 * thread: launch, plot, export), alone (one process that talks to no other:
 * no MPI_Init, whose singleton start costs 0.3 s, 0.9 s under ASan, of
 * every call; no signal is handled, so one ends it at once), or under MPI
 * with the signal thread. A new subcommand is its cmd_X.c, its line in
 * cli.h and one row here. */
typedef enum { CMD_BARE, CMD_ALONE, CMD_MPI } cmd_stage;

typedef struct {
    const char *name;
    cmd_stage stage;
    int (*bare)(int argc, char **argv);                                   /* CMD_BARE */
    int (*with_env)(int argc, char **argv, const cli_env *env);           /* CMD_ALONE, CMD_MPI */
    int (*with_signals)(int argc, char **argv, cli_env *env, cli_signals *sig); /* CMD_MPI (train, sweep) */
} cli_command;

static int sweep_orderly(int argc, char **argv, cli_env *env, cli_signals *sig) {
    int code = cmd_sweep(argc, argv, env, sig);
    env->orderly = 1; /* the ranks agree on the outcome */
    return code;
}

static const cli_command commands[] = {
    {"launch", CMD_BARE, cmd_launch, NULL, NULL},
    {"plot", CMD_BARE, cmd_plot, NULL, NULL},
    {"export", CMD_BARE, cmd_export, NULL, NULL},
    {"info", CMD_ALONE, NULL, cmd_info, NULL},
    {"simulate", CMD_ALONE, NULL, cmd_simulate, NULL},
    {"predict", CMD_ALONE, NULL, cmd_predict, NULL},
    {"train", CMD_MPI, NULL, NULL, cmd_train},
    {"sweep", CMD_MPI, NULL, NULL, sweep_orderly},
    {"eval", CMD_MPI, NULL, cmd_eval, NULL},
    {"bench", CMD_MPI, NULL, cmd_bench, NULL},
};

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* Ranks sharing this node, from Open MPI's environment (1 if not launched by mpirun). */
static int local_ranks(void) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        cli_print_version(stdout);
        return 0;
    }
    const cli_command *cmd = find_command(argv[1]);
    if (!cmd) {
        fprintf(stderr, "dtrain: unknown command '%s'\n%s", argv[1], usage);
        return 2;
    }
    if (cmd->stage == CMD_BARE) return cmd->bare(argc - 2, argv + 2);
    cli_env alone = {0, 1, local_ranks(), 0};
    if (cmd->stage == CMD_ALONE) return cmd->with_env(argc - 2, argv + 2, &alone);
    /* Before MPI_Init: every thread MPI, OpenMP and dtrain start from here
     * on inherits the mask, so only the signal thread ever takes them. */
    static cli_signals sig;
    if (cli_signals_block() != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return 1;
    }
    cli_env env = {0, 1, local_ranks(), 0};
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dtrain: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &env.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &env.world);
    if (env.world > 1 && provided < MPI_THREAD_SERIALIZED) {
        /* allreduce communicates from its own thread, one MPI call at a time. */
        fprintf(stderr, "dtrain: this MPI library gives no thread support (level %d); dtrain needs "
                        "MPI_THREAD_SERIALIZED or better\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sig.rank = env.rank;
    sig.world = env.world;
    if (cli_signals_start(&sig) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    int code = cmd->with_signals ? cmd->with_signals(argc - 2, argv + 2, &env, &sig)
                                 : cmd->with_env(argc - 2, argv + 2, &env);
    /* A failed rank may leave others waiting for it in a collective, unless
     * every rank reached the failure in order. */
    if (code != 0 && env.world > 1 && !env.orderly) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
    return code;
}
