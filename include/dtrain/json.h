/* JSON for the JSONL run log: escaping strings when writing it, and strict
 * readers when reading JSON back: one object per line (run logs: dtrain
 * plot, resume, launch) and whole small files (the simulator's profiles).
 *
 * The readers parse with jansson (libjansson-dev): RFC 8259 JSON in UTF-8,
 * no NaN or Infinity, no trailing commas, no comments, no duplicate keys;
 * \u escapes are decoded and surrogates paired. dtrain adds \u0000 refused
 * (callers get C strings) and at most 32 nested arrays and objects. A
 * refusal is DT_ERR_FORMAT naming where the fault is and what it is, in the
 * words of the two calls below. */
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

/* One top-level field of a parsed object. key and str point into the
 * object that holds the field, raw into the text it was parsed from. */
typedef struct {
    const char *key;  /* decoded, NUL-terminated */
    size_t key_len;
    dt_json_type type;
    const char *str;  /* DT_JSON_STRING: the value, decoded and NUL-terminated; else NULL */
    const char *raw;  /* the value as written (a string: between the quotes) */
    size_t raw_len;
    double number;    /* DT_JSON_NUMBER: the value; DT_JSON_BOOL: 0 or 1 */
} dt_json_field;

/* More fields than any dtrain record has; a line with more is refused. */
#define DT_JSON_MAX_FIELDS 64

/* Room for an object's decoded keys and string values, each with its NUL.
 * Decoding never lengthens them, so an object written in at most this many
 * bytes always fits (the longest record dtrain writes is under 9 KiB); one
 * needing more is refused. */
#define DT_JSON_MAX_STRINGS 16384

/* A parsed object owns copies of its keys and strings (no heap memory, so
 * nothing to free); its fields point into it, so it must not be copied. */
typedef struct {
    int nfields;
    dt_json_field fields[DT_JSON_MAX_FIELDS];
    char strings[DT_JSON_MAX_STRINGS];
} dt_json_object;

/* Parses text (NUL-terminated; whitespace around the object allowed) as one
 * JSON object. On failure DT_ERR_FORMAT with a message "column N: ..." that
 * the caller prefixes with the file and line (DT_ERR_NOMEM if jansson runs
 * out of memory). The fields' raw values point into text. */
dt_status dt_json_parse_object(dt_json_object *obj, const char *text);

/* The field whose decoded key equals key, or NULL. */
const dt_json_field *dt_json_find(const dt_json_object *obj, const char *key);

/* *out = the number field key. DT_ERR_FORMAT ("no number field 'key'") if it
 * is missing or not a number. */
dt_status dt_json_get_number(const dt_json_object *obj, const char *key, double *out);

/* Copies the decoded string field key into dst (capacity cap, terminated).
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

/* Scans text (NUL-terminated; any JSON value at the root), in document
 * order. JSON the line reader refuses (above) is DT_ERR_FORMAT "NAME:LINE:
 * message" (name stands for the file in messages); a path over 255 bytes or
 * a string over 1023 bytes is DT_ERR_FORMAT "NAME: message" showing the
 * path. */
dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx);

#endif
