/* `--weights CK --partial`: a model takes
 * the layers it shares with another model's checkpoint (fine-tuning a new
 * head on a trained trunk, as PyTorch's load_state_dict(strict=False) and
 * Darknet's partial do). Layers are paired by position: layer i of the
 * model with layer i of the checkpoint; a pair loads when kind, input and
 * output shapes and the counts of weights, biases and state are equal. The
 * other layers keep the initialisation of a fresh run. */
#include <stdio.h>
#include <string.h>

#include "dtrain/darknet_weights.h"
#include "dtrain/mem.h"
#include "trainer_impl.h"

static const char *kind_name(uint32_t kind) {
    const dt_layer_ops *ops = dt_layer_ops_of((dt_layer_kind)kind);
    return ops ? ops->name : "?";
}

/* "16x14x14" */
static const char *shape_text(char *buf, size_t cap, const uint32_t s[3]) {
    snprintf(buf, cap, "%ux%ux%u", s[0], s[1], s[2]);
    return buf;
}

/* Why layer i of the model does not take entry e of the checkpoint ("" when it does). */
static const char *mismatch(const dt_ckpt_layer *mine, const dt_ckpt_layer *e, char *buf, size_t cap) {
    char a[40], b[40];
    if (!e) snprintf(buf, cap, "the checkpoint has no layer here");
    else if (e->kind != mine->kind) snprintf(buf, cap, "the checkpoint's is [%s]", kind_name(e->kind));
    else if (memcmp(e->in, mine->in, sizeof e->in) != 0)
        snprintf(buf, cap, "its input is %s here, %s in the checkpoint", shape_text(a, sizeof a, mine->in),
                 shape_text(b, sizeof b, e->in));
    else if (memcmp(e->out, mine->out, sizeof e->out) != 0)
        snprintf(buf, cap, "its output is %s here, %s in the checkpoint", shape_text(a, sizeof a, mine->out),
                 shape_text(b, sizeof b, e->out));
    else if (e->nw != mine->nw || e->nb != mine->nb || e->nstate != mine->nstate)
        snprintf(buf, cap, "%llu+%llu parameters here, %llu+%llu in the checkpoint",
                 (unsigned long long)mine->nw, (unsigned long long)mine->nb, (unsigned long long)e->nw,
                 (unsigned long long)e->nb);
    else buf[0] = '\0';
    return buf;
}

/* The checkpoint's own sizes must cover its table (a file that passed its
 * CRC but was written by a buggy writer must not make us read past it). */
static dt_status check_table(const dt_ckpt_file *f, const char *path) {
    uint64_t np = 0, ns = 0;
    for (int j = 0; j < f->arch.nlayers; j++) {
        const dt_ckpt_layer *e = &f->arch.layers[j];
        /* each count within what is left, so that no sum can wrap */
        if (e->nw > f->nparams - np || e->nb > f->nparams - np - e->nw || e->nstate > f->nstate - ns) {
            np = f->nparams + 1;
            break;
        }
        np += e->nw + e->nb;
        ns += e->nstate;
    }
    if (np != f->nparams || ns != f->nstate)
        return dt_fail(DT_ERR_FORMAT, "%s: checkpoint layer table sums to %llu parameters and %llu state values, the "
                       "file holds %zu and %zu: corrupt", path, (unsigned long long)np, (unsigned long long)ns,
                       f->nparams, f->nstate);
    return DT_OK;
}

/* Copies every matching layer of f into the net, one table row per layer
 * that has parameters or state; *loaded counts them. */
static void take_layers(dt_trainer *t, const dt_ckpt_file *f, const dt_ckpt_layer *mine, int *loaded) {
    dt_net *net = t->net;
    size_t fp = 0, fs = 0, ms = 0; /* running offsets: file params, file state, model state */
    char why[256], line[512], shape[64];
    dt_report_line(&t->rep, "--partial: layer  kind            output      parameters  from the checkpoint");
    for (int i = 0; i < net->nlayers; i++) {
        const dt_ckpt_layer *e = i < f->arch.nlayers ? &f->arch.layers[i] : NULL;
        mismatch(&mine[i], e, why, sizeof why);
        size_t np = mine[i].nw + mine[i].nb, ns = mine[i].nstate;
        if (!why[0]) {
            memcpy(net->params + net->param_offset[i], f->params + fp, np * sizeof(float));
            memcpy(net->state + ms, f->state + fs, ns * sizeof(float));
            *loaded += np + ns > 0;
        }
        if (np + ns) {
            snprintf(line, sizeof line, "           %5d  %-14s  %-10s  %10zu  %s%s", i, kind_name(mine[i].kind),
                     shape_text(shape, sizeof shape, mine[i].out), np, why[0] ? "skipped: " : "loaded",
                     why[0] ? why : "");
            dt_report_line(&t->rep, line);
        }
        if (e) {
            fp += e->nw + e->nb;
            fs += e->nstate;
        }
        ms += ns;
    }
}

static dt_status log_partial(dt_trainer *t, const char *from, uint64_t step, int loaded, int with_params) {
    char line[4352];
    snprintf(line, sizeof line, "--partial: %d of %d layers with parameters or state taken from %s (step %llu of its "
             "run); the others start as in a fresh run, the optimiser, step and schedule afresh", loaded, with_params,
             from, (unsigned long long)step);
    dt_report_line(&t->rep, line);
    dt_rec r;
    dt_rec_begin(&r, "weights");
    dt_rec_str(&r, "checkpoint", from);
    dt_rec_uint(&r, "its_step", step);
    dt_rec_true(&r, "partial");
    dt_rec_int(&r, "layers_loaded", loaded);
    dt_rec_int(&r, "layers_with_parameters", with_params);
    return dt_report_record(&t->rep, &r);
}

dt_status dt_trainer_warm_start_partial(dt_trainer *t) {
    const char *from = t->opts->weights_path;
    dt_ckpt_meta m;
    dt_ckpt_file f;
    if (dt_darknet_weights_is(from)) /* which record no layers to pair */
        return dt_fail(DT_ERR_USAGE, "--partial: %s is Darknet weights, which --partial cannot pair with this "
                       "model's layers (a dtrain checkpoint records them); --weights without --partial loads it "
                       "whole", from);
    DT_TRY(dt_checkpoint_read_file(from, &m, &f));
    const dt_ckpt_layer *mine = t->arch.layers; /* (net->nlayers) the model's */
    dt_status s = f.arch.nlayers ? check_table(&f, from)
                                 : dt_fail(DT_ERR_USAGE, "--partial: %s has no layer table (written before dtrain "
                                           "kept one, checkpoint version 7); --weights without --partial loads it "
                                           "whole", from);
    int loaded = 0, with_params = 0;
    if (s == DT_OK) {
        take_layers(t, &f, mine, &loaded);
        for (int i = 0; i < t->net->nlayers; i++) with_params += mine[i].nw + mine[i].nb + mine[i].nstate > 0;
        if (loaded == 0)
            s = dt_fail(DT_ERR_USAGE, "--partial: no layer of %s matches the model's layer in its place in kind and "
                        "shapes (nothing to start from)", from);
    }
    if (s == DT_OK) s = log_partial(t, from, m.step, loaded, with_params);
    dt_ckpt_file_free(&f);
    return s;
}
