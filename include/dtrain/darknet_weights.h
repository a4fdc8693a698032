/* Darknet's .weights files (pjreddie/darknet src/parser.c, load_weights_upto
 * and save_weights_upto), read into and written from a net built from the
 * same Darknet model file.
 *
 * Layout (little-endian, as Darknet writes it on x86):
 *   i32 major | i32 minor | i32 revision
 *   seen: u64 when major*10 + minor >= 2 and major < 1000 and minor < 1000,
 *         else i32 (the images the run had trained on)
 *   then, section by section in the model file's order, f32 arrays:
 *     [convolutional] biases (F), with batch_normalize=1 scales (F),
 *                     rolling mean (F), rolling variance (F); weights
 *                     (F, C/groups, K, K)
 *     [connected]     biases (O), weights (O, I), with batch_normalize=1
 *                     scales (O), rolling mean (O), rolling variance (O);
 *                     weights are stored (I, O) when major or minor > 1000
 *     [batchnorm]     scales (C), rolling mean (C), rolling variance (C)
 *   and nothing after them. Sections without parameters hold nothing.
 * dtrain builds a section with batch_normalize=1 as the layer, a batch norm
 * (gamma = scales, beta = biases, state = rolling mean then variance) and
 * its activation (model.h), so these arrays are views of the net's
 * parameter and state blocks. A [batchnorm] section's shift is not in the
 * file (Darknet never learns it: 0). */
#ifndef DTRAIN_DARKNET_WEIGHTS_H
#define DTRAIN_DARKNET_WEIGHTS_H

#include <stdint.h>

#include "dtrain/status.h"

struct dt_net;

/* Whether path starts like a Darknet weights file: at least a header, not a
 * dtrain checkpoint's magic, and major, minor and revision in [0, 65536)
 * (Darknet writes 0, 2, 0; text and other binaries fail it). 0 also when
 * the file cannot be read (the checkpoint reader then names why). */
int dt_darknet_weights_is(const char *path);

/* Reads path into the net's parameters and batch-norm state, and its
 * `seen` into *seen. The file must hold exactly the arrays the net's
 * sections need: DT_ERR_FORMAT "PATH: ..." naming the section (and model
 * file line) where a short file ends, or the bytes a long one has left
 * over; the net is unchanged on any failure. A net with a layer Darknet's
 * files cannot hold is DT_ERR_CONFIG. */
dt_status dt_darknet_weights_load(const char *path, const struct dt_net *net, uint64_t *seen);

/* Writes the net's parameters and batch-norm state to path in Darknet's
 * format (major 0, minor 2, revision 0, seen as u64), atomically (path.tmp,
 * fsync, rename). A [batchnorm] section whose shift is not 0 is
 * DT_ERR_CONFIG (Darknet's file has no place for it) and nothing is
 * written. */
dt_status dt_darknet_weights_save(const char *path, const struct dt_net *net, uint64_t seen);

#endif
