/* Asynchronous signals, received on one thread of dtrain's own.
 *
 * No signal handler may run on a thread that computes: oneDNN 2.6's JIT
 * GEMMs point rsp into the heap, so a handler interrupting one writes its
 * frame over live heap memory (oneDNN #4845; measured: a loop of dnnl_sgemm
 * with a no-op SIGALRM handler crashes every time). So cli_signals_block,
 * first thing in main and before MPI, OpenMP or the loader start threads
 * (they inherit the mask), blocks SIGINT, SIGTERM, SIGHUP and SIGUSR1 in
 * every thread there will be; cli_signals_start starts the one thread that
 * takes them with sigwait, and only sets flags:
 *   SIGINT, SIGTERM, SIGHUP  stop at the next agreed step with a final
 *                            checkpoint (repeats are the same request)
 *   SIGUSR1                  print a progress line now (like dd)
 * Signals that report a fault (SIGSEGV, SIGBUS, ...) are not touched. */
#ifndef DTRAIN_CLI_SIGNALS_H
#define DTRAIN_CLI_SIGNALS_H

#include "dtrain/job.h"
#include "dtrain/status.h"

typedef struct {
    dt_job_requests req; /* stop: 1 once SIGINT/SIGTERM/SIGHUP arrived; progress: 1 after SIGUSR1 */
    int rank, world;     /* for the one line said when a stop is requested */
} cli_signals;

/* Blocks the signals above in the calling thread (before any other exists). */
dt_status cli_signals_block(void);
/* Unblocks them again (before exec of another program, which inherits the mask). */
void cli_signals_unblock(void);
/* Starts the receiving thread, which writes to *sig for the rest of the
 * process (sig must live that long). */
dt_status cli_signals_start(cli_signals *sig);

#endif
