/* The table of modes and allreduce algorithms (dist.h): names, what each
 * reads, how it is made; the usage text and the flag checks come from it. */
#include <string.h>

#include "dtrain/plan.h"

static dt_status serial_create(dt_sync **out, const dt_comm *c, const dt_dist_cfg *cfg) {
    (void)c, (void)cfg;
    return dt_sync_serial_create(out);
}

/* In dt_mode order. */
static const dt_mode_info modes[] = {
    {"serial", "one rank, no communication", 0, DT_PS_NONE, 0, 1, serial_create},
    {"allreduce", "every worker sums every gradient (Horovod, DDP)",
     DT_MF_ALGO | DT_MF_FACTORS | DT_MF_COMPRESSION, DT_PS_NONE, 0, 0, dt_sync_allreduce_create},
    {"ps-sync", "servers apply a clock once every gradient is in",
     DT_MF_SERVERS | DT_MF_FACTORS | DT_MF_GROUPS | DT_MF_COMPRESSION, DT_PS_CLOCKED, 0, 0, dt_sync_ps_create},
    {"ps-async", "servers apply each gradient on arrival",
     DT_MF_SERVERS | DT_MF_GROUPS | DT_MF_COMPRESSION, DT_PS_IMMEDIATE, 0, 0, dt_sync_ps_create},
    {"ps-ssp", "workers at most --staleness clocks apart (SSP)",
     DT_MF_SERVERS | DT_MF_STALENESS | DT_MF_COMPRESSION, DT_PS_CLOCKED, 0, 0, dt_sync_ps_create},
    {"ps-async-nowait", "servers reply at once, apply the gradients later",
     DT_MF_SERVERS | DT_MF_COMPRESSION, DT_PS_DEFERRED, 0, 0, dt_sync_ps_create},
    {"ps-hogwild", "ps-async-nowait, two threads, no locks",
     DT_MF_SERVERS | DT_MF_COMPRESSION, DT_PS_DEFERRED, 1, 0, dt_sync_ps_create},
};
enum { NMODES = (int)(sizeof modes / sizeof *modes) };
_Static_assert(NMODES == DT_MODE_PS_HOGWILD + 1, "a row per dt_mode, in its order");

/* In dt_ar_algo order. */
static const struct {
    const char *name, *summary;
} algos[] = {
    {"auto", "shm on one host, hier across hosts, else ring or mpi"},
    {"ring", "dtrain's ring per fusion bucket"},
    {"mpi", "MPI_Iallreduce per fusion bucket"},
    {"shm", "one shared-memory window on this host, no copies"},
    {"hier", "a window per host, a ring across hosts (Horovod)"},
};
enum { NALGOS = (int)(sizeof algos / sizeof *algos) };
_Static_assert(NALGOS == DT_AR_HIER + 1, "a row per dt_ar_algo, in its order");

const dt_mode_info *dt_mode_info_of(dt_mode m) { return &modes[m]; }

const char *dt_mode_name(dt_mode mode) { return modes[mode].name; }

int dt_mode_from_name(const char *name) {
    for (int i = 0; i < NMODES; i++)
        if (strcmp(name, modes[i].name) == 0) return i;
    return -1;
}

int dt_ar_algo_from_name(const char *name) {
    for (int i = 0; i < NALGOS; i++)
        if (strcmp(name, algos[i].name) == 0) return i;
    return -1;
}

const char *dt_ar_algo_name(dt_ar_algo algo) { return algos[algo].name; }

/* names[i] for the n rows with pick[i], as "a, b or c", into buf. */
static const char *join(const char *const *names, const int *pick, int n, char *buf, size_t cap) {
    int total = 0, seen = 0;
    size_t at = 0;
    for (int i = 0; i < n; i++) total += pick[i];
    buf[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        if (!pick[i]) continue;
        const char *sep = seen == 0 ? "" : seen == total - 1 ? " or " : ", ";
        int w = snprintf(buf + at, cap - at, "%s%s", sep, names[i]);
        at += w < 0 ? cap : (size_t)w;
        seen++;
    }
    return buf;
}

const char *dt_mode_list(unsigned flags, char *buf, size_t cap) {
    const char *names[NMODES];
    int pick[NMODES];
    for (int i = 0; i < NMODES; i++) {
        names[i] = modes[i].name;
        pick[i] = (modes[i].flags & flags) == flags;
    }
    return join(names, pick, NMODES, buf, cap);
}

const char *dt_ar_algo_list(char *buf, size_t cap) {
    const char *names[NALGOS];
    int pick[NALGOS];
    for (int i = 0; i < NALGOS; i++) names[i] = algos[i].name, pick[i] = 1;
    return join(names, pick, NALGOS, buf, cap);
}

dt_status dt_mode_check_flag(dt_mode mode, unsigned flags, const char *flag) {
    if ((modes[mode].flags & flags) == flags) return DT_OK;
    char list[160];
    return dt_fail(DT_ERR_USAGE, "%s applies to --mode %s, not %s", flag, dt_mode_list(flags, list, sizeof list),
                   modes[mode].name);
}

/* The usage column the flags' descriptions start at. */
#define USAGE_INDENT "                          "

void dt_mode_usage(FILE *out, const char *flag_text) {
    fputs(flag_text, out);
    for (int i = 0; i < NMODES; i++) fprintf(out, USAGE_INDENT "%-16s %s\n", modes[i].name, modes[i].summary);
}

void dt_ar_algo_usage(FILE *out, const char *flag_text) {
    fputs(flag_text, out);
    for (int i = 0; i < NALGOS; i++) fprintf(out, USAGE_INDENT "%-6s %s\n", algos[i].name, algos[i].summary);
}
