/* dtrain.h: the job API of libdtrain, for C programs and the Python package.
 *
 * A job is what `dtrain train` runs: a model (file or text), options by the
 * names of train's flags ("epochs", "batch", "max_steps" or "--max-steps",
 * "mode", "servers", "lr", "checkpoint_dir", any [net] key such as
 * "policy"; `dtrain train --help` lists them), and data: a built-in data set
 * ("dataset", "data_dir", "data" for a Darknet .data file) or arrays in the
 * caller's memory (dtrain_job_set_arrays: not copied, sharded over the
 * workers as files are). dtrain_job_run trains on MPI_COMM_WORLD: started
 * by `dtrain launch -n N` or mpirun, every process calls it with the same
 * job and the library decides the roles (the first `servers` ranks serve in
 * the ps-* modes; the rest are workers). MPI is initialised by the first
 * call that needs it unless the program (or mpi4py) already has.
 *
 * Every function returns a dtrain_status; on failure dtrain_last_error()
 * is the one-line message (the thread's own, like errno), e.g. "--batch:
 * 'x' is not an integer" or "model.cfg:7: unknown key 'fitler'". Nothing
 * here exits the process, with one exception: a rank that waited
 * --stall-abort seconds for ranks that never answer ends the whole MPI job
 * (exit status 3), as the CLI does, since its peers may never return.
 *
 * Signals stay the program's: while the library computes, SIGINT, SIGTERM,
 * SIGHUP and SIGUSR1 are blocked in the calling thread (and so in the
 * threads it starts) and taken by a thread of the library's that only
 * lets the program's handlers run there (a handler must never run on a
 * thread inside oneDNN's JIT code, oneDNN #4845). To stop a run at a step
 * every worker agrees on (with its final checkpoint), return non-zero from
 * the record callback, e.g. after the program's SIGINT handler set a flag.
 */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Statuses: the CLI's exit status is 2 for USAGE and CONFIG, 3 for
 * STALLED, 1 for the others. */
typedef enum {
    DTRAIN_OK = 0,
    DTRAIN_ERR_USAGE,       /* a bad option, value, array shape or type */
    DTRAIN_ERR_CONFIG,      /* a bad model (syntax, keys, shapes) */
    DTRAIN_ERR_IO,          /* a file missing, unreadable or unwritable */
    DTRAIN_ERR_FORMAT,      /* data or a checkpoint malformed; a label out of range */
    DTRAIN_ERR_NOMEM,       /* an allocation failed or a size is over a limit */
    DTRAIN_ERR_NUMERIC,     /* the loss became NaN or infinite */
    DTRAIN_ERR_MPI,         /* an MPI call failed, a peer was lost */
    DTRAIN_ERR_INTERRUPTED, /* stopped by SIGINT/SIGTERM (the CLI's signal thread) */
    DTRAIN_ERR_INTERNAL,    /* a bug in dtrain */
    DTRAIN_ERR_STALLED      /* waited --stall-abort seconds for other ranks */
} dtrain_status;

/* Element types of arrays given to the library. */
typedef enum {
    DTRAIN_U8 = 0, /* bytes, scaled by 1/255 as IDX images are */
    DTRAIN_F32 = 1 /* floats, taken as they are (byte / 255 gives what DTRAIN_U8 would) */
} dtrain_dtype;

/* The message of this thread's last failure ("" when none). */
const char *dtrain_last_error(void);
/* "0.9.0". */
const char *dtrain_version(void);

/* MPI_Init_thread (MPI_THREAD_MULTIPLE) unless MPI is initialised; every
 * call after the first does nothing. */
dtrain_status dtrain_init(void);
/* This process's rank in MPI_COMM_WORLD and their number (initialising
 * MPI as dtrain_init does); -1 when MPI cannot start. */
int dtrain_rank(void);
int dtrain_world(void);
/* MPI_Finalize, when dtrain_init initialised MPI (else nothing: MPI is the
 * program's). The last call of a process that used the library. */
dtrain_status dtrain_finalize(void);

/* ---- models: a network and its parameters ---- */
typedef struct dtrain_model dtrain_model;

/* A model from a model file's path, or its text (anything holding a
 * newline is text), with the parameters of weights (a dtrain checkpoint
 * or Darknet .weights, recognised by content; NULL: initialised from seed
 * 1, as a fresh `dtrain train` is). */
dtrain_status dtrain_model_load(dtrain_model **out, const char *model, const char *weights);
void dtrain_model_free(dtrain_model *m);

/* The input shape (channels, height, width), the outputs of the final
 * [softmax] (0: a feature extractor, whose outputs are its last layer's),
 * the parameter count and the number of layers. Any pointer may be NULL. */
dtrain_status dtrain_model_shape(const dtrain_model *m, int *c, int *h, int *w, int *classes, size_t *params,
                                 int *layers);
/* Layer i (0-based): its kind as the model file names it ("convolutional"),
 * output shape and parameter count; any pointer may be NULL. */
dtrain_status dtrain_model_layer(const dtrain_model *m, int i, char *kind, size_t cap, int *c, int *h, int *w,
                                 size_t *params);
/* The outputs (n, outputs): probabilities of a classifier (its softmax;
 * with [softmax] tree= the leaves' probabilities, Darknet's
 * hierarchy_predictions, inner nodes 0), the last layer's values of a feature extractor; x (n, C, H, W) of dtype
 * in the model's input shape, normalised as training normalises. */
dtrain_status dtrain_model_predict(dtrain_model *m, const void *x, dtrain_dtype dtype, int n, float *out);
/* Test accuracy and mean loss over x (n, C, H, W) with labels y (n), as
 * `dtrain eval` computes them. */
dtrain_status dtrain_model_evaluate(dtrain_model *m, const void *x, dtrain_dtype dtype, int n, const int32_t *y,
                                    double *accuracy, double *loss);
/* The parameters as a dtrain checkpoint (what `--weights` and
 * dtrain_model_load read; no optimiser state). */
dtrain_status dtrain_model_save(const dtrain_model *m, const char *path);
/* As `dtrain export`: path's extension says the format (.onnx, .weights). */
dtrain_status dtrain_model_export(const dtrain_model *m, const char *path);

/* ---- jobs: a training run ---- */
typedef struct dtrain_job dtrain_job;

/* A job over a model file's path or a model's text (as dtrain_model_load). */
dtrain_status dtrain_job_create(dtrain_job **out, const char *model);
void dtrain_job_free(dtrain_job *j);

/* Option `name` (a train flag: "max_steps", "max-steps" or "--max-steps")
 * set to value as the flag would be; flags without a value ("quiet",
 * "sfb") take "1"/"true" or "0"/"false" (NULL: "1"). The value is copied. */
dtrain_status dtrain_job_set(dtrain_job *j, const char *name, const char *value);

enum { DTRAIN_TRAIN = 0, DTRAIN_TEST = 1 };
/* The training (which DTRAIN_TRAIN) or test set (DTRAIN_TEST) as n images
 * x (n, c, h, w) of dtype and labels y (n) in [0, the model's classes).
 * Not copied: both must stay valid and unchanged until the run ends.
 * Without test arrays the training arrays are evaluated. Excludes the
 * options dataset, data_dir and data. */
dtrain_status dtrain_job_set_arrays(dtrain_job *j, int which, const void *x, dtrain_dtype dtype, int n, int c, int h,
                                    int w, const int32_t *y);

/* Called on worker 0 with every record of the run's log as it is written
 * (one JSON object: "event" is "config", "step", "eval" or "summary"),
 * whether or not a log file is given. A non-zero return ends the run
 * early at a step the workers agree on (within 10 steps in the lockstep
 * modes) as a finished one ends: its evaluation, final checkpoint where
 * one is configured, summary record, and DTRAIN_OK on every rank;
 * dtrain_job_stopped then says 1 on every worker. In the modes where workers step apart
 * (ps-async and kin) worker 0 stops and the others finish the run's
 * budget of steps. */
typedef int (*dtrain_record_fn)(void *ctx, const char *json);
dtrain_status dtrain_job_on_record(dtrain_job *j, dtrain_record_fn fn, void *ctx);

/* Trains on MPI_COMM_WORLD; every rank calls it with the same options.
 * Worker 0 prints the start-up line, progress and summary to stdout
 * unless option quiet is set (the summary only). A failure before
 * training (a bad option, a missing file on one host) is every rank's,
 * with the first failing rank's message. */
dtrain_status dtrain_job_run(dtrain_job *j);

/* A rank's part in a run. */
typedef enum {
    DTRAIN_ROLE_SERVER = 0, /* a parameter server: the first `servers` ranks of a ps-* mode */
    DTRAIN_ROLE_CHIEF = 1,  /* worker 0: prints, writes the log and checkpoints, gets the records */
    DTRAIN_ROLE_WORKER = 2  /* another worker */
} dtrain_role;
/* Before dtrain_job_run, without running anything: this rank's part in
 * the run on MPI_COMM_WORLD, from the options mode and servers and the
 * world size alone (the model and data are not read, so a job created over
 * any text, even "", answers). Fails as dtrain_job_run would on an unknown
 * mode or too few ranks for it. */
dtrain_status dtrain_job_role(const dtrain_job *j, dtrain_role *role);

/* After dtrain_job_run: whether this rank was a worker (0: a parameter
 * server), and whether the record callback ended the run early (every
 * worker says so). */
int dtrain_job_is_worker(const dtrain_job *j);
int dtrain_job_stopped(const dtrain_job *j);
/* After a run, on every rank, parameter servers included: the trained
 * model, now the caller's (a second call fails). Its parameters are the
 * run's final ones, the ones worker 0's final checkpoint holds: worker 0
 * sends them to every other rank as the run ends. */
dtrain_status dtrain_job_take_model(dtrain_job *j, dtrain_model **out);

#ifdef __cplusplus
}
#endif

#endif
