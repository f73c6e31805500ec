/* tests/onnx-backend/suite_runner.h: what the two conformance runners
 * (conformance.c: importer + reference executor or kiln_compile;
 * check_compiled.c: the CLI's `kiln check`) share: the suite's model list,
 * one forked child per model with a time limit (a crash or a hang is
 * recorded, never takes the runner down), and the committed regression
 * list (read and compared, or written). */
#ifndef KILN_TESTS_SUITE_RUNNER_H
#define KILN_TESTS_SUITE_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* Seconds since *t0 (CLOCK_MONOTONIC). */
double suite_seconds(const struct timespec *t0);

/* The models under DATA/{node,pytorch-converted,pytorch-operator,simple} as
 * "suite/name", sorted, those containing `filter` (NULL: all); *names is
 * malloc'ed (free each and it). Returns the count, or -1 after printing
 * "PROG: DIR: why" when a suite folder cannot be read. */
int suite_list(const char *prog, const char *data, const char *filter, char ***names);

/* The child's side: runs model DATA/name (its folder `dir`) and writes its
 * result to fd, which the parent reads in full (up to 4 KiB). */
typedef void (*suite_child_fn)(const char *dir, int fd);

/* The parent's side, once per model: `out` is what the child wrote
 * (NUL-terminated, len bytes, modifiable), status its waitpid status,
 * timed_out whether it was killed at the time limit, seconds its run time. */
typedef void (*suite_done_fn)(void *ctx, int index, char *out, size_t len, int status,
                              bool timed_out, double seconds);

/* Runs child on every model, `jobs` at a time (1..64), each killed after
 * `timeout` seconds, and calls done for each as it ends. Returns 0, or 2
 * after printing why when a pipe or a process cannot be made. */
int suite_run(const char *data, char *const *names, int n, int jobs, double timeout,
              suite_child_fn child, suite_done_fn done, void *ctx);

/* One model's outcome, for the regression list. */
typedef struct suite_outcome {
    bool pass;
    const char *verdict; /* e.g. "mismatch", printed for a regression */
    const char *why;
} suite_outcome;

/* Compares the outcomes with the regression list `path` (one model per line,
 * # comments): prints each regression (a listed model that does not pass;
 * one missing from the suite too, unless `subset`: a filtered run) and the
 * newly passing models (the first `show_new`), then a summary line. Returns
 * the number of regressions, 1 more when the list cannot be read. */
int suite_check_expected(const char *prog, const char *path, char *const *names,
                         const suite_outcome *o, int n, bool subset, int show_new);

/* Writes `header` then the passing models, one per line; 0 or 1 (printed). */
int suite_write_list(const char *prog, const char *path, const char *header,
                     char *const *names, const suite_outcome *o, int n);

#endif
