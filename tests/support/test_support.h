/* tests/support/test_support.h: helpers shared by the cmocka tests. */
#ifndef KILN_TEST_SUPPORT_H
#define KILN_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the three above first */
#include <cmocka.h>

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

/* A fresh temporary directory path (mkdtemp), malloc'ed; the caller removes it
 * with kt_rmdir. */
char *kt_tempdir(void);
void kt_rmdir(const char *dir);

#endif
