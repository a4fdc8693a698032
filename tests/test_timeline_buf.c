/* The timeline's buffer and files without MPI: threads recording while
 * the main thread flushes lose and duplicate nothing (across chunk
 * boundaries); spans keep their nesting through rounding; the merge keeps
 * every complete line of a part cut short by a kill, skips a missing part
 * only when told to, and refuses a file that is not a part. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/timeline.h"
#include "dtrain/timer.h"
#include "testutil.h"

enum { THREADS = 4, SPANS = 5000 }; /* 20000 events: many 1024-event chunks */

static char dir[] = "/tmp/dt_timeline_XXXXXX";
static dt_timeline *tl;

static void *recorder(void *arg) {
    int track = (int)(size_t)arg;
    for (int i = 0; i < SPANS; i++) {
        double t = dt_now();
        dt_timeline_span(tl, track, DT_TL_CAT_COMM, "span", t, t + 1e-6, (dt_tl_arg[]){{"i", i}}, 1);
    }
    return NULL;
}

/* Lines of path containing needle. */
static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static void concurrent_record_and_flush(void) {
    char path[256], part[300];
    snprintf(path, sizeof path, "%s/threads.json", dir);
    CHECK_OK(dt_timeline_create(&tl, path, 0, 0, dt_now()));
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) CHECK(pthread_create(&th[k], NULL, recorder, (void *)(size_t)k) == 0);
    for (int i = 0; i < 50; i++) {
        CHECK_OK(dt_timeline_flush(tl));
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
    for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
    CHECK_OK(dt_timeline_flush(tl));
    CHECK_OK(dt_timeline_flush(tl)); /* nothing new: writes nothing */
    dt_timeline_free(tl);
    CHECK_OK(dt_timeline_merge(path, 1, 1));
    snprintf(part, sizeof part, "%s.rank0", path);
    CHECK(access(part, F_OK) != 0); /* merged parts are removed */
    CHECK(count_lines(path, "\"ph\":\"X\"") == THREADS * SPANS);
    for (int k = 0; k < THREADS; k++) {
        char tid[96];
        snprintf(tid, sizeof tid, "\"tid\":%d,\"ts\"", k);
        CHECK(count_lines(path, tid) == SPANS);
        snprintf(tid, sizeof tid, "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,", k);
        CHECK(count_lines(path, tid) == 1);
    }
    CHECK(count_lines(path, "\"args\":{\"i\":4999}") == THREADS);
    remove(path);
}

/* A child ending 0.4 ns before its parent still ends inside it once both
 * are whole nanoseconds; a server's process is named as one. */
static void rounding_keeps_nesting(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/nest.json", dir);
    CHECK_OK(dt_timeline_create(&tl, path, 3, -1, 100.0));
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_STEP, "parent", 100.0000012346, 100.0000020004, NULL, 0);
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_FORWARD, "child", 100.0000012349, 100.0000020000, NULL, 0);
    CHECK_OK(dt_timeline_flush(tl));
    dt_timeline_free(tl);
    CHECK_OK(dt_timeline_merge(path, 4, 0)); /* ranks 0-2 have no part: skipped */
    CHECK(count_lines(path, "\"name\":\"parent\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":3,\"tid\":0,"
                            "\"ts\":1.235,\"dur\":0.765}") == 1);
    CHECK(count_lines(path, "\"name\":\"child\",\"cat\":\"forward\",\"ph\":\"X\",\"pid\":3,\"tid\":0,"
                            "\"ts\":1.235,\"dur\":0.765}") == 1);
    CHECK(count_lines(path, "\"args\":{\"name\":\"rank 3 server\"}") == 1);
    CHECK(count_lines(path, "\"args\":{\"name\":\"server\"}") == 1);
    remove(path);
}

static void merge_of_damaged_parts(void) {
    char path[256], part[300];
    snprintf(path, sizeof path, "%s/cut.json", dir);
    snprintf(part, sizeof part, "%s.rank0", path);
    dt_test_write_text(part, "[\n{\"name\":\"a\",\"ph\":\"X\"},\n{\"name\":\"b\",\"ph\":\"X\"},\n{\"name\":\"c\",\"p");
    CHECK(dt_timeline_merge(path, 2, 1) == DT_ERR_IO); /* rank 1's part is missing */
    CHECK(strstr(dt_last_error(), ".rank1") != NULL);
    CHECK(access(part, F_OK) == 0); /* a failed merge removes nothing */
    CHECK_OK(dt_timeline_merge(path, 2, 0));
    CHECK(count_lines(path, "\"ph\":\"X\"") == 2);
    CHECK(count_lines(path, "\"name\":\"c\"") == 0);
    CHECK(count_lines(path, "{\"name\":\"b\",\"ph\":\"X\"}") == 1);
    remove(path);

    dt_test_write_text(part, "{\"traceEvents\":[\n");
    CHECK(dt_timeline_merge(path, 1, 1) == DT_ERR_FORMAT);
    CHECK(access(path, F_OK) != 0);
    remove(part);
}

static void bad_paths_and_null(void) {
    char path[256];
    CHECK(dt_timeline_create(&tl, dir, 0, 0, 0) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "is a directory") != NULL);
    snprintf(path, sizeof path, "%s/missing/t.json", dir);
    CHECK(dt_timeline_create(&tl, path, 0, 0, 0) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "cannot create") != NULL && tl == NULL);
    dt_timeline_span(NULL, DT_TL_MAIN, DT_TL_CAT_STEP, "off", 0, 1, NULL, 0);
    CHECK_OK(dt_timeline_flush(NULL));
    dt_timeline_free(NULL);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    concurrent_record_and_flush();
    rounding_keeps_nesting();
    merge_of_damaged_parts();
    bad_paths_and_null();
    rmdir(dir);
    return dt_test_finish("test_timeline_buf");
}
