/* tests/support/alloc_count.h: counting the allocations a piece of code
 * makes, for tests that check that a steady-state run allocates nothing.
 *
 * alloc_count.c replaces malloc, calloc, realloc, aligned_alloc and
 * posix_memalign (glibc: forwarding to the __libc_ entry points), so it is
 * linked only into the tests that include this header (KILN_ALLOC_COUNT_TESTS
 * in tests/CMakeLists.txt). Under AddressSanitizer, which owns malloc,
 * nothing is replaced and KT_COUNT_ALLOCS is not defined: guard the checks
 * with #ifdef KT_COUNT_ALLOCS.
 *
 *     kt_alloc_count_start();
 *     st = kiln_module_run(m, &err);
 *     assert_int_equal(kt_alloc_count_stop(), 0);
 */
#ifndef KILN_TEST_ALLOC_COUNT_H
#define KILN_TEST_ALLOC_COUNT_H

#if !defined(__SANITIZE_ADDRESS__)
#define KT_COUNT_ALLOCS 1
#endif

/* Sets the count to 0 and counts every allocation (on any thread) from now. */
void kt_alloc_count_start(void);
/* Stops counting; returns the allocations since kt_alloc_count_start. */
long kt_alloc_count_stop(void);

#endif
