#include "dtrain/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *dt_json_escape(char *dst, size_t cap, const char *src) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[8];
        size_t n;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p, n = 2;
        } else if (*p < 0x20) {
            n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p, n = 1;
        }
        if (o + n + 1 > cap) break;
        for (size_t i = 0; i < n; i++) dst[o++] = esc[i];
    }
    if (cap) dst[o] = '\0';
    return dst;
}

size_t dt_utf8_char_len(const unsigned char *p, size_t n) {
    if (n == 0) return 0;
    if (p[0] < 0x80) return 1;
    size_t len;
    unsigned cp;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2, cp = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, cp = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, cp = p[0] & 0x07u;
    else
        return 0; /* continuation byte, overlong 2-byte lead, or beyond U+10FFFF */
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/* Nesting deeper than this is refused rather than recursed into. */
#define MAX_DEPTH 32

/* One recursive-descent parser serves both readers: dt_json_parse_object
 * keeps the top-level fields of a line, dt_json_scan hands every scalar to
 * a callback with its path. */
typedef struct {
    const char *text; /* start, for positions in messages */
    const char *p;    /* next character */
    const char *name; /* dt_json_scan: the file ("NAME:LINE: ..."); NULL: "column N: ..." */
    dt_json_fn fn;    /* dt_json_scan: called for every scalar; NULL: none */
    void *ctx;
    char path[256];   /* dt_json_scan: dotted path of the value being parsed */
    char str[1024];   /* dt_json_scan: the scalar string being handed over, decoded */
} parser;

static dt_status fail_at(const parser *ps, const char *what) {
    if (!ps->name) return dt_fail(DT_ERR_FORMAT, "column %ld: %s", (long)(ps->p - ps->text) + 1, what);
    int line = 1;
    for (const char *q = ps->text; q < ps->p; q++) line += *q == '\n';
    return dt_fail(DT_ERR_FORMAT, "%s:%d: %s", ps->name, line, what);
}

static void skip_ws(parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The code unit of the 4 hex digits at p, or -1. */
static long hex4(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) return -1;
        v = v << 4 | h;
    }
    return v;
}

/* A string at ps->p (at its opening quote); *start and *len = its raw inside. */
static dt_status parse_string(parser *ps, const char **start, size_t *len) {
    ps->p++;
    *start = ps->p;
    for (;;) {
        const unsigned char c = (unsigned char)*ps->p;
        if (c == '"') break;
        if (c == '\0') return fail_at(ps, "unterminated string");
        if (c < 0x20) return fail_at(ps, "control character in a string (must be escaped)");
        if (c == '\\') {
            char e = ps->p[1];
            if (e == 'u') {
                long u = hex4(ps->p + 2);
                if (u < 0) return fail_at(ps, "\\u needs four hex digits");
                if (u == 0) return fail_at(ps, "\\u0000 is not supported (fields are C strings)");
                if (u >= 0xdc00 && u <= 0xdfff) return fail_at(ps, "lone low surrogate");
                if (u >= 0xd800 && u <= 0xdbff) {
                    long lo = ps->p[6] == '\\' && ps->p[7] == 'u' ? hex4(ps->p + 8) : -1;
                    if (lo < 0xdc00 || lo > 0xdfff) return fail_at(ps, "high surrogate without a low one");
                    ps->p += 6;
                }
                ps->p += 6;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                ps->p += 2;
            } else {
                return fail_at(ps, "invalid escape in a string");
            }
            continue;
        }
        size_t n = dt_utf8_char_len((const unsigned char *)ps->p, strnlen(ps->p, 4));
        if (n == 0) return fail_at(ps, "invalid UTF-8 in a string");
        ps->p += n;
    }
    *len = (size_t)(ps->p - *start);
    ps->p++;
    return DT_OK;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* RFC 8259 number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static dt_status parse_number(parser *ps, double *out) {
    const char *s = ps->p, *p = s;
    if (*p == '-') p++;
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        while (is_digit(*p)) p++;
    } else {
        return fail_at(ps, "expected a value");
    }
    if (*p == '.') {
        if (!is_digit(*++p)) return ps->p = p, fail_at(ps, "expected a digit after '.'");
        while (is_digit(*p)) p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return ps->p = p, fail_at(ps, "expected a digit in the exponent");
        while (is_digit(*p)) p++;
    }
    /* The grammar above is a subset of strtod's, so strtod stops at p too. */
    double v = strtod(s, NULL);
    if (!isfinite(v)) return fail_at(ps, "number out of range");
    *out = v;
    ps->p = p;
    return DT_OK;
}

/* Decodes the next character of a raw string that parse_string accepted
 * into out (UTF-8, at most 4 bytes), advancing *p; returns its length. */
static size_t decode_char(const char **p, char out[4]) {
    const char *s = *p;
    if (*s != '\\') {
        size_t n = dt_utf8_char_len((const unsigned char *)s, strnlen(s, 4));
        memcpy(out, s, n);
        *p += n;
        return n;
    }
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (s[1] != 'u') {
        out[0] = to[strchr(from, s[1]) - from];
        *p += 2;
        return 1;
    }
    long cp = hex4(s + 2);
    *p += 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (hex4(s + 8) - 0xdc00);
        *p += 6;
    }
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes raw (len bytes) into dst (capacity cap); 0 if it does not fit. */
static int decode_string(char *dst, size_t cap, const char *raw, size_t len) {
    const char *p = raw, *end = raw + len;
    size_t o = 0;
    while (p < end) {
        char c[4];
        size_t n = decode_char(&p, c);
        if (o + n >= cap) return 0;
        memcpy(dst + o, c, n);
        o += n;
    }
    dst[o] = '\0';
    return 1;
}

/* Scanning: extends the path with ".key" (or "key" at the root), key
 * given raw (len bytes, escapes not decoded); *old = the length to cut
 * back to. */
static dt_status push_path(parser *ps, const char *key, size_t len, size_t *old) {
    *old = strlen(ps->path);
    char *at = ps->path + *old;
    size_t room = sizeof ps->path - *old;
    if (*old) {
        if (room < 2) return fail_at(ps, "path too long");
        *at++ = '.';
        room--;
    }
    if (!decode_string(at, room, key, len)) return fail_at(ps, "path too long");
    return DT_OK;
}

/* Scanning: hands the scalar f to the callback under the current path. */
static dt_status visit(parser *ps, const dt_json_field *f) {
    if (!ps->fn) return DT_OK;
    if (f->type == DT_JSON_STRING && !decode_string(ps->str, sizeof ps->str, f->raw, f->raw_len))
        return fail_at(ps, "string too long");
    return ps->fn(ps->ctx, ps->path, f->type, f->number, f->type == DT_JSON_STRING ? ps->str : NULL);
}

static dt_status parse_value(parser *ps, int depth, dt_json_field *f);

/* The members of an object or elements of an array, from just after its
 * opening bracket; fields (top level only, else NULL) receives the members. */
static dt_status parse_container(parser *ps, char close, int depth, dt_json_object *fields) {
    const int is_object = close == '}';
    if (depth > MAX_DEPTH) return fail_at(ps, "nested too deeply");
    skip_ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return DT_OK;
    }
    for (long index = 0;; index++) {
        dt_json_field f = {0};
        char num[24];
        if (is_object) {
            if (*ps->p != '"') return fail_at(ps, "expected a string key");
            DT_TRY(parse_string(ps, &f.key, &f.key_len));
            skip_ws(ps);
            if (*ps->p != ':') return fail_at(ps, "expected ':' after the key");
            ps->p++;
            skip_ws(ps);
        } else {
            f.key_len = (size_t)snprintf(num, sizeof num, "%ld", index);
            f.key = num;
        }
        size_t old = 0;
        if (ps->fn) DT_TRY(push_path(ps, f.key, f.key_len, &old));
        DT_TRY(parse_value(ps, depth + 1, &f));
        if (ps->fn) ps->path[old] = '\0';
        if (fields) {
            if (fields->nfields == DT_JSON_MAX_FIELDS) return fail_at(ps, "too many fields");
            fields->fields[fields->nfields++] = f;
        }
        skip_ws(ps);
        if (*ps->p == close) {
            ps->p++;
            return DT_OK;
        }
        if (*ps->p != ',') return fail_at(ps, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        ps->p++;
        skip_ws(ps);
    }
}

static dt_status parse_value(parser *ps, int depth, dt_json_field *f) {
    static const struct {
        const char *word;
        dt_json_type type;
        double number;
    } words[] = {{"true", DT_JSON_BOOL, 1}, {"false", DT_JSON_BOOL, 0}, {"null", DT_JSON_NULL, 0}};
    const char *start = ps->p;
    f->number = 0;
    if (*ps->p == '"') {
        f->type = DT_JSON_STRING;
        DT_TRY(parse_string(ps, &f->raw, &f->raw_len));
        return visit(ps, f);
    }
    if (*ps->p == '{' || *ps->p == '[') {
        f->type = *ps->p == '{' ? DT_JSON_OBJECT : DT_JSON_ARRAY;
        ps->p++;
        DT_TRY(parse_container(ps, f->type == DT_JSON_OBJECT ? '}' : ']', depth, NULL));
    } else {
        int i = 0, nwords = (int)(sizeof words / sizeof *words);
        while (i < nwords && strncmp(ps->p, words[i].word, strlen(words[i].word)) != 0) i++;
        if (i < nwords) {
            f->type = words[i].type;
            f->number = words[i].number;
            ps->p += strlen(words[i].word);
        } else {
            f->type = DT_JSON_NUMBER;
            DT_TRY(parse_number(ps, &f->number));
        }
    }
    f->raw = start;
    f->raw_len = (size_t)(ps->p - start);
    return f->type == DT_JSON_OBJECT || f->type == DT_JSON_ARRAY ? DT_OK : visit(ps, f);
}

dt_status dt_json_parse_object(dt_json_object *obj, const char *text) {
    parser ps = {.text = text, .p = text};
    obj->nfields = 0;
    skip_ws(&ps);
    if (*ps.p == '\0') return dt_fail(DT_ERR_FORMAT, "empty line, expected a JSON object");
    if (*ps.p != '{') return fail_at(&ps, "expected '{'");
    ps.p++;
    DT_TRY(parse_container(&ps, '}', 1, obj));
    skip_ws(&ps);
    if (*ps.p) return fail_at(&ps, "text after the object");
    return DT_OK;
}

const dt_json_field *dt_json_find(const dt_json_object *obj, const char *key) {
    for (int i = 0; i < obj->nfields; i++) {
        const dt_json_field *f = &obj->fields[i];
        const char *p = f->key, *end = f->key + f->key_len, *k = key;
        int same = 1;
        while (same && p < end) {
            char c[4];
            size_t n = decode_char(&p, c);
            same = strlen(k) >= n && memcmp(k, c, n) == 0;
            k += same ? n : 0;
        }
        if (same && *k == '\0') return f;
    }
    return NULL;
}

dt_status dt_json_get_number(const dt_json_object *obj, const char *key, double *out) {
    const dt_json_field *f = dt_json_find(obj, key);
    if (!f || f->type != DT_JSON_NUMBER) return dt_fail(DT_ERR_FORMAT, "no number field '%s'", key);
    *out = f->number;
    return DT_OK;
}

dt_status dt_json_get_string(const dt_json_object *obj, const char *key, char *dst, size_t cap) {
    const dt_json_field *f = dt_json_find(obj, key);
    if (!f || f->type != DT_JSON_STRING) return dt_fail(DT_ERR_FORMAT, "no string field '%s'", key);
    if (!decode_string(dst, cap, f->raw, f->raw_len))
        return dt_fail(DT_ERR_FORMAT, "field '%s' is longer than %zu bytes", key, cap - 1);
    return DT_OK;
}

dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx) {
    parser ps = {.text = text, .p = text, .name = name, .fn = fn, .ctx = ctx};
    skip_ws(&ps);
    if (*ps.p == '\0') return fail_at(&ps, "empty file");
    dt_json_field f;
    DT_TRY(parse_value(&ps, 0, &f));
    skip_ws(&ps);
    if (*ps.p != '\0') return fail_at(&ps, "text after the JSON value");
    return DT_OK;
}
