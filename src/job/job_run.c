/* The train job on the ranks of a communicator: roles (servers, workers),
 * the agreements before training, the start-up line, the strategy, the
 * trainer (job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/ckptdir.h"
#include "dtrain/job.h"
#include "dtrain/paths.h"
#include "dtrain/setup.h"

/* Flushes (and, when the run allows it, merges) the timeline after the
 * run, which ended with status run; the run's own error stays the one
 * returned, a timeline error after a failed run is added to its message. */
static dt_status close_timeline(dt_timeline *tl, const dt_comm *comm, dt_status run) {
    if (!tl) return run;
    if (run == DT_OK) return dt_comm_timeline_close(tl, comm, run);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    if (dt_comm_timeline_close(tl, comm, run) == DT_OK) return dt_fail(run, "%s", msg);
    return dt_fail(run, "%s (and the timeline: %s)", msg, dt_last_error());
}

/* Every rank reads the same model file, and the checkpoint to resume from
 * fits it (the workers read it; servers get the parameters from worker 0):
 * verdicts every rank shares, so that a wrong file ends the job in order
 * (one message) rather than by one worker's failure aborting all. */
static dt_status check_model(const dt_comm *comm, const dt_job_plan *p) {
    if (comm->size == 1) return DT_OK;
    dt_net *net = NULL;
    /* A net one rank cannot build (its file differs) fails on every rank. */
    dt_status s = dt_comm_agree(comm, dt_net_create(&net, &p->spec, 1, 1));
    if (s != DT_OK) {
        dt_net_free(net);
        return s;
    }
    s = dt_comm_check_model(comm, net->shape_hash, p->model);
    /* The run's last step where it is known before the data set: lockstep
     * modes' --max-steps or max_batches (asynchronous workers share a budget). */
    long last = p->spec.sched.max_batches;
    if (p->opts.max_steps > 0 && (last == 0 || p->opts.max_steps < last)) last = p->opts.max_steps;
    if (dt_mode_is_async(p->dist.mode)) last = 0;
    if (s == DT_OK)
        s = dt_comm_agree(comm, comm->worker >= 0 ? dt_resume_check(&p->opts, net,
                                                                   (long)dt_model_step_batch(&p->spec) *
                                                                       comm->nworkers, last)
                                                 : DT_OK);
    dt_net_free(net);
    return s;
}

/* ", augmentation: ..." of the start-up line (nothing without any). */
static void print_augment(FILE *out, const dt_model_spec *spec) {
    const dt_augment *a = &spec->augment;
    if (!spec->flip && !spec->crop_pad && !a->crop && !a->resized_crop && !dt_augment_distorts(a) && !spec->erase)
        return;
    const char *sep = ", augmentation:";
    if (a->resized_crop)
        fprintf(out, "%s RandomResizedCrop (scale %g..%g, ratio %g..%g)", sep, (double)a->scale[0],
                (double)a->scale[1], (double)a->ratio[0], (double)a->ratio[1]), sep = ",";
    if (spec->flip) fprintf(out, "%s flip", sep), sep = ",";
    if (spec->crop_pad) fprintf(out, "%s crop padded by %d", sep, spec->crop_pad), sep = ",";
    if (a->crop)
        fprintf(out, "%s Darknet crop (shorter side %d..%d, aspect %g, angle %g)", sep, a->min_crop, a->max_crop,
                (double)a->aspect, (double)a->angle), sep = ",";
    if (dt_augment_distorts(a))
        fprintf(out, "%s hue %g, saturation %g, exposure %g", sep, (double)a->hue, (double)a->saturation,
                (double)a->exposure), sep = ",";
    if (spec->erase) fprintf(out, "%s random erasing (p %g)", sep, (double)spec->erase);
}

/* The start-up line: what is trained, on what, and where its learning rate
 * comes from (the recipe's base rate, factor and warmup). */
static void print_start(FILE *out, const dt_job_plan *p, const dt_comm *comm, int nthreads) {
    const dt_model_spec *spec = &p->spec;
    const dt_lr_schedule *ls = &spec->sched;
    fprintf(out, "dtrain: training %s on %s: %d layers, batch %d per worker", spec->path,
            dt_dataset_kind_name(p->opts.dataset), spec->nlayers, spec->batch);
    if (spec->accumulate > 1) fprintf(out, " x %d passes per step", spec->accumulate);
    if (comm->nworkers > 1)
        fprintf(out, " x %d workers = %d global", comm->nworkers, dt_model_step_batch(spec) * comm->nworkers);
    if (ls->max_batches > 0)
        fprintf(out, ", %d steps (max_batches)", ls->max_batches);
    else
        fprintf(out, ", %d epochs", spec->epochs);
    fprintf(out, ", %s, lr %g", dt_optim_kind_name(spec->optim.kind), ls->base_lr / ls->lr_scale);
    if (p->scaling == DT_LR_SCALING_LINEAR)
        fprintf(out, " x %g = %g (linear scaling from base batch %d, ", ls->lr_scale, ls->base_lr, p->base_batch);
    else
        fprintf(out, " (");
    if (ls->warmup_epochs > 0)
        fprintf(out, "warmup %g epochs from %g, then ", ls->warmup_epochs, ls->warmup_start_factor * ls->base_lr);
    if (ls->burn_in > 0) fprintf(out, "burn_in %d steps (power %g), then ", ls->burn_in, ls->power);
    fprintf(out, "%s), %s, %d thread%s, mode %s", dt_schedule_kind_name(ls->kind),
            dt_precision_name(spec->precision), nthreads, nthreads == 1 ? "" : "s", dt_mode_name(p->dist.mode));
    if (dt_mode_is_ps(p->dist.mode)) fprintf(out, " with %d server%s", p->dist.servers, p->dist.servers == 1 ? "" : "s");
    if (dt_mode_info_of(p->dist.mode)->flags & DT_MF_STALENESS) fprintf(out, ", staleness %d", p->dist.staleness);
    if (p->dist.sfb != DT_SFB_OFF) fprintf(out, ", %s", dt_sfb_policy_name(p->dist.sfb));
    if (p->dist.group_size > 1)
        fprintf(out, ", %d groups of %d workers", comm->nworkers / p->dist.group_size, p->dist.group_size);
    char codec[32];
    if (p->dist.codec.kind != DT_GC_NONE)
        fprintf(out, ", gradients as %s", dt_grad_codec_name(&p->dist.codec, codec, sizeof codec));
    print_augment(out, spec);
    fprintf(out, "\n%s", p->notes);
    /* Darknet's [connected] defaults to logistic: squashed logits train
     * worse (cnn: 0.686 against 0.753 test accuracy after 300 steps). */
    if (spec->logistic_head_line)
        fprintf(out, "note: %s:%d: the [connected] before [softmax] has no activation=, so Darknet's default "
                "logistic squashes its logits into (0, 1), which costs accuracy; write activation=linear there for "
                "plain logits (PyTorch's nn.Linear)\n", spec->path, spec->logistic_head_line);
}

/* Whether to redraw a progress bar on out. Under mpirun every rank's
 * output is a pty whatever the user's is, so there only `dtrain launch`
 * knows (DT_PROGRESS_TTY); plain mpirun gets plain lines. */
static int progress_tty(FILE *out) {
    const char *said = getenv("DT_PROGRESS_TTY");
    if (said) return strcmp(said, "1") == 0;
    return !getenv("OMPI_COMM_WORLD_SIZE") && isatty(fileno(out));
}

/* The trainers' set-up (data, the checkpoint's place in an epoch) and the
 * strategy's creation, agreed by every rank: a failure there is everyone's,
 * said once, with no MPI_Abort. Servers agree with DT_OK. */
typedef struct {
    const dt_comm *comm;
    dt_job_plan *plan;
} setup_agreement;

static dt_status agree_setup(void *ctx, dt_status local) {
    setup_agreement *a = ctx;
    dt_status s = dt_comm_agree(a->comm, local);
    a->plan->agreed_failure = s != DT_OK && s != DT_ERR_MPI;
    return s;
}

/* opened: whether this rank's timeline part could be created (a failure is
 * agreed with the set-up's). */
static dt_status run_worker(dt_job_plan *p, const dt_comm *comm, int local_ranks, dt_job_requests *req, FILE *out,
                            dt_train_summary *sum, dt_status opened) {
    setup_agreement agreement = {comm, p};
    if (opened != DT_OK) return agree_setup(&agreement, opened);
    int nthreads = dt_setup_threads(p->threads, local_ranks);
    dt_train_opts *o = &p->opts;
    o->cache_bytes = dt_setup_cache_bytes(p->cache_mb, local_ranks);
    o->progress_tty = out && progress_tty(out);
    o->worker = comm->worker;
    o->workers = comm->nworkers;
    o->stop = &req->stop;
    o->progress_request = &req->progress;
    o->out = comm->worker == 0 ? out : NULL;
    if (!o->quiet && o->out) {
        print_start(o->out, p, comm, nthreads);
        p->dist.plan_out = o->out;
    }
    o->agree_setup = agree_setup;
    o->agree_ctx = &agreement;
    dt_sync *sync = NULL;
    dt_status s = dt_mode_info_of(p->dist.mode)->create(&sync, comm, &p->dist);
    dt_straggle_cfg sc = p->straggle;
    sc.seed = o->seed;
    sc.world_rank = comm->rank;
    sc.timeline = o->timeline;
    if (s == DT_OK) s = dt_sync_straggle_wrap(&sync, &sc);
    if (s == DT_OK)
        s = dt_train_run(&p->spec, o, sync, sum);
    else
        s = agree_setup(&agreement, s);
    o->agree_setup = NULL; /* the plan outlives this frame (sweeps reuse it) */
    o->agree_ctx = NULL;
    s = close_timeline(p->dist.timeline, comm, s);
    if (sync) sync->free(sync); /* before the timeline: its threads record until it is freed */
    return s;
}

/* floats a, n of them, from world rank root to every rank of c, in
 * messages MPI's int counts can hold. */
static dt_status bcast_floats(const dt_comm *c, float *a, size_t n, int root) {
    const size_t chunk = (size_t)1 << 28;
    for (size_t off = 0; off < n; off += chunk) {
        int len = (int)(n - off < chunk ? n - off : chunk);
        DT_TRY(dt_mpi_check(MPI_Bcast(a + off, len, MPI_FLOAT, root, c->world), "the trained model (MPI_Bcast)"));
    }
    return DT_OK;
}

/* The job API's trained model (opts.trained) on every rank, so that a
 * second run or a prediction needs nothing from worker 0: worker 0's final
 * parameters and state, the ones its final checkpoint holds, sent to every
 * rank (a server builds a net for them). Worker 0's rather than a server
 * assembly: the servers hold shards only, and in the modes where workers
 * step apart the workers' own differ. Only when every rank ended with a
 * model (agreed), so that no rank waits for one that failed; a rank that
 * lost its peers (DT_ERR_MPI, DT_ERR_STALLED) cannot agree and keeps what
 * it has. */
static dt_status share_trained(const dt_comm *c, const dt_job_plan *p, dt_status run) {
    if (!p->opts.trained || c->size == 1 || run == DT_ERR_MPI || run == DT_ERR_STALLED) return run;
    dt_net *net = *p->opts.trained;
    dt_status s = run == DT_OK || run == DT_ERR_INTERRUPTED ? DT_OK : run;
    if (s == DT_OK && c->worker < 0) s = dt_net_create(&net, &p->spec, p->spec.batch, 1);
    int mine = s == DT_OK && net, all = 0;
    dt_status a = dt_mpi_check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, c->world), "the trained model");
    if (a == DT_OK && all) a = bcast_floats(c, net->params, net->nparams, c->nservers);
    if (a == DT_OK && all) a = bcast_floats(c, net->state, net->nstate, c->nservers);
    if (c->worker < 0 && a == DT_OK && all) *p->opts.trained = net;
    else if (c->worker < 0) dt_net_free(net);
    return run != DT_OK ? run : a;
}

dt_status dt_job_run(dt_job_plan *p, MPI_Comm world, int local_ranks, dt_job_requests *req, FILE *out,
                     dt_train_summary *sum) {
    dt_comm comm;
    dt_status s = dt_comm_create(&comm, world, p->dist.servers);
    if (s == DT_OK) {
        s = check_model(&comm, p);
        p->agreed_failure = s != DT_OK && s != DT_ERR_MPI; /* the same verdict on every rank */
    }
    /* The recipe needs the global batch, known once the ranks are split. */
    if (s == DT_OK)
        s = dt_lr_scale(&p->spec.sched, p->scaling, p->base_batch,
                        dt_model_step_batch(&p->spec) * comm.nworkers);
    /* Before anything trains, so a bad path stops the run at once: a rank
     * that cannot create its part fails at the set-up agreement, in order. */
    dt_status opened = DT_OK;
    if (s == DT_OK && p->timeline_path) opened = dt_comm_timeline_open(&p->dist.timeline, &comm, p->timeline_path);
    if (opened == DT_ERR_MPI) s = opened;
    p->opts.timeline = p->dist.timeline;
    p->dist.stop = &req->stop;
    if (s == DT_OK && comm.worker < 0) {
        dt_setup_threads(1, local_ranks); /* a server only sums and steps its shard */
        setup_agreement agreement = {&comm, p};
        s = agree_setup(&agreement, opened);
        if (s == DT_OK) s = dt_server_run(&comm, &p->dist, &p->spec);
        s = share_trained(&comm, p, close_timeline(p->dist.timeline, &comm, s));
    } else if (s == DT_OK) {
        s = share_trained(&comm, p, run_worker(p, &comm, local_ranks, req, out, sum, opened));
    }
    dt_timeline_free(p->dist.timeline);
    p->dist.timeline = NULL;
    dt_comm_free(&comm);
    return s;
}

void dt_job_signal_set(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
}

dt_status dt_job_agree(MPI_Comm world, dt_status local) {
    int rank, size;
    if (MPI_Comm_rank(world, &rank) != MPI_SUCCESS || MPI_Comm_size(world, &size) != MPI_SUCCESS)
        return dt_fail(DT_ERR_MPI, "the ranks could not agree on how start-up went (MPI failed)");
    if (size == 1) return local;
    int mine = local == DT_OK ? size : rank, first;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world) != MPI_SUCCESS)
        return dt_fail(DT_ERR_MPI, "the ranks could not agree on how start-up went (MPI failed)");
    if (first == size) return DT_OK;
    struct {
        int status;
        char msg[480];
    } said = {(int)local, ""};
    if (rank == first) snprintf(said.msg, sizeof said.msg, "rank %d: %s", rank, dt_last_error());
    if (MPI_Bcast(&said, (int)sizeof said, MPI_BYTE, first, world) != MPI_SUCCESS)
        return dt_fail(DT_ERR_MPI, "the ranks could not agree on how start-up went (MPI failed)");
    return dt_fail((dt_status)said.status, "%s", said.msg);
}

dt_status dt_job_execute(dt_job_plan *p, const dt_job_args *a, MPI_Comm world, int local_ranks,
                         dt_job_requests *req, FILE *out, dt_train_summary *sum) {
    int rank;
    if (MPI_Comm_rank(world, &rank) != MPI_SUCCESS) return dt_fail(DT_ERR_MPI, "MPI_Comm_rank failed");
    dt_status s = dt_job_check_path_collisions(a);
    /* Worker 0 writes the log and the checkpoints, and owns the directory
     * while it runs (released when the run ends, however it ends). */
    int lock = -1;
    if (s == DT_OK && rank == p->dist.servers) s = dt_job_check_outputs_writable(a);
    if (s == DT_OK && rank == p->dist.servers && a->ckpt_dir) s = dt_ckptdir_lock(a->ckpt_dir, &lock);
    s = dt_job_agree(world, s);
    if (s == DT_OK) {
        s = dt_job_run(p, world, local_ranks, req, out, sum);
    } else if (s != DT_ERR_MPI) {
        p->agreed_failure = 1;
    }
    if (lock >= 0) close(lock);
    return s;
}
