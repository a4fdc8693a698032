/* Finding and checking the checkpoint a run resumes from (train.h). */
#include <string.h>
#include <sys/stat.h>

#include "dtrain/checkpoint.h"
#include "dtrain/ckptdir.h"
#include "dtrain/train.h"

dt_status dt_resume_find(const dt_train_opts *o, dt_ckptdir_try_fn try_one, dt_ckptdir_skip_fn skipped, void *ctx,
                         char *path, size_t cap) {
    const char *from = o->resume_path;
    int is_auto = strcmp(from, "auto") == 0;
    struct stat st;
    if (!is_auto && (stat(from, &st) != 0 || !S_ISDIR(st.st_mode))) {
        snprintf(path, cap, "%s", from);
        return try_one(from, ctx);
    }
    const char *dir = is_auto ? o->checkpoint_dir : from;
    dt_status s = dt_ckptdir_newest(dir, try_one, skipped, ctx, path, cap);
    if (s == DT_ERR_IO && is_auto && strstr(dt_last_error(), "no checkpoint in it")) {
        path[0] = '\0';
        return DT_OK;
    }
    return s;
}

dt_status dt_resume_check_run(const char *from, const dt_ckpt_meta *m, uint64_t seed, long step_samples) {
    if (m->seed != seed)
        return dt_fail(DT_ERR_USAGE, "--resume %s: checkpoint was written with --seed %llu, this run has --seed %llu",
                       from, (unsigned long long)m->seed, (unsigned long long)seed);
    if (m->step_samples && m->step_samples != (uint64_t)step_samples)
        return dt_fail(DT_ERR_USAGE, "--resume %s: the checkpoint's steps were of %llu samples, this run's are of "
                       "%ld (--batch x --accumulate x workers): a resumed run keeps the global batch (its steps, "
                       "schedule and place in the epoch count in it); on other workers, give --keep-global-batch or a --batch that keeps "
                       "it", from, (unsigned long long)m->step_samples, step_samples);
    return DT_OK;
}

dt_status dt_resume_check_end(const char *from, long step, long total_steps) {
    if (step < total_steps) return DT_OK;
    return dt_fail(DT_ERR_USAGE, "--resume %s: the checkpoint is at step %ld, and this run ends at step %ld "
                   "(--max-steps or --epochs): nothing left to train", from, step, total_steps);
}

typedef struct {
    const dt_net *net;
    dt_ckpt_meta *m;
} verify_ctx;

/* Whole (CRC), then of this model; the arrays are not read. Another
 * model's is read again as the net's, whose refusal names the first layer
 * that differs (nothing is copied into the net). */
static dt_status verify_one(const char *path, void *ctx) {
    verify_ctx *v = ctx;
    DT_TRY(dt_checkpoint_verify(path, v->m));
    if (v->m->shape_hash == v->net->shape_hash) return DT_OK;
    dt_ckpt_arrays a = {0};
    return dt_checkpoint_load_net(path, v->net, v->m, &a);
}

dt_status dt_resume_check(const dt_train_opts *o, const dt_net *net, long step_samples, long last_step) {
    if (!o->resume_path) return DT_OK;
    dt_ckpt_meta m;
    verify_ctx v = {net, &m};
    char from[4096];
    DT_TRY(dt_resume_find(o, verify_one, NULL, &v, from, sizeof from));
    if (!from[0]) return DT_OK;
    DT_TRY(dt_resume_check_run(from, &m, o->seed, step_samples));
    return last_step > 0 ? dt_resume_check_end(from, (long)m.step, last_step) : DT_OK;
}
