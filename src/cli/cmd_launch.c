/* dtrain launch -n N [--hosts H:S,... | --hostfile F] [--launch-agent CMD]
 * [--max-restarts K [--min-workers M]] -- train|sweep MODEL.cfg ... (or any
 * program on the job API, python3 script.py ...): runs
 * mpirun with the flags this kind of machine needs (like horovodrun): as
 * root, more ranks than cores, CPU binding only when every rank of one
 * machine has a core; on several hosts, Open MPI's rsh launcher starts a
 * daemon on each through ssh or the given agent (scripts/cluster.sh agent
 * for the emulated cluster). It stays as mpirun's parent (launch_run.h):
 * stop signals go to the ranks, and nothing outlives a bounded wait. With
 * --max-restarts (torchrun's model), when a rank dies, gives up waiting or
 * the job fails, the launcher starts the job again from the newest
 * complete checkpoint of --checkpoint-dir (--resume auto), up to K times,
 * logging each restart; with --min-workers (torchrun's --nnodes MIN:MAX,
 * Horovod's --min-np) without the host the failed rank waited for. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/opts.h"
#include "cli.h"
#include "launch_run.h"
#include "dtrain/job.h"
#include "dtrain/checkpoint.h"
#include "dtrain/ckptdir.h"
#include "dtrain/json.h"

#define MAX_ARGS 512

static const char launch_usage[] =
    "usage: dtrain launch [-n N] [--hosts H:S,...|--hostfile F] [--launch-agent CMD] [--max-restarts K]\n"
    "                     [--min-workers M] [--stop-timeout S] [--dry-run] -- train|sweep MODEL.cfg [flags]\n"
    "       dtrain launch [flags] -- PROGRAM [ARGS]   (python3 script.py: the job API, docs/PYTHON.md)\n"
    "  runs N ranks of this dtrain (or of PROGRAM, a program on libdtrain.so) with mpirun\n"
    "  (as root: --allow-run-as-root; more ranks than cores: --oversubscribe and no CPU binding)\n"
    "  --hosts H:S,...     the ranks go to these hosts, S slots (ranks) on host H, filled\n"
    "                      in order (-n defaults to the sum of S); ranks on one host share\n"
    "                      memory, hosts talk TCP (Open MPI's btl_tcp_eager_limit 256 KiB\n"
    "                      unless OMPI_MCA_btl_tcp_eager_limit is set). No CPU binding\n"
    "                      (hosts may share a machine)\n"
    "  --hostfile F        Open MPI hostfile: the ranks are spread over its hosts\n"
    "  --launch-agent CMD  how mpirun reaches another host (default ssh): it runs\n"
    "                      CMD HOST orted...; the emulated cluster of scripts/cluster.sh\n"
    "                      uses \"scripts/cluster.sh agent\"\n"
    "  --max-restarts K    when a rank dies, gives up waiting (train's --stall-abort, exit 3)\n"
    "                      or the job fails (exit 1), start it again from the newest complete\n"
    "                      checkpoint in the train command's --checkpoint-dir (--resume auto),\n"
    "                      up to K times; each restart is printed and logged (--log) with\n"
    "                      the rank that failed, the step resumed and the work lost\n"
    "  --min-workers M     with --hosts and --max-restarts: a host that a rank gave up\n"
    "                      waiting for is dropped before the restart, which runs on the\n"
    "                      hosts left as long as M workers remain, with the checkpoint's\n"
    "                      global batch (train's --keep-global-batch: more accumulation\n"
    "                      passes per worker) and learning-rate schedule. Dropped hosts are\n"
    "                      not added back\n"
    "  --stop-timeout S    after SIGINT/SIGTERM, the seconds the ranks have to stop at an\n"
    "                      agreed step before mpirun and every rank are killed (default 60;\n"
    "                      a second signal kills at once)\n"
    "  --dry-run           print the mpirun command instead of running it\n"
    "  Ctrl-C (SIGINT/SIGTERM to the launcher) stops every rank at an agreed step with a\n"
    "  final checkpoint; it is never restarted. Nothing the job started outlives the launcher.\n";

/* The value of --name in the command's flags (after --), or NULL; *at is
 * its flag's index (-1 when absent). */
static const char *flag_value(const char **args, int n, const char *name, int *at) {
    size_t len = strlen(name);
    *at = -1;
    for (int i = 0; i < n; i++) {
        if (strncmp(args[i], name, len) != 0) continue;
        if (args[i][len] == '=') return *at = i, args[i] + len + 1;
        if (args[i][len] == '\0' && i + 1 < n) return *at = i, args[i + 1];
    }
    return NULL;
}

/* The last "step" of a run log (-1 if none). */
static long last_logged_step(const char *log) {
    FILE *f = log ? fopen(log, "r") : NULL;
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    long step = -1;
    while (getline(&line, &cap, f) > 0) {
        dt_json_object o;
        char ev[16];
        double v;
        if (dt_json_parse_object(&o, line) == DT_OK && dt_json_get_string(&o, "event", ev, sizeof ev) == DT_OK &&
            strcmp(ev, "step") == 0 && dt_json_get_number(&o, "step", &v) == DT_OK)
            step = (long)v;
    }
    free(line);
    fclose(f);
    return step;
}

static dt_status verify_one(const char *path, void *ctx) { return dt_checkpoint_verify(path, ctx); }

/* Prints (and appends to the run log) what a restart throws away: the
 * rank that failed, the checkpoint it goes on from, the steps and seconds
 * of training since that checkpoint, and the host dropped (NULL: none). */
static void log_restart(int attempt, int max, const launch_outcome *f, int code, const char *dir, const char *log,
                        double failed_at, const char *dropped, int workers) {
    dt_ckpt_meta m;
    char ck[4096] = "", why[96], esc[8192], host[600] = "", json[8192 + 1024];
    long from = -1, last = last_logged_step(log);
    double lost_s = -1;
    struct stat st;
    if (dt_ckptdir_newest(dir, verify_one, NULL, &m, ck, sizeof ck) == DT_OK) {
        from = (long)m.step;
        if (stat(ck, &st) == 0) lost_s = failed_at - ((double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec);
    }
    if (f->stalled) snprintf(why, sizeof why, "gave up waiting for other ranks (--stall-abort)");
    else if (f->start_failed) snprintf(why, sizeof why, "could not be started (Open MPI's daemon did not start)");
    else if (f->lost_daemon) snprintf(why, sizeof why, "lost a host (Open MPI lost its daemon there)");
    else if (f->signal > 0) snprintf(why, sizeof why, "died of signal %d (%s)", f->signal, strsignal(f->signal));
    else snprintf(why, sizeof why, "exited with status %d", f->exit_code >= 0 ? f->exit_code : code);
    char who[32] = "the job";
    if (f->rank >= 0) snprintf(who, sizeof who, "rank %d", f->rank);
    fprintf(stderr, "dtrain launch: restart %d of %d: %s %s; ", attempt, max, who, why);
    if (dropped) fprintf(stderr, "dropping host %s (%d worker%s left); ", dropped, workers, workers == 1 ? "" : "s");
    fprintf(stderr, "resuming from %s (step %ld)", ck[0] ? ck : "the beginning (no checkpoint yet)", from < 0 ? 0 : from);
    if (last >= 0) fprintf(stderr, "; %ld steps lost", last - (from < 0 ? 0 : from));
    if (lost_s >= 0) fprintf(stderr, " (%.1f s of training since that checkpoint)", lost_s);
    fputc('\n', stderr);
    FILE *lf = log ? fopen(log, "a") : NULL;
    if (!lf) return;
    dt_json_escape(esc, sizeof esc, ck);
    if (dropped) {
        char name[300];
        dt_json_escape(name, sizeof name, dropped);
        snprintf(host, sizeof host, ",\"dropped_host\":\"%s\",\"workers\":%d", name, workers);
    }
    snprintf(json, sizeof json,
             "{\"event\":\"restart\",\"attempt\":%d,\"max_restarts\":%d,\"failed_rank\":%d,\"signal\":%d,"
             "\"exit_code\":%d,\"stalled\":%s,\"checkpoint\":\"%s\",\"resume_step\":%ld,\"lost_steps\":%ld,"
             "\"lost_s\":%.3f%s}",
             attempt, max, f->rank, f->signal, f->exit_code, f->stalled ? "true" : "false", esc,
             from < 0 ? 0 : from, last >= 0 ? last - (from < 0 ? 0 : from) : -1, lost_s, host);
    fprintf(lf, "%s\n", json);
    fclose(lf);
}

/* --hosts H:S,...: checks the list and returns the number of slots (its
 * ranks), or -1 with the error set. A host without :S has one slot. */
static long count_host_slots(const char *list) {
    long total = 0;
    const char *p = list;
    for (;;) {
        size_t name = strcspn(p, ":,");
        if (name == 0 || name > 255)
            return dt_fail(DT_ERR_USAGE, "--hosts '%s': give host names with slots, e.g. h1:2,h2:2", list), -1;
        for (size_t i = 0; i < name; i++)
            if (!(p[i] == '-' || p[i] == '.' || p[i] == '_' || (p[i] >= '0' && p[i] <= '9') ||
                  ((p[i] | 32) >= 'a' && (p[i] | 32) <= 'z')))
                return dt_fail(DT_ERR_USAGE, "--hosts '%s': '%.*s' is not a host name", list, (int)name, p), -1;
        p += name;
        long slots = 1;
        if (*p == ':') {
            char *end;
            errno = 0;
            slots = strtol(p + 1, &end, 10);
            if (end == p + 1 || errno || slots < 1 || slots > 65536 || (*end != ',' && *end != '\0'))
                return dt_fail(DT_ERR_USAGE, "--hosts '%s': slots after ':' must be an integer 1-65536", list), -1;
            p = end;
        }
        total += slots;
        if (*p == '\0') return total;
        p++; /* ',' */
    }
}

/* The server ranks of a train command: --servers S (default 1) in a ps-*
 * mode, none otherwise. */
static int server_ranks(const char **cmd, int ncmd) {
    int at;
    const char *mode = flag_value(cmd, ncmd, "--mode", &at), *servers = flag_value(cmd, ncmd, "--servers", &at);
    if (!mode || strncmp(mode, "ps-", 3) != 0) return 0;
    return servers ? atoi(servers) : 1;
}

/* Whether host name a (the --hosts entry) is b (a rank's host name): the
 * same, or one the other's first label ("h2" and "h2.cluster"). */
static int same_host(const char *a, size_t alen, const char *b) {
    size_t blen = strlen(b);
    size_t n = alen < blen ? alen : blen;
    if (strncmp(a, b, n) != 0) return 0;
    return alen == blen || (alen > blen ? a[blen] == '.' : b[alen] == '.');
}

/* Drops from the --hosts list (hosts, "h1:2,h2:2", rewritten in place) the
 * entry of the first host of blamed ("h2,h3": in the order Open MPI or the
 * ranks named them; a daemon that failed first is named first, and others
 * that lost it after, as the job came down, later) that is in the list,
 * unless it is the last entry or this machine (mpirun's host: were it
 * lost, so would be the job). *n (ranks) loses the ranks that were on it
 * (mpirun fills the hosts' slots in order). Returns the dropped entry's
 * name in name (cap bytes), or 0 if none was dropped. */
static int drop_blamed_host(char *hosts, int *n, const char *blamed, char *name, size_t cap) {
    char self[256] = "";
    gethostname(self, sizeof self - 1);
    for (const char *b = blamed; *b;) {
        size_t blen = strcspn(b, ",");
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)blen, b);
        b += blen + (b[blen] == ',');
        int left = *n;
        for (char *h = hosts; *h;) {
            size_t len = strcspn(h, ":,"), entry = strcspn(h, ",");
            long slots = h[len] == ':' ? atol(h + len + 1) : 1;
            int on = slots < left ? (int)slots : left;
            left -= on;
            int only = h == hosts && h[entry] == '\0';
            if (same_host(h, len, one) && !same_host(h, len, self) && !only) {
                snprintf(name, cap, "%.*s", (int)len, h);
                char *next = h + entry + (h[entry] == ',');
                memmove(h, next, strlen(next) + 1);
                size_t end = strlen(hosts);
                if (end && hosts[end - 1] == ',') hosts[end - 1] = '\0';
                *n -= on;
                return 1;
            }
            h += entry + (h[entry] == ',');
        }
    }
    return 0;
}

/* Removes flag (and its value) from cmd (*ncmd words), then appends the
 * words add (NULL-terminated). */
static void set_flag(const char **cmd, int *ncmd, const char *flag, const char *const *add) {
    int at;
    if (flag_value(cmd, *ncmd, flag, &at)) {
        int width = strchr(cmd[at], '=') ? 1 : 2;
        memmove(&cmd[at], &cmd[at + width], sizeof *cmd * (size_t)(*ncmd - at - width));
        *ncmd -= width;
    }
    while (*add) cmd[(*ncmd)++] = *add++;
}

static int has_word(const char **cmd, int ncmd, const char *word) {
    for (int i = 0; i < ncmd; i++)
        if (strcmp(cmd[i], word) == 0) return 1;
    return 0;
}

/* Launch's flags, as given and then completed (-n from --hosts' slots). */
typedef struct {
    int n, dry, help, max_restarts, min_workers;
    double stop_timeout;
    const char *hostfile, *hosts, *agent;
} launch_opts;

/* Checks the flags against each other and the command after -- (rest,
 * nrest >= 0): the first problem is the error. */
static dt_status check_launch(launch_opts *o, const char **rest, int nrest) {
    if (o->hosts && o->hostfile)
        return dt_fail(DT_ERR_USAGE, "launch: --hosts and --hostfile exclude each other (give the hosts once)");
    if (o->hosts) {
        long slots = count_host_slots(o->hosts);
        if (slots < 0) return DT_ERR_USAGE;
        if (o->n == 0) o->n = slots > 65536 ? 65536 : (int)slots;
        if (o->n > slots)
            return dt_fail(DT_ERR_USAGE, "launch: -n %d is more ranks than --hosts has slots (%ld)", o->n, slots);
    }
    if (o->agent && !o->hosts && !o->hostfile)
        return dt_fail(DT_ERR_USAGE, "launch: --launch-agent starts ranks on other hosts: give --hosts or --hostfile");
    if (o->n < 1 || nrest < 1)
        return dt_fail(DT_ERR_USAGE, "launch: needs -n N and a command after --\n%s", launch_usage);
    int at;
    if (o->max_restarts > 0 && strcmp(rest[0], "train") != 0)
        return dt_fail(DT_ERR_USAGE, "launch: --max-restarts restarts train runs, not '%s'", rest[0]);
    if (o->max_restarts > 0 && !flag_value(rest, nrest, "--checkpoint-dir", &at))
        return dt_fail(DT_ERR_USAGE, "launch: --max-restarts needs the train command's --checkpoint-dir DIR "
                       "(the restarts resume from its newest checkpoint)");
    if (o->min_workers > 0 && (!o->hosts || o->max_restarts == 0))
        return dt_fail(DT_ERR_USAGE, "launch: --min-workers drops failed hosts between restarts: give --hosts and "
                       "--max-restarts");
    if (o->min_workers > o->n - server_ranks(rest, nrest))
        return dt_fail(DT_ERR_USAGE, "launch: --min-workers %d is more workers than the job has (%d)", o->min_workers,
                       o->n - server_ranks(rest, nrest));
    return DT_OK;
}

/* A train command's flags, parsed here by train's own parser before mpirun
 * starts: a mistyped flag is one line and exit 2, not N ranks' errors and
 * Open MPI's abort banner. (What needs the model file or the ranks is
 * checked by the ranks, which agree on it and end in order.) */
static dt_status check_train_flags(const char **rest, int nrest) {
    if (strcmp(rest[0], "train") != 0) return DT_OK;
    dt_job_args a;
    return dt_job_parse(&a, nrest - 1, (char **)rest + 1);
}

/* mpirun's command line into args (MAX_ARGS, NULL-terminated): mpirun's
 * flags, then self and the command. At most 17 words come before rest's
 * (at most MAX_ARGS - 24), which leaves supervise room for --resume auto.
 * np (N as text) must outlive args.
 * Returns the number of words; *cmd_at is where the command begins. */
static int mpirun_args(const launch_opts *o, const char *self, const char *np, const char **rest, int nrest,
                       const char **args, int *cmd_at) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int k = 0;
    args[k++] = "mpirun";
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    args[k++] = "-np";
    args[k++] = np;
    if (o->hostfile) {
        args[k++] = "--hostfile";
        args[k++] = o->hostfile;
    } else if (o->hosts) {
        args[k++] = "--host";
        args[k++] = o->hosts;
    } else if (o->n > cores) {
        args[k++] = "--oversubscribe";
    }
    if (o->agent) {
        args[k++] = "--mca";
        args[k++] = "plm_rsh_agent";
        args[k++] = o->agent;
    }
    /* Between hosts Open MPI's TCP transport sends a message above its
     * eager limit (64 KiB) only once the receiver answers a rendezvous,
     * which a worker busy with backward does at its next progress probe
     * (pump.h): a parameter server's replies then move late, the workers
     * fall out of step and the server's link idles. At 256 KiB a layer's
     * segment of resnet20 (at most 144 KiB) goes at once: ps-sync between
     * emulated hosts at 100 Mbit/s 341 -> 308 ms a step (docs/CLUSTER.md).
     * A user's own setting (the environment) is left alone. */
    if ((o->hosts || o->hostfile) && !getenv("OMPI_MCA_btl_tcp_eager_limit")) {
        args[k++] = "--mca";
        args[k++] = "btl_tcp_eager_limit";
        args[k++] = "262144";
    }
    args[k++] = "--bind-to";
    args[k++] = (o->hosts || (!o->hostfile && o->n > cores)) ? "none" : "core";
    /* Open MPI gives every rank a pty, so the ranks cannot tell whether the
     * user's output is a terminal: the launcher says (progress bar or lines). */
    args[k++] = "-x";
    args[k++] = isatty(STDOUT_FILENO) ? "DT_PROGRESS_TTY=1" : "DT_PROGRESS_TTY=0";
    /* dtrain's train or sweep, or a program of the user's on the job API
     * (python3 script.py, a C program on libdtrain.so) as it is. */
    if (strcmp(rest[0], "train") == 0 || strcmp(rest[0], "sweep") == 0) args[k++] = self;
    *cmd_at = k;
    for (int i = 0; i < nrest; i++) args[k++] = rest[i];
    args[k] = NULL;
    return k;
}

/* The job, and with --max-restarts K after each failure again from the
 * newest checkpoint (--resume auto), up to K times; with --min-workers M
 * without the host a rank that gave up waited for, as long as M workers
 * remain, keeping the checkpoint's global batch (--keep-global-batch). */
static int supervise(launch_opts *o, const char *self, const char **rest, int nrest) {
    const char *cmd[MAX_ARGS], *args[MAX_ARGS];
    int ncmd = nrest, at;
    memcpy(cmd, rest, sizeof *cmd * (size_t)nrest);
    const char *dir = flag_value(cmd, ncmd, "--checkpoint-dir", &at);
    const char *log = flag_value(cmd, ncmd, "--log", &at);
    char hosts[4096] = "", np[32];
    if (o->hosts) snprintf(hosts, sizeof hosts, "%s", o->hosts);
    int servers = server_ranks(rest, nrest);
    launch_catch_signals(o->stop_timeout);
    for (int attempt = 0;; attempt++) {
        snprintf(np, sizeof np, "%d", o->n);
        if (o->hosts) o->hosts = hosts;
        int cmd_at;
        mpirun_args(o, self, np, cmd, ncmd, args, &cmd_at);
        launch_outcome f;
        int code = launch_run(args, &f);
        if (code == 0 || code == 2 || code < 0 || f.signalled || attempt == o->max_restarts) {
            if (code != 0 && attempt == o->max_restarts && o->max_restarts > 0 && !f.signalled && code != 2)
                fprintf(stderr, "dtrain launch: the job failed after %d restart%s; giving up\n", o->max_restarts,
                        o->max_restarts == 1 ? "" : "s");
            return code < 0 ? 1 : code;
        }
        char dropped[256];
        int n = o->n, drop = o->min_workers > 0 && drop_blamed_host(hosts, &n, f.blamed, dropped, sizeof dropped);
        if (drop && n - servers < o->min_workers) {
            fprintf(stderr, "dtrain launch: host %s failed, and without it %d worker%s would be left (--min-workers "
                    "%d); giving up\n", dropped, n - servers, n - servers == 1 ? "" : "s", o->min_workers);
            return code;
        }
        o->n = n;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        log_restart(attempt + 1, o->max_restarts, &f, code, dir, log, (double)now.tv_sec + 1e-9 * (double)now.tv_nsec,
                    drop ? dropped : NULL, o->n - servers);
        static const char *const resume_auto[] = {"--resume", "auto", NULL}, *const keep[] = {"--keep-global-batch",
                                                                                             NULL};
        if (launch_stop_asked()) return code; /* a stop came while the job was being restarted */
        set_flag(cmd, &ncmd, "--resume", resume_auto);
        if (drop && !has_word(cmd, ncmd, "--keep-global-batch")) set_flag(cmd, &ncmd, "--keep-global-batch", keep);
    }
}

int cmd_launch(int argc, char **argv) {
    launch_opts o = {.stop_timeout = 60};
    dt_opt flags[] = {
        {"-n", DT_OPT_INT, &o.n, 1, 65536, 0},
        {"--hosts", DT_OPT_STR, &o.hosts, 0, 0, 0},
        {"--hostfile", DT_OPT_STR, &o.hostfile, 0, 0, 0},
        {"--launch-agent", DT_OPT_STR, &o.agent, 0, 0, 0},
        {"--max-restarts", DT_OPT_INT, &o.max_restarts, 0, 1000, 0},
        {"--min-workers", DT_OPT_INT, &o.min_workers, 1, 65536, 0},
        {"--stop-timeout", DT_OPT_DOUBLE, &o.stop_timeout, 1, 1e6, 0},
        {"--dry-run", DT_OPT_FLAG, &o.dry, 0, 0, 0},
        {"--help", DT_OPT_FLAG, &o.help, 0, 0, 0},
    };
    const char *rest[MAX_ARGS - 24];
    int nrest, dashes = 0;
    cli_env env = {0, 1, 1, 0};
    for (int i = 0; i < argc && !dashes; i++) dashes = strcmp(argv[i], "--") == 0;
    dt_status s = dt_opts_parse(argc, argv, flags, (int)(sizeof flags / sizeof *flags), rest, MAX_ARGS - 24, &nrest);
    if (o.help) {
        fputs(launch_usage, stdout);
        return 0;
    }
    if (!dashes && (s != DT_OK || nrest > 0))
        s = dt_fail(DT_ERR_USAGE, "launch: put -- between launch's flags and the command: dtrain launch -n N -- "
                    "train MODEL.cfg [flags]");
    if (s == DT_OK) s = check_launch(&o, rest, nrest);
    if (s == DT_OK) s = check_train_flags(rest, nrest);
    if (s != DT_OK) return cli_report(s, &env);

    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return cli_report(dt_fail(DT_ERR_IO, "launch: cannot find this executable: %s",
                                            strerror(errno)), &env);
    self[len] = '\0';
    if (o.dry) {
        const char *args[MAX_ARGS];
        char np[32];
        int cmd_at;
        snprintf(np, sizeof np, "%d", o.n);
        int k = mpirun_args(&o, self, np, rest, nrest, args, &cmd_at);
        for (int i = 0; i < k; i++) printf("%s%s", i ? " " : "", args[i]);
        printf("\n");
        return 0;
    }
    return supervise(&o, self, rest, nrest);
}
