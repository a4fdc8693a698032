/* A progress pump: a thread that drives MPI's progress engine while the
 * trainer computes with nonblocking messages in flight.
 *
 * Open MPI moves a message above the eager limit (a rendezvous: the
 * receiver's answer, then the data as the socket drains, over TCP and
 * shared memory alike) and a nonblocking collective's rounds only inside
 * MPI calls. A parameter-server worker posts its pushes, its receives for
 * the replies and its sufficient factors from grad_ready, then runs the
 * next layers' backward and makes no MPI call until the next layer is
 * done: without a pump those messages move at the end of the step
 * (measured on cnn with --sacp between two hosts at 1 Gbit/s).
 * The pump calls MPI_Iprobe on a copy of MPI_COMM_SELF (which no message
 * ever uses: it only progresses the engine) every DT_PUMP_INTERVAL_US while it is on,
 * and sleeps on a condition variable while it is off. Needs
 * MPI_THREAD_MULTIPLE (the trainer posts while the pump probes).
 * Why 5 ms: the pump's probes move the messages' copies into the compute's
 * time, which on cores the compute needs is a cost; at 0.1 and 1 ms it cost
 * resnet20 ps-sync between emulated hosts at 1 Gbit/s more than it won
 * (581 img/s against 625-645 without it), at 5 ms it won (651-664 against
 * 630-655; 100 Mbit/s: 364 against 280; cnn unshaped: 1936-1960 against
 * 1769-1867; one machine: 2525-2610 against 2512-2686, noise). One
 * rendezvous answered up to 5 ms late costs little while a layer's
 * backward takes longer than that and many messages are in flight. */
#ifndef DTRAIN_COMM_PUMP_H
#define DTRAIN_COMM_PUMP_H

#include <mpi.h>
#include <pthread.h>

#include "dtrain/status.h"

#define DT_PUMP_INTERVAL_US 5000 /* between probes while on (why: above) */

typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* on/off/quit for the thread; a probe's end for dt_pump_off */
    MPI_Comm self;      /* a copy of MPI_COMM_SELF whose errors return (the pump probes it) */
    int on;             /* under mu: pumping */
    int probing;        /* under mu: the thread is inside MPI_Iprobe */
    int failed;         /* under mu: a probe failed; the pump stopped for good */
    int quit;           /* under mu: the thread ends */
    int started;        /* the thread runs (dt_pump_free joins it) */
} dt_pump;

/* Starts the thread, off. Errors: DT_ERR_MPI (the communicator), or
 * DT_ERR_INTERNAL when no thread starts. */
dt_status dt_pump_create(dt_pump *p);
/* Pumping from now until dt_pump_off. No-op when the pump never started. */
void dt_pump_on(dt_pump *p);
/* Stops pumping; on return the thread makes no MPI call until the next
 * dt_pump_on (the caller may free what the step's requests point to).
 * DT_ERR_MPI when a probe failed since the pump was created. */
dt_status dt_pump_off(dt_pump *p);
/* Ends and joins the thread; a zeroed or already freed pump is a no-op.
 * Before MPI_Finalize. */
void dt_pump_free(dt_pump *p);

#endif
