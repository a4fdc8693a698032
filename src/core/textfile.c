#include "dtrain/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status dt_read_text_file(char **out, const char *path, size_t max_bytes, dt_status bad,
                            const char *kind) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    dt_status st = buf ? DT_OK : dt_fail(DT_ERR_NOMEM, "%s: out of memory", path);
    while (st == DT_OK) {
        if (n + 1 == cap) {
            char *grown = cap >= max_bytes ? NULL : realloc(buf, cap * 2);
            if (!grown) {
                st = cap >= max_bytes
                         ? dt_fail(bad, "%s: larger than %zu MiB, not %s", path, max_bytes >> 20, kind)
                         : dt_fail(DT_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = dt_fail(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    /* A NUL would silently end the text early; find its line to report it. */
    const char *nul = st == DT_OK ? memchr(buf, '\0', n) : NULL;
    if (nul) {
        int line = 1;
        for (const char *c = buf; c < nul; c++) line += *c == '\n';
        st = dt_fail(bad, "%s:%d: NUL byte (not a text file?)", path, line);
    }
    if (st != DT_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    return DT_OK;
}
