/* Ending the helper threads of the distributed code (the progress pump,
 * the allreduce buckets' communication thread, the deferred policy's
 * appliers). Each waits on a condition variable under a mutex until a quit
 * flag is set; ending them is always the same four moves, here once. */
#ifndef DTRAIN_COMM_THREADS_H
#define DTRAIN_COMM_THREADS_H

#include <pthread.h>

/* Sets *quit under mu, wakes every thread waiting on cv, and joins the n
 * threads (n 0: only the flag). The threads must read *quit under mu after
 * every wake. mu and cv stay initialised: the caller destroys them. */
void dt_threads_stop(pthread_mutex_t *mu, pthread_cond_t *cv, int *quit, const pthread_t *threads, int n);

#endif
