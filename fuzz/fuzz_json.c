/* JSON: the input as text through both readers (jansson behind them, with
 * dtrain's limits and messages around it): dt_json_parse_object (run-log
 * lines), then lookups and typed getters on what it indexed, and
 * dt_json_scan (profiles). Each must accept the text or fail cleanly, and
 * everything they hand out must lie inside its bounds: keys and strings in
 * the object's own buffer, raw values inside the text, paths and strings
 * within the scanner's limits, numbers finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/json.h"
#include "fuzz_util.h"

static dt_status on_scalar(void *ctx, const char *path, dt_json_kind kind, double num, const char *str) {
    (void)ctx;
    FUZZ_CHECK(strlen(path) < 256);
    FUZZ_CHECK(kind == DT_JSON_STRING ? str != NULL && strlen(str) < 1024 : str == NULL);
    FUZZ_CHECK(kind == DT_JSON_NUMBER || kind == DT_JSON_STRING || kind == DT_JSON_BOOL || kind == DT_JSON_NULL);
    FUZZ_CHECK(isfinite(num));
    return DT_OK;
}

static void check_fields(const dt_json_object *obj, const char *text, size_t len) {
    FUZZ_CHECK(obj->nfields >= 0 && obj->nfields <= DT_JSON_MAX_FIELDS);
    for (int i = 0; i < obj->nfields; i++) {
        const dt_json_field *f = &obj->fields[i];
        const char *own = obj->strings, *own_end = obj->strings + sizeof obj->strings;
        FUZZ_CHECK(f->key >= own && f->key + f->key_len < own_end && strlen(f->key) == f->key_len);
        FUZZ_CHECK(f->type == DT_JSON_STRING ? f->str >= own && f->str + strlen(f->str) < own_end : f->str == NULL);
        FUZZ_CHECK(f->raw >= text && f->raw + f->raw_len <= text + len);
        FUZZ_CHECK(f->type != DT_JSON_NUMBER || isfinite(f->number));
    }
    /* Keys of the run log; the getters decode into small buffers. */
    static const char *const keys[] = {"event", "step", "loss", "mode", "a", ""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char small[8];
        double v;
        dt_status s = dt_json_get_string(obj, keys[k], small, sizeof small);
        FUZZ_CHECK(s == DT_OK ? strlen(small) < sizeof small : s == DT_ERR_FORMAT);
        s = dt_json_get_number(obj, keys[k], &v);
        FUZZ_CHECK(s == DT_OK ? isfinite(v) : s == DT_ERR_FORMAT);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t len = strlen(text); /* the readers see text up to the first NUL */
    dt_json_object obj;
    dt_status s = dt_json_parse_object(&obj, text);
    fuzz_expect_clean(s, "column", "empty line");
    if (s == DT_OK) check_fields(&obj, text, len);
    s = dt_json_scan(text, "fuzz.json", on_scalar, NULL);
    fuzz_expect_clean(s, "fuzz.json", NULL);
    free(text);
    return 0;
}
