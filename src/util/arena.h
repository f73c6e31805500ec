/* util/arena.h: a bump allocator freed all at once (the graph's memory).
 *
 * Allocations are 64-byte aligned (weights are read by vector code). Large
 * requests get a block of their own, so a 400 MB weight costs no waste. */
#ifndef KILN_UTIL_ARENA_H
#define KILN_UTIL_ARENA_H

#include <stddef.h>

typedef struct kiln_arena kiln_arena;

kiln_arena *kiln_arena_create(void);
void kiln_arena_destroy(kiln_arena *a); /* NULL-safe */
/* Uninitialised memory, or NULL when out of memory. size 0 returns a valid
 * unique pointer. */
void *kiln_arena_alloc(kiln_arena *a, size_t size);
/* Zeroed memory. */
void *kiln_arena_calloc(kiln_arena *a, size_t count, size_t size);
/* Copy of a NUL-terminated string (NULL in, NULL out). */
char *kiln_arena_strdup(kiln_arena *a, const char *s);
/* Copy of `size` bytes. */
void *kiln_arena_memdup(kiln_arena *a, const void *p, size_t size);
/* Total bytes handed out (for reports). */
size_t kiln_arena_used(const kiln_arena *a);

#endif
