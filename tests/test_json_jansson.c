/* JSON readers on jansson: what the move to the library added or had to
 * rebuild around it (test_json.c and test_json_scan.c pin the rest): the
 * object owns its keys and strings, duplicate keys are refused, nesting is
 * capped at 32, and jansson's errors point at the token at fault. */
#include <stdlib.h>
#include <string.h>

#include "dtrain/json.h"
#include "testutil.h"

static dt_status ignore(void *ctx, const char *path, dt_json_kind kind, double num, const char *str) {
    (void)ctx, (void)path, (void)kind, (void)num, (void)str;
    return DT_OK;
}

/* The line reader refuses text with a message containing want. */
static void line_refused(const char *text, const char *want) {
    static dt_json_object obj;
    dt_status s = dt_json_parse_object(&obj, text);
    if (s != DT_ERR_FORMAT || !strstr(dt_last_error(), want)) {
        fprintf(stderr, "line %.60s: status %d '%s', wanted '%s'\n", text, s, dt_last_error(), want);
        dt_test_failures++;
    }
}

/* The scanner refuses text (as t.json) with a message containing want. */
static void scan_refused(const char *text, const char *want) {
    dt_status s = dt_json_scan(text, "t.json", ignore, NULL);
    if (s != DT_ERR_FORMAT || !strstr(dt_last_error(), want)) {
        fprintf(stderr, "scan %.60s: status %d '%s', wanted '%s'\n", text, s, dt_last_error(), want);
        dt_test_failures++;
    }
}

/* Keys and strings are copies in the object: the text can go. */
static void test_owned(void) {
    static dt_json_object obj;
    char text[] = "{\"k\\u00e9y\":\"v\\n\",\"n\":2}";
    if (!CHECK_OK(dt_json_parse_object(&obj, text))) return;
    const dt_json_field *f = &obj.fields[0];
    CHECK(f->raw == text + 13 && f->raw_len == 3); /* a string's raw: between the quotes */
    memset(text, 'x', sizeof text - 1);
    CHECK(obj.nfields == 2 && strcmp(f->key, "k\xc3\xa9y") == 0 && f->key_len == 4);
    CHECK(f->type == DT_JSON_STRING && strcmp(f->str, "v\n") == 0);
    CHECK(obj.fields[1].str == NULL && obj.fields[1].number == 2);
    char s[8];
    CHECK_OK(dt_json_get_string(&obj, "k\xc3\xa9y", s, sizeof s));
    CHECK(strcmp(s, "v\n") == 0);
}

/* A line whose keys and strings fill the object's room is refused, one
 * just under it accepted (its raw text is longer than its decoded strings). */
static void test_room(void) {
    static dt_json_object obj;
    const size_t n = DT_JSON_MAX_STRINGS + 16;
    char *text = malloc(n);
    CHECK(text != NULL);
    if (!text) return;
    /* {"a":"xxx...x"}: key 'a' (2 bytes with its NUL), the value len + 1 */
    for (size_t len = DT_JSON_MAX_STRINGS - 3; len <= DT_JSON_MAX_STRINGS - 2; len++) {
        snprintf(text, n, "{\"a\":\"%*s\"}", (int)len, "");
        dt_status s = dt_json_parse_object(&obj, text);
        if (len == DT_JSON_MAX_STRINGS - 3)
            CHECK(s == DT_OK && obj.nfields == 1 && strlen(obj.fields[0].str) == len);
        else
            CHECK(s == DT_ERR_FORMAT && strstr(dt_last_error(), "column 6: keys and strings over 16384 bytes"));
    }
    free(text);
}

static void test_refusals(void) {
    /* Repeated keys would hide a value, even spelled differently. */
    line_refused("{\"a\":1,\"a\":2}", "column 8: duplicate key");
    line_refused("{\"a\":1,\"\\u0061\":2}", "column 8: duplicate key");
    scan_refused("{\"x\":{\"a\":1,\n\"a\":2}}", "t.json:2: duplicate key");
    /* At the token after the number, however jansson splits them. */
    line_refused("{\"a\":1.5e3x}", "column 11: expected ',' or '}'");
    line_refused("{\"a\":0.5.3}", "column 9: expected ',' or '}'");
    line_refused("{\"a\":1-2}", "column 7: expected ',' or '}'");
    line_refused("{\"a\":[01]}", "column 8: expected ',' or ']'");
    scan_refused("[0,-01]", "expected ',' or ']'");
    line_refused("{\"a\":1e+}", "column 9: expected a digit in the exponent");
    /* Cut short in an array: a value is missing, not a ']'. */
    line_refused("{\"a\":[1,", "column 9: expected a value");
    scan_refused("[\n", "t.json:2: expected a value");
    scan_refused("{\"a\":1,\n\"b\" 2}", "t.json:2: expected ':'");
    /* Inside strings: the escape at fault, the character at fault. */
    line_refused("{\"a\":\"x\\u\"}", "column 8: \\u needs four hex digits");
    line_refused("{\"a\":\"x\\", "column 8: invalid escape");
    line_refused("{\"a\":\"x\ny\"}", "column 8: control character");
    line_refused("{\"a\":\xc3\xa9}", "column 6: expected a value");
    line_refused("{\"a\":\xff}", "column 6: invalid UTF-8");
    /* Big integers are doubles, as before. */
    static dt_json_object obj;
    double v = 0;
    if (CHECK_OK(dt_json_parse_object(&obj, "{\"n\":123456789012345678901234567890}")))
        CHECK(dt_json_get_number(&obj, "n", &v) == DT_OK && v == 123456789012345678901234567890.0);
}

/* At most 32 nested arrays and objects, in both readers. */
static void test_depth(void) {
    char text[128];
    for (int depth = 32; depth <= 33; depth++) {
        int o = snprintf(text, sizeof text, "{\"a\":");
        for (int i = 1; i < depth; i++) text[o++] = '[';
        for (int i = 1; i < depth; i++) text[o++] = ']';
        snprintf(text + o, sizeof text - (size_t)o, "}");
        static dt_json_object obj;
        dt_status line = dt_json_parse_object(&obj, text), scan = dt_json_scan(text, "t.json", ignore, NULL);
        if (depth == 32) {
            CHECK_OK(line);
            CHECK_OK(scan);
        } else {
            CHECK(line == DT_ERR_FORMAT && scan == DT_ERR_FORMAT && strstr(dt_last_error(), "nested too deeply"));
        }
    }
}

/* The scanner's limits name the path (escaped: keys may hold anything). */
static void test_scan_limits(void) {
    char text[2048];
    snprintf(text, sizeof text, "{\"p\\n\":{\"%0300d\":1}}", 0);
    scan_refused(text, "t.json: a path longer than 255 bytes, under \"p\\u000a\"");
    snprintf(text, sizeof text, "{\"s\":\"%01024d\"}", 0);
    scan_refused(text, "t.json: a string longer than 1023 bytes at \"s\"");
}

int main(void) {
    test_owned();
    test_room();
    test_refusals();
    test_depth();
    test_scan_limits();
    return dt_test_finish("test_json_jansson");
}
