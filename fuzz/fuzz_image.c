/* Image files: dt_image_decode on the input (a PNG or JPEG, told by its
 * first bytes; anything else is refused), then dt_image_fit of a decoded
 * image to two model inputs, one fixed and one that varies with the
 * input's size, so shrinking, enlarging, gray/RGB conversion and odd crops
 * all meet the decoders' odd images. dt_image_load reads a file and calls
 * these two. A decoded image has sides within image.h's bounds and 1 or 3
 * channels; a fitted one is written exactly within its buffer (ASan sees
 * a byte past it). fuzz/make_corpus.py writes the seeds. */
#include <stdlib.h>

#include "dtrain/image.h"
#include "fuzz_util.h"

#define NAME "fuzz.img"

static void fit(const dt_image *img, dt_shape shape) {
    size_t n = dt_shape_size(shape);
    uint8_t *out = malloc(n); /* exactly n bytes: ASan reports a write past them */
    FUZZ_CHECK(out != NULL);
    dt_status s = dt_image_fit(out, shape, 0, img);
    FUZZ_CHECK(s == DT_OK || s == DT_ERR_NOMEM);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_image img;
    dt_status s = dt_image_decode(&img, data, size, NAME);
    fuzz_expect_clean(s, NAME, NULL);
    FUZZ_CHECK((s == DT_OK) == (img.px != NULL));
    if (s != DT_OK) return 0;
    FUZZ_CHECK(img.w >= 1 && img.h >= 1 && img.w <= DT_IMAGE_MAX_DIM && img.h <= DT_IMAGE_MAX_DIM);
    FUZZ_CHECK((long)img.w * img.h <= DT_IMAGE_MAX_PIXELS && (img.c == 1 || img.c == 3));
    fit(&img, (dt_shape){3, 9, 7});
    fit(&img, (dt_shape){size % 2 ? 1 : 3, 1 + (int)(size % 37), 1 + (int)(size / 37 % 41)});
    dt_image_free(&img);
    return 0;
}
