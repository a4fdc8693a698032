#include "threads.h"

void dt_threads_stop(pthread_mutex_t *mu, pthread_cond_t *cv, int *quit, const pthread_t *threads, int n) {
    pthread_mutex_lock(mu);
    *quit = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
}
