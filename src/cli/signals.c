#include "signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

dt_status cli_signals_block(void) {
    sigset_t set;
    dt_job_signal_set(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0) return dt_fail(DT_ERR_INTERNAL, "cannot block signals: %s", strerror(rc));
    return DT_OK;
}

void cli_signals_unblock(void) {
    sigset_t set;
    dt_job_signal_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void *receive(void *arg) {
    cli_signals *s = arg;
    sigset_t set;
    dt_job_signal_set(&set);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) != 0) continue;
        if (sig == SIGUSR1) {
            atomic_store(&s->req.progress, 1);
            continue;
        }
        if (atomic_exchange(&s->req.stop, 1)) continue; /* said once */
        char where[32] = "";
        if (s->world > 1) snprintf(where, sizeof where, "rank %d: ", s->rank);
        fprintf(stderr, "dtrain: %s%s received; stopping at the next step all ranks agree on, with a final "
                        "checkpoint where one is configured\n", where, strsignal(sig));
    }
    return NULL;
}

dt_status cli_signals_start(cli_signals *sig) {
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0) return dt_fail(DT_ERR_INTERNAL, "cannot start the signal thread");
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, receive, sig);
    pthread_attr_destroy(&attr);
    if (rc != 0) return dt_fail(DT_ERR_INTERNAL, "cannot start the signal thread: %s", strerror(rc));
    return DT_OK;
}
