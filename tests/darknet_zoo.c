/* Darknet's own classifier cfgs, as Debian's darknet ships them
 * (/usr/share/darknet/cfg, or the folder in DT_DARKNET_CFG), each train two
 * SGD steps at batch 1 on random images (dt_test_train_two_steps: finite
 * losses, parameters moved), read unmodified but for the batch and the
 * rate: 0.001, as vgg-16.cfg's 1e-5 moves its connected layers' weights,
 * whose gradients a batch of one leaves mostly 0, by less than a float's
 * rounding in two steps (weight decay 0.0005 x 1e-5); the cfgs
 * named on the command line, the classifiers of the folder's 28 classifier
 * and feature-extractor cfgs (tests/test_darknet_cfgs.sh checks all 28
 * against Darknet's parser); tests/CMakeLists.txt names them, the fast ones
 * in test_darknet_zoo, the others in test_darknet_zoo_slow (label slow).
 * Exit 77 (skipped) without the folder. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/mem.h"
#include "dtrain/net.h"
#include "dtrain/timer.h"
#include "testutil.h"

int main(int argc, char **argv) {
    const char *dir = getenv("DT_DARKNET_CFG") ? getenv("DT_DARKNET_CFG") : "/usr/share/darknet/cfg";
    if (access(dir, R_OK) != 0) {
        printf("test_darknet_zoo: skipped (no %s: apt-get install darknet)\n", dir);
        return 77;
    }
    dt_model_spec *m = NULL;
    if (!CHECK_OK(dt_alloc_bytes((void **)&m, sizeof *m, "spec"))) return dt_test_finish("test_darknet_zoo");
    for (int a = 1; a < argc; a++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, argv[a]);
        dt_net *net = NULL;
        double t0 = dt_now();
        if (CHECK_OK(dt_model_parse_file(m, path))) {
            m->batch = 1, m->accumulate = 1, m->sched.base_lr = 0.001;
            if (CHECK_OK(dt_net_create(&net, m, 1, 1))) dt_test_train_two_steps(net, m);
        }
        printf("%-24s %6.1f s\n", argv[a], dt_now() - t0);
        fflush(stdout);
        dt_net_free(net);
    }
    dt_free(m);
    return dt_test_finish("test_darknet_zoo");
}
