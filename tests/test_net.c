/* The net's memory estimate: what it counts (exactly, on small nets), that
 * it includes the convolution workspace, that a net over the machine's
 * memory is refused up front with the estimate, and that sizes beyond 64
 * bits are refused rather than wrapped. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/model.h"
#include "dtrain/net.h"
#include "testutil.h"

static double machine_bytes(void) {
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

static int parse(dt_model_spec *m, const char *text) {
    return CHECK_OK(dt_model_parse_string(m, text, "limits.cfg"));
}

/* The estimate is every float the net and its optimiser hold. */
static void test_exact(dt_model_spec *m) {
    size_t bytes = 0;
    /* mlp at batch 64: 3 x 407050 parameters (weights, gradients, momentum),
     * activations (512 + 512 + 10 + 10) x 64, two input-gradient buffers of
     * the largest activation (the 784 input) x 64. */
    if (CHECK_OK(dt_model_parse_file(m, dt_test_src_path("examples/mlp.cfg")))) {
        CHECK_OK(dt_net_estimate(&bytes, m, 64));
        CHECK(bytes == 4 * (3 * 407050 + 1044 * 64 + 2 * 784 * 64));
    }
    /* A 3x3 conv on 1x8x8 at batch 2: 20 parameters, output 2x6x6 (twice:
     * conv and softmax), one gradient buffer of 72 (the conv's output
     * gradient; layer 0 writes no input gradient), and the im2col workspace
     * of one image, 9 x 36 floats. */
    if (parse(m, "[net]\nchannels=1\nheight=8\nwidth=8\n[convolutional]\nfilters=2\nsize=3\n"
                 "activation=linear\n[softmax]\n")) {
        CHECK_OK(dt_net_estimate(&bytes, m, 2));
        CHECK(bytes == 4 * (3 * 20 + 2 * 72 * 2 + 72 * 2 + 9 * 36));
        dt_net *net = NULL;
        CHECK_OK(dt_net_create(&net, m, 2, 1));
        CHECK(net && dt_net_bytes(net) == bytes && net->nws == 9 * 36);
        dt_net_free(net);
    }
    /* Saved values (dropout mask) and state (batch-norm statistics). */
    if (parse(m, "[net]\nchannels=3\nheight=2\nwidth=2\n[batchnorm]\n[dropout]\n[softmax]\n")) {
        CHECK_OK(dt_net_estimate(&bytes, m, 5));
        /* bn: 3 + 3 parameters, 6 state, saved mean and invstd 3 + 3; dropout saved 12 x 5. */
        CHECK(bytes == 4 * (3 * 6 + 6 + 3 * 12 * 5 + (3 + 3) + 12 * 5 + 2 * 12 * 5));
    }
    /* Shape errors come out of the estimate as out of dt_net_create. */
    if (parse(m, "[net]\nchannels=1\nheight=4\nwidth=4\n[convolutional]\nfilters=2\nsize=7\n"
                 "[softmax]\n")) {
        CHECK(dt_net_estimate(&bytes, m, 1) == DT_ERR_CONFIG);
        CHECK(strncmp(dt_last_error(), "limits.cfg:5: ", 14) == 0);
    }
}

/* The message of a refused net: the file, the estimate, the machine. */
static void expect_refused(dt_model_spec *m, int batch) {
    dt_net *net = (dt_net *)1;
    CHECK(dt_net_create(&net, m, batch, 1) == DT_ERR_NOMEM);
    CHECK(net == NULL);
    const char *msg = dt_last_error();
    int ok = strncmp(msg, "limits.cfg: the model needs about ", 34) == 0 &&
             strstr(msg, "GiB at batch") && strstr(msg, "this machine has");
    if (!ok) fprintf(stderr, "message: %s\n", msg);
    CHECK(ok);
}

static void test_refused(dt_model_spec *m) {
    /* 2^48 weights: petabytes, refused before any allocation. */
    if (parse(m, "[net]\nchannels=1\nheight=4096\nwidth=4096\n[connected]\noutput=16777216\n"
                 "[softmax]\n"))
        expect_refused(m, 1);
    /* Activations alone: a 1x4096x4096 input at batch 2^20. */
    if (parse(m, "[net]\nchannels=1\nheight=4096\nwidth=4096\n[activation]\nactivation=relu\n"
                 "[softmax]\n"))
        expect_refused(m, 1 << 20);

    /* The workspace decides: a 3x3 conv over 4096x512x512 has a 36 GiB
     * im2col workspace, while everything else is about 8 GiB. */
    if (!parse(m, "[net]\nchannels=4096\nheight=512\nwidth=512\n[convolutional]\nfilters=1\n"
                  "size=3\npad=1\n[softmax]\n"))
        return;
    size_t bytes = 0;
    CHECK_OK(dt_net_estimate(&bytes, m, 1));
    double ws = 4.0 * 4096 * 9 * 512 * 512;
    CHECK((double)bytes > ws && (double)bytes - ws < 9.0 * (1 << 30));
    if ((double)bytes > 0.9 * machine_bytes())
        expect_refused(m, 1);
    else
        printf("test_net: this machine has %.0f GiB, the workspace case fits; refusal not checked\n",
               machine_bytes() / (1 << 30));
}

/* Sizes beyond 64 bits are an error, never a wrapped small number. */
static void test_overflow(dt_model_spec *m) {
    if (!parse(m, "[net]\nchannels=1\nheight=46340\nwidth=46340\n[activation]\nactivation=relu\n"
                  "[dropout]\n[softmax]\n"))
        return;
    size_t bytes = 1;
    CHECK(dt_net_estimate(&bytes, m, 2147483647) == DT_ERR_NOMEM);
    CHECK(bytes == 0);
    CHECK(strstr(dt_last_error(), "limits.cfg") && strstr(dt_last_error(), "overflow"));
    dt_net *net = (dt_net *)1;
    CHECK(dt_net_create(&net, m, 2147483647, 1) == DT_ERR_NOMEM && net == NULL);
}

int main(void) {
    dt_model_spec *m = malloc(sizeof *m);
    if (!m) return 1;
    test_exact(m);
    test_refused(m);
    test_overflow(m);
    free(m);
    return dt_test_finish("test_net");
}
