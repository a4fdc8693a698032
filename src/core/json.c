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

/* dt_json_scan: recursive descent over the text; `path` holds the dotted
 * path of the value being parsed, extended and cut back as it descends. */
typedef struct {
    const char *text, *p, *name;
    dt_json_fn fn;
    void *ctx;
    char path[256];
    char str[1024];
} json_scan;

#define JSON_MAX_DEPTH 32

static dt_status json_error(const json_scan *j, const char *what) {
    int line = 1;
    for (const char *q = j->text; q < j->p; q++) line += *q == '\n';
    return dt_fail(DT_ERR_FORMAT, "%s:%d: %s", j->name, line, what);
}

static void json_skip_ws(json_scan *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 1;
}

/* Appends code point cp as UTF-8 at out[*n] (room checked by the caller). */
static void put_utf8(char *out, size_t *n, unsigned cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xc0 | cp >> 6);
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xe0 | cp >> 12);
        out[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | cp >> 18);
        out[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* A string at j->p (at its opening quote) into out (capacity cap). */
static dt_status json_string(json_scan *j, char *out, size_t cap) {
    size_t n = 0;
    j->p++;
    for (;;) {
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') break;
        if (c == '\0') return json_error(j, "unterminated string");
        if (c < 0x20) return json_error(j, "control character in a string");
        if (n + 5 > cap) return json_error(j, "string too long");
        j->p++;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple) {
            out[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || !hex4(j->p, &cp)) return json_error(j, "bad escape in a string");
        j->p += 4;
        /* A high surrogate must pair with a low one (\uD83D\uDE00). */
        if (cp >= 0xd800 && cp < 0xdc00) {
            if (j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) || lo < 0xdc00 || lo >= 0xe000)
                return json_error(j, "unpaired surrogate in a string");
            j->p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
            return json_error(j, "unpaired surrogate in a string");
        }
        put_utf8(out, &n, cp);
    }
    j->p++;
    out[n] = '\0';
    return DT_OK;
}

/* A number per JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static dt_status json_number(json_scan *j, double *out) {
    const char *q = j->p;
    if (*q == '-') q++;
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        while (*q >= '0' && *q <= '9') q++;
    } else {
        return json_error(j, "unexpected character");
    }
    if (*q == '.') {
        if (!(*++q >= '0' && *q <= '9')) return json_error(j, "bad number");
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return json_error(j, "bad number");
        while (*q >= '0' && *q <= '9') q++;
    }
    *out = strtod(j->p, NULL); /* the grammar above is a subset of strtod's */
    if (!isfinite(*out)) return json_error(j, "number out of range");
    j->p = q;
    return DT_OK;
}

/* Extends the path with ".key" (or "key" at the root); returns the old length. */
static dt_status json_push(json_scan *j, const char *key, size_t *old) {
    *old = strlen(j->path);
    int n = snprintf(j->path + *old, sizeof j->path - *old, "%s%s", *old ? "." : "", key);
    if (n < 0 || (size_t)n >= sizeof j->path - *old) return json_error(j, "path too long");
    return DT_OK;
}

static dt_status json_value(json_scan *j, int depth);

/* An object or array at j->p (at '{' or '['): each member's value under its key or index. */
static dt_status json_container(json_scan *j, int depth) {
    char close = *j->p == '{' ? '}' : ']';
    j->p++;
    json_skip_ws(j);
    if (*j->p == close) {
        j->p++;
        return DT_OK;
    }
    for (long index = 0;; index++) {
        char key[256];
        if (close == '}') {
            if (*j->p != '"') return json_error(j, "expected a key");
            DT_TRY(json_string(j, key, sizeof key));
            json_skip_ws(j);
            if (*j->p++ != ':') return json_error(j, "expected ':'");
        } else {
            snprintf(key, sizeof key, "%ld", index);
        }
        size_t old;
        DT_TRY(json_push(j, key, &old));
        DT_TRY(json_value(j, depth + 1));
        j->path[old] = '\0';
        json_skip_ws(j);
        if (*j->p == close) {
            j->p++;
            return DT_OK;
        }
        if (*j->p++ != ',')
            return json_error(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
        json_skip_ws(j);
    }
}

static dt_status json_value(json_scan *j, int depth) {
    if (depth > JSON_MAX_DEPTH) return json_error(j, "nesting too deep");
    json_skip_ws(j);
    char c = *j->p;
    if (c == '{' || c == '[') return json_container(j, depth);
    if (c == '"') {
        DT_TRY(json_string(j, j->str, sizeof j->str));
        return j->fn(j->ctx, j->path, DT_JSON_STRING, 0, j->str);
    }
    static const struct {
        const char *word;
        dt_json_kind kind;
        double num;
    } words[] = {{"true", DT_JSON_BOOL, 1}, {"false", DT_JSON_BOOL, 0}, {"null", DT_JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        size_t n = strlen(words[i].word);
        if (strncmp(j->p, words[i].word, n) == 0) {
            j->p += n;
            return j->fn(j->ctx, j->path, words[i].kind, words[i].num, NULL);
        }
    }
    double num = 0;
    DT_TRY(json_number(j, &num));
    return j->fn(j->ctx, j->path, DT_JSON_NUMBER, num, NULL);
}

dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx) {
    json_scan j = {.text = text, .p = text, .name = name, .fn = fn, .ctx = ctx};
    if (*text == '\0') return json_error(&j, "empty file");
    DT_TRY(json_value(&j, 0));
    json_skip_ws(&j);
    if (*j.p != '\0') return json_error(&j, "text after the JSON value");
    return DT_OK;
}
