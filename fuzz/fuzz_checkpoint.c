/* Checkpoints: dt_checkpoint_load_fd on the input. The expected shape hash
 * and array sizes are taken from the input's own header when it has one
 * (bounded by MAX_FLOATS), so the fuzzer gets past the header checks to the
 * size, CRC and payload checks; each input is loaded twice, as a trainer
 * (with momentum, the class names and a worker's state) and as an
 * evaluator (without). On failure the caller's arrays must be untouched
 * and no names returned, as checkpoint.h promises; loaded names are 1..256
 * distinct non-empty ones. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "fuzz_util.h"

#define NAME "fuzz.ckpt"
#define MAX_FLOATS 4096
#define HEADER 80 /* magic 8, version 4, reserved 4, 4 x u64, 2 x i32, 3 x u64 */

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Header count at off, or a small default when absent or too large (the
 * load then fails on the mismatch, which is worth fuzzing too). */
static size_t count_at(const uint8_t *data, size_t size, size_t off) {
    if (size < HEADER) return 3;
    uint64_t v = le64(data + off);
    return v <= MAX_FLOATS ? (size_t)v : 3;
}

static void load(int fd, uint64_t hash, size_t np, size_t ns, size_t nm, int with_momentum) {
    static float p[MAX_FLOATS], st[MAX_FLOATS], m[MAX_FLOATS], w[MAX_FLOATS], sentinel[MAX_FLOATS];
    if (sentinel[0] == 0.0f)
        for (size_t i = 0; i < MAX_FLOATS; i++) sentinel[i] = -1234.5f - (float)i;
    memcpy(p, sentinel, sizeof p), memcpy(st, sentinel, sizeof st), memcpy(m, sentinel, sizeof m);
    memcpy(w, sentinel, sizeof w);
    dt_class_names names = {0, NULL};
    /* A trainer also asks for worker 1 of 2's state, the size of the parameters. */
    dt_ckpt_arrays a = {p, np, st, ns, with_momentum ? m : NULL, with_momentum ? nm : 0, 0,
                        with_momentum ? &names : NULL, with_momentum ? w : NULL, np, 2, 1, NULL};
    dt_ckpt_meta meta;
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    dt_status s = dt_checkpoint_load_fd(fd, NAME, hash, &meta, &a);
    fuzz_expect_clean(s, NAME, NULL);
    if (s == DT_OK) {
        FUZZ_CHECK(meta.shape_hash == hash && meta.epoch >= 0 && meta.step_in_epoch >= 0);
        FUZZ_CHECK(names.n >= 0 && names.n <= DT_DATA_MAX_CLASSES);
        for (int i = 0; i < names.n; i++) {
            FUZZ_CHECK(names.names[i][0] != '\0');
            for (int k = 0; k < i; k++) FUZZ_CHECK(strcmp(names.names[i], names.names[k]) != 0);
        }
        dt_class_names_free(&names);
        return;
    }
    FUZZ_CHECK(names.n == 0 && names.names == NULL);
    FUZZ_CHECK(memcmp(p, sentinel, sizeof p) == 0 && memcmp(st, sentinel, sizeof st) == 0 &&
               memcmp(m, sentinel, sizeof m) == 0 && memcmp(w, sentinel, sizeof w) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t hash = size >= HEADER ? le64(data + 16) : 0;
    size_t np = count_at(data, size, 56), ns = count_at(data, size, 64),
           nm = count_at(data, size, 72);
    int fd = fuzz_fd(0, data, size);
    load(fd, hash, np, ns, nm, 1);
    load(fd, hash, np, ns, nm, 0);
    return 0;
}
