/* The JSON object reader behind dtrain plot: values of every kind, escapes
 * and UTF-8 decoded, and each malformation refused with its column. */
#include <stdio.h>
#include <string.h>

#include "dtrain/json.h"
#include "testutil.h"

/* text must be refused with a message containing want. */
static void expect_error(const char *text, const char *want) {
    dt_json_object obj;
    dt_status s = dt_json_parse_object(&obj, text);
    if (s != DT_ERR_FORMAT || !strstr(dt_last_error(), want)) {
        fprintf(stderr, "parsing %s: status %d, message '%s', wanted '%s'\n", text, s, dt_last_error(),
                want);
        dt_test_failures++;
    }
}

static void test_values(void) {
    dt_json_object obj;
    const char *text = " {\"event\" : \"step\",\"step\":3, \"loss\":-1.5e-3,"
                       "\"name\":\"a\\\"b\\\\\\u00e9\\ud83d\\ude00\\n\xc3\xa9\","
                       "\"nest\":[1,{\"x\":[]},\"]\"],\"t\":true,\"f\":false,\"z\":null,\"st\\u0065p2\":0}\r\n";
    if (!CHECK_OK(dt_json_parse_object(&obj, text))) return;
    CHECK(obj.nfields == 9);
    double v = 0;
    CHECK_OK(dt_json_get_number(&obj, "step", &v));
    CHECK(v == 3);
    CHECK_OK(dt_json_get_number(&obj, "loss", &v));
    CHECK(v == -1.5e-3);
    char s[64];
    CHECK_OK(dt_json_get_string(&obj, "event", s, sizeof s));
    CHECK(strcmp(s, "step") == 0);
    CHECK_OK(dt_json_get_string(&obj, "name", s, sizeof s));
    CHECK(strcmp(s, "a\"b\\\xc3\xa9\xf0\x9f\x98\x80\n\xc3\xa9") == 0);
    const dt_json_field *f = dt_json_find(&obj, "nest");
    CHECK(f && f->type == DT_JSON_ARRAY && f->raw_len == strlen("[1,{\"x\":[]},\"]\"]"));
    f = dt_json_find(&obj, "t");
    CHECK(f && f->type == DT_JSON_BOOL && f->number == 1);
    f = dt_json_find(&obj, "z");
    CHECK(f && f->type == DT_JSON_NULL);
    CHECK(dt_json_find(&obj, "step2") != NULL); /* keys are compared decoded */
    CHECK(dt_json_find(&obj, "ste") == NULL && dt_json_find(&obj, "steps") == NULL);

    CHECK(dt_json_get_number(&obj, "event", &v) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "no number field 'event'"));
    CHECK(dt_json_get_string(&obj, "missing", s, sizeof s) == DT_ERR_FORMAT);
    CHECK(dt_json_get_string(&obj, "event", s, 4) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "longer than 3 bytes"));

    CHECK_OK(dt_json_parse_object(&obj, "{}"));
    CHECK(obj.nfields == 0);
}

/* What dt_json_escape writes, the reader gives back. */
static void test_escape_roundtrip(void) {
    const char *orig = "q\"b\\s\n\t\x01 \xc3\xa9";
    char esc[128], line[160], back[64];
    snprintf(line, sizeof line, "{\"k\":\"%s\"}", dt_json_escape(esc, sizeof esc, orig));
    dt_json_object obj;
    if (CHECK_OK(dt_json_parse_object(&obj, line)) &&
        CHECK_OK(dt_json_get_string(&obj, "k", back, sizeof back)))
        CHECK(strcmp(back, orig) == 0);
}

static void test_errors(void) {
    expect_error("", "empty line");
    expect_error("  \n", "empty line");
    expect_error("[1]", "column 1: expected '{'");
    expect_error("{\"a\":1,}", "column 8: expected a string key");
    expect_error("{\"a\":1 \"b\":2}", "column 8: expected ',' or '}'");
    expect_error("{\"a\" 1}", "column 6: expected ':'");
    expect_error("{'a':1}", "column 2: expected a string key");
    expect_error("{\"a\":01}", "column 7: expected ',' or '}'");
    expect_error("{\"a\":1.}", "column 8: expected a digit after '.'");
    expect_error("{\"a\":.5}", "column 6: expected a value");
    expect_error("{\"a\":1e}", "column 8: expected a digit in the exponent");
    expect_error("{\"a\":+1}", "column 6: expected a value");
    expect_error("{\"a\":NaN}", "column 6: expected a value");
    expect_error("{\"a\":1e999}", "number out of range");
    expect_error("{\"a\":tru}", "column 6: expected a value");
    expect_error("{\"a\":[1,]}", "column 9: expected a value");
    expect_error("{\"a\":[1}", "expected ',' or ']'");
    expect_error("{\"a\":1} x", "column 9: text after the object");
    expect_error("{\"a\":1}{}", "text after the object");
    expect_error("{\"a\":1", "expected ',' or '}'");
    expect_error("{\"a\":\"x", "unterminated string");
    expect_error("{\"a\":\"\\x\"}", "invalid escape");
    expect_error("{\"a\":\"\\u12g4\"}", "four hex digits");
    expect_error("{\"a\":\"\t\"}", "control character");
    expect_error("{\"a\":\"\xff\"}", "invalid UTF-8");
    expect_error("{\"a\":\"\xc0\xaf\"}", "invalid UTF-8"); /* overlong '/' */
    expect_error("{\"a\":\"\\udc00\"}", "lone low surrogate");
    expect_error("{\"a\":\"\\ud800x\"}", "high surrogate without a low one");
    expect_error("{\"a\":\"\\u0000\"}", "\\u0000 is not supported");

    char deep[128] = "{\"a\":";
    for (int i = 0; i < 40; i++) strcat(deep, "[");
    expect_error(deep, "nested too deeply");

    char wide[1024] = "{";
    for (int i = 0; i <= DT_JSON_MAX_FIELDS; i++)
        snprintf(wide + strlen(wide), sizeof wide - strlen(wide), "%s\"k%d\":%d", i ? "," : "", i, i);
    strcat(wide, "}");
    expect_error(wide, "too many fields");
}

static void test_utf8(void) {
    const struct {
        const char *bytes;
        size_t len;
    } cases[] = {
        {"a", 1},         {"\xc3\xa9", 2},         {"\xe2\x82\xac", 3}, {"\xf0\x9f\x98\x80", 4},
        {"\x80", 0},      {"\xc0\x80", 0},         {"\xe0\x80\x80", 0}, /* overlong */
        {"\xed\xa0\x80", 0},                                             /* surrogate */
        {"\xf4\x90\x80\x80", 0},                                         /* > U+10FFFF */
        {"\xc3", 0},      {"\xe2\x82", 0},         {"\xc3\x28", 0},     /* cut, bad continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t got = dt_utf8_char_len((const unsigned char *)cases[i].bytes, strlen(cases[i].bytes));
        if (got != cases[i].len) {
            fprintf(stderr, "utf8 case %zu: length %zu, wanted %zu\n", i, got, cases[i].len);
            dt_test_failures++;
        }
    }
}

int main(void) {
    test_values();
    test_escape_roundtrip();
    test_errors();
    test_utf8();
    return dt_test_finish("test_json");
}
