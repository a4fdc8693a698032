/* Model-file [net] keys as train flags: every key of the model file's one
 * table (src/net/model.c) is a flag of `dtrain train`, so the schedule
 * (--policy, --steps, --scales ...), augmentation and the rest can be set
 * on the command line and swept (--grid policy=cosine,steps) without a
 * second list of them. Keys that had a flag of their own before keep it
 * (learning_rate is --lr); the others are --KEY with '-' for '_'. */
#ifndef DTRAIN_NETKEYS_H
#define DTRAIN_NETKEYS_H

#include <stddef.h>

#define DT_NETKEY_FLAG_MAX 40 /* "--warmup-start-factor" and the longest key's */
#define DT_NETKEYS_MAX 64 /* [net] keys (model.c has 45) */

/* The train flag of [net] key `key` (a model-file spelling, or the flag's
 * with dashes) into buf; whether it is generated (not a flag of its own).
 * -1 when key is no [net] key. */
int dt_netkey_flag(const char *key, char *buf, size_t cap);

/* The model file's spelling of [net] key `key` ("min-lr" -> "min_lr",
 * static), NULL when it is none. */
const char *dt_netkey_name(const char *key);

/* The [net] key of generated flag `flag` ("--min-lr" -> "min_lr"), NULL
 * when it is none. */
const char *dt_netkey_of_flag(const char *flag);

#endif
