/* CIFAR-10 batch files: dt_dataset_load_cifar10_fd on the input (plain or
 * gzip), the reader the directory loader runs on each batch file. */
#include "dtrain/data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_dataset *ds = NULL;
    dt_status s = dt_dataset_load_cifar10_fd(&ds, fuzz_fd(0, data, size), "batch.bin");
    fuzz_expect_clean(s, "batch.bin", NULL);
    FUZZ_CHECK((s == DT_OK) == (ds != NULL));
    if (ds) {
        FUZZ_CHECK(ds->n >= 1 && ds->classes == 10);
        FUZZ_CHECK(ds->shape.c == 3 && ds->shape.h == 32 && ds->shape.w == 32);
        for (int i = 0; i < ds->n; i++) FUZZ_CHECK(ds->labels[i] >= 0 && ds->labels[i] < 10);
    }
    dt_dataset_free(ds);
    return 0;
}
