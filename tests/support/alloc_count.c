/* tests/support/alloc_count.c: the allocation counter of alloc_count.h. */
#include "alloc_count.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h> /* the prototypes of what is replaced below */

static atomic_int counting;
static atomic_long n_allocs;

void kt_alloc_count_start(void)
{
    atomic_store(&n_allocs, 0);
    atomic_store(&counting, 1);
}

long kt_alloc_count_stop(void)
{
    atomic_store(&counting, 0);
    return atomic_load(&n_allocs);
}

#ifdef KT_COUNT_ALLOCS
/* glibc: forward to the __libc_ entry points */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void note(void)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
}
void *malloc(size_t n)
{
    note();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    note();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    note();
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n)
{
    note();
    return __libc_memalign(al, n);
}
int posix_memalign(void **p, size_t al, size_t n)
{
    note();
    *p = __libc_memalign(al, n);
    return *p ? 0 : ENOMEM;
}
#endif
