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
 *      EXIF orientation ignored (PIL does not apply it either); a JPEG at
 *      least twice the size of step 3 decoded at 1/2, 1/4 or 1/8 (PIL's
 *      draft(); dt_image_load);
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

/* A region of an image: rows [y, y + h), columns [x, x + w). */
typedef struct {
    int y, x, h, w;
} dt_rect;

/* Chooses the region of an image of h x w pixels that a sample takes
 * (inside it, h, w >= 1). */
typedef dt_rect (*dt_pick_fn)(void *ctx, int h, int w);

/* Decodes a PNG or JPEG held in data[0..len) (the format is told by its
 * first bytes, whatever the file's name); name stands for it in messages.
 * On failure *out is empty and nothing is left allocated. */
dt_status dt_image_decode(dt_image *out, const uint8_t *data, size_t len, const char *name);

/* Frees img's pixels and empties it (an empty image is a no-op). */
void dt_image_free(dt_image *img);

/* out (shape.c, shape.h, shape.w) <- img through steps 2-4 above; with
 * side > 0, step 3 resizes the shorter side to side instead (the other
 * floor(longer x side / shorter), torchvision's Resize(side)), which must
 * leave both sides at least the shape's (DT_ERR_USAGE otherwise).
 * shape.c must be 1 or 3 (DT_ERR_USAGE otherwise). */
dt_status dt_image_fit(uint8_t *out, dt_shape shape, int side, const dt_image *img);

/* The size (*rh, *rw) step 3 of dt_image_fit resizes an h x w image to. */
void dt_image_fit_size(int h, int w, dt_shape shape, int side, int *rh, int *rw);

/* Reads the file at path whole (a regular file of 1..DT_IMAGE_MAX_FILE
 * bytes), decodes it and fits it into out (shape, side as dt_image_fit).
 * A JPEG at least twice the resized size (dt_image_fit_size, from its full
 * size) on both sides is decoded at a reduced scale first, by the rule of
 * dt_image_load_region for the whole image and that size: the fit of the
 * image as PIL's draft() decodes it, then torchvision's Resize and
 * CenterCrop of that. */
dt_status dt_image_load(uint8_t *out, dt_shape shape, int side, const char *path);

/* PIL's convert("L") of an RGB image, in place (c becomes 1); a gray
 * image is left as it is. */
void dt_image_gray(dt_image *img);

/* Reads and decodes the file at path for a sample of out_h x out_w
 * pixels taken from the region pick chooses, asked with the image's full
 * size. A JPEG is decoded at the smallest of libjpeg-turbo's scales 1/8,
 * 1/4, 1/2 (else whole) at which the region still has at least out_h x
 * out_w pixels (its reduced inverse DCTs; its 3/8, 5/8, 3/4 and 7/8 decode
 * slower than the whole image: docs/IMAGES.md), and the
 * region is mapped to that scale's pixels (its edges rounded outwards).
 * *img the decoded image (gray when channels is 1, else its own 1 or 3
 * channels), *r the region in its pixels. */
dt_status dt_image_load_region(dt_image *img, dt_rect *r, const char *path, int channels, int out_h, int out_w,
                               dt_pick_fn pick, void *pick_ctx);

#endif
