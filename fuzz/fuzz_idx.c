/* IDX files (MNIST, Fashion-MNIST): dt_dataset_load_idx_fd on an images
 * file and a labels file cut from the input: a 2-byte little-endian length
 * n, then n bytes of images file (fewer if the input ends), the rest is the
 * labels file. Either may be plain or gzip. fuzz/make_corpus.py writes
 * seeds in this form. */
#include "dtrain/data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2, size -= 2;
    if (n > size) n = size;
    int images = fuzz_fd(0, data, n), labels = fuzz_fd(1, data + n, size - n);
    dt_dataset *ds = NULL;
    dt_status s = dt_dataset_load_idx_fd(&ds, images, "images.idx", labels, "labels.idx");
    fuzz_expect_clean(s, "images.idx", "labels.idx");
    FUZZ_CHECK((s == DT_OK) == (ds != NULL));
    if (ds) {
        FUZZ_CHECK(ds->n >= 1 && ds->classes == 10 && ds->shape.c == 1);
        for (int i = 0; i < ds->n; i++) FUZZ_CHECK(ds->labels[i] >= 0 && ds->labels[i] < 10);
    }
    dt_dataset_free(ds);
    return 0;
}
