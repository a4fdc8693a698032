/* What a model file's [net] section means once its keys are read
 * (model_net.h). */
#include "net/model_net.h"

#include <stddef.h>
#include <stdio.h>

#include "dtrain/optim.h"
#include "dtrain/schedule.h"

/* Policy-specific keys: an error with a policy that does not read them (a
 * step_epochs= without policy=step would otherwise be silently ignored),
 * required by some. Sets of policies as bits (1 << dt_schedule_kind). */
#define POLICY(k) (1u << DT_SCHED_##k)
static const struct {
    const char *key;
    unsigned read_by, needed_by;
} policy_keys[] = {{"step_epochs", POLICY(STEP), 0},
                   {"milestones", POLICY(MULTISTEP), POLICY(MULTISTEP)},
                   {"steps", POLICY(STEPS), POLICY(STEPS)},
                   {"scales", POLICY(STEPS), POLICY(STEPS)},
                   {"step", POLICY(STEP) | POLICY(SIGMOID), 0},
                   {"scale", POLICY(STEP), 0}};

/* "step or sigmoid": the names of a set of policies, into buf. */
static const char *policy_names(unsigned set, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < 32 && used < cap; k++)
        if (set & (1u << k))
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? " or " : "",
                                     dt_schedule_kind_name((dt_schedule_kind)k));
    return buf;
}

/* The hyperparameters written in [net] (their lines, for the job's
 * --optimizer), each one the optimiser reads. */
static dt_status check_optimizer_keys(const dt_section *p, dt_model_spec *m) {
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        int line = m->hyper_line[i] = dt_section_key_line(p, h->key);
        if (!line || dt_optim_uses(m->optim.kind, h->key)) continue;
        char who[64];
        dt_optim_users(who, sizeof who, h->key);
        return dt_section_error(p, line, "%s= applies only to optimizer=%s (optimizer is %s)", h->key, who,
                                dt_optim_kind_name(m->optim.kind));
    }
    return DT_OK;
}

/* Darknet's batch=B subdivisions=S: S passes of B/S images per step, which
 * is dtrain's batch=B/S accumulate=S. */
static dt_status apply_subdivisions(const dt_section *p, dt_model_spec *m) {
    int line = dt_section_key_line(p, "subdivisions");
    if (!line) return DT_OK;
    if (dt_section_key_line(p, "accumulate"))
        return dt_section_error(p, line,
                       "subdivisions= and accumulate= both given (Darknet's subdivisions splits batch into "
                       "passes, accumulate repeats it); give one");
    if (m->batch % m->subdivisions != 0)
        return dt_section_error(p, line, "batch=%d is not a multiple of subdivisions=%d", m->batch, m->subdivisions);
    m->batch /= m->subdivisions;
    m->accumulate = m->subdivisions;
    return DT_OK;
}

/* Darknet's schedule keys that go together, and the ones that would mean two
 * things at once. */
static dt_status check_darknet_schedule(const dt_section *p, dt_model_spec *m) {
    const dt_lr_schedule *s = &m->sched;
    int steps = dt_section_key_line(p, "steps"), scales = dt_section_key_line(p, "scales");
    if (steps && s->nsteps != s->nscales)
        return dt_section_error(p, scales, "steps= has %d values and scales= %d; each step needs its scale", s->nsteps,
                       s->nscales);
    if (s->kind == DT_SCHED_POLY && !s->max_batches)
        return dt_section_error(p, dt_section_key_line(p, "policy"), "policy=poly needs max_batches= (its horizon)");
    /* gamma's default is Darknet's 1 (no decay): dtrain's own decaying forms need it given. */
    int own_step = s->kind == DT_SCHED_STEP && dt_section_key_line(p, "step_epochs");
    if ((own_step || s->kind == DT_SCHED_MULTISTEP) && !dt_section_key_line(p, "gamma"))
        return dt_section_error(p, dt_section_key_line(p, "policy"), "policy=%s%s needs gamma= (the factor of each "
                                "decay)", dt_schedule_kind_name(s->kind), own_step ? " with step_epochs=" : "");
    if (dt_section_key_line(p, "power") && s->kind != DT_SCHED_POLY && !dt_section_key_line(p, "burn_in"))
        return dt_section_error(p, dt_section_key_line(p, "power"), "power= applies only to policy=poly and burn_in=");
    if (s->max_batches && dt_section_key_line(p, "epochs"))
        return dt_section_error(p, dt_section_key_line(p, "max_batches"),
                       "max_batches= and epochs= both set the run's length (line %d); give one",
                       dt_section_key_line(p, "epochs"));
    if (dt_section_key_line(p, "burn_in") && dt_section_key_line(p, "warmup_epochs"))
        return dt_section_error(p, dt_section_key_line(p, "burn_in"),
                                "burn_in= and warmup_epochs= are two warmups; give one");
    return DT_OK;
}

/* augment=resized_crop: torchvision's defaults (scale 0.08..1, ratio
 * 3/4..4/3) for the ranges not given, flip on unless flip= is given (the
 * recipe of He et al. and Goyal et al.); Darknet's crop keys and crop_pad=
 * are another crop, and the ranges alone crop nothing. */
static dt_status resolve_resized_crop(const dt_section *p, dt_model_spec *m) {
    dt_augment *a = &m->augment;
    static const char *const own[] = {"crop_scale", "crop_ratio"}, *const other[] = {"min_crop", "max_crop", "angle",
                                                                                     "aspect", "crop_pad"};
    for (size_t i = 0; !a->resized_crop && i < sizeof own / sizeof *own; i++)
        if (dt_section_key_line(p, own[i]))
            return dt_section_error(p, dt_section_key_line(p, own[i]), "%s= is RandomResizedCrop's: it needs "
                                    "augment=resized_crop", own[i]);
    for (size_t i = 0; a->resized_crop && i < sizeof other / sizeof *other; i++)
        if (dt_section_key_line(p, other[i]))
            return dt_section_error(p, dt_section_key_line(p, other[i]), "%s= with augment=resized_crop: give "
                                    "RandomResizedCrop or %s, not both", other[i],
                                    i < 4 ? "Darknet's crop" : "crop_pad");
    if (!a->resized_crop) return DT_OK;
    if (a->scale[1] == 0) a->scale[0] = 0.08f, a->scale[1] = 1.0f;
    if (a->ratio[1] == 0) a->ratio[0] = 3.0f / 4.0f, a->ratio[1] = 4.0f / 3.0f;
    if (!dt_section_key_line(p, "flip")) m->flip = 1;
    return DT_OK;
}

/* Darknet's classifier crops every training image at a random scale and
 * flips half of them; here the crop is on when one of its keys is given
 * (the others then take Darknet's defaults: min_crop = width, max_crop = 2
 * x width), and with it or a colour key, flip defaults to 1. */
static dt_status resolve_augment(const dt_section *p, dt_model_spec *m) {
    dt_augment *a = &m->augment;
    static const char *const crop_keys[] = {"min_crop", "max_crop", "angle", "aspect"};
    for (size_t i = 0; i < sizeof crop_keys / sizeof *crop_keys; i++)
        if (dt_section_key_line(p, crop_keys[i])) a->crop = 1;
    DT_TRY(resolve_resized_crop(p, m));
    if (!a->crop && !dt_augment_distorts(a)) return DT_OK;
    if (!dt_section_key_line(p, "flip")) m->flip = 1;
    if (dt_section_key_line(p, "crop_pad"))
        return dt_section_error(p, dt_section_key_line(p, "crop_pad"),
                                "crop_pad= with Darknet's augmentation (min_crop=, max_crop=, angle=, aspect=, hue=, "
                                "saturation=, exposure=): give Darknet's crop or crop_pad, not both");
    if (!a->crop) return DT_OK;
    if (m->eval_resize)
        return dt_section_error(p, dt_section_key_line(p, "eval_resize"), "eval_resize= with Darknet's crop, whose "
                                "evaluation is its own centre crop of the max_crop square");
    if (!a->min_crop) a->min_crop = m->input.w;
    if (!a->max_crop) a->max_crop = 2 * m->input.w;
    return DT_OK;
}

/* eval_resize= leaves the shorter side at least the input's height and
 * width, so that the centre crop lies inside every resized image. */
static dt_status check_eval_resize(const dt_section *p, dt_model_spec *m) {
    if (m->eval_resize && (m->eval_resize < m->input.h || m->eval_resize < m->input.w))
        return dt_section_error(p, dt_section_key_line(p, "eval_resize"), "eval_resize=%d is shorter than the "
                                "input's %dx%d (the centre crop is taken from the resized image)", m->eval_resize,
                                m->input.h, m->input.w);
    return DT_OK;
}

/* mean= and std= give one value per input channel. */
static dt_status check_channels(const dt_section *p, dt_model_spec *m) {
    const dt_channel_values *v[2] = {&m->mean, &m->std};
    for (int i = 0; i < 2; i++)
        if (v[i]->n && v[i]->n != m->input.c)
            return dt_section_error(p, dt_section_key_line(p, i ? "std" : "mean"), "%s= has %d value%s, the input "
                                    "has %d channel%s (channels=): one per channel", i ? "std" : "mean", v[i]->n,
                                    v[i]->n == 1 ? "" : "s", m->input.c, m->input.c == 1 ? "" : "s");
    return DT_OK;
}

dt_status dt_model_finish_net(const dt_section *p, dt_model_spec *m) {
    DT_TRY(apply_subdivisions(p, m));
    DT_TRY(check_channels(p, m));
    DT_TRY(check_eval_resize(p, m));
    DT_TRY(resolve_augment(p, m));
    dt_lr_schedule *s = &m->sched;
    const char *policy = dt_schedule_kind_name(s->kind);
    /* policy=step: Darknet's (step=, scale= in batches) or dtrain's (step_epochs=, gamma=). */
    int epochs_line = dt_section_key_line(p, "step_epochs");
    int darknet_line = dt_section_key_line(p, "step") ? dt_section_key_line(p, "step") : dt_section_key_line(p, "scale");
    if (s->kind == DT_SCHED_STEP && epochs_line && darknet_line)
        return dt_section_error(p, darknet_line, "policy=step takes Darknet's step= and scale= (in batches) or "
                                "step_epochs= and gamma=, not both (step_epochs= is on line %d)", epochs_line);
    if (s->kind == DT_SCHED_STEP && !epochs_line && s->step_batches == 0)
        return dt_section_error(p, dt_section_key_line(p, "step"), "policy=step needs step= of at least 1 (the "
                                "rate is scale^(batch / step))");
    for (size_t i = 0; i < sizeof policy_keys / sizeof policy_keys[0]; i++) {
        int line = dt_section_key_line(p, policy_keys[i].key);
        unsigned kind = 1u << s->kind;
        if ((policy_keys[i].needed_by & kind) && !line)
            return dt_section_error(p, dt_section_key_line(p, "policy"), "policy=%s needs %s=", policy,
                           policy_keys[i].key);
        char names[64];
        /* A policy from the command line replaced the file's schedule: the
         * file's keys for its own policy are not read. */
        if (line > 0 && dt_section_key_line(p, "policy") < 0) continue;
        if (!(policy_keys[i].read_by & kind) && line)
            return dt_section_error(p, line, "%s= applies only to policy=%s (policy is %s)", policy_keys[i].key,
                                    policy_names(policy_keys[i].read_by, names, sizeof names), policy);
    }
    DT_TRY(check_darknet_schedule(p, m));
    s->total_epochs = m->epochs;
    s->lr_scale = 1;
    return check_optimizer_keys(p, m);
}

