/* Descriptors over the fuzz input and the clean-failure check. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fuzz_check(int cond, const char *what, const char *file, int line) {
    if (cond) return;
    fprintf(stderr, "%s:%d: fuzz invariant '%s' broken (last error: %s)\n", file, line, what,
            dt_last_error());
    abort();
}

int fuzz_fd(int slot, const uint8_t *data, size_t size) {
    static int fds[2] = {-1, -1};
    FUZZ_CHECK(slot == 0 || slot == 1);
    if (fds[slot] < 0) fds[slot] = memfd_create("dt_fuzz_input", MFD_CLOEXEC);
    int fd = fds[slot];
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    for (size_t off = 0; off < size;) {
        ssize_t k = pwrite(fd, data + off, size - off, (off_t)off);
        FUZZ_CHECK(k > 0);
        off += (size_t)k;
    }
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}

void fuzz_expect_clean(dt_status s, const char *name, const char *name2) {
    if (s == DT_OK) return;
    const char *msg = dt_last_error();
    int named = strstr(msg, name) != NULL || (name2 && strstr(msg, name2) != NULL);
    if (s != DT_ERR_INTERNAL && msg[0] && !strchr(msg, '\n') && named) return;
    fprintf(stderr, "unclean failure: status %d (%s), message \"%s\" (must be one line naming %s)\n",
            (int)s, dt_status_name(s), msg, name);
    abort();
}
