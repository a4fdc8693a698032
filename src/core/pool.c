/* The thread team of pool.h. A loop is published under the mutex with a
 * new generation number; helpers wake, take items from the shared counter
 * until it runs past n, and the last one to finish signals the caller. */
#include "dtrain/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/mem.h"

struct dt_pool {
    int threads;
    int started;        /* helpers running (threads - 1 after a successful create) */
    pthread_t *helpers; /* (threads - 1) */
    pthread_mutex_t mu;
    pthread_cond_t go;   /* a new loop was published, or stop */
    pthread_cond_t done; /* busy reached 0 */
    /* Guarded by mu: */
    unsigned long generation;
    int stop;
    int busy;            /* helpers still in the current loop */
    size_t err_item;     /* lowest failing item (SIZE_MAX: none) */
    dt_status err;
    char err_msg[512];   /* its message, copied from the failing thread */
    /* The current loop: written under mu before generation moves on. */
    dt_pool_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next;
    atomic_int failed;   /* stop handing out items */
};

static void work(dt_pool *p, int worker) {
    while (!atomic_load_explicit(&p->failed, memory_order_relaxed)) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) return;
        dt_status s = p->fn(p->ctx, i, worker);
        if (s == DT_OK) continue;
        pthread_mutex_lock(&p->mu);
        if (i < p->err_item) {
            p->err_item = i;
            p->err = s;
            snprintf(p->err_msg, sizeof p->err_msg, "%s", dt_last_error());
        }
        pthread_mutex_unlock(&p->mu);
        atomic_store(&p->failed, 1);
    }
}

typedef struct {
    dt_pool *p;
    int worker;
} helper_arg;

static void *helper(void *arg) {
    dt_pool *p = ((helper_arg *)arg)->p;
    int worker = ((helper_arg *)arg)->worker;
    dt_free(arg);
    /* Generation 0 is "no loop yet": a loop published before this thread
     * first takes the mutex is still seen as new. */
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, worker);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The mutex and both condition variables, or none of them. */
static dt_status init_sync(dt_pool *p) {
    if (pthread_mutex_init(&p->mu, NULL) != 0) return dt_fail(DT_ERR_NOMEM, "thread pool: cannot create a mutex");
    if (pthread_cond_init(&p->go, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        return dt_fail(DT_ERR_NOMEM, "thread pool: cannot create a condition variable");
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->go);
        pthread_mutex_destroy(&p->mu);
        return dt_fail(DT_ERR_NOMEM, "thread pool: cannot create a condition variable");
    }
    return DT_OK;
}

dt_status dt_pool_create(dt_pool **out, int threads) {
    *out = NULL;
    if (threads < 1 || threads > 1024)
        return dt_fail(DT_ERR_USAGE, "thread pool: %d threads (must be 1..1024)", threads);
    void *mem;
    DT_TRY(dt_alloc_bytes(&mem, sizeof(dt_pool), "thread pool"));
    dt_pool *p = mem;
    p->threads = threads;
    dt_status s = dt_alloc_bytes(&mem, sizeof(pthread_t) * (size_t)threads, "thread pool");
    if (s != DT_OK) {
        dt_free(p);
        return s;
    }
    p->helpers = mem;
    s = init_sync(p);
    if (s != DT_OK) {
        dt_free(p->helpers);
        dt_free(p);
        return s;
    }
    for (int i = 1; i < threads && s == DT_OK; i++) {
        s = dt_alloc_bytes(&mem, sizeof(helper_arg), "thread pool");
        if (s != DT_OK) break;
        *(helper_arg *)mem = (helper_arg){p, i};
        int e = pthread_create(&p->helpers[p->started], NULL, helper, mem);
        if (e) {
            dt_free(mem);
            s = dt_fail(DT_ERR_NOMEM, "thread pool: cannot start thread %d of %d: %s", i + 1, threads, strerror(e));
        } else {
            p->started++;
        }
    }
    if (s != DT_OK) {
        dt_pool_free(p);
        return s;
    }
    *out = p;
    return DT_OK;
}

dt_status dt_pool_run(dt_pool *p, size_t n, dt_pool_fn fn, void *ctx) {
    if (p->threads == 1) {
        for (size_t i = 0; i < n; i++) DT_TRY(fn(ctx, i, 0));
        return DT_OK;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    atomic_store(&p->failed, 0);
    p->err_item = SIZE_MAX;
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    dt_status s = p->err_item == SIZE_MAX ? DT_OK : dt_fail(p->err, "%s", p->err_msg);
    pthread_mutex_unlock(&p->mu);
    return s;
}

void dt_pool_free(dt_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->helpers[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    dt_free(p->helpers);
    dt_free(p);
}
