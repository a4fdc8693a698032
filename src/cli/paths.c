/* realpath is XSI. */
#define _XOPEN_SOURCE 700

#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/ckptdir.h"

/* Whether a and b name one file: the same inode when both exist, else the
 * same absolute path once their directories are resolved. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return 0;
    char ra[PATH_MAX * 2], rb[PATH_MAX * 2], da[PATH_MAX], db[PATH_MAX], ta[PATH_MAX], tb[PATH_MAX];
    snprintf(ta, sizeof ta, "%s", a);
    snprintf(tb, sizeof tb, "%s", b);
    if (!realpath(dirname(ta), da) || !realpath(dirname(tb), db)) return strcmp(a, b) == 0;
    snprintf(ta, sizeof ta, "%s", a);
    snprintf(tb, sizeof tb, "%s", b);
    snprintf(ra, sizeof ra, "%s/%s", da, basename(ta));
    snprintf(rb, sizeof rb, "%s/%s", db, basename(tb));
    return strcmp(ra, rb) == 0;
}

/* Whether the file `path` (followed through links, as `latest` is) lies
 * in directory dir. */
static int in_directory(const char *path, const char *dir) {
    char rp[PATH_MAX], rd[PATH_MAX];
    if (!realpath(path, rp) || !realpath(dir, rd)) return 0;
    return same_file(dirname(rp), rd);
}

typedef struct {
    const char *flag, *path;
} named_path;

dt_status cli_check_path_collisions(const cli_train_args *a) {
    /* The new run's checkpoints would prune it (a later step) or replace it. */
    if (a->weights && a->ckpt_dir && in_directory(a->weights, a->ckpt_dir))
        return dt_fail(DT_ERR_USAGE, "--weights %s is in --checkpoint-dir %s, whose checkpoints this run replaces: "
                       "copy it out, or give another directory", a->weights, a->ckpt_dir);
    const char *resume = a->resume && strcmp(a->resume, "auto") != 0 ? a->resume : NULL;
    named_path out[] = {{"--log", a->log}, {"--checkpoint", a->ckpt}, {"--checkpoint-dir", a->ckpt_dir},
                        {"--timeline", a->timeline}};
    int n = (int)(sizeof out / sizeof *out);
    for (int i = 0; i < n; i++) {
        if (!out[i].path) continue;
        if (same_file(out[i].path, a->model))
            return dt_fail(DT_ERR_USAGE, "%s %s is the model file: it would be overwritten", out[i].flag, out[i].path);
        /* Continuing the checkpoint resumed from is what --resume F --checkpoint F means. */
        if (resume && same_file(out[i].path, resume) && strcmp(out[i].flag, "--checkpoint") != 0 &&
            strcmp(out[i].flag, "--checkpoint-dir") != 0)
            return dt_fail(DT_ERR_USAGE, "%s %s is the checkpoint to resume from: it would be overwritten", out[i].flag,
                           out[i].path);
        /* --weights F --checkpoint F: the new run's checkpoints replace F, as asked. */
        if (a->weights && same_file(out[i].path, a->weights) && strcmp(out[i].flag, "--checkpoint") != 0)
            return dt_fail(DT_ERR_USAGE, "%s %s is the checkpoint given to --weights: it would be overwritten",
                           out[i].flag, out[i].path);
        for (int j = 0; j < i; j++)
            if (out[j].path && same_file(out[i].path, out[j].path))
                return dt_fail(DT_ERR_USAGE, "%s and %s name the same file (%s): one would overwrite the other",
                               out[j].flag, out[i].flag, out[i].path);
    }
    return DT_OK;
}

/* path can be written without changing it: an existing file is opened for
 * appending, a new one created and removed again. Messages say
 * "FLAG SHOWN". */
static dt_status writable_as(const char *flag, const char *shown, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return dt_fail(DT_ERR_USAGE, "%s %s: %s is a directory; give a file name", flag, shown, path);
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd < 0) return dt_fail(DT_ERR_IO, "%s %s: cannot write %s: %s", flag, shown, path, strerror(errno));
        close(fd);
        return DT_OK;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return dt_fail(DT_ERR_IO, "%s %s: cannot create %s: %s", flag, shown, path, strerror(errno));
    close(fd);
    unlink(path);
    return DT_OK;
}

static dt_status writable(const char *flag, const char *path) { return writable_as(flag, path, path); }

dt_status cli_check_outputs_writable(const cli_train_args *a) {
    if (a->log) DT_TRY(writable("--log", a->log));
    if (a->ckpt) {
        /* The checkpoint itself is replaced by renaming its temporary file. */
        char tmp[PATH_MAX + 8];
        struct stat st;
        if (stat(a->ckpt, &st) == 0 && S_ISDIR(st.st_mode))
            return dt_fail(DT_ERR_USAGE, "--checkpoint %s is a directory (for a directory of checkpoints use "
                           "--checkpoint-dir)", a->ckpt);
        snprintf(tmp, sizeof tmp, "%s.tmp", a->ckpt);
        DT_TRY(writable_as("--checkpoint", a->ckpt, tmp));
    }
    if (a->ckpt_dir) DT_TRY(dt_ckptdir_prepare(a->ckpt_dir));
    return DT_OK;
}
