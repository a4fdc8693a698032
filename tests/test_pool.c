/* The thread pool (pool.h): every item runs once, on any thread count, loop
 * after loop on the same pool; a failing loop reports its lowest failing
 * item's status and message whatever the timing, and the pool runs on. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/pool.h"
#include "testutil.h"

enum { N = 2000 };

typedef struct {
    atomic_int runs[N];
    int threads;
    atomic_int bad_workers; /* worker indices out of [0, threads) */
    size_t fail_a, fail_b; /* items that fail (SIZE_MAX: none) */
} job;

static dt_status item(void *ctx, size_t i, int worker) {
    job *j = ctx;
    atomic_fetch_add(&j->runs[i], 1);
    if (worker < 0 || worker >= j->threads) atomic_fetch_add(&j->bad_workers, 1);
    if (i == j->fail_a) return dt_fail(DT_ERR_FORMAT, "item %zu failed", i);
    if (i == j->fail_b) return dt_fail(DT_ERR_IO, "item %zu failed", i);
    return DT_OK;
}

static void run_threads(int threads) {
    dt_pool *p = NULL;
    CHECK_OK(dt_pool_create(&p, threads));
    if (!p) return;
    static job j;
    for (int loop = 0; loop < 30; loop++) {
        memset(&j, 0, sizeof j);
        j.threads = threads;
        j.fail_a = j.fail_b = SIZE_MAX;
        CHECK_OK(dt_pool_run(p, N, item, &j));
        int once = 0;
        for (int i = 0; i < N; i++) once += atomic_load(&j.runs[i]) == 1;
        CHECK(once == N && atomic_load(&j.bad_workers) == 0);
        /* Two failures: the lower one is the loop's, and every item below
         * it ran. */
        memset(&j, 0, sizeof j);
        j.threads = threads;
        j.fail_a = 1500 - (size_t)loop * 7;
        j.fail_b = 900 + (size_t)loop;
        CHECK(dt_pool_run(p, N, item, &j) == DT_ERR_IO);
        char want[64];
        snprintf(want, sizeof want, "item %zu failed", j.fail_b);
        CHECK(strcmp(dt_last_error(), want) == 0);
        int below = 0;
        for (size_t i = 0; i < j.fail_b; i++) below += atomic_load(&j.runs[i]) == 1;
        CHECK(below == (int)j.fail_b);
    }
    CHECK_OK(dt_pool_run(p, 0, item, &j)); /* an empty loop */
    dt_pool_free(p);
}

int main(void) {
    for (int threads = 1; threads <= 4; threads++) run_threads(threads);
    dt_pool *p = NULL;
    CHECK(dt_pool_create(&p, 0) == DT_ERR_USAGE && p == NULL);
    dt_pool_free(NULL);
    return dt_test_finish("test_pool");
}
