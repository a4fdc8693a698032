/* The train and test sets of a run: loaded as dt_train_opts says, checked
 * against the model, and described on the run's report (a folder's class
 * names, how its images are held, the files it skipped). */
#ifndef DTRAIN_TRAIN_TRAINSET_H
#define DTRAIN_TRAIN_TRAINSET_H

#include "dtrain/train.h"
#include "report.h"

/* *train and *test (freed by the caller, also on failure). A folder's test
 * set must have the train set's class folders and gets the cache budget the
 * train set left. outputs: the net's classes (a folder may have fewer). */
dt_status dt_trainset_load(dt_dataset **train, dt_dataset **test, const dt_model_spec *spec, int outputs,
                           const dt_train_opts *o, dt_report *rep);

/* The class names a checkpoint holds (from, given with `flag`: --resume or
 * --weights; n = 0: none) against the train set's: when both have names
 * they must be the same list. */
dt_status dt_trainset_check_classes(const dt_dataset *train, const dt_class_names *saved, const char *flag,
                                    const char *from);

#endif
