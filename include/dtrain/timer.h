/* Monotonic wall clock for timing steps, benchmarks and progress. */
#ifndef DTRAIN_TIMER_H
#define DTRAIN_TIMER_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double dt_now(void);

#endif
