/* Tiny helpers for writing the JSONL log and summaries. */
#ifndef DTRAIN_JSON_H
#define DTRAIN_JSON_H

#include <stddef.h>

/* Copies src into dst (capacity cap, always terminated) as the inside of a
 * JSON string: quotes, backslashes and control characters escaped; cut at a
 * character boundary if it does not fit. Returns dst. */
char *dt_json_escape(char *dst, size_t cap, const char *src);

#endif
