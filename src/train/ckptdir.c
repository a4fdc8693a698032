#include "dtrain/ckptdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "dtrain/mem.h"

static dt_status join(char *buf, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(buf, cap, "%s/%s", dir, name) >= cap)
        return dt_fail(DT_ERR_USAGE, "--checkpoint-dir %s: path too long", dir);
    return DT_OK;
}

dt_status dt_ckptdir_prepare(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT || mkdir(dir, 0755) != 0)
            return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot create: %s", dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        return dt_fail(DT_ERR_USAGE, "--checkpoint-dir %s: exists and is not a directory", dir);
    }
    char probe[4096];
    DT_TRY(join(probe, sizeof probe, dir, ".dtrain-write-test"));
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot write in it: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return DT_OK;
}

dt_status dt_ckptdir_step_path(char *buf, size_t cap, const char *dir, long step) {
    char name[64];
    snprintf(name, sizeof name, "step-%ld.ckpt", step);
    return join(buf, cap, dir, name);
}

dt_status dt_ckptdir_best_path(char *buf, size_t cap, const char *dir) { return join(buf, cap, dir, "best.ckpt"); }

/* N of a "step-N.ckpt" name, or -1. */
static long step_of_name(const char *name) {
    if (strncmp(name, "step-", 5) != 0 || name[5] < '0' || name[5] > '9') return -1;
    char *end;
    errno = 0;
    long n = strtol(name + 5, &end, 10);
    return errno == 0 && strcmp(end, ".ckpt") == 0 ? n : -1;
}

/* The step numbers of D's step-N.ckpt files, newest first, in *steps
 * (owned by the caller). */
static dt_status list_steps(const char *dir, long **steps, int *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return dt_fail(DT_ERR_IO, "%s: cannot read the checkpoint directory: %s", dir, strerror(errno));
    int cap = 0;
    dt_status s = DT_OK;
    for (struct dirent *e; s == DT_OK && (e = readdir(d));) {
        long k = step_of_name(e->d_name);
        if (k < 0) continue;
        if (*n == cap) {
            long *grown = realloc(*steps, sizeof(long) * (size_t)(cap = cap ? 2 * cap : 16));
            if (!grown) s = dt_fail(DT_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
            else *steps = grown;
        }
        if (s == DT_OK) (*steps)[(*n)++] = k;
    }
    closedir(d);
    for (int i = 1; s == DT_OK && i < *n; i++) /* insertion sort, newest first */
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            long x = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = x;
        }
    return s;
}

dt_status dt_ckptdir_commit(const char *dir, long step, int keep) {
    char target[64], tmp[4096], latest[4096];
    snprintf(target, sizeof target, "step-%ld.ckpt", step);
    DT_TRY(join(tmp, sizeof tmp, dir, "latest.tmp"));
    DT_TRY(join(latest, sizeof latest, dir, "latest"));
    unlink(tmp); /* left by a run killed here */
    if (symlink(target, tmp) != 0)
        return dt_fail(DT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    if (rename(tmp, latest) != 0) {
        dt_status s = dt_fail(DT_ERR_IO, "%s: cannot rename %s over it: %s", latest, tmp, strerror(errno));
        unlink(tmp);
        return s;
    }
    DT_TRY(dt_sync_dir_of(latest));
    long *steps;
    int n;
    DT_TRY(list_steps(dir, &steps, &n));
    dt_status s = DT_OK;
    /* Newest first: the keep newest up to this step stay; older ones go,
     * and so do newer ones (a future abandoned when a run resumed from an
     * older checkpoint than its last). */
    for (int i = 0, kept = 0; i < n; i++) {
        if (steps[i] <= step && kept < keep) {
            kept++;
            continue;
        }
        char old[4096];
        if ((s = dt_ckptdir_step_path(old, sizeof old, dir, steps[i])) != DT_OK) break;
        if (unlink(old) != 0 && errno != ENOENT) {
            s = dt_fail(DT_ERR_IO, "%s: cannot remove: %s", old, strerror(errno));
            break;
        }
    }
    free(steps);
    return s;
}

dt_status dt_ckptdir_newest(const char *dir, dt_ckptdir_try_fn try_one, dt_ckptdir_skip_fn skipped, void *ctx,
                            char *chosen, size_t cap) {
    long *steps;
    int n;
    DT_TRY(list_steps(dir, &steps, &n));
    /* latest's target first: it is the newest one written whole. */
    char link[256], path[4096];
    DT_TRY(join(path, sizeof path, dir, "latest"));
    ssize_t len = readlink(path, link, sizeof link - 1);
    long first = -1;
    if (len > 0) {
        link[len] = '\0';
        first = step_of_name(link);
    }
    dt_status s = dt_fail(DT_ERR_IO, "%s: no checkpoint in it (no step-N.ckpt)", dir);
    for (int i = -1; i < n; i++) {
        long k = i < 0 ? first : steps[i];
        if (k < 0 || (i >= 0 && k == first)) continue;
        if ((s = dt_ckptdir_step_path(path, sizeof path, dir, k)) != DT_OK) break;
        if ((s = try_one(path, ctx)) == DT_OK) {
            snprintf(chosen, cap, "%s", path);
            break;
        }
        if (s == DT_ERR_USAGE) break; /* a whole file this run cannot continue: older ones cannot either */
        if (skipped) skipped(path, dt_last_error(), ctx);
    }
    free(steps);
    return s;
}

/* ---- one owner ----------------------------------------------------------- */

dt_status dt_ckptdir_lock(const char *dir, int *fd_out) {
    char path[4096], owner[512] = "";
    DT_TRY(join(path, sizeof path, dir, ".lock"));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot open %s: %s", dir, path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        ssize_t got = err == EWOULDBLOCK ? pread(fd, owner, sizeof owner - 1, 0) : -1;
        close(fd);
        if (err != EWOULDBLOCK)
            return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot lock %s: %s", dir, path, strerror(err));
        owner[got > 0 ? got : 0] = '\0';
        owner[strcspn(owner, "\n")] = '\0';
        return dt_fail(DT_ERR_USAGE, "--checkpoint-dir %s is in use by another run (%s; %s): give another "
                       "directory, or wait for that run to end", dir, owner[0] ? owner : "owner unknown", path);
    }
    /* The lock is this process's until it ends (the kernel drops it then,
     * so a killed run leaves no lock behind); the file says whose it is. */
    char host[256] = "?", when[32] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    int n = snprintf(owner, sizeof owner, "host %s, pid %ld, started %s\n", host, (long)getpid(), when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, owner, (size_t)n, 0) != n) {
        int err = errno;
        close(fd);
        return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot write %s: %s", dir, path, strerror(err));
    }
    *fd_out = fd;
    return DT_OK;
}

/* ---- room for what it keeps --------------------------------------------- */

/* Bytes of the checkpoints D holds now (step-N.ckpt, best.ckpt): the room
 * they take is reused as newer ones replace them. */
static uint64_t bytes_kept(const char *dir) {
    uint64_t sum = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        if ((step_of_name(e->d_name) >= 0 || strcmp(e->d_name, "best.ckpt") == 0) &&
            join(path, sizeof path, dir, e->d_name) == DT_OK && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    }
    closedir(d);
    return sum;
}

static double mb(uint64_t bytes) { return (double)bytes / 1e6; }

dt_status dt_ckptdir_check_space(const char *dir, uint64_t ckpt_bytes, int *keep, int fewer) {
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return dt_fail(DT_ERR_IO, "--checkpoint-dir %s: cannot read its file system's free space: %s", dir,
                       strerror(errno));
    uint64_t room = (uint64_t)fs.f_bavail * fs.f_frsize + bytes_kept(dir);
    /* At the peak: keep step files, the next one being written, best.ckpt. */
    uint64_t need = (uint64_t)(*keep + 2) * ckpt_bytes;
    if (room >= need) return DT_OK;
    long fits = ckpt_bytes ? (long)(room / ckpt_bytes) - 2 : 0;
    if (fewer && fits >= 1) {
        *keep = (int)fits;
        return DT_OK;
    }
    return dt_fail(DT_ERR_USAGE, "--checkpoint-dir %s: its file system has room for %.1f MB of checkpoints, and "
                   "keeping --keep %d of %.1f MB needs %.1f MB (%d, the one being written and best.ckpt); %s", dir,
                   mb(room), *keep, mb(ckpt_bytes), mb(need), *keep,
                   fits >= 1 ? "free space, give a smaller --keep, or --keep-fewer to keep as many as fit"
                             : "not even one fits beside the one being written and best.ckpt: free space or give "
                               "another directory");
}
