/* Tiny JSON helpers: escaping for the JSONL log and summaries, and a
 * scanner for reading small files. */
#ifndef DTRAIN_JSON_H
#define DTRAIN_JSON_H

#include <stddef.h>

#include "dtrain/status.h"

/* Copies src into dst (capacity cap, always terminated) as the inside of a
 * JSON string: quotes, backslashes and control characters escaped; cut at a
 * character boundary if it does not fit. Returns dst. */
char *dt_json_escape(char *dst, size_t cap, const char *src);

/* Reading: a scanner that walks a whole JSON text and hands every scalar to
 * a callback with its path from the root, object keys and array indices
 * joined by dots ("layers.2.fwd_s"). Readers of small fixed formats (the
 * simulator's profiles) match paths instead of building a tree. */
typedef enum { DT_JSON_NUMBER, DT_JSON_STRING, DT_JSON_BOOL, DT_JSON_NULL } dt_json_kind;

/* num holds numbers and booleans (1/0); str holds strings (unescaped, UTF-8).
 * A status other than DT_OK stops the scan and is returned by dt_json_scan. */
typedef dt_status (*dt_json_fn)(void *ctx, const char *path, dt_json_kind kind, double num,
                                const char *str);

/* Scans text (NUL-terminated). Malformed JSON, nesting deeper than 32,
 * paths over 255 bytes or strings over 1023 bytes are DT_ERR_FORMAT
 * "NAME:LINE: message" (name stands for the file in messages). */
dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx);

#endif
