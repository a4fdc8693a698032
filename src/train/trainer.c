/* The training loop shared by every mode (see train.h). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "dtrain/mem.h"
#include "dtrain/train.h"
#include "report.h"
#include "trainer_impl.h"
#include "trainset.h"

dt_net *dt_trainer_net(dt_trainer *t) { return t->net; }
float *dt_trainer_residual(dt_trainer *t) { return t->residual; }

dt_status dt_trainer_all_residuals(dt_trainer *t, float **out) {
    if (!t->all_residuals) {
        size_t n;
        DT_TRY(dt_mul_size(&n, (size_t)t->opts->workers, t->net->nparams, "residuals for a checkpoint"));
        DT_TRY(dt_alloc_floats(&t->all_residuals, n, "residuals for a checkpoint"));
    }
    *out = t->all_residuals;
    return DT_OK;
}
float *dt_trainer_opt_state(dt_trainer *t) { return t->opt_state; }
void dt_trainer_bind_opt_state(dt_trainer *t, float *state) {
    dt_free(t->own_opt_state);
    t->own_opt_state = NULL;
    t->opt_state = state;
}
const dt_optim *dt_trainer_optim(const dt_trainer *t) { return t->optim; }
size_t dt_trainer_opt_floats(const dt_trainer *t) { return (size_t)dt_optim_nslots(t->optim) * t->net->nparams; }
void dt_trainer_update(dt_trainer *t, float lr, size_t lo, size_t hi) {
    dt_optim_update_net(t->optim, lr, t->step + 1, t->net, t->opt_state, lo, hi);
}
long dt_trainer_step(const dt_trainer *t) { return t->step; }
long dt_trainer_total_steps(const dt_trainer *t) { return t->total_steps; }

/* Whether the workers agree that a stop was asked, before batch b: every
 * EVAL_AGREE batches while b < common (the batches every worker has), one
 * sum over them. */
enum { EVAL_AGREE = 8 };
static dt_status eval_stop_asked(const dt_eval_cfg *c, int b, int common, int *stop) {
    *stop = 0;
    if (!c->stop || b % EVAL_AGREE != 0 || b >= common) return DT_OK;
    double v = atomic_load(c->stop) != 0;
    if (c->workers > 1 && c->sync && c->sync->reduce_sum) DT_TRY(c->sync->reduce_sum(c->sync, &v, 1));
    *stop = v > 0;
    return DT_OK;
}

dt_status dt_evaluate(dt_net *net, const dt_dataset *ds, const dt_eval_cfg *c, double *accuracy, double *loss) {
    const dt_layer *head = &net->layers[net->nlayers - 1];
    /* A classifier hands on its logits (the softmax's input), a hierarchical softmax (tree=) its leaf
     * probabilities (dt_net_scores: what its accuracy ranks); a feature extractor its output. */
    int tree = net->scores != NULL, features = net->classes == 0;
    int from = features ? net->nlayers - 1 : head->spec.inputs[0];
    int width = features ? (int)dt_shape_size(head->out) : net->classes;
    int workers = c->workers > 0 ? c->workers : 1;
    dt_loader_cfg cfg = {.batch = c->batch, .worker = c->worker, .workers = workers, .threads = c->threads,
                         .out = net->input};
    dt_loader *ld;
    DT_TRY(dt_loader_create(&ld, ds, &cfg));
    /* Each worker's share has at least n / workers samples (data.h). */
    const int common = workers > 1 ? ds->n / workers / c->batch : INT_MAX;
    double sums[3] = {0, 0, 0}; /* correct, loss, samples */
    dt_status s = DT_OK;
    for (int b = 0;; b++) {
        int stop;
        s = eval_stop_asked(c, b, common, &stop);
        if (s == DT_OK && stop) s = dt_fail(DT_ERR_INTERRUPTED, "interrupted during the evaluation");
        if (s != DT_OK) break;
        const float *x;
        const dt_label *y;
        int n;
        s = dt_loader_next(ld, &x, &y, &n);
        if (s != DT_OK || n == 0) break;
        dt_net_forward(net, x, n, 0);
        if (c->on_logits) {
            s = c->on_logits(c->ctx, tree ? dt_net_scores(net) : dt_net_output(net, from, x), n, width);
            if (s != DT_OK) break;
        }
        if (features) continue;
        sums[0] += dt_net_count_correct(net, y, n);
        sums[1] += dt_net_loss(net, y, n);
        sums[2] += n;
    }
    dt_loader_free(ld);
    if (s == DT_OK && c->sync && c->sync->reduce_sum) s = c->sync->reduce_sum(c->sync, sums, 3);
    if (s != DT_OK) return s;
    *accuracy = sums[2] > 0 ? sums[0] / sums[2] : 0;
    *loss = sums[2] > 0 ? sums[1] / sums[2] : 0;
    return DT_OK;
}

/* --max-steps past the run's end: the model file's length ends it first,
 * which is said rather than run silently short. */
static void note_run_shorter(dt_trainer *t, long max_steps) {
    char line[768];
    if (t->spec->sched.max_batches > 0)
        snprintf(line, sizeof line, "note: --max-steps %ld is past the run's end: %s's max_batches=%d ends it at step "
                 "%ld", max_steps, t->spec->path, t->spec->sched.max_batches, t->total_steps);
    else
        snprintf(line, sizeof line, "note: --max-steps %ld is past the run's end: it ends at step %ld (%d epoch%s of "
                 "%d steps: %s's epochs=, or --epochs)", max_steps, t->total_steps, t->epochs,
                 t->epochs == 1 ? "" : "s", t->steps_per_epoch, t->spec->path);
    dt_report_line(&t->rep, line);
}

/* What a worker sets up alone, before any message: its report, net,
 * optimiser, data, loader and the checkpoint it resumes. */
static dt_status setup(dt_trainer *t) {
    const dt_train_opts *o = t->opts;
    const dt_model_spec *spec = t->spec;
    DT_TRY(dt_report_open(&t->rep, o->worker == 0 ? o->out : NULL, o->worker == 0 ? o->log_path : NULL,
                          o->quiet, o->progress_tty, o->resume_path != NULL));
    if (o->worker == 0) {
        t->rep.on_record = o->on_record;
        t->rep.record_ctx = o->record_ctx;
    }
    DT_TRY(dt_net_create(&t->net, spec, spec->batch, o->seed));
    t->net->timeline = o->timeline;
    DT_TRY(dt_ckpt_arch_of(&t->arch, t->net));
    DT_TRY(dt_optim_create(&t->optim, &spec->optim, t->net, NULL));
    DT_TRY(dt_alloc_floats(&t->own_opt_state, dt_trainer_opt_floats(t), "optimiser state"));
    t->opt_state = t->own_opt_state;
    if (spec->accumulate > 1) DT_TRY(dt_alloc_floats(&t->acc, t->net->nparams, "accumulated gradients"));
    if (t->sync->keeps_residual) {
        DT_TRY(dt_alloc_floats(&t->residual, t->net->nparams, "top-k residual"));
        /* Worker 0's block for every worker's, now: at a checkpoint hours in
         * a failure would leave the others in the gather. */
        float *all;
        if (o->worker == 0 && (o->checkpoint_path || o->checkpoint_dir)) DT_TRY(dt_trainer_all_residuals(t, &all));
    }
    DT_TRY(dt_trainset_load(&t->train_ds, &t->test_ds, spec, t->net->classes, o, &t->rep));
    const dt_dataset *d = t->train_ds;
    /* A step's batch: --accumulate passes of the net's batch each. */
    dt_loader_cfg lc = {.batch = dt_model_step_batch(spec), .worker = o->worker, .workers = o->workers, .seed = o->seed,
                        .shuffle = 1, .flip = spec->flip, .crop_pad = spec->crop_pad, .erase = spec->erase,
                        .augment = &spec->augment,
                        .out = spec->input,
                        .prefetch = o->prefetch, .threads = o->loader_threads, .timeline = o->timeline};
    DT_TRY(dt_loader_create(&t->loader, t->train_ds, &lc));
    t->steps_per_epoch = dt_loader_steps_per_epoch(t->loader);
    if (t->steps_per_epoch < 1)
        return dt_fail(DT_ERR_USAGE, "--batch %d x --accumulate %d x %d workers is larger than the %d training "
                       "samples", spec->batch, spec->accumulate, o->workers, d->n);
    /* Darknet's max_batches sets the run's length in steps instead of epochs. */
    int max_batches = spec->sched.max_batches;
    t->epochs = max_batches > 0 ? (int)(((long long)max_batches + t->steps_per_epoch - 1) / t->steps_per_epoch)
                                : spec->epochs;
    t->total_steps = max_batches > 0 ? max_batches : (long)spec->epochs * t->steps_per_epoch;
    if (o->max_steps > 0 && o->max_steps < t->total_steps) t->total_steps = o->max_steps;
    if (o->max_steps > t->total_steps) note_run_shorter(t, o->max_steps);
    /* Apart workers share the whole run's budget of steps; one may do
     * up to all of them (the strategy says when the budget is spent). */
    if (t->sync->pace == DT_PACE_APART) t->total_steps *= o->workers;
    /* With --resume auto, the weights start the run only while the
     * directory has no checkpoint (a restarted job continues its own). */
    int resumed = 0;
    if (o->resume_path) DT_TRY(dt_trainer_resume(t, &resumed));
    if (o->weights_path && !resumed)
        DT_TRY(o->partial ? dt_trainer_warm_start_partial(t) : dt_trainer_warm_start(t));
    return dt_trainer_check_ckpt_room(t);
}

/* After the set-up every rank agreed on: the strategy starts (parameters
 * broadcast, servers seeded) and the log gets the run's configuration. */
static dt_status start(dt_trainer *t) {
    const dt_train_opts *o = t->opts;
    const dt_model_spec *spec = t->spec;
    if (t->sync->start) DT_TRY(t->sync->start(t->sync, t));
    /* The learning rate as the large-minibatch recipe made it: the base
     * rate, the factor for the global batch, the scaled rate and warmup. */
    const dt_lr_schedule *ls = &spec->sched;
    const dt_optim_cfg *oc = dt_optim_config(t->optim);
    dt_rec r;
    dt_rec_begin(&r, "config");
    dt_rec_str(&r, "model", spec->path);
    dt_rec_str(&r, "mode", t->sync->name);
    dt_rec_int(&r, "workers", o->workers);
    dt_rec_int(&r, "batch", spec->batch);
    dt_rec_int(&r, "global_batch", dt_model_step_batch(spec) * o->workers);
    dt_rec_int(&r, "epochs", t->epochs);
    dt_rec_int(&r, "steps_per_epoch", t->steps_per_epoch);
    dt_rec_int(&r, "total_steps", t->total_steps);
    dt_rec_uint(&r, "params", t->net->nparams);
    dt_rec_uint(&r, "seed", o->seed);
    dt_rec_str(&r, "dataset", dt_dataset_kind_name(o->dataset));
    dt_rec_int(&r, "train_samples", t->train_ds->n);
    dt_rec_int(&r, "test_samples", t->test_ds->n);
    dt_rec_num(&r, "base_lr", ls->base_lr / ls->lr_scale, 6);
    dt_rec_num(&r, "lr_scale", ls->lr_scale, 6);
    dt_rec_num(&r, "lr", ls->base_lr, 6);
    dt_rec_num(&r, "warmup_epochs", ls->warmup_epochs, 6);
    dt_rec_num(&r, "warmup_start_lr", ls->warmup_start_factor * ls->base_lr, 6);
    dt_rec_str(&r, "schedule", dt_schedule_kind_name(ls->kind));
    dt_rec_int(&r, "accumulate", spec->accumulate);
    dt_rec_str(&r, "optimizer", dt_optim_kind_name(oc->kind));
    const dt_optim_hyper *h;
    for (int i = 0; (h = dt_optim_hyper_at(i)) != NULL; i++) {
        double v = dt_optim_hyper_get(oc, h);
        if (h->integer)
            dt_rec_int(&r, h->key, (long long)v);
        else
            dt_rec_num(&r, h->key, v, 6);
    }
    dt_rec_str(&r, "precision", dt_precision_name(t->net->precision));
    return dt_report_record(&t->rep, &r);
}

/* An evaluation after `done` epochs (a whole number at an epoch's end; the
 * run's last may come part way into one, which is said, not rounded up). */
static dt_status evaluate_and_log(dt_trainer *t, double done, double *acc, double *loss) {
    int epoch = (int)ceil(done - 1e-9), partial = done < epoch - 1e-9;
    double t0 = dt_now();
    dt_verdict v; /* a stop request waits for the next step's agreement */
    DT_TRY(dt_coord_agree(&t->coord, DT_PACE_LOCKSTEP, &v));
    if (t->sync->sync_state) DT_TRY(t->sync->sync_state(t->sync, t, DT_PACE_LOCKSTEP));
    const dt_eval_cfg ec = {.sync = t->sync, .worker = t->opts->worker, .workers = t->opts->workers,
                            .batch = t->spec->batch, .threads = t->opts->loader_threads, .stop = t->opts->stop};
    DT_TRY(dt_evaluate(t->net, t->test_ds, &ec, acc, loss));
    dt_timeline_span(t->opts->timeline, DT_TL_MAIN, DT_TL_CAT_EVAL, "eval", t0, dt_now(),
                     (dt_tl_arg[]){{"epoch", epoch}}, 1);
    dt_rec r;
    dt_rec_begin(&r, "eval");
    dt_rec_int(&r, "step", t->step);
    dt_rec_int(&r, "epoch", epoch);
    dt_rec_fixed(&r, "epochs", done, 3);
    dt_rec_fixed(&r, "test_accuracy", *acc, 4);
    dt_rec_fixed(&r, "test_loss", *loss, 4);
    dt_rec_fixed(&r, "train_loss", t->last_epoch_loss, 4);
    dt_rec_fixed(&r, "elapsed_s", dt_now() - t->rep.start, 2);
    DT_TRY(dt_report_record(&t->rep, &r));
    t->evaluated_step = t->step;
    char line[200], when[64];
    if (partial)
        snprintf(when, sizeof when, "epoch %d (partial: %.3f epochs, step %ld)", epoch, done, t->step);
    else
        snprintf(when, sizeof when, "epoch %d", epoch);
    snprintf(line, sizeof line, "%s: test accuracy %.4f, test loss %.4f, train loss %.4f", when, *acc, *loss,
             t->last_epoch_loss);
    dt_report_line(&t->rep, line);
    /* Every worker is here at the same step (the caller's contract). */
    if (t->opts->checkpoint_dir && *acc > t->best_acc) {
        t->best_acc = *acc;
        DT_TRY(dt_trainer_save_checkpoint(t, DT_PACE_LOCKSTEP, 1));
    }
    return DT_OK;
}

/* The step's last forward/backward pass: its samples, and the summed loss
 * of the passes before it. */
typedef struct {
    const float *x;
    const dt_label *y;
    int n;
    double loss_before;
} last_pass;

/* --accumulate N: the step's batch x (n, input), y (n) is N passes of up
 * to the net's batch. Runs all but the last (forward, loss, backward),
 * keeping their gradients weighted by their share of the n samples in
 * t->acc, and sets acc_weight for the last one, whose backward folds them
 * in layer by layer (fold_and_ready) so that the strategy still sends each
 * layer as soon as it is final, once per step. Without accumulation the
 * last pass is the whole batch. */
static last_pass accumulate_passes(dt_trainer *t, const float *x, const dt_label *y, int n) {
    last_pass p = {x, y, n, 0};
    if (!t->acc) return p;
    dt_net *net = t->net;
    int b = t->spec->batch;
    size_t sample = dt_shape_size(t->spec->input);
    for (int first = 1; p.n > b; first = 0, p.x += (size_t)b * sample, p.y += b, p.n -= b, net->sample_base += b) {
        dt_net_forward(net, p.x, b, 1);
        p.loss_before += dt_net_loss(net, p.y, b);
        dt_net_backward(net, p.x, b, NULL, NULL);
        float wgt = (float)b / (float)n;
        for (size_t i = 0; i < net->nparams; i++) t->acc[i] = (first ? 0.0f : t->acc[i]) + wgt * net->grads[i];
    }
    t->acc_weight = (float)p.n / (float)n;
    if (p.n == n) memset(t->acc, 0, sizeof(float) * net->nparams); /* one pass: nothing earlier */
    return p;
}

/* dt_grad_ready_fn of the last pass: layer's gradient becomes the step's
 * (its own weighted, plus the earlier passes'), then goes to the strategy. */
static void fold_and_ready(void *ctx, int layer) {
    dt_trainer *t = ctx;
    dt_net *net = t->net;
    for (size_t i = net->param_offset[layer]; i < net->param_offset[layer + 1]; i++)
        net->grads[i] = t->acc_weight * net->grads[i] + t->acc[i];
    if (t->sync->grad_ready) t->sync->grad_ready(t->sync->ctx, layer);
}

/* Forward and backward of a step's batch (its passes), each layer's
 * gradient handed to the strategy as it becomes final; the batch's summed
 * loss to *loss. A non-finite loss goes to the coordinator. */
static dt_status forward_backward(dt_trainer *t, const float *x, const dt_label *y, int n, int epoch, double *loss) {
    dt_net *net = t->net;
    /* This worker's batch in the step's global batch (the loader's sharding). */
    net->sample_base = (uint64_t)t->opts->worker * (uint64_t)dt_model_step_batch(t->spec);
    last_pass p = accumulate_passes(t, x, y, n);
    dt_net_forward(net, p.x, p.n, 1);
    *loss = p.loss_before + dt_net_loss(net, p.y, p.n);
    if (!isfinite(*loss))
        DT_TRY(dt_coord_loss_diverged(&t->coord, isnan(*loss) ? "loss is NaN" : "loss is infinite", t->step + 1,
                                      epoch + 1));
    if (t->acc)
        dt_net_backward(net, p.x, p.n, fold_and_ready, t);
    else
        dt_net_backward(net, p.x, p.n, t->sync->grad_ready, t->sync->ctx);
    return DT_OK;
}

/* A finished step of n samples and summed loss `loss` that took step_s
 * seconds counted: the trainer's totals, and the strategy's measurements
 * of it, which are returned and reset. */
static dt_sync_stats count_step(dt_trainer *t, int n, double loss, double step_s) {
    t->train_time += step_s;
    t->images += n;
    t->step++;
    t->steps_run++;
    t->loss_sum += loss;
    dt_trainer_track_loss(t, loss / n);
    t->loss_count += n;
    dt_sync *s = t->sync;
    dt_sync_stats st = s->stats;
    memset(&s->stats, 0, sizeof s->stats);
    s->stats.server_cpu_share = -1;
    t->comm.comm_s += st.comm_s;
    t->comm.wait_s += st.wait_s;
    t->comm.bytes_sent += st.bytes_sent;
    t->comm.bytes_recv += st.bytes_recv;
    t->lag_sum += st.lag;
    if (st.lag > t->lag_max) t->lag_max = st.lag;
    t->done = st.done;
    return st;
}

/* The step record of the step just counted (now: when it ended). */
static dt_status log_step(dt_trainer *t, int epoch, double mean_loss, float lr, double step_s, double now,
                          const dt_sync_stats *st) {
    dt_rec r;
    dt_rec_begin(&r, "step");
    dt_rec_int(&r, "step", t->step);
    dt_rec_int(&r, "epoch", epoch);
    dt_rec_fixed(&r, "loss", mean_loss, 5);
    dt_rec_num(&r, "lr", lr, 6);
    dt_rec_fixed(&r, "step_s", step_s, 5);
    dt_rec_fixed(&r, "elapsed_s", now - t->rep.start, 4);
    dt_rec_fixed(&r, "compute_s", step_s - st->wait_s, 5);
    dt_rec_fixed(&r, "comm_s", st->comm_s, 5);
    dt_rec_fixed(&r, "comm_wait_s", st->wait_s, 5);
    dt_rec_uint(&r, "bytes_sent", st->bytes_sent);
    dt_rec_uint(&r, "bytes_recv", st->bytes_recv);
    dt_rec_fixed(&r, "lag", st->lag, 0);
    dt_rec_fixed(&r, "version", st->version, 0);
    return dt_report_record(&t->rep, &r);
}

/* One optimiser step on this worker's next batch: forward, backward, the
 * strategy's step (end_step owns the update), the log. */
static dt_status train_step(dt_trainer *t, const float *x, const dt_label *y, int n, int epoch) {
    dt_sync *s = t->sync;
    float lr = t->lr = (float)dt_lr_at(&t->spec->sched, t->step, t->steps_per_epoch);
    double t0 = dt_now(), loss;
    if (s->begin_step) DT_TRY(s->begin_step(s, t, lr));
    DT_TRY(forward_backward(t, x, y, n, epoch, &loss));
    double t_end = dt_now();
    DT_TRY(s->end_step(s, t, lr));
    double now = dt_now();
    dt_timeline *tl = t->opts->timeline;
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_UPDATE, "end_step", t_end, now, NULL, 0);
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_STEP, "step", t0, now, (dt_tl_arg[]){{"step", t->step + 1}}, 1);
    dt_sync_stats st = count_step(t, n, loss, now - t0);
    return log_step(t, epoch, loss / n, lr, now - t0, now, &st);
}

/* SIGINT/SIGTERM agreed on: a checkpoint (collective when here is
 * DT_PACE_LOCKSTEP), the servers told to stop, DT_ERR_INTERRUPTED. */
static dt_status stop_run(dt_trainer *t, dt_pace here) {
    DT_TRY(dt_trainer_save_checkpoint(t, here, 0));
    DT_TRY(dt_coord_end(&t->coord));
    const dt_train_opts *o = t->opts;
    int wrote = o->worker == 0 && t->good_step == t->step && (o->checkpoint_path || o->checkpoint_dir);
    return dt_fail(DT_ERR_INTERRUPTED, "interrupted at step %ld%s", t->step, wrote ? "; checkpoint written" : "");
}

/* --checkpoint-every's checkpoint of this step; at an epoch's last step it
 * waits for the evaluation that comes next (every lockstep worker does
 * alike), so that a run restarted from it does not evaluate that epoch
 * again. */
static dt_status periodic_checkpoint(dt_trainer *t) {
    int epoch, pos;
    dt_loader_position(t->loader, &epoch, &pos);
    if (pos == t->steps_per_epoch && t->sync->pace == DT_PACE_LOCKSTEP && t->step < t->total_steps) {
        t->ckpt_after_eval = 1;
        return DT_OK;
    }
    return dt_trainer_save_checkpoint(t, t->sync->pace, 0);
}

/* This worker's next batch x (n, input), y (n); n = 0: the epoch is over. */
static dt_status load_batch(dt_trainer *t, const float **x, const dt_label **y, int *n) {
    const dt_train_opts *o = t->opts;
    double t0 = dt_now();
    DT_TRY(dt_loader_next(t->loader, x, y, n));
    if (*n)
        dt_timeline_span(o->timeline, DT_TL_MAIN, DT_TL_CAT_DATA, o->prefetch ? "wait for batch" : "load batch", t0,
                         dt_now(), NULL, 0);
    return DT_OK;
}

/* The end of epoch `epoch` (0-based): its train loss kept, and (lockstep)
 * its evaluation, then the checkpoint --checkpoint-every held back for it. */
static dt_status end_epoch(dt_trainer *t, int epoch, double *acc, double *test_loss) {
    t->last_epoch_loss = t->loss_count ? t->loss_sum / (double)t->loss_count : 0;
    t->loss_sum = 0;
    t->loss_count = 0;
    /* Apart workers evaluate once, at the end; a run resumed from the
     * checkpoint written after this epoch's evaluation (its end) does not
     * repeat it. */
    if (t->sync->pace == DT_PACE_APART || t->evaluated_step == t->step) return DT_OK;
    dt_status s = evaluate_and_log(t, epoch + 1, acc, test_loss);
    if (s == DT_ERR_INTERRUPTED) return stop_run(t, DT_PACE_LOCKSTEP); /* agreed by every worker */
    DT_TRY(s);
    if (t->ckpt_after_eval) DT_TRY(dt_trainer_save_checkpoint(t, DT_PACE_LOCKSTEP, 0));
    t->ckpt_after_eval = 0;
    return DT_OK;
}

/* The progress line after a step at position pos of epoch `epoch` (at once
 * when SIGUSR1 asked for one). */
static void show_progress(dt_trainer *t, int epoch, int pos) {
    const dt_train_opts *o = t->opts;
    double ips = t->train_time > 0 ? (double)t->images / t->train_time : 0;
    double eta = ips > 0 ? (double)(t->total_steps - t->step) * dt_model_step_batch(t->spec) / ips : 0;
    int asked = o->progress_request && atomic_exchange(o->progress_request, 0);
    dt_report_progress(&t->rep, epoch, t->epochs, pos + 1, t->steps_per_epoch,
                       t->loss_count ? t->loss_sum / (double)t->loss_count : 0, t->lr, ips * o->workers, eta, asked);
}

/* After the last step (or an apart worker's leaving): the workers meet,
 * then the last evaluation and checkpoint, and the run ends together. */
static dt_status end_run(dt_trainer *t, double *acc, double *test_loss) {
    if (t->loss_count) t->last_epoch_loss = t->loss_sum / (double)t->loss_count;
    dt_verdict v;
    DT_TRY(dt_coord_meet(&t->coord, &v));
    if (v == DT_STOP) return stop_run(t, DT_PACE_LOCKSTEP);
    if (t->evaluated_step != t->step) {
        int epoch, pos;
        dt_loader_position(t->loader, &epoch, &pos);
        dt_status s = evaluate_and_log(t, epoch + (double)pos / t->steps_per_epoch, acc, test_loss);
        if (s == DT_ERR_INTERRUPTED) return stop_run(t, DT_PACE_LOCKSTEP); /* agreed by every worker */
        DT_TRY(s);
    }
    DT_TRY(dt_trainer_save_checkpoint(t, DT_PACE_LOCKSTEP, 0));
    return dt_coord_end(&t->coord);
}

/* The loop: the coordinator's verdict, load, then a step (forward,
 * backward, the strategy's step, log) or an epoch's end; until the run's
 * last step, the strategy's done (apart workers' budget) or a verdict to
 * stop or leave. */
static dt_status run_loop(dt_trainer *t, double *acc, double *test_loss) {
    const dt_train_opts *o = t->opts;
    while (t->step < t->total_steps && !t->done) {
        int epoch, pos;
        dt_loader_position(t->loader, &epoch, &pos);
        dt_verdict v;
        DT_TRY(dt_coord_step(&t->coord, t->step, &v));
        if (v == DT_LEAVE || v == DT_FINISH) break;
        if (v == DT_STOP) return stop_run(t, t->sync->pace);
        const float *x;
        const dt_label *y;
        int n;
        DT_TRY(load_batch(t, &x, &y, &n));
        if (n == 0) { /* epoch finished */
            DT_TRY(end_epoch(t, epoch, acc, test_loss));
            continue;
        }
        DT_TRY(train_step(t, x, y, n, epoch));
        if (o->checkpoint_every > 0 && t->step % o->checkpoint_every == 0) DT_TRY(periodic_checkpoint(t));
        show_progress(t, epoch, pos);
    }
    return end_run(t, acc, test_loss);
}

static void teardown(dt_trainer *t) {
    dt_loader_free(t->loader);
    dt_dataset_free(t->train_ds);
    dt_dataset_free(t->test_ds);
    dt_free(t->own_opt_state);
    dt_free(t->acc);
    dt_free(t->residual);
    dt_free(t->all_residuals);
    dt_optim_free(t->optim);
    dt_net_free(t->net);
    dt_ckpt_arch_free(&t->arch);
}

/* The summary record: the last line of the output and of the log. */
static dt_status report_summary(dt_trainer *t, const dt_train_summary *sum) {
    const dt_sync *sync = t->sync;
    dt_rec r;
    dt_rec_begin(&r, "summary");
    dt_rec_fixed(&r, "test_accuracy", sum->test_accuracy, 4);
    dt_rec_fixed(&r, "train_loss", sum->train_loss, 4);
    dt_rec_int(&r, "steps", t->step);
    dt_rec_fixed(&r, "epochs", sum->epochs, 3);
    dt_rec_fixed(&r, "images_per_sec", sum->images_per_sec, 1);
    dt_rec_fixed(&r, "wall_s", sum->wall_s, 2);
    dt_rec_str(&r, "mode", sync->name);
    dt_rec_int(&r, "workers", t->opts->workers);
    dt_rec_int(&r, "global_batch", dt_model_step_batch(t->spec) * t->opts->workers);
    dt_rec_fixed(&r, "comm_overlap", sum->comm_overlap, 3);
    dt_rec_fixed(&r, "comm_wait_share", t->train_time > 0 ? t->comm.wait_s / t->train_time : 0, 4);
    dt_rec_fixed(&r, "bytes_per_step", sum->bytes_per_step, 0);
    if (sum->has_staleness) {
        dt_rec_fixed(&r, "server_cpu_share", sync->stats.server_cpu_share, 3);
        dt_rec_fixed(&r, "staleness_mean", sum->staleness_mean, 3);
        dt_rec_fixed(&r, "staleness_max", sum->staleness_max, 0);
        dt_rec_int(&r, "max_clock_gap", sum->max_clock_gap);
        dt_rec_int(&r, "server_nice", sync->stats.server_nice);
    }
    if (sync->plan_bytes > 0) dt_rec_fixed(&r, "plan_bytes_per_step", sync->plan_bytes, 0);
    dt_rec_str(&r, "precision", dt_precision_name(t->net->precision));
    return dt_report_summary(&t->rep, &r);
}

/* The run's summary, over every worker, into *sum and the summary record. */
static dt_status summarise(dt_trainer *t, double acc, double test_loss, dt_train_summary *sum) {
    dt_sync *sync = t->sync;
    int workers = t->opts->workers;
    double done[2] = {(double)t->images, (double)t->steps_run};
    if (workers > 1) DT_TRY(sync->reduce_sum(sync, done, 2));
    t->images = (long)done[0];
    /* Apart workers share the run's steps: the summary counts them
     * as a lockstep run would (all of them over the workers), so
     * --max-steps N reports N (the budget may run over by one step of
     * each other worker in flight). */
    if (sync->pace == DT_PACE_APART) t->step = t->step - t->steps_run + (long)(done[1] / workers);
    sum->test_accuracy = acc;
    sum->test_loss = test_loss;
    sum->train_loss = t->last_epoch_loss;
    sum->steps = t->step;
    /* From the loader's position: steps of a resumed run's first part may
     * have had another global batch (a checkpoint before version 6). */
    int epoch, pos;
    dt_loader_position(t->loader, &epoch, &pos);
    sum->epochs = t->steps_per_epoch ? epoch + (double)pos / t->steps_per_epoch : 0;
    if (sync->pace == DT_PACE_APART) sum->epochs = (double)t->step / t->steps_per_epoch;
    /* All workers' images (apart workers do unequal shares) over
     * this worker's training time. */
    sum->images_per_sec = t->train_time > 0 ? (double)t->images / t->train_time : 0;
    sum->wall_s = dt_now() - t->rep.start;
    sum->comm_overlap = t->comm.comm_s > 0 ? 1.0 - fmin(t->comm.wait_s / t->comm.comm_s, 1.0) : 0;
    sum->bytes_per_step =
        t->steps_run ? (double)(t->comm.bytes_sent + t->comm.bytes_recv) / (double)t->steps_run : 0;
    sum->has_staleness = sync->stats.server_cpu_share >= 0;
    sum->staleness_mean = t->steps_run ? t->lag_sum / (double)t->steps_run : 0;
    sum->staleness_max = t->lag_max;
    sum->max_clock_gap = sync->stats.max_clock_gap;
    sum->ended_early = t->coord.finished_early;
    return report_summary(t, sum);
}

dt_status dt_train_run(const dt_model_spec *spec, const dt_train_opts *opts, dt_sync *sync,
                       dt_train_summary *summary) {
    dt_trainer t;
    memset(&t, 0, sizeof t);
    t.spec = spec;
    t.opts = opts;
    t.best_acc = -1;
    t.good_step = t.skipped_step = t.saved_step = t.evaluated_step = -1;
    t.sync = sync;
    dt_coord_init(&t.coord, sync, &t, opts->stop, opts->finish, opts->workers);
    sync->stats.server_cpu_share = -1;
    memset(summary, 0, sizeof *summary);
    double acc = 0, test_loss = 0;
    dt_status s = setup(&t);
    if (opts->agree_setup) s = opts->agree_setup(opts->agree_ctx, s);
    if (s == DT_OK) s = start(&t);
    if (s == DT_OK) s = run_loop(&t, &acc, &test_loss);
    if (s == DT_OK) s = summarise(&t, acc, test_loss, summary);
    if (s == DT_OK && t.skipped_step >= 0)
        s = dt_fail(DT_ERR_NUMERIC, "training exploded: the checkpoint at step %ld was not written (see the log); "
                    "the last good checkpoint is at step %ld", t.skipped_step, t.good_step);
    dt_status c = dt_report_close(&t.rep);
    if (s == DT_OK) s = c;
    /* Its blocks its own: a strategy's shared window goes with the strategy. */
    if ((s == DT_OK || s == DT_ERR_INTERRUPTED) && opts->trained && (c = dt_net_own_blocks(t.net)) == DT_OK) {
        *opts->trained = t.net;
        t.net = NULL;
    }
    if (s == DT_OK && c != DT_OK) s = c;
    teardown(&t);
    return s;
}
