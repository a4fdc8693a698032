/* realpath is XSI. */
#define _XOPEN_SOURCE 700

#include "dtrain/paths.h"

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

dt_status dt_paths_check(const dt_path *p, int n) {
    for (int i = 0; i < n; i++) {
        if (!p[i].path || p[i].role) continue; /* an input, or not given */
        for (int j = 0; j < n; j++) {
            if (j == i || !p[j].path || !same_file(p[i].path, p[j].path)) continue;
            if (p[j].role && !(p[i].may_replace & (1u << j)))
                return dt_fail(DT_ERR_USAGE, "%s %s is %s: it would be overwritten", p[i].flag, p[i].path,
                               p[j].role);
            if (!p[j].role && j < i)
                return dt_fail(DT_ERR_USAGE, "%s and %s name the same file (%s): one would overwrite the other",
                               p[j].flag, p[i].flag, p[i].path);
        }
    }
    return DT_OK;
}

/* mkdir -p of path's folder (nothing for a bare file name). */
static dt_status make_parent(const char *flag, const char *path) {
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
        return dt_fail(DT_ERR_USAGE, "%s %s: path too long", flag, path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return DT_OK; /* the current folder, or / */
    *slash = '\0';
    /* Each prefix in turn, as mkdir -p: one that exists (as a folder) is kept. */
    for (char *c = dir + 1;; c++) {
        if (*c != '/' && *c != '\0') continue;
        char was = *c;
        *c = '\0';
        struct stat st;
        if (mkdir(dir, 0755) != 0 && (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
            int err = errno == EEXIST ? ENOTDIR : errno;
            return dt_fail(DT_ERR_IO, "%s %s: cannot create the folder %s: %s", flag, path, dir, strerror(err));
        }
        *c = was;
        if (!was) return DT_OK;
    }
}

dt_status dt_paths_make_parents(const dt_path *p, int n) {
    for (int i = 0; i < n; i++)
        if (p[i].path && !p[i].role) DT_TRY(make_parent(p[i].flag, p[i].path));
    return DT_OK;
}

/* The train run's files: inputs first (their bits are the may_replace
 * masks below), then outputs. */
enum { TRAIN_MODEL, TRAIN_RESUME, TRAIN_WEIGHTS, TRAIN_NPATHS = 7 };

static void train_paths(dt_path p[TRAIN_NPATHS], const dt_job_args *a) {
    const char *resume = a->resume && strcmp(a->resume, "auto") != 0 ? a->resume : NULL;
    const dt_path t[TRAIN_NPATHS] = {
        {"MODEL.cfg", a->model, "the model file", 0},
        {"--resume", resume, "the checkpoint to resume from", 0},
        {"--weights", a->weights, "the checkpoint given to --weights", 0},
        {"--log", a->log, NULL, 0},
        /* --resume F --checkpoint F continues F; --weights F --checkpoint F
         * replaces F with the new run's, as asked. */
        {"--checkpoint", a->ckpt, NULL, 1u << TRAIN_RESUME | 1u << TRAIN_WEIGHTS},
        {"--checkpoint-dir", a->ckpt_dir, NULL, 1u << TRAIN_RESUME},
        {"--timeline", a->timeline, NULL, 0},
    };
    memcpy(p, t, sizeof t);
}

dt_status dt_job_check_path_collisions(const dt_job_args *a) {
    /* The new run's checkpoints would prune it (a later step) or replace it. */
    if (a->weights && a->ckpt_dir && in_directory(a->weights, a->ckpt_dir))
        return dt_fail(DT_ERR_USAGE, "--weights %s is in --checkpoint-dir %s, whose checkpoints this run replaces: "
                       "copy it out, or give another directory", a->weights, a->ckpt_dir);
    dt_path p[TRAIN_NPATHS];
    train_paths(p, a);
    return dt_paths_check(p, TRAIN_NPATHS);
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

dt_status dt_job_check_outputs_writable(const dt_job_args *a) {
    dt_path p[TRAIN_NPATHS];
    train_paths(p, a);
    DT_TRY(dt_paths_make_parents(p, TRAIN_NPATHS));
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
