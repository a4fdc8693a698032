#include "pump.h"

#include <errno.h>
#include <time.h>

#include "dtrain/dist.h"
#include "threads.h"

/* now + DT_PUMP_INTERVAL_US on the condition variable's clock (monotonic). */
static struct timespec next_probe(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += DT_PUMP_INTERVAL_US * 1000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

/* Probes while on, sleeping on cv between probes (so off and quit need
 * not wait out an interval); between steps waits for on. */
static void *pump_thread(void *arg) {
    dt_pump *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        if (!p->on || p->failed) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        p->probing = 1;
        pthread_mutex_unlock(&p->mu);
        int flag;
        int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, p->self, &flag, MPI_STATUS_IGNORE);
        pthread_mutex_lock(&p->mu);
        p->probing = 0;
        if (rc != MPI_SUCCESS) p->failed = 1;
        pthread_cond_broadcast(&p->cv);
        struct timespec until = next_probe();
        while (p->on && !p->quit && pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dt_status dt_pump_create(dt_pump *p) {
    p->on = p->probing = p->failed = p->quit = 0;
    DT_TRY(dt_mpi_check(MPI_Comm_dup(MPI_COMM_SELF, &p->self), "progress thread (MPI_Comm_dup)"));
    dt_status s = dt_mpi_check(MPI_Comm_set_errhandler(p->self, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    pthread_condattr_t attr;
    int cv = 0, mu = 0;
    if (s == DT_OK && pthread_condattr_init(&attr) == 0) {
        cv = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&p->cv, &attr) == 0;
        pthread_condattr_destroy(&attr);
    }
    mu = cv && pthread_mutex_init(&p->mu, NULL) == 0;
    if (s == DT_OK && (!mu || pthread_create(&p->thread, NULL, pump_thread, p) != 0))
        s = dt_fail(DT_ERR_INTERNAL, "cannot start the MPI progress thread");
    if (s == DT_OK) {
        p->started = 1;
        return DT_OK;
    }
    if (mu) pthread_mutex_destroy(&p->mu);
    if (cv) pthread_cond_destroy(&p->cv);
    MPI_Comm_free(&p->self);
    return s;
}

void dt_pump_on(dt_pump *p) {
    if (!p->started) return;
    pthread_mutex_lock(&p->mu);
    p->on = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

dt_status dt_pump_off(dt_pump *p) {
    if (!p->started) return DT_OK;
    pthread_mutex_lock(&p->mu);
    p->on = 0;
    pthread_cond_broadcast(&p->cv);
    while (p->probing) pthread_cond_wait(&p->cv, &p->mu);
    int failed = p->failed;
    pthread_mutex_unlock(&p->mu);
    return failed ? dt_fail(DT_ERR_MPI, "the MPI progress thread's MPI_Iprobe failed") : DT_OK;
}

void dt_pump_free(dt_pump *p) {
    if (!p->started) return;
    dt_threads_stop(&p->mu, &p->cv, &p->quit, &p->thread, 1);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    MPI_Comm_free(&p->self);
    p->started = 0;
}
