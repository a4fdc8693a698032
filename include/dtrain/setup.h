/* What the commands that load a model and a data set share (train, the
 * job API, eval, predict, bench, info): the model file with the flags
 * over it, precision, threads and the data set's source, each checked with
 * a one-line error naming the flag. */
#ifndef DTRAIN_SETUP_H
#define DTRAIN_SETUP_H

#include <stddef.h>

#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/status.h"

/* Parses the model file at path (or path is the model's text when it
 * holds a newline: the job API's models) and applies --batch/--lr/--epochs
 * overrides (0 = keep the file's value). */
dt_status dt_setup_model(dt_model_spec *spec, const char *path, int batch, double lr, int epochs);
/* The same with n [net] keys given as flags (dt_model_parse_file_over). */
dt_status dt_setup_model_over(dt_model_spec *spec, const char *path, const dt_model_override *ov, int n, int batch,
                              double lr, int epochs);

/* --precision NAME (NULL: not given) over the model file's precision=, and
 * the CPU check of the result: the error names the flag, or the file. */
dt_status dt_setup_precision(dt_model_spec *spec, const char *name);

/* Sets the OpenMP threads oneDNN runs on: `threads` if > 0, else cores /
 * local_ranks (the ranks on this node). */
int dt_setup_threads(int threads, int local_ranks);

/* --dataset name (NULL: the model file's, else fashion-mnist) -> kind. */
dt_status dt_setup_dataset_kind(dt_dataset_kind *kind, const char *name, const dt_model_spec *spec);

/* The data set's kind and where it is: --data FILE.data (Darknet's; it
 * excludes --dataset and --data-dir) as kind darknet with *dir the file,
 * else --dataset (dt_setup_dataset_kind) and --data-dir. */
dt_status dt_setup_data_source(dt_dataset_kind *kind, const char **dir, const char *data, const char *dataset,
                               const char *data_dir, const dt_model_spec *spec);

/* The image data sets' flags against the kind: --data-dir required for
 * folder, --cache-mb (cache_mb >= 0) and --skip-bad-images only for kinds
 * that decode images (folder, darknet). */
dt_status dt_setup_folder_flags(dt_dataset_kind kind, const char *data_dir, long cache_mb, int skip_bad);
/* --val-split F (0: not given) applies to folder data sets only. */
dt_status dt_setup_val_split(dt_dataset_kind kind, double val_split);
/* --loader-threads when not given: 2 for the kinds that decode, else 1. */
int dt_setup_loader_threads(dt_dataset_kind kind);
/* --cache-mb in bytes; -1 (not given): a quarter of memory over the ranks
 * on this node. */
size_t dt_setup_cache_bytes(long cache_mb, int local_ranks);

#endif
