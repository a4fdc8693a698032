/* dtrain train MODEL.cfg [flags]: a client of the train job (job.h). */
#include <stdio.h>

#include "cli.h"
#include "dtrain/job.h"

int cmd_train(int argc, char **argv, cli_env *env, cli_signals *sig) {
    dt_job_args a;
    dt_status s = dt_job_parse(&a, argc, argv);
    if (s == DT_OK && a.help) {
        dt_job_usage(stdout);
        return 0;
    }
    if (s == DT_OK) s = dt_job_use_backup(&a);
    dt_job_plan p;
    if (s == DT_OK) s = dt_job_prepare(&p, &a, env->world, 0);
    int code = cli_agree_start(s, env);
    if (code != 0) return code;
    dt_train_summary sum;
    s = dt_job_execute(&p, &a, MPI_COMM_WORLD, env->local_ranks, &sig->req, stdout, &sum);
    /* Interrupted, diverged or refused at the start, every rank ends by
     * itself: no MPI_Abort. */
    env->orderly = dt_run_ended_together(s) || p.agreed_failure;
    if (p.agreed_failure && env->rank != 0) return dt_status_exit_code(s); /* rank 0 says it */
    return cli_report(s, env);
}
