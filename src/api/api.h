/* What the job API's files share (dtrain.h is the public contract). */
#ifndef DTRAIN_API_INTERNAL_H
#define DTRAIN_API_INTERNAL_H

#include <pthread.h>
#include <signal.h>

#include "dtrain.h"
#include "dtrain/model.h"
#include "dtrain/net.h"

/* A model: its spec (the model file or text, parsed) and a net built for
 * batches of up to spec.batch (predict and evaluate go in such batches). */
struct dtrain_model {
    dt_model_spec spec;
    dt_net *net;
    char *text;         /* the model's text or path (spec.path may point into it) */
    dt_class_names names; /* the checkpoint's class names (n 0: none) */
};

/* DT_TRY for the public functions, which return a dtrain_status (the
 * same values, dtrain.h). */
#define DT_API_TRY(expr)                                     \
    do {                                                     \
        dt_status dt_api_s_ = (dt_status)(expr);             \
        if (dt_api_s_ != DT_OK) return (dtrain_status)dt_api_s_; \
    } while (0)

/* A model over spec (copied) and net (taken), text copied; DT_ERR_NOMEM. */
dt_status dt_api_model_new(dtrain_model **out, const dt_model_spec *spec, dt_net *net, const char *text);

/* The ranks on this node, from Open MPI's environment (1 outside mpirun). */
int dt_api_local_ranks(void);

/* While the library computes: the job API's signals blocked in the calling
 * thread, and a thread of the library's on which the program's handlers
 * run instead (dtrain.h). dt_api_compute_end restores the caller's mask. */
typedef struct {
    sigset_t saved;
    int relay_started;
    pthread_t relay;
} dt_api_compute;
dt_status dt_api_compute_begin(dt_api_compute *c);
void dt_api_compute_end(dt_api_compute *c);

#endif
