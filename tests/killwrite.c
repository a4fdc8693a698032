/* LD_PRELOAD shim for test_crash.sh: the process dies by SIGKILL part-way
 * through writing a checkpoint. Counting the bytes written to files whose
 * name ends in ".tmp" (a checkpoint being written), it writes up to
 * DT_KILL_AFTER_BYTES of them and then kills itself, as a power cut or the
 * OOM killer would. Without the variable it only passes write() through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_tmp_file(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, path, sizeof path - 1);
    return k > 4 && memcmp(path + k - 4, ".tmp", 4) == 0;
}

ssize_t write(int fd, const void *buf, size_t n) {
    static ssize_t (*real_write)(int, const void *, size_t);
    static long long written;
    if (!real_write) real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *limit = getenv("DT_KILL_AFTER_BYTES");
    if (limit && is_tmp_file(fd)) {
        long long left = atoll(limit) - written;
        if ((long long)n >= left) {
            if (left > 0) real_write(fd, buf, (size_t)left);
            raise(SIGKILL);
        }
        written += (long long)n;
    }
    return real_write(fd, buf, n);
}
