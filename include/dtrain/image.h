/* Image files (PNG with libpng, JPEG with libjpeg-turbo's TurboJPEG API)
 * decoded and fitted to a model's input: what a folder dataset does with
 * each of its files.
 *
 * The pipeline is torchvision's ImageFolder with
 * convert("RGB" or "L") -> Resize(side) -> CenterCrop(H, W) on PIL images,
 * reproduced to the byte for PNGs (JPEGs: libjpeg-turbo decodes as PIL's
 * libjpeg does, ISLOW DCT and fancy upsampling):
 *   1. decode to 8 bits per sample: gray (1-, 2-, 4-, 8-bit gray and gray +
 *      alpha) or RGB (RGB, RGBA, palette); alpha and transparency dropped
 *      (PIL's convert("RGB") drops them too), 16-bit samples keep their high
 *      byte (as PIL reads 16-bit RGB); gamma and colour profiles ignored;
 *      EXIF orientation ignored (PIL does not apply it either);
 *   2. channels: gray -> RGB repeats the value; RGB -> gray is PIL's
 *      ITU-R 601-2 luma, L = (19595 R + 38470 G + 7471 B + 32768) >> 16;
 *   3. scale so that the image just covers H x W: the side that limits
 *      becomes H (or W) exactly, the other is floor(side x scale), as
 *      torchvision's Resize(int) does for the shorter side; resampled with
 *      PIL's bilinear filter (a triangle, widened by the scale when
 *      shrinking, so shrinking averages the area it covers: antialiased),
 *      in PIL's fixed point, rounding to bytes between the horizontal and
 *      the vertical pass as PIL does;
 *   4. centre crop to H x W (offset round((side - H) / 2), half to even, as
 *      torchvision's CenterCrop).
 * The result is planar (C, H, W) bytes, C = 1 (luminance) or 3 (RGB).
 *
 * Bounds (before anything is allocated for a file's pixels): files up to
 * DT_IMAGE_MAX_FILE bytes, sides up to DT_IMAGE_MAX_DIM, at most
 * DT_IMAGE_MAX_PIXELS pixels; a PNG whose header claims more pixel data
 * than its size can hold at deflate's best ratio is refused as truncated.
 * Corrupt data, truncation and libjpeg warnings are errors: every failure
 * is one line naming the file. */
#ifndef DTRAIN_IMAGE_H
#define DTRAIN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/layer.h"
#include "dtrain/status.h"

#define DT_IMAGE_MAX_DIM 16384           /* pixels per side of a source image */
#define DT_IMAGE_MAX_PIXELS (1L << 26)   /* 64 Mpx: 192 MiB decoded as RGB */
#define DT_IMAGE_MAX_FILE ((size_t)256 << 20)

/* A decoded image: h rows of w pixels of c interleaved bytes (h, w, c),
 * c = 1 (gray) or 3 (RGB). Owns px. */
typedef struct {
    int h, w, c;
    uint8_t *px;
} dt_image;

/* Decodes a PNG or JPEG held in data[0..len) (the format is told by its
 * first bytes, whatever the file's name); name stands for it in messages.
 * On failure *out is empty and nothing is left allocated. */
dt_status dt_image_decode(dt_image *out, const uint8_t *data, size_t len, const char *name);

/* Frees img's pixels and empties it (an empty image is a no-op). */
void dt_image_free(dt_image *img);

/* out (shape.c, shape.h, shape.w) <- img through steps 2-4 above.
 * shape.c must be 1 or 3 (DT_ERR_USAGE otherwise). */
dt_status dt_image_fit(uint8_t *out, dt_shape shape, const dt_image *img);

/* Reads the file at path whole (a regular file of 1..DT_IMAGE_MAX_FILE
 * bytes), decodes it and fits it into out (shape). */
dt_status dt_image_load(uint8_t *out, dt_shape shape, const char *path);

#endif
