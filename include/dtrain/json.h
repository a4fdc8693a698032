/* JSON for the JSONL run log: escaping strings when writing it, and a small
 * strict reader of one JSON object per line when reading it back (dtrain
 * plot). The reader accepts RFC 8259 JSON (UTF-8, no trailing commas, no
 * comments, no NaN), except \u0000 in strings (callers get C strings), and
 * indexes the object's top-level fields; nested arrays and objects are
 * checked and skipped. It allocates nothing: fields point into the text.
 * dt_json_scan is the same parser walking a whole small JSON file (the
 * simulator's profiles), handing every scalar to a callback by path. */
#ifndef DTRAIN_JSON_H
#define DTRAIN_JSON_H

#include <stddef.h>

#include "dtrain/status.h"

/* Copies src into dst (capacity cap, always terminated) as the inside of a
 * JSON string: quotes, backslashes and control characters escaped; cut at a
 * character boundary if it does not fit. Returns dst. */
char *dt_json_escape(char *dst, size_t cap, const char *src);

/* Length (1-4) of the well-formed UTF-8 character starting at p (n bytes
 * available), or 0 if it is not one (overlong forms and surrogates are not). */
size_t dt_utf8_char_len(const unsigned char *p, size_t n);

typedef enum {
    DT_JSON_NULL,
    DT_JSON_BOOL,
    DT_JSON_NUMBER,
    DT_JSON_STRING,
    DT_JSON_ARRAY,
    DT_JSON_OBJECT
} dt_json_type;

/* One top-level field of a parsed object; key and raw point into the text. */
typedef struct {
    const char *key;  /* between the quotes, escapes not decoded */
    size_t key_len;
    dt_json_type type;
    const char *raw;  /* the value as written (a string: between the quotes) */
    size_t raw_len;
    double number;    /* DT_JSON_NUMBER: the value; DT_JSON_BOOL: 0 or 1 */
} dt_json_field;

/* More fields than any dtrain record has; a line with more is refused. */
#define DT_JSON_MAX_FIELDS 64

typedef struct {
    int nfields;
    dt_json_field fields[DT_JSON_MAX_FIELDS];
} dt_json_object;

/* Parses text (NUL-terminated; whitespace around the object allowed) as one
 * JSON object. On failure DT_ERR_FORMAT with a message "column N: ..." that
 * the caller prefixes with the file and line. obj points into text. */
dt_status dt_json_parse_object(dt_json_object *obj, const char *text);

/* The field whose decoded key equals key, or NULL. */
const dt_json_field *dt_json_find(const dt_json_object *obj, const char *key);

/* *out = the number field key. DT_ERR_FORMAT ("no number field 'key'") if it
 * is missing or not a number. */
dt_status dt_json_get_number(const dt_json_object *obj, const char *key, double *out);

/* Decodes the string field key into dst (capacity cap, terminated).
 * DT_ERR_FORMAT if it is missing, not a string, or longer than cap - 1 bytes. */
dt_status dt_json_get_string(const dt_json_object *obj, const char *key, char *dst, size_t cap);

/* Reading: a scanner that walks a whole JSON text and hands every scalar to
 * a callback with its path from the root, object keys and array indices
 * joined by dots ("layers.2.fwd_s"). Readers of small fixed formats (the
 * simulator's profiles) match paths instead of building a tree. */
/* The scanner sees scalars only: NUMBER, STRING, BOOL or NULL. */
typedef dt_json_type dt_json_kind;

/* num holds numbers and booleans (1/0); str holds strings (unescaped, UTF-8).
 * A status other than DT_OK stops the scan and is returned by dt_json_scan. */
typedef dt_status (*dt_json_fn)(void *ctx, const char *path, dt_json_kind kind, double num,
                                const char *str);

/* Scans text (NUL-terminated; any JSON value at the root). JSON the line
 * reader refuses (above), nesting deeper than 32, paths over 255 bytes or
 * strings over 1023 bytes are DT_ERR_FORMAT "NAME:LINE: message" (name
 * stands for the file in messages). */
dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx);

#endif
