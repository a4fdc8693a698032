/* dtrain launch -n N [--hostfile F] -- train|sweep MODEL.cfg ...: runs mpirun with
 * the flags this kind of machine needs (like horovodrun): as root, more
 * ranks than cores, CPU binding only when every rank has a core. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"

#define MAX_ARGS 512

static const char launch_usage[] =
    "usage: dtrain launch -n N [--hostfile F] [--dry-run] -- train|sweep MODEL.cfg [flags]\n"
    "  runs N ranks of this dtrain with mpirun (as root: --allow-run-as-root;\n"
    "  more ranks than cores: --oversubscribe and no CPU binding)\n";

int cmd_launch(int argc, char **argv) {
    int n = 0, dry = 0;
    const char *hostfile = NULL;
    cli_flag flags[] = {
        {"-n", ARG_INT, &n, 1, 65536, 0},
        {"--hostfile", ARG_STR, &hostfile, 0, 0, 0},
        {"--dry-run", ARG_FLAG, &dry, 0, 0, 0},
    };
    const char *rest[MAX_ARGS - 16];
    int nrest;
    cli_env env = {0, 1, 1, 0};
    dt_status s = cli_parse(argc, argv, flags, 3, rest, MAX_ARGS - 16, &nrest);
    if (s == DT_OK && (n < 1 || nrest < 1))
        s = dt_fail(DT_ERR_USAGE, "launch: needs -n N and a command after --\n%s", launch_usage);
    if (s != DT_OK) return cli_report(s, &env);

    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return cli_report(dt_fail(DT_ERR_IO, "launch: cannot find this executable: %s",
                                            strerror(errno)), &env);
    self[len] = '\0';
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char np[32];
    snprintf(np, sizeof np, "%d", n);
    const char *args[MAX_ARGS];
    int k = 0;
    args[k++] = "mpirun";
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    args[k++] = "-np";
    args[k++] = np;
    if (hostfile) {
        args[k++] = "--hostfile";
        args[k++] = hostfile;
    } else if (n > cores) {
        args[k++] = "--oversubscribe";
    }
    args[k++] = "--bind-to";
    args[k++] = (!hostfile && n > cores) ? "none" : "core";
    args[k++] = self;
    for (int i = 0; i < nrest; i++) args[k++] = rest[i];
    args[k] = NULL;
    if (dry) {
        for (int i = 0; i < k; i++) printf("%s%s", i ? " " : "", args[i]);
        printf("\n");
        return 0;
    }
    fflush(stdout);
    execvp("mpirun", (char *const *)args);
    return cli_report(dt_fail(DT_ERR_IO, "launch: cannot run mpirun: %s (install openmpi-bin)",
                              strerror(errno)), &env);
}
