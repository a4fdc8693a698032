/* The serial strategy: one process, the optimiser over the whole flat block. */
#include "dtrain/mem.h"
#include "dtrain/optim.h"
#include "dtrain/train.h"

static dt_status serial_end_step(dt_sync *s, dt_trainer *t, float lr) {
    (void)s;
    dt_net *net = dt_trainer_net(t);
    dt_trainer_update(t, lr, 0, net->nparams);
    return DT_OK;
}

static void serial_free(dt_sync *s) { dt_free(s); }

dt_status dt_sync_serial_create(dt_sync **out) {
    dt_sync *s;
    DT_TRY(dt_alloc_bytes((void **)&s, sizeof *s, "sync strategy"));
    s->name = "serial";
    s->end_step = serial_end_step;
    s->free = serial_free;
    *out = s;
    return DT_OK;
}
