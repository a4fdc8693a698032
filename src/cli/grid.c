#include "grid.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/netkeys.h"

/* What a sweep may vary: the train flags that change one run's
 * optimisation or its synchronisation scheme, not where it reads or
 * writes; and every [net] key, the optimiser's hyperparameters among them
 * (resolve_key). */
static const struct {
    const char *key, *flag;
    int numeric;
} keys[] = {
    {"lr", "--lr", 1},           {"batch", "--batch", 1},           {"epochs", "--epochs", 1},
    {"max-steps", "--max-steps", 1}, {"seed", "--seed", 1},         {"warmup-epochs", "--warmup-epochs", 1},
    {"lr-scaling", "--lr-scaling", 0}, {"mode", "--mode", 0},       {"servers", "--servers", 1},
    {"staleness", "--staleness", 1}, {"straggle", "--straggle", 0}, {"slow-worker", "--slow-worker", 0},
    {"optimizer", "--optimizer", 0}, {"accumulate", "--accumulate", 1},
};
#define NKEYS ((int)(sizeof keys / sizeof *keys))

static int key_index(const char *key) {
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].key, key) == 0) return i;
    return -1;
}

/* "lr, batch, ..." for messages. */
static const char *key_list(char *buf, size_t cap) {
    size_t used = 0;
    for (int i = 0; i < NKEYS && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", keys[i].key);
    if (used < cap) snprintf(buf + used, cap - used, ", or any [net] key of the model file");
    return buf;
}

/* Axis a's key, flag and kind of values: a sweep key, else a [net] key. */
static int resolve_key(cli_grid_axis *a, const char *key) {
    int k = key_index(key);
    if (k >= 0) {
        a->key = keys[k].key, a->flag = keys[k].flag, a->numeric = keys[k].numeric;
        return 1;
    }
    if (dt_netkey_flag(key, a->flagbuf, sizeof a->flagbuf) < 0) return 0;
    a->key = dt_netkey_name(key);
    a->flag = a->flagbuf;
    a->numeric = dt_model_net_key_is_number(a->key);
    return 1;
}

void cli_grid_init(cli_grid *g) {
    memset(g, 0, sizeof *g);
    g->ntrials = 1;
}


dt_status cli_grid_add(cli_grid *g, const char *term) {
    char list[512];
    const char *eq = strchr(term, '=');
    if (!eq || eq == term)
        return dt_fail(DT_ERR_USAGE, "--grid: '%s' is not KEY=V1,V2,... (keys: %s)", term,
                       key_list(list, sizeof list));
    if (g->naxes == CLI_GRID_MAX_AXES)
        return dt_fail(DT_ERR_USAGE, "--grid: more than %d keys", CLI_GRID_MAX_AXES);
    cli_grid_axis *a = &g->axes[g->naxes];
    memset(a, 0, sizeof *a);
    if (strlen(term) >= sizeof a->buf)
        return dt_fail(DT_ERR_USAGE, "--grid: '%.40s...' is longer than %d characters", term,
                       CLI_GRID_TERM_MAX - 1);
    memcpy(a->buf, term, strlen(term) + 1);
    a->buf[eq - term] = '\0';
    if (!resolve_key(a, a->buf))
        return dt_fail(DT_ERR_USAGE, "--grid: unknown key '%s' (keys: %s)", a->buf, key_list(list, sizeof list));
    for (int i = 0; i < g->naxes; i++)
        if (strcmp(g->axes[i].flag, a->flag) == 0)
            return dt_fail(DT_ERR_USAGE, "--grid: %s is given twice (as %s)", a->key, a->flag);
    /* Split the values in place at the commas. */
    char *v = a->buf + (eq - term) + 1;
    for (;;) {
        char *comma = strchr(v, ',');
        if (comma) *comma = '\0';
        if (!*v) return dt_fail(DT_ERR_USAGE, "--grid: %s has an empty value in '%s'", a->key, term);
        for (int i = 0; i < a->nvalues; i++)
            if (strcmp(a->values[i], v) == 0)
                return dt_fail(DT_ERR_USAGE, "--grid: %s lists %s twice", a->key, v);
        if (a->nvalues == CLI_GRID_MAX_VALUES)
            return dt_fail(DT_ERR_USAGE, "--grid: %s has more than %d values", a->key, CLI_GRID_MAX_VALUES);
        a->values[a->nvalues++] = v;
        if (!comma) break;
        v = comma + 1;
    }
    if (g->ntrials * a->nvalues > CLI_GRID_MAX_TRIALS)
        return dt_fail(DT_ERR_USAGE, "--grid: %ld trials, more than %d", g->ntrials * a->nvalues,
                       CLI_GRID_MAX_TRIALS);
    g->ntrials *= a->nvalues;
    g->naxes++;
    return DT_OK;
}

const char *cli_grid_value(const cli_grid *g, long t, int axis) {
    for (int i = g->naxes - 1; i > axis; i--) t /= g->axes[i].nvalues;
    return g->axes[axis].values[t % g->axes[axis].nvalues];
}

void cli_grid_describe(const cli_grid *g, long t, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->naxes && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s=%s", i ? " " : "", g->axes[i].key,
                                 cli_grid_value(g, t, i));
}
