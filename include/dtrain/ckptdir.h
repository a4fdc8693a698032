/* A checkpoint directory (--checkpoint-dir D): the last K checkpoints as
 * D/step-N.ckpt, D/latest (a symbolic link to the newest, replaced
 * atomically by rename, so it always names a complete file) and D/best.ckpt
 * (the best test accuracy so far). Each file is a whole checkpoint written
 * by dt_checkpoint_save (temporary file, fsync, rename). */
#ifndef DTRAIN_CKPTDIR_H
#define DTRAIN_CKPTDIR_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/status.h"

/* Creates D if missing (not its parents) and checks a file can be created
 * in it, so an unwritable directory is found before training. */
dt_status dt_ckptdir_prepare(const char *dir);

/* One run at a time writes in D: takes an exclusive flock on D/.lock,
 * which says whose it is (host, pid, start time), and returns its
 * descriptor in *fd (close it, or end the process, to let go). A lock held
 * by a live process is DT_ERR_USAGE naming that owner; a dead process
 * holds none (the kernel drops it), so its file never blocks a --resume. */
dt_status dt_ckptdir_lock(const char *dir, int *fd);

/* Whether D's file system has room for *keep checkpoints of ckpt_bytes,
 * the next one being written and best.ckpt (the checkpoints D holds
 * already count as room: they are replaced). If not: with fewer, *keep
 * becomes the most that fit (at least 1); else DT_ERR_USAGE with the
 * sizes. */
dt_status dt_ckptdir_check_space(const char *dir, uint64_t ckpt_bytes, int *keep, int fewer);

/* "D/step-N.ckpt" and "D/best.ckpt" into buf (DT_ERR_USAGE if too long). */
dt_status dt_ckptdir_step_path(char *buf, size_t cap, const char *dir, long step);
dt_status dt_ckptdir_best_path(char *buf, size_t cap, const char *dir);

/* After D/step-N.ckpt was written: points D/latest at it (symlink to a
 * temporary name, renamed over latest, directory fsync'd), then removes
 * the oldest step-*.ckpt beyond keep, and any newer than N: a future
 * abandoned when a run resumed from an older one (never best.ckpt). */
dt_status dt_ckptdir_commit(const char *dir, long step, int keep);

/* Tries the checkpoints of D newest first (latest's target, then every
 * step-N.ckpt by N descending) with try_one(path, ctx) until one returns
 * DT_OK; its path goes to chosen. A candidate that fails is reported with
 * skipped(path, message, ctx) (may be NULL) and the next one is tried,
 * unless it failed with DT_ERR_USAGE (whole, but not for this run: another
 * optimiser; the older ones are not either), which is returned at once.
 * DT_ERR_IO "no checkpoint in D" when there is none; when every one
 * failed, the last failure. */
typedef dt_status (*dt_ckptdir_try_fn)(const char *path, void *ctx);
typedef void (*dt_ckptdir_skip_fn)(const char *path, const char *why, void *ctx);
dt_status dt_ckptdir_newest(const char *dir, dt_ckptdir_try_fn try_one, dt_ckptdir_skip_fn skipped, void *ctx,
                            char *chosen, size_t cap);

#endif
