#include "launch_run.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Set by the handlers (this process computes nothing: handlers are safe). */
static volatile sig_atomic_t child_pid = 0, signals_seen = 0, last_signal = 0;
static double stop_grace = 30;

static void forward(int sig) {
    last_signal = sig;
    signals_seen++;
    if (child_pid > 0 && signals_seen == 1) kill((pid_t)child_pid, sig);
}

int launch_stop_asked(void) { return signals_seen > 0; }

void launch_catch_signals(double stop_timeout) {
    stop_grace = stop_timeout;
    /* mpirun's output passes through here: a reader that went away (a
     * closed pipe) must not end the launcher before the job. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Appends to blamed the hosts of the "R (HOST)" pairs that a rank that gave
 * up names as the ones it waited for ("... have not reached it: 1 (h2), 3
 * (h3); giving up after ...", "... from server rank(s) 0 (h1); ..."). A
 * worker group's line names every member, the healthy too: no host. */
static void read_blamed_hosts(const char *line, char *blamed, size_t cap) {
    const char *end = strstr(line, "; giving up after --stall-abort"), *from = NULL;
    static const char *const markers[] = {"have not reached it: ", "rank(s) "};
    for (size_t i = 0; i < sizeof markers / sizeof *markers && !from; i++)
        if ((from = strstr(line, markers[i]))) from += strlen(markers[i]);
    for (const char *p = from; p && p < end; p++) {
        const char *open = strstr(p, " (");
        if (!open || open >= end) break;
        const char *close = strchr(open + 2, ')');
        if (!close || close > end) break;
        size_t n = (size_t)(close - open - 2), used = strlen(blamed);
        int digit_before = open > line && open[-1] >= '0' && open[-1] <= '9';
        if (digit_before && n > 0 && n < 256 && used + n + 2 < cap) {
            if (used) blamed[used++] = ',';
            memcpy(blamed + used, open + 2, n);
            blamed[used + n] = '\0';
        }
        p = close;
    }
}

/* What mpirun said of the rank that failed ("process rank 1 ... exited on
 * signal 9", "Process name: [[x,y],1] ... Exit code: 1"), and a rank that
 * gave up waiting. */
static void scan_line(const char *line, launch_outcome *o) {
    const char *p;
    if (!o->stalled && (p = strstr(line, "process rank ")) && sscanf(p, "process rank %d", &o->rank) == 1 &&
        o->signal < 0 &&
        (p = strstr(line, "on signal ")))
        sscanf(p, "on signal %d", &o->signal);
    if ((p = strstr(line, "Process name: [[")) && (p = strstr(p, "],")) && o->rank < 0) sscanf(p, "],%d]", &o->rank);
    if ((p = strstr(line, "Exit code:")) && o->exit_code < 0) sscanf(p, "Exit code: %d", &o->exit_code);
    /* Open MPI could not start a daemon, or lost one (TCP gave up on its
     * host, minutes after a link went down): the host it names, or ssh's. */
    if (strstr(line, "ORTE was unable to reliably start one or more daemons")) o->start_failed = 1;
    if (strstr(line, "ORTE has lost communication with a remote daemon")) o->lost_daemon = 1;
    /* Where the host is named: a daemon that could not connect back is
     * the "Local host" of its message (elsewhere that is the reporter, so
     * it counts for start failures only), ssh names its target, a lost
     * daemon its node. */
    static const struct {
        const char *at, *then; /* the host follows `at`, or `then` after it */
        int lost;              /* names a lost daemon's host, not one that did not start */
    } daemon_host[] = {{"Local host:", NULL, 0},
                       {"ssh: connect to host ", NULL, 0},
                       {"Could not resolve hostname ", NULL, 0},
                       {"Remote daemon:", " on node ", 1}}; /* "Remote daemon: [[8187,0],2] on node h2" */
    for (size_t i = 0; i < sizeof daemon_host / sizeof *daemon_host; i++) {
        if (!(p = strstr(line, daemon_host[i].at))) continue;
        p += strlen(daemon_host[i].at);
        if (daemon_host[i].then && !(p = strstr(p, daemon_host[i].then))) continue;
        if (daemon_host[i].then) p += strlen(daemon_host[i].then);
        p += strspn(p, " \t");
        char *list = daemon_host[i].lost ? o->lost_hosts : o->daemon_hosts;
        size_t n = strcspn(p, " \t:\n"), used = strlen(list);
        if (n > 0 && used + n + 2 < sizeof o->daemon_hosts)
            snprintf(list + used, sizeof o->daemon_hosts - used, "%s%.*s", used ? "," : "", (int)n, p);
    }
    if (strstr(line, "giving up after --stall-abort")) {
        if (!o->stalled && (p = strstr(line, "rank ")) && o->rank < 0) sscanf(p, "rank %d", &o->rank);
        if (!o->stalled) read_blamed_hosts(line, o->blamed, sizeof o->blamed);
        o->stalled = 1;
    }
}

/* The parent of pid from /proc/pid/stat (-1 if gone). */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')'); /* the command name may hold anything */
    int ppid;
    return close && sscanf(close + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : -1;
}

/* Reaps every child that has ended (orphans of the job come back to this
 * process); mpirun's status goes to *st, *exited set, when it is one. */
static void reap(pid_t mpirun, int *st, int *exited) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == mpirun) {
            *st = status;
            *exited = 1;
            child_pid = 0; /* no signal goes to its pid from now on */
        }
}

/* SIGKILL to every process below this one (mpirun, the ranks, Open MPI's
 * daemons and launch agents on this machine; orphans come back to this
 * process, a child subreaper). Repeated until none is left, since the
 * ones found last may have forked. */
static void kill_descendants(pid_t mpirun, int *st, int *exited) {
    pid_t self = getpid();
    /* Until none is left (a process in an uninterruptible wait, as an fsync
     * to a slow disk, dies only when that ends), for at most 30 s. */
    for (double until = now_s() + 30; now_s() < until;) {
        pid_t found[4096];
        int n = 0;
        found[n++] = self;
        DIR *d = opendir("/proc");
        if (!d) break;
        for (int grew = 1; grew && n < 4096;) { /* the descendants, to a fixed point */
            grew = 0;
            rewinddir(d);
            struct dirent *e;
            while ((e = readdir(d)) && n < 4096) {
                pid_t pid = (pid_t)atoi(e->d_name), pp;
                if (pid <= 0 || (pp = parent_of(pid)) < 0) continue;
                int known = 0, under = 0;
                for (int i = 0; i < n; i++) known |= found[i] == pid, under |= found[i] == pp;
                if (under && !known) found[n++] = pid, grew = 1;
            }
        }
        closedir(d);
        for (int i = n - 1; i >= 1; i--) kill(found[i], SIGKILL);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        reap(mpirun, st, exited);
        if (n == 1) break;
    }
}

/* One of mpirun's output streams: passed through as it comes (a progress
 * bar redraws without newlines), its whole lines read. */
typedef struct {
    int fd, open;
    FILE *out;
    char line[8192];
    size_t have;
} stream;

static void pump(stream *st, launch_outcome *o) {
    char got[4096];
    ssize_t n = read(st->fd, got, sizeof got);
    if (n < 0) {
        st->open = errno == EINTR || errno == EAGAIN;
        return;
    }
    if (n == 0) {
        st->open = 0;
        return;
    }
    fwrite(got, 1, (size_t)n, st->out);
    fflush(st->out);
    for (ssize_t i = 0; i < n; i++) {
        if (got[i] != '\n') {
            if (st->have < sizeof st->line - 1) st->line[st->have++] = got[i]; /* a longer line is cut */
            continue;
        }
        st->line[st->have] = '\0';
        scan_line(st->line, o);
        st->have = 0;
    }
}

/* The reason the launcher ends the job itself, or NULL while it need not. */
static const char *why_kill(const launch_outcome *o, double *stall_at, double *stop_at, double now) {
    if (o->stalled && *stall_at == 0) *stall_at = now + LAUNCH_ABORT_GRACE;
    if (signals_seen && *stop_at == 0) *stop_at = now + stop_grace;
    if (signals_seen > 1) return "a second stop signal";
    if (*stop_at > 0 && now >= *stop_at) return "the ranks did not stop within --stop-timeout";
    if (*stall_at > 0 && now >= *stall_at) return "mpirun did not end the job after a rank gave up";
    return NULL;
}

int launch_run(const char **args, launch_outcome *o) {
    memset(o, 0, sizeof *o);
    o->rank = o->signal = o->exit_code = -1;
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    int err[2], out[2];
    if (pipe(err) != 0) return -1;
    if (pipe(out) != 0) {
        close(err[0]);
        close(err[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(err[0]);
        close(err[1]);
        close(out[0]);
        close(out[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(err[1], STDERR_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(err[0]);
        close(err[1]);
        close(out[0]);
        close(out[1]);
        execvp("mpirun", (char *const *)args);
        fprintf(stderr, "dtrain: launch: cannot run mpirun: %s (install openmpi-bin)\n", strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    child_pid = pid;
    if (signals_seen) kill(pid, last_signal); /* one came before it existed */
    close(err[1]);
    close(out[1]);
    stream streams[2] = {{.fd = err[0], .open = 1, .out = stderr}, {.fd = out[0], .open = 1, .out = stdout}};
    int st = 0, exited = 0;
    double stall_at = 0, stop_at = 0, ended_at = 0; /* ended: mpirun exited or was killed */
    while (streams[0].open || streams[1].open) {
        struct pollfd p[2] = {{streams[0].open ? err[0] : -1, POLLIN, 0}, {streams[1].open ? out[0] : -1, POLLIN, 0}};
        if (poll(p, 2, 200) > 0)
            for (int i = 0; i < 2; i++)
                if (p[i].revents) pump(&streams[i], o);
        double now = now_s();
        if (!exited) reap(pid, &st, &exited);
        if (exited && ended_at == 0) ended_at = now;
        const char *why = o->killed ? NULL : why_kill(o, &stall_at, &stop_at, now);
        if (why) {
            fprintf(stderr, "dtrain launch: %s; killing mpirun and every rank\n", why);
            kill_descendants(pid, &st, &exited);
            o->killed = 1;
            if (ended_at == 0) ended_at = now;
        }
        /* Whatever still holds the pipe (a launch agent whose host is gone)
         * has had 5 s since mpirun ended. */
        if (ended_at > 0 && now - ended_at > 5) break;
    }
    close(err[0]);
    close(out[0]);
    if (!exited)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    child_pid = 0;
    kill_descendants(pid, &st, &exited); /* nothing of the job outlives it */
    o->signalled = signals_seen > 0;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (!o->blamed[0] && (o->lost_daemon || o->start_failed))
        snprintf(o->blamed, sizeof o->blamed, "%s", o->lost_daemon ? o->lost_hosts : o->daemon_hosts);
    return o->stalled ? 3 : code;
}
