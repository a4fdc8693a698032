#include "dtrain/netkeys.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"

/* [net] keys whose train flag is older than this mapping and named
 * otherwise, or parsed with checks of its own (job_prepare.c); and the
 * optimiser's hyperparameters (optim.h's table), whose flags are --KEY but
 * rows of the job's own table. */
static const struct {
    const char *key, *flag;
} own[] = {{"learning_rate", "--lr"},
           {"batch", "--batch"},
           {"epochs", "--epochs"},
           {"accumulate", "--accumulate"},
           {"optimizer", "--optimizer"},
           {"warmup_epochs", "--warmup-epochs"},
           {"dataset", "--dataset"},
           {"precision", "--precision"}};

/* "min_lr" and "min-lr" are the same key. */
static int same_key(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '_' || *a == '-') && (*b == '_' || *b == '-'))) return 0;
    return *a == *b;
}

const char *dt_netkey_name(const char *key) {
    const char *k;
    for (int i = 0; (k = dt_model_net_key(i)) != NULL; i++)
        if (same_key(k, key)) return k;
    return NULL;
}

int dt_netkey_flag(const char *key, char *buf, size_t cap) {
    const char *k = dt_netkey_name(key);
    if (!k) return -1;
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (strcmp(own[i].key, k) == 0) {
            snprintf(buf, cap, "%s", own[i].flag);
            return 0;
        }
    snprintf(buf, cap, "--%s", k);
    for (char *c = buf + 2; *c; c++)
        if (*c == '_') *c = '-';
    return dt_optim_hyper_of(k) ? 0 : 1;
}

const char *dt_netkey_of_flag(const char *flag) {
    char buf[DT_NETKEY_FLAG_MAX];
    if (strncmp(flag, "--", 2) != 0) return NULL;
    const char *k = dt_netkey_name(flag + 2);
    return k && dt_netkey_flag(k, buf, sizeof buf) == 1 && strcmp(buf, flag) == 0 ? k : NULL;
}
