#include "pump.h"

#include <mpi.h>
#include <time.h>

static void *pump_thread(void *arg) {
    dt_pump *p = arg;
    const struct timespec interval = {0, DT_PUMP_INTERVAL_US * 1000L};
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        if (!atomic_load(&p->on) || atomic_load(&p->failed)) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        int flag;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            atomic_store(&p->failed, 1);
        nanosleep(&interval, NULL);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dt_status dt_pump_create(dt_pump *p) {
    atomic_init(&p->on, 0);
    atomic_init(&p->failed, 0);
    p->quit = 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, pump_thread, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return dt_fail(DT_ERR_INTERNAL, "cannot start the MPI progress thread");
    }
    p->started = 1;
    return DT_OK;
}

void dt_pump_on(dt_pump *p) {
    if (!p->started) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->on, 1);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

dt_status dt_pump_off(dt_pump *p) {
    atomic_store(&p->on, 0);
    if (atomic_load(&p->failed)) return dt_fail(DT_ERR_MPI, "the MPI progress thread's MPI_Iprobe failed");
    return DT_OK;
}

void dt_pump_free(dt_pump *p) {
    if (!p->started) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    p->started = 0;
}
