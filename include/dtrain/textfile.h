/* Reading small text files (model files, simulator profiles) whole. */
#ifndef DTRAIN_TEXTFILE_H
#define DTRAIN_TEXTFILE_H

#include <stddef.h>

#include "dtrain/status.h"

/* Reads path into *out as a NUL-terminated string (malloc'd; free() it).
 * Errors: DT_ERR_IO "PATH: cannot open/read: ...", DT_ERR_NOMEM; a file
 * larger than max_bytes or holding a NUL byte is `bad` (the caller's status
 * for a malformed file) "PATH: larger than N MiB, not KIND" /
 * "PATH:LINE: NUL byte (not a text file?)". *out is NULL on failure. */
dt_status dt_read_text_file(char **out, const char *path, size_t max_bytes, dt_status bad,
                            const char *kind);

#endif
