/* Model files: dt_model_parse_string on the input (and dt_model_parse_file,
 * which must agree), then, for a spec that parses, shape inference (dt_net_estimate) and, when the net is small,
 * dt_net_create and one forward, loss and backward pass, so the layers'
 * kernels run on every odd shape the parser lets through. Parsing and the
 * estimate allocate nothing big, so any size may be fuzzed; only nets under
 * NET_BYTES (and steps under STEP_FLOPS) are built and run, keeping the
 * fuzzer far from its memory limit and fast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/net.h"
#include "fuzz_util.h"

#define NAME "fuzz.cfg"
#define NET_BYTES ((size_t)16 << 20)
#define STEP_FLOPS 2e7
#define MAX_BATCH 3

/* One training step on a fixed input; the net must take it without a
 * sanitizer report. (Its numbers are not checked: a legal but absurd net
 * may overflow to inf, which the trainer reports as divergence.) */
static void run_step(dt_net *net, int batch) {
    size_t n = dt_shape_size(net->input) * (size_t)batch;
    float *x = malloc(n * sizeof(float));
    dt_label labels[MAX_BATCH];
    FUZZ_CHECK(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int b = 0; b < batch; b++) labels[b] = (dt_label)(b % net->classes);
    dt_net_forward(net, x, batch, 1);
    dt_net_loss(net, labels, batch);
    dt_net_backward(net, x, batch, NULL, NULL);
    FUZZ_CHECK(dt_net_count_correct(net, labels, batch) <= batch);
    free(x);
}

static void build(const dt_model_spec *spec) {
    int batch = spec->batch < MAX_BATCH ? spec->batch : MAX_BATCH;
    size_t bytes;
    dt_status s = dt_net_estimate(&bytes, spec, batch);
    fuzz_expect_clean(s, NAME, NULL);
    if (s != DT_OK || bytes > NET_BYTES) return;
    dt_net *net;
    /* The estimate passed, so creating the same net must succeed. */
    s = dt_net_create(&net, spec, batch, 1);
    FUZZ_CHECK(s == DT_OK);
    FUZZ_CHECK(dt_net_bytes(net) == bytes);
    FUZZ_CHECK(net->classes >= 1 && net->nlayers == spec->nlayers);
    if ((double)dt_net_flops(net) * batch * 3 <= STEP_FLOPS) run_step(net, batch);
    dt_net_free(net);
}

/* The file reader must agree with the string parser: the same outcome and
 * spec, except that it refuses a NUL byte the string parser never sees. */
static void parse_as_file(const uint8_t *data, size_t size, dt_status want,
                          const dt_model_spec *spec) {
    static dt_model_spec from_file;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fuzz_fd(0, data, size));
    dt_status s = dt_model_parse_file(&from_file, path);
    fuzz_expect_clean(s, path, NULL);
    if (memchr(data, '\0', size)) {
        FUZZ_CHECK(s == DT_ERR_CONFIG && strstr(dt_last_error(), "NUL byte"));
        return;
    }
    FUZZ_CHECK(s == want);
    memcpy(from_file.path, spec->path, sizeof from_file.path);
    FUZZ_CHECK(s != DT_OK || memcmp(&from_file, spec, sizeof *spec) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static dt_model_spec spec; /* ~125 KiB: not on the stack */
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0'; /* an embedded NUL ends the text, as for a string */
    dt_status s = dt_model_parse_string(&spec, text, NAME);
    free(text);
    fuzz_expect_clean(s, NAME, NULL);
    parse_as_file(data, size, s, &spec);
    if (s != DT_OK) return 0;
    FUZZ_CHECK(spec.nlayers >= 2 && spec.nlayers <= DT_MAX_LAYERS);
    FUZZ_CHECK(spec.layers[spec.nlayers - 1].kind == DT_LAYER_SOFTMAX);
    FUZZ_CHECK(spec.batch >= 1 && spec.input.c >= 1 && spec.input.h >= 1 && spec.input.w >= 1);
    FUZZ_CHECK(isfinite(spec.sched.base_lr) && spec.sched.base_lr > 0);
    build(&spec);
    return 0;
}
