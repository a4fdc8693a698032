/* The files a train run writes, checked before it trains: none may be the
 * model file, an input or another output (a typo must not destroy a file),
 * and each must be writable (found now, not when the first checkpoint is
 * due). */
#ifndef DTRAIN_CLI_PATHS_H
#define DTRAIN_CLI_PATHS_H

#include "cmd_train.h"

/* Collisions between a's paths (every rank: the answer is the same). */
dt_status cli_check_path_collisions(const cli_train_args *a);

/* Whether the outputs worker 0 writes can be written (--log, --checkpoint,
 * --checkpoint-dir, which is created): call it on worker 0 only. Nothing
 * existing is truncated or changed. */
dt_status cli_check_outputs_writable(const cli_train_args *a);

#endif
