/* JSON: the writers' helpers (escaping, UTF-8 lengths) by hand; the
 * readers on jansson (libjansson-dev).
 *
 * Why jansson: Debian packages and maintains it, and its decoder is strict
 * by default: RFC 8259 only (no NaN or Infinity, trailing commas or
 * comments), UTF-8 validated, \u escapes decoded and surrogates paired,
 * \u0000 refused unless asked for, duplicate keys refused on request
 * (JSON_REJECT_DUPLICATES), and every error reported with its position in a
 * caller's json_error_t. cJSON, the other packaged choice, keeps the error
 * position in a global, copies strings without validating UTF-8 and keeps
 * duplicate keys.
 *
 * What is still done here: jansson reports the byte offset where it
 * stopped, after the token at fault, in its own words; the readers name the
 * token's first character (or the fault inside it) in theirs, which users
 * and tests know (explain, walk). jansson allows 2048 levels of nesting,
 * dtrain 32. And a parsed line keeps copies of its keys and strings in the
 * object, so callers free nothing. */
#include "dtrain/json.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
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

/* Nesting deeper than this is refused (32 covers every dtrain format with
 * room to spare; it bounds dt_json_scan's recursion). */
#define MAX_DEPTH 32

/* The longest path and string dt_json_scan hands out, with their NUL. */
#define SCAN_PATH 256
#define SCAN_STRING 1024

static const char SPACE[] = " \t\n\r";

/* Which reader refuses, and in what words. */
typedef struct {
    const char *text;
    const char *name;  /* dt_json_scan: the file ("NAME:LINE: ..."); NULL: a line ("column N: ...") */
    const char *after; /* what text after the value is called */
} reader;

/* The refusal what at text offset at. */
static dt_status refuse(const reader *r, size_t at, const char *what) {
    if (!r->name) return dt_fail(DT_ERR_FORMAT, "column %zu: %s", at + 1, what);
    long line = 1;
    for (size_t i = 0; i < at; i++) line += r->text[i] == '\n';
    return dt_fail(DT_ERR_FORMAT, "%s:%ld: %s", r->name, line, what);
}

/* Length of the escape at p (its backslash), or 0 if jansson's lexer
 * refuses it: \u needs four hex digits. */
static size_t escape_len(const char *p) {
    if (p[1] != 'u') return p[1] && strchr("\"\\/bfnrt", p[1]) ? 2 : 0;
    for (int i = 2; i < 6; i++)
        if (!p[i] || !strchr("0123456789abcdefABCDEF", p[i])) return 0;
    return 6;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Whether text[i] continues the token that starts at text[start] (and runs
 * up to i), as jansson's lexer splits tokens: a number runs over digits, one
 * '.', one exponent and its sign; a word (true, NaN) over letters; a UTF-8
 * character over its continuation bytes. Anything else stands alone. */
static int continues(const char *text, size_t start, size_t i) {
    const char first = text[start], prev = text[i - 1], c = text[i];
    if (is_digit(first) || first == '-') {
        const size_t len = i - start;
        const int has_exp = memchr(text + start, 'e', len) || memchr(text + start, 'E', len);
        if (c == '.') return is_digit(prev) && !has_exp && !memchr(text + start, '.', len);
        if (c == 'e' || c == 'E') return is_digit(prev) && !has_exp;
        return is_digit(c) || ((c == '+' || c == '-') && (prev == 'e' || prev == 'E'));
    }
    if (is_letter(first)) return is_letter(c);
    return (unsigned char)first >= 0xc0 && ((unsigned char)c & 0xc0) == 0x80;
}

/* What jansson's report leaves out, read from the text it read before it
 * stopped (text[0..end)). That text is JSON up to its last token, so
 * brackets outside strings give the nesting. */
typedef struct {
    size_t token;      /* the last token's first byte */
    char inside;       /* '{' or '[' around it; 0 at the top */
    size_t bad_escape; /* the backslash of the first malformed escape, or SIZE_MAX */
    size_t too_deep;   /* the first bracket past MAX_DEPTH, or SIZE_MAX */
} layout;

static layout walk(const char *text, size_t end) {
    layout w = {.token = 0, .inside = 0, .bad_escape = SIZE_MAX, .too_deep = SIZE_MAX};
    char open[MAX_DEPTH];
    int depth = 0, in_string = 0;
    size_t token_end = SIZE_MAX; /* the offset after the last token's last byte so far */
    for (size_t i = 0; i < end; i++) {
        const char c = text[i];
        if (in_string) {
            const size_t n = c == '\\' ? escape_len(text + i) : 1;
            if (n == 0) {
                w.bad_escape = i;
                break;
            }
            in_string = c != '"';
            i += n - 1;
            continue;
        }
        if (strchr(SPACE, c)) continue;
        if (token_end != i || !continues(text, w.token, i)) {
            w.token = i;
            w.inside = depth ? open[depth - 1] : 0;
        }
        token_end = i + 1;
        if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH) {
                w.too_deep = i;
                break;
            }
            open[depth++] = c;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return w;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* jansson's "invalid token": a malformed number is named by its fault, at
 * the character the lexer stopped on. */
static dt_status bad_token(const reader *r, const layout *w, size_t stop) {
    const char *tok = r->text + w->token;
    const size_t len = stop > w->token ? stop - w->token : 0;
    if (len == 0 || !(is_digit(tok[0]) || (tok[0] == '-' && len > 1)))
        return refuse(r, w->token, "expected a value");
    if (tok[len - 1] == '.') return refuse(r, stop, "expected a digit after '.'");
    if (strchr("eE+-", tok[len - 1])) return refuse(r, stop, "expected a digit in the exponent");
    /* A leading zero (01): jansson refuses the number; the grammar reads 0,
     * then finds a digit where a ',' or the end belongs, and says so. */
    return refuse(r, stop, w->inside == '{'   ? "expected ',' or '}'"
                           : w->inside == '[' ? "expected ',' or ']'"
                                              : r->after);
}

/* jansson's syntax errors, in the readers' words. */
static const struct {
    const char *jansson, *ours;
} syntax_words[] = {
    {"string or '}' expected", "expected a string key"},
    {"':' expected", "expected ':' after the key"},
    {"'}' expected", "expected ',' or '}'"},
    {"']' expected", "expected ',' or ']'"},
    {"unexpected token", "expected a value"},
};

/* The refusal jansson reported in e, in the reader's words and at the
 * place it names: the first byte of the token at fault (jansson stops after
 * it), the fault inside a string, or the end for text cut short. */
static dt_status explain(const reader *r, const json_error_t *e) {
    const enum json_error_code code = json_error_code(e);
    const char *m = e->text;
    /* Without a message, jansson failed to allocate. */
    if (code == json_error_out_of_memory || m[0] == '\0')
        return dt_fail(DT_ERR_NOMEM, "%s%sout of memory parsing JSON", r->name ? r->name : "", r->name ? ": " : "");
    const size_t stop = e->position > 0 ? (size_t)e->position : 0;
    const layout w = walk(r->text, stop);
    if (w.too_deep != SIZE_MAX) return refuse(r, w.too_deep, "nested too deeply");
    if (code == json_error_invalid_utf8) return refuse(r, stop, "invalid UTF-8");
    if (code == json_error_null_character || code == json_error_null_byte_in_key)
        return refuse(r, w.token, "\\u0000 is not supported (fields are C strings)");
    if (code == json_error_duplicate_key) return refuse(r, w.token, "duplicate key");
    if (code == json_error_numeric_overflow) return refuse(r, w.token, "number out of range");
    if (starts(m, "premature end of input")) return refuse(r, stop, "unterminated string");
    if (starts(m, "control character") || starts(m, "unexpected newline"))
        return refuse(r, stop, "control character in a string (must be escaped)");
    if (starts(m, "invalid escape") && w.bad_escape != SIZE_MAX)
        return refuse(r, w.bad_escape,
                      r->text[w.bad_escape + 1] == 'u' ? "\\u needs four hex digits" : "invalid escape in a string");
    unsigned u;
    if (sscanf(m, "invalid Unicode '\\u%4x", &u) == 1)
        return refuse(r, w.token,
                      u >= 0xdc00 && u <= 0xdfff ? "lone low surrogate" : "high surrogate without a low one");
    if (starts(m, "invalid token")) return bad_token(r, &w, stop);
    /* The parser's errors: at the token, or at the end if the text ran out. */
    const size_t at = code == json_error_premature_end_of_input ? stop : w.token;
    /* An array cut after '[' or ',' lacks a value (jansson says its ']'). */
    if (code == json_error_premature_end_of_input && starts(m, "']' expected") && strchr("[,", r->text[w.token]))
        return refuse(r, at, "expected a value");
    if (starts(m, "end of file expected")) return refuse(r, at, r->after);
    for (size_t i = 0; i < sizeof syntax_words / sizeof *syntax_words; i++)
        if (starts(m, syntax_words[i].jansson)) return refuse(r, at, syntax_words[i].ours);
    /* Errors dtrain's flags and limits leave unreachable: jansson's words,
     * without its quote of the text. */
    const char *near = strstr(m, " near ");
    char what[JSON_ERROR_TEXT_LENGTH];
    snprintf(what, sizeof what, "%.*s", near ? (int)(near - m) : (int)strlen(m), m);
    return refuse(r, at, what);
}

/* Parses r->text into *root (the caller's, freed with json_decref), or
 * refuses it in the reader's words. */
static dt_status load(const reader *r, size_t flags, json_t **root) {
    json_error_t e;
    memset(&e, 0, sizeof e); /* jansson sets the code byte only with a message */
    /* Every number a double, as strtod reads it (no integer overflow); a
     * repeated key would hide a value, so it is an error. */
    *root = json_loads(r->text, flags | JSON_DECODE_INT_AS_REAL | JSON_REJECT_DUPLICATES, &e);
    if (!*root) return explain(r, &e);
    const layout w = walk(r->text, strlen(r->text));
    if (w.too_deep == SIZE_MAX) return DT_OK;
    json_decref(*root);
    *root = NULL;
    return refuse(r, w.too_deep, "nested too deeply");
}

/* The offset after the string whose quote is at text[i], in text jansson
 * accepted. */
static size_t skip_string(const char *text, size_t i) {
    for (i++; text[i] && text[i] != '"'; i++) i += text[i] == '\\' && text[i + 1];
    return text[i] ? i + 1 : i;
}

/* In an object jansson accepted, from *pos (after its '{' or a value): where
 * the next member's value is written (jansson hands out values, not where
 * they are). Returns its offset, sets *len and moves *pos past it. */
static size_t next_value(const char *text, size_t *pos, size_t *len) {
    size_t i = *pos + strspn(text + *pos, SPACE);
    if (text[i] == ',') i++;
    i += strspn(text + i, SPACE);
    i = skip_string(text, i);         /* the key */
    i += strspn(text + i, SPACE) + 1; /* its ':' */
    i += strspn(text + i, SPACE);
    const size_t start = i;
    int depth = 0;
    do {
        if (text[i] == '"') {
            i = skip_string(text, i);
        } else {
            depth += (text[i] == '{' || text[i] == '[') - (text[i] == '}' || text[i] == ']');
            i++;
        }
    } while (text[i] && (depth > 0 || !strchr(",} \t\n\r", text[i])));
    *len = i - start;
    *pos = i;
    return start;
}

/* Copies s (n bytes and its NUL) into obj's strings; NULL if they are full. */
static const char *keep(dt_json_object *obj, size_t *used, const char *s, size_t n) {
    if (n >= sizeof obj->strings - *used) return NULL;
    char *dst = obj->strings + *used;
    memcpy(dst, s, n + 1);
    *used += n + 1;
    return dst;
}

/* Indexes the members of root, the object jansson parsed from r->text
 * whose '{' is at offset open, in the order written (jansson keeps it). */
static dt_status index_fields(dt_json_object *obj, const reader *r, json_t *root, size_t open) {
    size_t pos = open + 1, used = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        size_t len;
        const size_t at = next_value(r->text, &pos, &len);
        if (obj->nfields == DT_JSON_MAX_FIELDS) return refuse(r, at, "too many fields");
        dt_json_field *f = &obj->fields[obj->nfields++];
        *f = (dt_json_field){.key_len = strlen(key), .raw = r->text + at, .raw_len = len};
        f->key = keep(obj, &used, key, f->key_len);
        switch (json_typeof(v)) {
        case JSON_OBJECT: f->type = DT_JSON_OBJECT; break;
        case JSON_ARRAY: f->type = DT_JSON_ARRAY; break;
        case JSON_STRING:
            f->type = DT_JSON_STRING;
            f->str = keep(obj, &used, json_string_value(v), json_string_length(v));
            f->raw++, f->raw_len -= 2; /* between the quotes */
            break;
        case JSON_INTEGER:
        case JSON_REAL: f->type = DT_JSON_NUMBER, f->number = json_number_value(v); break;
        case JSON_TRUE:
        case JSON_FALSE: f->type = DT_JSON_BOOL, f->number = json_is_true(v); break;
        case JSON_NULL: f->type = DT_JSON_NULL; break;
        }
        if (!f->key || (f->type == DT_JSON_STRING && !f->str)) {
            char what[64];
            snprintf(what, sizeof what, "keys and strings over %d bytes in all", DT_JSON_MAX_STRINGS);
            return refuse(r, at, what);
        }
    }
    return DT_OK;
}

dt_status dt_json_parse_object(dt_json_object *obj, const char *text) {
    const reader r = {.text = text, .after = "text after the object"};
    obj->nfields = 0;
    const size_t open = strspn(text, SPACE);
    if (!text[open]) return dt_fail(DT_ERR_FORMAT, "empty line, expected a JSON object");
    if (text[open] != '{') return refuse(&r, open, "expected '{'");
    json_t *root;
    DT_TRY(load(&r, 0, &root));
    const dt_status s = index_fields(obj, &r, root, open);
    json_decref(root);
    if (s != DT_OK) obj->nfields = 0;
    return s;
}

const dt_json_field *dt_json_find(const dt_json_object *obj, const char *key) {
    for (int i = 0; i < obj->nfields; i++)
        if (strcmp(obj->fields[i].key, key) == 0) return &obj->fields[i];
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
    const size_t n = strlen(f->str);
    if (n >= cap) return dt_fail(DT_ERR_FORMAT, "field '%s' is longer than %zu bytes", key, cap - 1);
    memcpy(dst, f->str, n + 1);
    return DT_OK;
}

/* dt_json_scan's walk over the tree jansson built. */
typedef struct {
    const char *name;
    dt_json_fn fn;
    void *ctx;
    char path[SCAN_PATH]; /* of the value being visited */
} scanner;

static dt_status visit(scanner *sc, json_t *v, size_t len);

/* Visits v, a member of the value at the current path (its first len bytes)
 * named key (an object key or an array index). */
static dt_status visit_member(scanner *sc, json_t *v, size_t len, const char *key) {
    const size_t room = sizeof sc->path - len;
    const int n = snprintf(sc->path + len, room, "%s%s", len ? "." : "", key);
    if (n < 0 || (size_t)n >= room) {
        sc->path[len] = '\0';
        char shown[64]; /* keys may hold any character: escaped, and cut */
        return dt_fail(DT_ERR_FORMAT, "%s: a path longer than %d bytes, under \"%s\"", sc->name, SCAN_PATH - 1,
                       dt_json_escape(shown, sizeof shown, sc->path));
    }
    DT_TRY(visit(sc, v, len + (size_t)n));
    sc->path[len] = '\0';
    return DT_OK;
}

static dt_status visit(scanner *sc, json_t *v, size_t len) {
    const char *key;
    json_t *member;
    size_t i;
    char index[24];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        json_object_foreach(v, key, member) DT_TRY(visit_member(sc, member, len, key));
        return DT_OK;
    case JSON_ARRAY:
        json_array_foreach(v, i, member) {
            snprintf(index, sizeof index, "%zu", i); /* 20 digits at most: fits */
            DT_TRY(visit_member(sc, member, len, index));
        }
        return DT_OK;
    case JSON_STRING:
        if (json_string_length(v) >= SCAN_STRING) {
            char shown[64];
            return dt_fail(DT_ERR_FORMAT, "%s: a string longer than %d bytes at \"%s\"", sc->name, SCAN_STRING - 1,
                           dt_json_escape(shown, sizeof shown, sc->path));
        }
        return sc->fn(sc->ctx, sc->path, DT_JSON_STRING, 0, json_string_value(v));
    case JSON_INTEGER:
    case JSON_REAL: return sc->fn(sc->ctx, sc->path, DT_JSON_NUMBER, json_number_value(v), NULL);
    case JSON_TRUE:
    case JSON_FALSE: return sc->fn(sc->ctx, sc->path, DT_JSON_BOOL, json_is_true(v), NULL);
    case JSON_NULL: return sc->fn(sc->ctx, sc->path, DT_JSON_NULL, 0, NULL);
    }
    return DT_OK;
}

dt_status dt_json_scan(const char *text, const char *name, dt_json_fn fn, void *ctx) {
    const reader r = {.text = text, .name = name, .after = "text after the JSON value"};
    const size_t start = strspn(text, SPACE);
    if (!text[start]) return refuse(&r, start, "empty file");
    json_t *root;
    DT_TRY(load(&r, JSON_DECODE_ANY, &root));
    scanner sc = {.name = name, .fn = fn, .ctx = ctx};
    const dt_status s = visit(&sc, root, 0);
    json_decref(root);
    return s;
}
