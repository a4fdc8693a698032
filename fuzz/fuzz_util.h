/* Shared by the fuzz harnesses (fuzz/fuzz_*.c): inputs as file descriptors
 * and the property every harness checks on every input.
 *
 * Each harness defines LLVMFuzzerTestOneInput. Built with clang's libFuzzer
 * (cmake -DDT_FUZZ=ON, `make fuzz`) it is a fuzzer; linked with replay.c
 * (any compiler, every build) it replays a corpus, which is how CTest runs
 * the committed corpora and regression inputs. */
#ifndef DT_FUZZ_UTIL_H
#define DT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A descriptor at offset 0 whose file holds exactly data: an in-memory file
 * (memfd) per slot (0 or 1), reused from input to input. Aborts if the
 * system refuses, which is never the input's fault. */
int fuzz_fd(int slot, const uint8_t *data, size_t size);

/* The clean-failure property: s is DT_OK, or an error other than
 * DT_ERR_INTERNAL whose message is one non-empty line containing `name`
 * (or `name2` when not NULL). Anything else aborts, which the fuzzer
 * reports as a crash with the input that caused it. */
void fuzz_expect_clean(dt_status s, const char *name, const char *name2);

/* Aborts with a message when cond is false (a broken invariant). */
#define FUZZ_CHECK(cond) fuzz_check((cond), #cond, __FILE__, __LINE__)
void fuzz_check(int cond, const char *what, const char *file, int line);

#endif
