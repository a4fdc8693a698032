/* Communication plans without MPI: shard ranges, Poseidon's SACP choice
 * against hand-computed byte counts, the servers' layout without SFB
 * layers, the printed plan, and fusion buckets around SFB layers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/plan.h"
#include "testutil.h"

/* Input 16 floats; layer 0 connected 100 (1700 params), layer 1 connected
 * 3 (303 params), layer 2 softmax. */
static const char two_fc[] =
    "[net]\nchannels=1\nheight=4\nwidth=4\nbatch=4\n"
    "[connected]\noutput=100\nactivation=linear\n[connected]\noutput=3\nactivation=linear\n[softmax]\n";

static dt_net *build(const char *text) {
    dt_model_spec spec;
    dt_net *net = NULL;
    CHECK_OK(dt_model_parse_string(&spec, text, "test"));
    CHECK_OK(dt_net_create(&net, &spec, spec.batch, 1));
    return net;
}

static void test_shards(void) {
    size_t lo, hi, prev = 0;
    for (int s = 0; s < 3; s++) { /* 10 over 3: 4, 3, 3 */
        dt_shard_range(10, 3, s, &lo, &hi);
        CHECK(lo == prev && hi - lo == (s == 0 ? 4u : 3u));
        prev = hi;
    }
    CHECK(prev == 10);
}

static void test_bytes(void) {
    /* Issue 5's formulas, by hand: PS 2 n 4; ring allreduce 4 (P-1)/P n 4;
     * SFB 2 K (P-1) (M + N) 4. */
    CHECK_CLOSE(dt_dense_bytes(DT_MODE_PS_SYNC, 1700, 2, NULL), 13600, 0, 0);
    CHECK_CLOSE(dt_dense_bytes(DT_MODE_ALLREDUCE, 1700, 4, NULL), 20400, 0, 0);
    CHECK_CLOSE(dt_dense_bytes(DT_MODE_ALLREDUCE, 1700, 1, NULL), 0, 0, 0);
    CHECK_CLOSE(dt_sfb_bytes(100, 16, 4, 2), 3712, 0, 0);
    CHECK_CLOSE(dt_sfb_bytes(100, 16, 4, 8), 25984, 0, 0);
    CHECK_CLOSE(dt_sfb_bytes(3, 100, 4, 2), 3296, 0, 0);
}

static void test_sacp(dt_net *net) {
    dt_comm_plan p;
    /* ps-sync, P = 2, K = 4: layer 0 13600 vs 3712 -> sfb; layer 1 2424 vs 3296 -> usual. */
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_PS_SYNC, DT_SFB_AUTO, 2, 4, NULL));
    CHECK(p.sfb[0] == 1 && p.sfb[1] == 0 && p.sfb[2] == 0 && p.nsfb == 1);
    CHECK_CLOSE(p.dense_bytes[1], 2424, 0, 0);
    CHECK_CLOSE(dt_comm_plan_bytes(&p), 3712 + 2424, 0, 0);
    /* The servers hold layer 1 only. */
    CHECK(p.ps_offset[0] == 0 && p.ps_offset[1] == 0 && p.ps_offset[2] == 303 && p.ps_n == 303);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    if (f) {
        dt_comm_plan_write(f, &p, net);
        fclose(f);
        CHECK(strstr(text, "layer 0 connected") && strstr(text, "usual     0.014 MB  sfb    0.004 MB  -> sfb"));
        CHECK(strstr(text, "layer 1 connected") && strstr(text, "usual     0.002 MB  sfb    0.003 MB  -> usual"));
        CHECK(strstr(text, "0.006 MB per worker per step"));
    }
    free(text);
    dt_comm_plan_free(&p);
    /* P = 8: layer 0's factors cost 25984 > 13600 -> usual everywhere. */
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_PS_SYNC, DT_SFB_AUTO, 8, 4, NULL));
    CHECK(p.nsfb == 0 && p.ps_n == net->nparams);
    dt_comm_plan_free(&p);
    /* allreduce P = 4: layer 0 20400 vs 11136 -> sfb. */
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_ALLREDUCE, DT_SFB_AUTO, 4, 4, NULL));
    CHECK(p.sfb[0] == 1 && p.sfb[1] == 0);
    dt_comm_plan_free(&p);
    /* --sfb takes every connected layer; one worker never exchanges anything. */
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_ALLREDUCE, DT_SFB_ALL, 2, 4, NULL));
    CHECK(p.sfb[0] == 1 && p.sfb[1] == 1 && p.ps_n == 0);
    dt_comm_plan_free(&p);
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_ALLREDUCE, DT_SFB_ALL, 1, 4, NULL));
    CHECK(p.nsfb == 0);
    dt_comm_plan_free(&p);
}

static void test_buckets(dt_net *net) {
    dt_comm_plan p;
    dt_bucket b[8];
    /* No SFB, one fused bucket: everything, ready at layer 0. */
    int n = dt_bucket_plan(b, 8, net, NULL, 1 << 20);
    CHECK(n == 1 && b[0].lo == 0 && b[0].hi == net->nparams && b[0].ready_layer == 0 && !b[0].sfb);
    /* Layer 0 SFB: the open bucket (layer 1) closes before it. */
    CHECK_OK(dt_comm_plan_create(&p, net, DT_MODE_PS_SYNC, DT_SFB_AUTO, 2, 4, NULL));
    n = dt_bucket_plan(b, 8, net, &p, 1 << 20);
    CHECK(n == 2);
    CHECK(b[0].lo == 1700 && b[0].hi == 2003 && b[0].ready_layer == 1 && !b[0].sfb);
    CHECK(b[1].lo == 0 && b[1].hi == 1700 && b[1].ready_layer == 0 && b[1].sfb);
    /* Buckets of 100 floats split layer 1 (303 = 100 + 100 + 100 + 3). */
    n = dt_bucket_plan(b, 8, net, &p, 100);
    CHECK(n == 5 && b[3].lo == 1700 && b[3].hi == 1703 && b[4].sfb);
    CHECK(dt_bucket_plan(b, 2, net, &p, 100) == -1);
    /* Without SFB, the 103-float tail of layer 1 (split by 200-float buckets)
     * is a bucket of its own, not filled up from layer 0. */
    dt_bucket many[16];
    n = dt_bucket_plan(many, 16, net, NULL, 200);
    CHECK(n == 11 && many[0].lo == 1803 && many[0].hi == 2003 && many[0].ready_layer == 1);
    CHECK(many[1].lo == 1700 && many[1].hi == 1803 && many[1].ready_layer == 1);
    CHECK(many[2].lo == 1500 && many[2].hi == 1700 && many[2].ready_layer == 0);
    CHECK(many[10].lo == 0 && many[10].hi == 100);
    dt_comm_plan_free(&p);
}

int main(void) {
    test_shards();
    test_bytes();
    dt_net *net = build(two_fc);
    if (net) {
        test_sacp(net);
        test_buckets(net);
    }
    dt_net_free(net);
    return dt_test_finish("test_plan");
}
