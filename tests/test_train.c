/* The trainer loop: exact resume (N steps, then resume to 2N, equals 2N
 * straight), a diverging run stops with a clear error and keeps the last
 * checkpoint, and a small net learns synthetic data. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"
#include "dtrain/mem.h"
#include "dtrain/train.h"
#include "testutil.h"

/* Conv + batch norm + dropout: every piece of state a resume must restore. */
static const char *model_text =
    "[net]\nbatch=16\nchannels=1\nheight=8\nwidth=8\nlearning_rate=0.05\nmomentum=0.9\n"
    "decay=0.0005\nexclude_bias_bn=0\nepochs=3\npolicy=cosine\nwarmup_epochs=0.01\nflip=1\ncrop_pad=1\n"
    "[convolutional]\nfilters=4\nsize=3\npad=1\nbatch_normalize=1\nactivation=relu\n"
    "[maxpool]\nsize=2\nstride=2\n[dropout]\nprobability=0.2\n[connected]\noutput=10\nactivation=linear\n"
    "[softmax]\n";

static char dir[] = "/tmp/dt_train_XXXXXX";

static dt_status run(const dt_model_spec *spec, long max_steps, const char *ckpt, const char *resume,
                     dt_train_summary *sum) {
    dt_train_opts o;
    memset(&o, 0, sizeof o);
    o.dataset = DT_DATASET_SYNTHETIC;
    o.epochs = spec->epochs;
    o.max_steps = max_steps;
    o.seed = 7;
    o.checkpoint_path = ckpt;
    o.resume_path = resume;
    o.quiet = 1;
    o.workers = 1;
    o.prefetch = 1;
    dt_sync *sync;
    DT_TRY(dt_sync_serial_create(&sync));
    dt_status s = dt_train_run(spec, &o, sync, sum);
    sync->free(sync);
    return s;
}

/* Parameters, state and momentum of a checkpoint as one array. */
static float *load_all(const dt_model_spec *spec, const char *path, size_t *n) {
    dt_net *net;
    if (dt_net_create(&net, spec, spec->batch, 7) != DT_OK) return NULL;
    float *all;
    *n = 2 * net->nparams + net->nstate;
    if (dt_alloc_floats(&all, *n, "test") != DT_OK) return NULL;
    dt_ckpt_arrays a = {all, net->nparams, all + net->nparams, net->nstate,
                        all + net->nparams + net->nstate, net->nparams, 0, NULL, NULL, 0, 0, 0, NULL};
    dt_ckpt_meta m;
    CHECK_OK(dt_checkpoint_load(path, net->shape_hash, &m, &a));
    dt_net_free(net);
    return all;
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    char straight[256], half[256], resumed[256];
    snprintf(straight, sizeof straight, "%s/straight.ckpt", dir);
    snprintf(half, sizeof half, "%s/half.ckpt", dir);
    snprintf(resumed, sizeof resumed, "%s/resumed.ckpt", dir);
    dt_model_spec spec;
    CHECK_OK(dt_model_parse_string(&spec, model_text, "test.cfg"));

    /* Exact resume across an epoch boundary (3750 steps per epoch at 16). */
    const long n = 3760;
    dt_train_summary a, b, c;
    CHECK_OK(run(&spec, 2 * n, straight, NULL, &a));
    CHECK_OK(run(&spec, n, half, NULL, &b));
    CHECK_OK(run(&spec, 2 * n, resumed, half, &c));
    CHECK(a.steps == 2 * n && b.steps == n && c.steps == 2 * n);
    size_t na, nc;
    float *pa = load_all(&spec, straight, &na), *pc = load_all(&spec, resumed, &nc);
    CHECK(pa && pc && na == nc);
    if (pa && pc) CHECK(memcmp(pa, pc, na * sizeof(float)) == 0);
    CHECK_CLOSE(a.test_accuracy, c.test_accuracy, 0, 0);
    /* The synthetic set is learnable: well above chance (0.1) after two tiny
     * epochs, with crop/flip augmentation and dropout on. */
    CHECK(a.test_accuracy > 0.3);
    dt_free(pa);
    dt_free(pc);

    /* Divergence: a huge learning rate gives NaN/inf; the error names the
     * step and the checkpoint written before is untouched. */
    size_t nh;
    float *before = load_all(&spec, half, &nh);
    dt_model_spec hot = spec;
    hot.sched.base_lr = 1e6;
    hot.sched.warmup_epochs = 0;
    dt_train_summary d;
    dt_status s = run(&hot, 200, half, NULL, &d);
    CHECK(s == DT_ERR_NUMERIC);
    CHECK(strstr(dt_last_error(), "at step") != NULL);
    float *after = load_all(&spec, half, &nh);
    CHECK(before && after);
    if (before && after) CHECK(memcmp(before, after, nh * sizeof(float)) == 0);
    dt_free(before);
    dt_free(after);

    /* A checkpoint of another model is refused on resume. */
    dt_model_spec other;
    CHECK_OK(dt_model_parse_string(&other,
                                   "[net]\nchannels=1\nheight=8\nwidth=8\nbatch=16\n"
                                   "[connected]\noutput=10\nactivation=linear\n[softmax]\n", "other.cfg"));
    s = run(&other, 10, NULL, half, &d);
    CHECK(s == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "different model") != NULL);

    unlink(straight);
    unlink(half);
    unlink(resumed);
    rmdir(dir);
    return dt_test_finish("test_train");
}
