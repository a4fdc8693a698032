/* Darknet's classifier augmentation (its [net] keys min_crop, max_crop,
 * angle, aspect, hue, saturation, exposure; see dt_augment in data.h), and
 * its evaluation transform, on one sample at a time (not public API).
 *
 * Images are floats in [0, 1], (C, H, W), as Darknet holds them; the loader
 * converts a sample's bytes into one and normalises the result. Every
 * random draw comes from the caller's stream, so a sample's augmentation is
 * a function of (seed, epoch, index) like the loader's own. */
#ifndef DTRAIN_DATA_AUGMENT_H
#define DTRAIN_DATA_AUGMENT_H

#include "dtrain/data.h"
#include "dtrain/rng.h"

/* Darknet's random_augment_image: out (C, os.h, os.w) <- im (C, is.h, is.w)
 * scaled so that its shorter side (after the aspect draw) is a random
 * integer in [min_crop, max_crop], rotated by a random angle in
 * [-angle, angle] degrees and shifted at random within the scaled image,
 * sampled bilinearly (outside the image: 0). `a->crop` must be set. */
void dt_augment_crop(float *out, dt_shape os, const float *im, dt_shape is, const dt_augment *a, dt_rng *r);

/* Darknet's random_distort_image on x (C, n) in place: hue shifted by a
 * random amount in [-hue, hue] (of the full circle), saturation and value
 * (exposure) scaled by a random factor in [1, s] or its inverse, through
 * HSV (C = 3); other channel counts scale every value by the exposure
 * draw (a grey pixel has no hue or saturation); the result clamped to
 * [0, 1]. */
void dt_augment_distort(float *x, int channels, size_t n, const dt_augment *a, dt_rng *r);

/* Darknet's classifier evaluation (center_crop_image): out (C, os.h, os.w)
 * <- the centre square of side min(is.h, is.w) of im (C, is.h, is.w),
 * resized bilinearly (Darknet's resize_image, corners to corners). ws:
 * dt_augment_eval_floats floats. */
void dt_augment_eval(float *out, dt_shape os, const float *im, dt_shape is, float *ws);
size_t dt_augment_eval_floats(dt_shape os, dt_shape is);

/* Random erasing (Zhong et al. 2017; torchvision's RandomErasing with its
 * defaults): with probability p, a rectangle of x (C, h, w) covering a
 * random share in [0.02, 0.33] of the image, of aspect ratio log-uniform
 * in [0.3, 3.3], at a random place, is set to 0 on every channel (the
 * data set's mean, as x is normalised); after 10 draws that do not fit
 * the image, nothing. */
void dt_augment_erase(float *x, dt_shape s, float p, dt_rng *r);

/* torchvision's RandomResizedCrop.get_params (0.14) for an image of h x w
 * pixels: 10 attempts of area = U(scale) x h x w, ratio = exp(U(log
 * ratio)), w = round(sqrt(area x ratio)), h = round(sqrt(area / ratio))
 * (halves to even, as Python), the first that fits placed at a random
 * (y, x); else the centre crop of the whole image, its ratio clamped to
 * [ratio[0], ratio[1]]. Uniform draws from r (24 bits, computed in
 * double), integers by dt_rng_below. */
dt_rect dt_augment_rrc_pick(int h, int w, const dt_augment *a, dt_rng *r);

/* torchvision's resize of a tensor crop (F.resized_crop on a float tensor,
 * bilinear, antialias=False; PyTorch 1.13's upsample_bilinear2d with
 * align_corners=False, in its float arithmetic and order of operations):
 * out (os.c, os.h, os.w) <- region r of the byte image src, whose pixel
 * (y, x) of channel c is src[y * sy + x * sx + c * sc] (planar: sy = W,
 * sx = 1, sc = H W; interleaved: sy = W C, sx = C, sc = 1; sc = 0 repeats
 * a gray plane), each byte read as byte / 255.0f (ToTensor).
 * ws: dt_augment_resize_floats(os) floats. */
void dt_augment_resize_region(float *out, dt_shape os, const uint8_t *src, size_t sy, size_t sx, size_t sc, dt_rect r,
                              float *ws);
size_t dt_augment_resize_floats(dt_shape os);

/* RGB <-> HSV in place on x (3, n), Darknet's formulas (hue in [0, 1); a
 * grey pixel gets hue 0). Exposed for tests. */
void dt_augment_rgb_to_hsv(float *x, size_t n);
void dt_augment_hsv_to_rgb(float *x, size_t n);

#endif
