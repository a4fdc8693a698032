/* JSON: escaping for the logs, and the scanner's paths, values and errors. */
#include <string.h>

#include "dtrain/json.h"
#include "testutil.h"

/* Collects "path=value;" for every scalar. */
typedef struct {
    char out[1024];
    int stop_at; /* fail on this scalar (1-based), 0: never */
    int seen;
} collect;

static dt_status on_value(void *ctx, const char *path, dt_json_kind kind, double num, const char *str) {
    collect *c = ctx;
    size_t n = strlen(c->out);
    if (kind == DT_JSON_STRING)
        snprintf(c->out + n, sizeof c->out - n, "%s=\"%s\";", path, str);
    else if (kind == DT_JSON_NULL)
        snprintf(c->out + n, sizeof c->out - n, "%s=null;", path);
    else
        snprintf(c->out + n, sizeof c->out - n, "%s=%g;", path, num);
    if (++c->seen == c->stop_at) return dt_fail(DT_ERR_FORMAT, "stopped at %s", path);
    return DT_OK;
}

static void scans_to(const char *text, const char *want) {
    collect c = {.stop_at = 0};
    CHECK_OK(dt_json_scan(text, "t.json", on_value, &c));
    if (strcmp(c.out, want) != 0) {
        fprintf(stderr, "scan of %s\n  gave %s\n  want %s\n", text, c.out, want);
        dt_test_failures++;
    }
}

static void fails_with(const char *text, const char *what) {
    collect c = {.stop_at = 0};
    dt_status s = dt_json_scan(text, "t.json", on_value, &c);
    if (s != DT_ERR_FORMAT || !strstr(dt_last_error(), what)) {
        fprintf(stderr, "scan of %s: status %d '%s', expected '%s'\n", text, s, dt_last_error(), what);
        dt_test_failures++;
    }
}

int main(void) {
    char buf[64];
    CHECK(strcmp(dt_json_escape(buf, sizeof buf, "a\"b\\c\n"), "a\\\"b\\\\c\\u000a") == 0);

    scans_to("{\"a\":1,\"b\":[true,false,null,\"x\"],\"c\":{\"d\":-2.5e3}}",
             "a=1;b.0=1;b.1=0;b.2=null;b.3=\"x\";c.d=-2500;");
    scans_to(" [ ] ", "");
    scans_to("[[1],[2,{\"k\":0}]]", "0.0=1;1.0=2;1.1.k=0;");
    scans_to("\"\\\"\\\\\\/\\b\\n\\u00e9\\ud83d\\ude00\"", "=\"\"\\/\b\n\xc3\xa9\xf0\x9f\x98\x80\";");
    scans_to("{\"layers\":[{\"fwd_s\":0.001}]}", "layers.0.fwd_s=0.001;");

    fails_with("", "t.json:1: empty file");
    fails_with("{\"a\":1,}", "expected a string key");
    fails_with("{\"a\" 1}", "expected ':'");
    fails_with("[1 2]", "expected ',' or ']'");
    fails_with("{\"a\":1\n\n", "t.json:3: expected ',' or '}'");
    fails_with("\"abc", "unterminated string");
    fails_with("\"a\\x\"", "invalid escape");
    fails_with("\"\\ud83d\"", "high surrogate without a low one");
    fails_with("01", "text after the JSON value");
    fails_with("1.", "expected a digit after '.'");
    fails_with("-", "t.json:1: expected a value");
    fails_with("1e999", "out of range");
    fails_with("nul", "expected a value");
    fails_with("[1] x", "text after");
    char deep[80];
    memset(deep, '[', 40);
    deep[40] = '\0';
    fails_with(deep, "nested too deeply");

    /* The callback's failure stops the scan and is returned. */
    collect c = {.stop_at = 2};
    CHECK(dt_json_scan("[1,2,3]", "t.json", on_value, &c) == DT_ERR_FORMAT);
    CHECK(c.seen == 2 && strstr(dt_last_error(), "stopped at 1"));
    return dt_test_finish("test_json_scan");
}
