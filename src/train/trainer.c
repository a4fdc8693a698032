/* The training loop shared by every mode (see train.h). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "dtrain/json.h"
#include "dtrain/mem.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"
#include "report.h"
#include "trainer_impl.h"
#include "trainset.h"

dt_net *dt_trainer_net(dt_trainer *t) { return t->net; }
float *dt_trainer_residual(dt_trainer *t) { return t->residual; }

dt_status dt_trainer_all_residuals(dt_trainer *t, float **out) {
    if (!t->all_residuals) {
        size_t n;
        DT_TRY(dt_mul_size(&n, (size_t)t->opts->world, t->net->nparams, "residuals for a checkpoint"));
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

dt_status dt_evaluate(dt_net *net, const dt_dataset *ds, dt_sync *sync, int rank, int world,
                      int batch, int threads, dt_logits_fn on_logits, void *ctx, double *accuracy,
                      double *loss) {
    const dt_layer *head = &net->layers[net->nlayers - 1];
    /* A classifier hands on its logits (the softmax's input); a feature extractor its output. */
    int features = net->classes == 0, from = features ? net->nlayers - 1 : head->spec.inputs[0];
    int width = features ? (int)dt_shape_size(head->out) : net->classes;
    dt_loader_cfg cfg = {.batch = batch, .rank = rank, .world = world, .threads = threads, .out = net->input};
    dt_loader *ld;
    DT_TRY(dt_loader_create(&ld, ds, &cfg));
    double sums[3] = {0, 0, 0}; /* correct, loss, samples */
    dt_status s = DT_OK;
    for (;;) {
        const float *x;
        const dt_label *y;
        int n;
        s = dt_loader_next(ld, &x, &y, &n);
        if (s != DT_OK || n == 0) break;
        dt_net_forward(net, x, n, 0);
        if (on_logits) {
            s = on_logits(ctx, dt_net_output(net, from, x), n, width);
            if (s != DT_OK) break;
        }
        if (features) continue;
        sums[0] += dt_net_count_correct(net, y, n);
        sums[1] += dt_net_loss(net, y, n);
        sums[2] += n;
    }
    dt_loader_free(ld);
    if (s == DT_OK && sync && sync->reduce_sum) s = sync->reduce_sum(sync, sums, 3);
    if (s != DT_OK) return s;
    *accuracy = sums[2] > 0 ? sums[0] / sums[2] : 0;
    *loss = sums[2] > 0 ? sums[1] / sums[2] : 0;
    return DT_OK;
}

/* Workers that run every step together (allreduce, ps-sync, ps-ssp). */
static int lockstep(const dt_trainer *t) { return t->opts->world > 1 && !t->sync->independent; }

static dt_status diverged(const char *what, long step, int epoch) {
    return dt_fail(DT_ERR_NUMERIC,
                   "training diverged: %s at step %ld (epoch %d); the last checkpoint was "
                   "left as it was; try a lower --lr",
                   what, step, epoch);
}

/* The first sign of divergence on this worker, kept until the workers
 * agree on it. */
void dt_trainer_note_divergence(dt_trainer *t, const char *what, long step, int epoch) {
    if (t->bad_step) return;
    t->bad_step = step;
    t->bad_epoch = epoch;
    t->bad_what = what;
}

/* Peers or servers expect every step this worker starts to be finished:
 * lockstep workers, and any worker of parameter servers (a server waits
 * for the gradients of a step it was told of, and for each worker's stop). */
static int finishes_steps(const dt_trainer *t) { return lockstep(t) || t->sync->finish; }

/* A non-finite loss seen here (this worker's or, agreed, another's): the
 * servers are told to stop like at the end of a run, so that they end and
 * the job (or the sweep's next trial) is not left waiting for them. Every
 * worker returns here together, so the job can end without MPI_Abort. */
static dt_status end_diverged(dt_trainer *t) {
    if (t->sync->finish) DT_TRY(t->sync->finish(t->sync, t));
    if (t->bad_step) return diverged(t->bad_what, t->bad_step, t->bad_epoch);
    return dt_fail(DT_ERR_NUMERIC,
                   "training diverged: another worker's loss or parameters became NaN or infinite by step %ld; "
                   "the last checkpoint was left as it was; try a lower --lr", t->step);
}

/* Independent workers with peers (ps-async and kin on 2+ workers): each
 * steps on its own, so a stop request or a divergence on one is not seen
 * by the others at once; instead of stopping alone (leaving the others
 * without it in the end-of-run collectives) it trains no more and they all
 * meet after their last step (run_loop), where they stop together. */
static int meets_at_end(const dt_trainer *t) { return !lockstep(t) && t->opts->world > 1; }

/* This worker's flags for an agreement: v[0] a stop was asked
 * (SIGINT/SIGTERM, or a server passed one on), v[1] a divergence seen. */
static void local_flags(const dt_trainer *t, double v[2]) {
    v[0] = (t->opts->stop && atomic_load(t->opts->stop)) || t->sync->stop_requested;
    v[1] = t->bad_step > 0 || t->diverging;
}

/* Acts on agreed flags v (summed, or a group's maximum): a divergence ends
 * the run (or, for a worker that meets the others at the end, its
 * training); *stop (may be NULL) says whether a stop was asked. */
static dt_status act_on_agreement(dt_trainer *t, const double v[2], int together, int *stop) {
    if (v[1] > 0 && !together && meets_at_end(t)) {
        t->diverging = t->done = 1;
    } else if (v[1] > 0) {
        /* A divergence is seen by every worker of the reduction here, at once. */
        if (together) t->sync->ended_together = 1;
        return end_diverged(t);
    }
    if (stop) *stop = v[0] > 0;
    return DT_OK;
}

/* Workers must stop together: one that stopped alone would leave the
 * others waiting in the next collective for ever. So a stop request
 * (SIGINT/SIGTERM) and a divergence on any worker are agreed on in one
 * small reduction: lockstep workers every 10 steps (off the hot path),
 * and every worker before every evaluation and checkpoint (so none holds
 * diverged parameters), over all workers when `all` (every worker is at
 * this point: lockstep, or independent ones at the end of the run).
 * Otherwise an independent worker decides alone at every step, or with the
 * peers of its worker group (agree_stop; a divergence wins over a stop
 * request), and one that saw a divergence trains no more (done) and meets
 * the others at the end: they follow soon, as their next parameters hold
 * its non-finite gradient. stop may be NULL (the request is then seen at
 * the next agreement). A periodic agreement still open is finished first
 * and counts. */
dt_status dt_trainer_agree(dt_trainer *t, int *stop, int all) {
    double v[2], open[2] = {0, 0};
    local_flags(t, v);
    int together = lockstep(t) || (all && t->opts->world > 1);
    if (t->agree_due >= 0) { /* the started one first, as every worker does */
        DT_TRY(t->sync->reduce_sum_finish(t->sync, open, 2));
        t->agree_due = -1;
    }
    if (together) {
        DT_TRY(t->sync->reduce_sum(t->sync, v, 2));
    } else if (t->sync->agree_stop) {
        int flags = (v[0] > 0) | (v[1] > 0) << 1; /* reduced by MAX: 2 or 3 if any peer diverged */
        DT_TRY(t->sync->agree_stop(t->sync, &flags));
        v[0] = flags == 1 || flags == 3;
        v[1] = flags >= 2;
    }
    v[0] += open[0];
    v[1] += open[1];
    return act_on_agreement(t, v, together, stop);
}

/* Lockstep workers up to sync->lead steps apart (ps-ssp) agree every 10
 * steps without waiting for each other: each starts the sum at step 10k
 * and finishes it min(lead + 1, 10) steps later. With lead < 10 the
 * staleness bound has made every worker start it by then (a worker's reply
 * for clock c needs every worker's clock c - lead delivered); with more, a
 * worker over 10 steps ahead waits there for the others to reach 10k.
 * Every worker acts on it at that same step. A blocking sum pulled
 * ps-ssp's workers back into step every 10 steps (docs/CLUSTER.md). An
 * evaluation or checkpoint before then finishes it in dt_trainer_agree, which counts
 * a divergence at once and a stop request at the next agreement (the flag
 * stays set). */
static dt_status agree_periodically(dt_trainer *t, int *stop) {
    if (t->sync->lead == 0 || !t->sync->reduce_sum_start)
        return t->step % 10 == 0 ? dt_trainer_agree(t, stop, 0) : DT_OK;
    if (t->agree_due == t->step) {
        double v[2];
        DT_TRY(t->sync->reduce_sum_finish(t->sync, v, 2));
        t->agree_due = -1;
        DT_TRY(act_on_agreement(t, v, 1, stop));
        if (*stop) return DT_OK;
    }
    if (t->step % 10 != 0) return DT_OK;
    double v[2];
    local_flags(t, v);
    DT_TRY(t->sync->reduce_sum_start(t->sync, v, 2));
    t->agree_due = t->step + (t->sync->lead < 9 ? t->sync->lead + 1 : 10);
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
    DT_TRY(dt_report_open(&t->rep, o->rank == 0 ? o->out : NULL, o->rank == 0 ? o->log_path : NULL,
                          o->quiet, o->progress_tty, o->resume_path != NULL));
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
        if (o->rank == 0 && (o->checkpoint_path || o->checkpoint_dir)) DT_TRY(dt_trainer_all_residuals(t, &all));
    }
    DT_TRY(dt_trainset_load(&t->train_ds, &t->test_ds, spec, t->net->classes, o, &t->rep));
    const dt_dataset *d = t->train_ds;
    /* A step's batch: --accumulate passes of the net's batch each. */
    dt_loader_cfg lc = {.batch = dt_model_step_batch(spec), .rank = o->rank, .world = o->world, .seed = o->seed,
                        .shuffle = 1, .flip = spec->flip, .crop_pad = spec->crop_pad, .erase = spec->erase,
                        .augment = &spec->augment,
                        .out = spec->input,
                        .prefetch = o->prefetch, .threads = o->loader_threads, .timeline = o->timeline};
    DT_TRY(dt_loader_create(&t->loader, t->train_ds, &lc));
    t->steps_per_epoch = dt_loader_steps_per_epoch(t->loader);
    if (t->steps_per_epoch < 1)
        return dt_fail(DT_ERR_USAGE, "--batch %d x --accumulate %d x %d workers is larger than the %d training "
                       "samples", spec->batch, spec->accumulate, o->world, d->n);
    /* Darknet's max_batches sets the run's length in steps instead of epochs. */
    int max_batches = spec->sched.max_batches;
    t->epochs = max_batches > 0 ? (int)(((long long)max_batches + t->steps_per_epoch - 1) / t->steps_per_epoch)
                                : spec->epochs;
    t->total_steps = max_batches > 0 ? max_batches : (long)spec->epochs * t->steps_per_epoch;
    if (o->max_steps > 0 && o->max_steps < t->total_steps) t->total_steps = o->max_steps;
    if (o->max_steps > t->total_steps) note_run_shorter(t, o->max_steps);
    /* Independent workers share the whole run's budget of steps; one may do
     * up to all of them (the strategy says when the budget is spent). */
    if (t->sync->independent) t->total_steps *= o->world;
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
    char json[2048], model[1024];
    dt_json_escape(model, sizeof model, spec->path);
    /* The learning rate as the large-minibatch recipe made it: the base
     * rate, the factor for the global batch, the scaled rate and warmup. */
    const dt_lr_schedule *ls = &spec->sched;
    const dt_optim_cfg *oc = dt_optim_config(t->optim);
    snprintf(json, sizeof json,
             "{\"event\":\"config\",\"model\":\"%s\",\"mode\":\"%s\",\"workers\":%d,\"batch\":%d,"
             "\"global_batch\":%d,\"epochs\":%d,\"steps_per_epoch\":%d,\"total_steps\":%ld,"
             "\"params\":%zu,\"seed\":%llu,\"dataset\":\"%s\",\"train_samples\":%d,\"test_samples\":%d,"
             "\"base_lr\":%.6g,\"lr_scale\":%.6g,\"lr\":%.6g,\"warmup_epochs\":%.6g,"
             "\"warmup_start_lr\":%.6g,\"schedule\":\"%s\",\"accumulate\":%d,\"optimizer\":\"%s\","
             "\"momentum\":%.6g,\"decay\":%.6g,\"nesterov\":%d,\"beta1\":%.6g,\"beta2\":%.6g,\"eps\":%.6g,"
             "\"trust_coefficient\":%.6g,\"exclude_bias_bn\":%d,\"precision\":\"%s\"}",
             model, t->sync->name, o->world, spec->batch, dt_model_step_batch(spec) * o->world, t->epochs,
             t->steps_per_epoch, t->total_steps, t->net->nparams, (unsigned long long)o->seed,
             dt_dataset_kind_name(o->dataset), t->train_ds->n, t->test_ds->n, ls->base_lr / ls->lr_scale,
             ls->lr_scale, ls->base_lr, ls->warmup_epochs, ls->warmup_start_factor * ls->base_lr,
             dt_schedule_kind_name(ls->kind), spec->accumulate, dt_optim_kind_name(oc->kind), oc->momentum,
             oc->decay, oc->nesterov, oc->beta1, oc->beta2, oc->eps, oc->trust, oc->exclude,
             dt_precision_name(t->net->precision));
    return dt_report_log(&t->rep, json);
}

/* An evaluation after `done` epochs (a whole number at an epoch's end; the
 * run's last may come part way into one, which is said, not rounded up). */
static dt_status evaluate_and_log(dt_trainer *t, double done, double *acc, double *loss) {
    int epoch = (int)ceil(done - 1e-9), partial = done < epoch - 1e-9;
    double t0 = dt_now();
    DT_TRY(dt_trainer_agree(t, NULL, 1));
    if (t->sync->sync_state) DT_TRY(t->sync->sync_state(t->sync, t, 1));
    DT_TRY(dt_evaluate(t->net, t->test_ds, t->sync, t->opts->rank, t->opts->world, t->spec->batch,
                       t->opts->loader_threads, NULL, NULL, acc, loss));
    dt_timeline_span(t->opts->timeline, DT_TL_MAIN, DT_TL_CAT_EVAL, "eval", t0, dt_now(),
                     (dt_tl_arg[]){{"epoch", epoch}}, 1);
    char json[256];
    snprintf(json, sizeof json,
             "{\"event\":\"eval\",\"step\":%ld,\"epoch\":%d,\"epochs\":%.3f,\"test_accuracy\":%.4f,"
             "\"test_loss\":%.4f,\"train_loss\":%.4f,\"elapsed_s\":%.2f}",
             t->step, epoch, done, *acc, *loss, t->last_epoch_loss, dt_now() - t->rep.start);
    DT_TRY(dt_report_log(&t->rep, json));
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
        DT_TRY(dt_trainer_save_checkpoint(t, 1, 1));
    }
    return DT_OK;
}

/* --straggle / --slow-worker: sleep inside the step, as a slow or
 * interrupted machine would; drawn from (seed, rank, step). */
static void straggle(const dt_train_opts *o, long step) {
    double ms = 0;
    if (o->slow_ms > 0 && o->world_rank == o->slow_rank) ms += o->slow_ms;
    if (o->straggle_p > 0) {
        dt_rng r = dt_rng_seed(dt_hash3(o->seed, (uint64_t)o->world_rank, (uint64_t)step ^ 0x57a9));
        if (dt_rng_uniform(&r) < o->straggle_p) ms += o->straggle_ms;
    }
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
    double t0 = dt_now();
    nanosleep(&ts, NULL);
    dt_timeline_span(o->timeline, DT_TL_MAIN, DT_TL_CAT_WAIT, "straggler sleep", t0, dt_now(), NULL, 0);
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

/* One optimiser step on this worker's next batch. */
static dt_status train_step(dt_trainer *t, const float *x, const dt_label *y, int n, int epoch) {
    dt_net *net = t->net;
    dt_sync *s = t->sync;
    float lr = t->lr = (float)dt_lr_at(&t->spec->sched, t->step, t->steps_per_epoch);
    double t0 = dt_now();
    straggle(t->opts, t->step);
    if (s->begin_step) DT_TRY(s->begin_step(s, t, lr));
    /* This worker's batch in the step's global batch (the loader's sharding). */
    net->sample_base = (uint64_t)t->opts->rank * (uint64_t)dt_model_step_batch(t->spec);
    last_pass p = accumulate_passes(t, x, y, n);
    dt_net_forward(net, p.x, p.n, 1);
    double loss = p.loss_before + dt_net_loss(net, p.y, p.n);
    if (!isfinite(loss)) {
        const char *what = isnan(loss) ? "loss is NaN" : "loss is infinite";
        if (!finishes_steps(t)) return diverged(what, t->step + 1, epoch + 1);
        /* The peers are entering this step's collectives, or the servers
         * expect its gradients: finish it (the non-finite gradient reaches
         * every worker's parameters, so independent workers diverge too)
         * and stop at the next agreement. */
        dt_trainer_note_divergence(t, what, t->step + 1, epoch + 1);
    }
    if (t->acc)
        dt_net_backward(net, p.x, p.n, fold_and_ready, t);
    else
        dt_net_backward(net, p.x, p.n, s->grad_ready, s->ctx);
    double t_end = dt_now();
    DT_TRY(s->end_step(s, t, lr));
    double now = dt_now(), dt = now - t0;
    dt_timeline *tl = t->opts->timeline;
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_UPDATE, "end_step", t_end, now, NULL, 0);
    dt_timeline_span(tl, DT_TL_MAIN, DT_TL_CAT_STEP, "step", t0, now, (dt_tl_arg[]){{"step", t->step + 1}}, 1);
    t->train_time += dt;
    t->images += n;
    t->step++;
    t->steps_run++;
    t->loss_sum += loss;
    dt_trainer_track_loss(t, loss / n);
    t->loss_count += n;
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
    char json[448];
    snprintf(json, sizeof json,
             "{\"event\":\"step\",\"step\":%ld,\"epoch\":%d,\"loss\":%.5f,\"lr\":%.6g,\"step_s\":%.5f,"
             "\"elapsed_s\":%.4f,\"compute_s\":%.5f,\"comm_s\":%.5f,\"comm_wait_s\":%.5f,"
             "\"bytes_sent\":%llu,\"bytes_recv\":%llu,\"lag\":%.0f,\"version\":%.0f}",
             t->step, epoch, loss / n, lr, dt, now - t->rep.start, dt - st.wait_s, st.comm_s, st.wait_s,
             (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_recv, st.lag, st.version);
    return dt_report_log(&t->rep, json);
}

/* SIGINT/SIGTERM agreed on: a checkpoint (collective when all), the
 * servers told to stop, DT_ERR_INTERRUPTED. */
static dt_status stop_run(dt_trainer *t, int all) {
    DT_TRY(dt_trainer_save_checkpoint(t, all, 0));
    if (t->sync->finish) DT_TRY(t->sync->finish(t->sync, t));
    t->sync->ended_together = 1;
    int wrote = t->opts->rank == 0 && t->good_step == t->step && (t->opts->checkpoint_path || t->opts->checkpoint_dir);
    return dt_fail(DT_ERR_INTERRUPTED, "interrupted at step %ld%s", t->step, wrote ? "; checkpoint written" : "");
}

/* --checkpoint-every's checkpoint of this step; at an epoch's last step it
 * waits for the evaluation that comes next (every lockstep worker does
 * alike), so that a run restarted from it does not evaluate that epoch
 * again. */
static dt_status periodic_checkpoint(dt_trainer *t) {
    int epoch, pos;
    dt_loader_position(t->loader, &epoch, &pos);
    if (pos == t->steps_per_epoch && !t->sync->independent && t->step < t->total_steps) {
        t->ckpt_after_eval = 1;
        return DT_OK;
    }
    return dt_trainer_save_checkpoint(t, !t->sync->independent, 0);
}

static dt_status run_loop(dt_trainer *t, double *acc, double *test_loss) {
    const dt_train_opts *o = t->opts;
    while (t->step < t->total_steps && !t->done) {
        int epoch, pos;
        dt_loader_position(t->loader, &epoch, &pos);
        int stop = 0;
        DT_TRY(lockstep(t) ? agree_periodically(t, &stop) : dt_trainer_agree(t, &stop, 0));
        if (t->diverging || (stop && meets_at_end(t))) break;
        if (stop) return stop_run(t, !t->sync->independent); /* lockstep: every worker at this step */
        const float *x;
        const dt_label *y;
        int n;
        double t0 = dt_now();
        DT_TRY(dt_loader_next(t->loader, &x, &y, &n));
        if (n)
            dt_timeline_span(o->timeline, DT_TL_MAIN, DT_TL_CAT_DATA, o->prefetch ? "wait for batch" : "load batch",
                             t0, dt_now(), NULL, 0);
        if (n == 0) { /* epoch finished */
            t->last_epoch_loss = t->loss_count ? t->loss_sum / (double)t->loss_count : 0;
            t->loss_sum = 0;
            t->loss_count = 0;
            /* Independent workers evaluate once, at the end; a run resumed
             * from the checkpoint written after this epoch's evaluation
             * (its end) does not repeat it. */
            if (t->sync->independent || t->evaluated_step == t->step) continue;
            DT_TRY(evaluate_and_log(t, epoch + 1, acc, test_loss));
            if (t->ckpt_after_eval) DT_TRY(dt_trainer_save_checkpoint(t, 1, 0));
            t->ckpt_after_eval = 0;
            continue;
        }
        DT_TRY(train_step(t, x, y, n, epoch));
        if (o->checkpoint_every > 0 && t->step % o->checkpoint_every == 0) DT_TRY(periodic_checkpoint(t));
        double ips = t->train_time > 0 ? (double)t->images / t->train_time : 0;
        double eta = ips > 0 ? (double)(t->total_steps - t->step) * dt_model_step_batch(t->spec) / ips : 0;
        int asked = o->progress_request && atomic_exchange(o->progress_request, 0); /* SIGUSR1 */
        dt_report_progress(&t->rep, epoch, t->epochs, pos + 1, t->steps_per_epoch,
                           t->loss_count ? t->loss_sum / (double)t->loss_count : 0, t->lr,
                           ips * o->world, eta, asked);
    }
    if (t->loss_count) t->last_epoch_loss = t->loss_sum / (double)t->loss_count;
    if (t->agree_due >= 0) DT_TRY(dt_trainer_agree(t, NULL, 1)); /* no request left open */
    if (meets_at_end(t)) { /* a divergence, a stop request or the end: all of them together */
        int stop = 0;
        DT_TRY(dt_trainer_agree(t, &stop, 1));
        if (stop) return stop_run(t, 1);
    }
    if (t->evaluated_step != t->step) {
        int epoch, pos;
        dt_loader_position(t->loader, &epoch, &pos);
        DT_TRY(evaluate_and_log(t, epoch + (double)pos / t->steps_per_epoch, acc, test_loss));
    }
    DT_TRY(dt_trainer_save_checkpoint(t, 1, 0));
    if (t->sync->finish) DT_TRY(t->sync->finish(t->sync, t));
    t->sync->ended_together = 1;
    return DT_OK;
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

dt_status dt_train_run(const dt_model_spec *spec, const dt_train_opts *opts, dt_sync *sync,
                       dt_train_summary *summary) {
    dt_trainer t;
    memset(&t, 0, sizeof t);
    t.spec = spec;
    t.opts = opts;
    t.best_acc = -1;
    t.good_step = t.skipped_step = t.saved_step = t.agree_due = t.evaluated_step = -1;
    t.sync = sync;
    sync->stats.server_cpu_share = -1;
    memset(summary, 0, sizeof *summary);
    double acc = 0, test_loss = 0;
    dt_status s = setup(&t);
    if (opts->agree_setup) s = opts->agree_setup(opts->agree_ctx, s);
    if (s == DT_OK) s = start(&t);
    if (s == DT_OK) s = run_loop(&t, &acc, &test_loss);
    if (s == DT_OK) {
        double done[2] = {(double)t.images, (double)t.steps_run};
        if (opts->world > 1) s = sync->reduce_sum(sync, done, 2);
        t.images = (long)done[0];
        /* Independent workers share the run's steps: the summary counts them
         * as a lockstep run would (all of them over the workers), so
         * --max-steps N reports N (the budget may run over by one step of
         * each other worker in flight). */
        if (sync->independent) t.step = t.step - t.steps_run + (long)(done[1] / opts->world);
    }
    if (s == DT_OK) {
        summary->test_accuracy = acc;
        summary->test_loss = test_loss;
        summary->train_loss = t.last_epoch_loss;
        summary->steps = t.step;
        /* From the loader's position: steps of a resumed run's first part may
         * have had another global batch (a checkpoint before version 6). */
        int epoch, pos;
        dt_loader_position(t.loader, &epoch, &pos);
        summary->epochs = t.steps_per_epoch ? epoch + (double)pos / t.steps_per_epoch : 0;
        if (sync->independent) summary->epochs = (double)t.step / t.steps_per_epoch;
        /* All workers' images (independent workers do unequal shares) over
         * this worker's training time. */
        summary->images_per_sec = t.train_time > 0 ? (double)t.images / t.train_time : 0;
        summary->wall_s = dt_now() - t.rep.start;
        summary->comm_overlap =
            t.comm.comm_s > 0 ? 1.0 - fmin(t.comm.wait_s / t.comm.comm_s, 1.0) : 0;
        summary->bytes_per_step =
            t.steps_run ? (double)(t.comm.bytes_sent + t.comm.bytes_recv) / (double)t.steps_run : 0;
        char extra_json[256] = "";
        summary->has_staleness = sync->stats.server_cpu_share >= 0;
        summary->staleness_mean = t.steps_run ? t.lag_sum / (double)t.steps_run : 0;
        summary->staleness_max = t.lag_max;
        summary->max_clock_gap = sync->stats.max_clock_gap;
        if (summary->has_staleness)
            snprintf(extra_json, sizeof extra_json,
                     ",\"server_cpu_share\":%.3f,\"staleness_mean\":%.3f,\"staleness_max\":%.0f,"
                     "\"max_clock_gap\":%ld,\"server_nice\":%d",
                     sync->stats.server_cpu_share, summary->staleness_mean, summary->staleness_max,
                     summary->max_clock_gap, sync->stats.server_nice);
        if (sync->plan_bytes > 0) {
            size_t used = strlen(extra_json);
            snprintf(extra_json + used, sizeof extra_json - used, ",\"plan_bytes_per_step\":%.0f",
                     sync->plan_bytes);
        }
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"event\":\"summary\",\"test_accuracy\":%.4f,\"train_loss\":%.4f,\"steps\":%ld,"
                 "\"epochs\":%.3f,\"images_per_sec\":%.1f,\"wall_s\":%.2f,\"mode\":\"%s\",\"workers\":%d,"
                 "\"global_batch\":%d,\"comm_overlap\":%.3f,\"comm_wait_share\":%.4f,\"bytes_per_step\":%.0f%s,"
                 "\"precision\":\"%s\"}",
                 acc, summary->train_loss, t.step, summary->epochs, summary->images_per_sec,
                 summary->wall_s, sync->name, opts->world, dt_model_step_batch(spec) * opts->world,
                 summary->comm_overlap, t.train_time > 0 ? t.comm.wait_s / t.train_time : 0,
                 summary->bytes_per_step, extra_json, dt_precision_name(t.net->precision));
        s = dt_report_summary(&t.rep, json);
    }
    if (s == DT_OK && t.skipped_step >= 0)
        s = dt_fail(DT_ERR_NUMERIC, "training exploded: the checkpoint at step %ld was not written (see the log); "
                    "the last good checkpoint is at step %ld", t.skipped_step, t.good_step);
    dt_status c = dt_report_close(&t.rep);
    if (s == DT_OK) s = c;
    teardown(&t);
    return s;
}
