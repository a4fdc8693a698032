/* Trains a small network on images held in this program's memory through
 * libdtrain's job API (include/dtrain.h), then evaluates and predicts.
 *
 *   cc examples/train_from_memory.c $(pkg-config --cflags --libs dtrain) -o train_from_memory
 *   ./train_from_memory [MODE]     (or under mpirun -np 2, -np 3 ... ps-sync)
 * MODE: train's --mode (default serial, or allreduce on several ranks).
 *
 * The images: 10 classes of 1x28x28 bytes, class k a bright band across
 * rows 2k+4 .. 2k+7 over noise. The run stops early, from the record
 * callback, once a step's loss is below 0.05. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dtrain.h>

enum { N_TRAIN = 6000, N_TEST = 1000, SIDE = 28, PIXELS = SIDE * SIDE, CLASSES = 10 };

static const char model[] =
    "[net]\n"
    "batch=50\nchannels=1\nheight=28\nwidth=28\n"
    "learning_rate=0.05\nmomentum=0.9\nepochs=3\npolicy=constant\n"
    "[connected]\noutput=64\nactivation=relu\n"
    "[connected]\noutput=10\nactivation=linear\n"
    "[softmax]\n";

/* n images (n, 1, 28, 28) and their labels, from seed. */
static void make_images(uint8_t *x, int32_t *y, int n, unsigned seed) {
    srand(seed);
    for (int i = 0; i < n; i++) {
        int k = rand() % CLASSES;
        y[i] = k;
        for (int p = 0; p < PIXELS; p++) {
            int row = p / SIDE, band = row >= 2 * k + 4 && row < 2 * k + 8;
            x[(size_t)i * PIXELS + p] = (uint8_t)(band ? 160 + rand() % 96 : rand() % 96);
        }
    }
}

/* The record callback: counts steps, stops once a step's loss is small. */
typedef struct {
    int steps;
} progress;

static int on_record(void *ctx, const char *json) {
    progress *p = ctx;
    if (strncmp(json, "{\"event\":\"step\"", 15) != 0) return 0;
    p->steps++;
    const char *loss = strstr(json, "\"loss\":");
    return loss && atof(loss + 7) < 0.05;
}

static int fail(const char *what) {
    fprintf(stderr, "train_from_memory: %s: %s\n", what, dtrain_last_error());
    dtrain_finalize();
    return 1;
}

int main(int argc, char **argv) {
    uint8_t *x = malloc((size_t)(N_TRAIN + N_TEST) * PIXELS);
    int32_t *y = malloc(sizeof *y * (N_TRAIN + N_TEST));
    float *probs = malloc(sizeof *probs * N_TEST * CLASSES);
    if (!x || !y || !probs) return 1;
    make_images(x, y, N_TRAIN + N_TEST, 7);
    const uint8_t *x_test = x + (size_t)N_TRAIN * PIXELS;
    const int32_t *y_test = y + N_TRAIN;

    dtrain_job *job;
    progress seen = {0};
    if (dtrain_job_create(&job, model) != DTRAIN_OK) return fail("job");
    if ((argc > 1 && dtrain_job_set(job, "mode", argv[1]) != DTRAIN_OK) ||
        dtrain_job_set(job, "seed", "3") != DTRAIN_OK || dtrain_job_set(job, "quiet", NULL) != DTRAIN_OK ||
        dtrain_job_set_arrays(job, DTRAIN_TRAIN, x, DTRAIN_U8, N_TRAIN, 1, SIDE, SIDE, y) != DTRAIN_OK ||
        dtrain_job_set_arrays(job, DTRAIN_TEST, x_test, DTRAIN_U8, N_TEST, 1, SIDE, SIDE, y_test) != DTRAIN_OK ||
        dtrain_job_on_record(job, on_record, &seen) != DTRAIN_OK)
        return fail("options");
    dtrain_role role; /* known before the run: worker 0 (the chief) prints */
    if (dtrain_job_role(job, &role) != DTRAIN_OK) return fail("role");
    if (dtrain_job_run(job) != DTRAIN_OK) return fail("training");
    /* Every rank holds the trained model afterwards, a parameter server too. */
    dtrain_model *m;
    if (dtrain_job_take_model(job, &m) != DTRAIN_OK) return fail("model");
    double accuracy, loss;
    if (dtrain_model_evaluate(m, x_test, DTRAIN_U8, N_TEST, y_test, &accuracy, &loss) != DTRAIN_OK)
        return fail("evaluate");
    if (dtrain_model_predict(m, x_test, DTRAIN_U8, N_TEST, probs) != DTRAIN_OK) return fail("predict");
    int right = 0;
    for (int i = 0; i < N_TEST; i++) {
        int best = 0;
        for (int k = 1; k < CLASSES; k++)
            if (probs[i * CLASSES + k] > probs[i * CLASSES + best]) best = k;
        right += best == y_test[i];
    }
    if (role == DTRAIN_ROLE_CHIEF) /* the records are worker 0's */
        printf("train_from_memory: %d steps%s, test accuracy %.4f (loss %.4f), predicted %d of %d right\n",
               seen.steps, dtrain_job_stopped(job) ? " (stopped by the callback)" : "", accuracy, loss, right,
               N_TEST);
    dtrain_model_free(m);
    dtrain_job_free(job);
    free(x);
    free(y);
    free(probs);
    return dtrain_finalize() == DTRAIN_OK ? 0 : 1;
}
