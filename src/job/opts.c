#include "dtrain/opts.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/suggest.h"

static dt_status parse_number(const dt_opt *f, const char *v, double *out) {
    char *end;
    errno = 0;
    double d = (f->type == DT_OPT_DOUBLE) ? strtod(v, &end) : (double)strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno == ERANGE || !isfinite(d))
        return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s", f->name, v,
                       f->type == DT_OPT_DOUBLE ? "a number" : "an integer");
    if (d < f->min || d > f->max)
        return dt_fail(DT_ERR_USAGE, "%s: %s is out of range [%g, %g]", f->name, v, f->min, f->max);
    *out = d;
    return DT_OK;
}

static dt_status set_value(dt_opt *f, const char *v) {
    double d = 0;
    if (f->type != DT_OPT_STR) DT_TRY(parse_number(f, v, &d));
    switch (f->type) {
    case DT_OPT_INT: *(int *)f->dest = (int)d; break;
    case DT_OPT_LONG: *(long *)f->dest = (long)d; break;
    case DT_OPT_DOUBLE: *(double *)f->dest = d; break;
    case DT_OPT_STR: *(const char **)f->dest = v; break;
    case DT_OPT_FLAG: break;
    }
    return DT_OK;
}

const dt_opt *dt_opt_find(const dt_opt *flags, int nflags, const char *name) {
    for (int i = 0; i < nflags; i++)
        if (strcmp(flags[i].name, name) == 0) return &flags[i];
    return NULL;
}

/* "unknown flag '--max-step' (did you mean --max-steps?)". */
static dt_status unknown_flag(const dt_opt *flags, int nflags, const char *name) {
    dt_suggest sg;
    dt_suggest_init(&sg, name);
    for (int i = 0; i < nflags; i++) dt_suggest_offer(&sg, flags[i].name);
    char hint[96];
    dt_suggest_text(&sg, hint, sizeof hint);
    return dt_fail(DT_ERR_USAGE, "unknown flag '%s'%s (see --help)", name, hint);
}

dt_status dt_opts_parse(int argc, char **argv, dt_opt *flags, int nflags, const char **positional,
                  int max_pos, int *npos) {
    *npos = 0;
    int only_positional = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || a[1] == '\0') {
            if (*npos >= max_pos) return dt_fail(DT_ERR_USAGE, "unexpected argument '%s'", a);
            positional[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_positional = 1;
            continue;
        }
        /* --flag=value or --flag value */
        char name[64];
        const char *eq = strchr(a, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) return dt_fail(DT_ERR_USAGE, "unknown flag '%s'", a);
        memcpy(name, a, len);
        name[len] = '\0';
        dt_opt *f = (dt_opt *)dt_opt_find(flags, nflags, name);
        if (!f) return unknown_flag(flags, nflags, name);
        if (f->seen) return dt_fail(DT_ERR_USAGE, "%s is given twice", name);
        if (f->type == DT_OPT_FLAG) {
            if (eq) return dt_fail(DT_ERR_USAGE, "%s takes no value", name);
            *(int *)f->dest = 1;
            f->seen = 1;
            continue;
        }
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) return dt_fail(DT_ERR_USAGE, "%s needs a value", name);
            value = argv[++i];
        }
        DT_TRY(set_value(f, value));
        f->seen = 1;
    }
    return DT_OK;
}

/* "--max-steps" for "max_steps", "max-steps" or "--max-steps". */
static dt_status flag_name(char *buf, size_t cap, const char *name) {
    const char *bare = strncmp(name, "--", 2) == 0 ? name + 2 : name;
    if (!*bare || strlen(bare) + 3 > cap) return dt_fail(DT_ERR_USAGE, "option '%s' is not a known name", name);
    snprintf(buf, cap, "--%s", bare);
    for (char *c = buf + 2; *c; c++)
        if (*c == '_') *c = '-';
    return DT_OK;
}

dt_status dt_opts_set(dt_opt *opts, int nopts, const char *name, const char *value) {
    char flag[64];
    DT_TRY(flag_name(flag, sizeof flag, name));
    dt_opt *f = (dt_opt *)dt_opt_find(opts, nopts, flag);
    if (!f) return unknown_flag(opts, nopts, flag);
    if (f->type == DT_OPT_FLAG) {
        int on = !value || strcmp(value, "1") == 0 || strcmp(value, "true") == 0;
        if (!on && strcmp(value, "0") != 0 && strcmp(value, "false") != 0)
            return dt_fail(DT_ERR_USAGE, "%s: '%s' is not true or false", flag, value);
        *(int *)f->dest = on;
        f->seen = on;
        return DT_OK;
    }
    if (!value) return dt_fail(DT_ERR_USAGE, "%s needs a value", flag);
    DT_TRY(set_value(f, value));
    f->seen = 1;
    return DT_OK;
}
