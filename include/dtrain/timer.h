/* Monotonic wall clock for timing steps, benchmarks and progress. */
#ifndef DTRAIN_TIMER_H
#define DTRAIN_TIMER_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double dt_now(void);

/* Median of v[0..n) (n >= 1), sorting v in place: what repeated timings
 * report, robust to the odd preempted run. */
double dt_median(double *v, int n);

#endif
