/* One run of mpirun under dtrain launch: started in a process group of its
 * own, its stderr echoed and read for what it says of a failed rank, and
 * ended within a bounded time whatever its ranks do. */
#ifndef DT_CLI_LAUNCH_RUN_H
#define DT_CLI_LAUNCH_RUN_H

/* What a run said and how it ended. */
typedef struct {
    int rank, signal, exit_code; /* what mpirun said of the rank that failed (-1: nothing) */
    int stalled;                 /* a rank gave up waiting for others (--stall-abort) */
    char blamed[512];            /* the hosts that rank waited for, or where Open MPI could not start a
                                  * daemon: "h2,h3" ("" if none said) */
    int start_failed;            /* Open MPI could not start a daemon */
    int lost_daemon;             /* Open MPI lost a daemon (its host unreachable) */
    char daemon_hosts[512];      /* hosts where a daemon did not start ("Local host:", ssh's) */
    char lost_hosts[512];        /* hosts whose daemon was lost ("Remote daemon: ... on node H") */
    int killed;                  /* mpirun and its ranks had to be killed */
    int signalled;               /* SIGINT/SIGTERM/SIGHUP reached the launcher */
} launch_outcome;

/* Seconds mpirun has to end the job after a rank gave up (MPI_Abort) or
 * after the launcher passed it a stop signal, before the launcher kills it
 * and every process under it (a stop signal: --stop-timeout). */
enum { LAUNCH_ABORT_GRACE = 10 };

/* From now on SIGINT, SIGTERM and SIGHUP to the launcher are passed to
 * mpirun (which passes them to every rank: they stop at an agreed step);
 * a second one, or stop_timeout seconds without an end, kills mpirun and
 * every process under it. */
void launch_catch_signals(double stop_timeout);
/* Whether a stop signal has reached the launcher. */
int launch_stop_asked(void);

/* Runs args (mpirun ...) to its end. Returns its exit status (128 + signal
 * if it was killed; 3 if a rank gave up waiting), -1 if it could not be
 * started. */
int launch_run(const char **args, launch_outcome *o);

#endif
