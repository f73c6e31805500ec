/* tests/support/test_support.h: helpers shared by the cmocka tests. */
#ifndef KILN_TEST_SUPPORT_H
#define KILN_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the three above first */
#include <cmocka.h>
#include <stdlib.h> /* free, used by expect_cli */

#include "kiln/kiln.h"

/* Builds a shape from a rank and dims: ks(4, 1, 3, 8, 8). */
kiln_shape ks(int rank, ...);

/* Asserts |a[i] - b[i]| <= atol + rtol * |b[i]| for all i, printing the first
 * bad index and values on failure. */
#define assert_allclose(a, b, n, rtol, atol) \
    kt_assert_allclose((a), (b), (n), (rtol), (atol), __FILE__, __LINE__)
void kt_assert_allclose(const float *a, const float *b, int64_t n, double rtol, double atol,
                        const char *file, int line);

/* Fills n floats uniformly in [lo, hi) from a seeded generator. */
void kt_fill_random(float *dst, int64_t n, uint64_t seed, float lo, float hi);

/* Runs the kiln CLI with the given argument string (passed to /bin/sh), capturing
 * stdout+stderr into a malloc'ed string (*output, may be NULL to discard).
 * Returns the exit code, or -1 if it did not exit normally. */
int kt_run_cli(const char *args, char **output);

/* printf into one of a few rotating static buffers, so that CLI arguments can be
 * built inline: expect_cli(0, kt_fmt("run %s", path), ...). A result stays valid
 * for the next 7 calls. */
const char *kt_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Runs `kiln ARGS` and fails the test, showing the whole output, unless it exits
 * with want_rc, its output contains every string listed, and it contains none of
 * those listed after KT_LACKS:
 *   expect_cli(2, "run", "no MODEL given", KT_LACKS, "usage: kiln COMMAND");
 * expect_cli_output does the same and returns the output (malloc'ed) for checks
 * that are not substrings. Failures are reported at the caller's line. */
#define expect_cli(want_rc, args, ...)                                                 \
    free(kt_expect_cli((want_rc), (args), (const char *const[]){__VA_ARGS__, NULL},    \
                       __FILE__, __LINE__))
#define expect_cli_output(want_rc, args, ...)                                          \
    kt_expect_cli((want_rc), (args), (const char *const[]){__VA_ARGS__, NULL}, __FILE__, \
                  __LINE__)
#define KT_LACKS kt_lacks
extern const char kt_lacks[];
char *kt_expect_cli(int want_rc, const char *args, const char *const *strings, const char *file,
                    int line);

/* A fresh temporary directory path (mkdtemp), malloc'ed; the caller removes it
 * with kt_rmdir. */
char *kt_tempdir(void);
void kt_rmdir(const char *dir);
/* A fresh temporary directory removed when the test process exits (its
 * path stays valid until then; not to be freed). NULL on failure. */
const char *kt_tempdir_until_exit(void);

/* The cmocka group set-up and tear-down of a test that writes files:
 * kt_dir is a fresh kt_tempdir for the whole group, removed at the end. */
extern char *kt_dir;
int kt_dir_setup(void **state);
int kt_dir_teardown(void **state);

#endif
