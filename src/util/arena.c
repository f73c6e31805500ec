/* util/arena.c: chained blocks; a request larger than a quarter of the block
 * size gets a dedicated block inserted behind the current one so the current
 * block keeps serving small requests. */
#include "util/arena.h"

#include "util/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_BLOCK (256 * 1024)

typedef struct block {
    struct block *next;
    size_t size, used;
    unsigned char *base; /* aligned start */
} block;

struct kiln_arena {
    block *head; /* current small-allocation block */
    size_t total;
};

static block *block_new(size_t size)
{
    if (size > SIZE_MAX - sizeof(block) - ARENA_ALIGN)
        return NULL;
    /* a large constant (a model's weights) lands on huge pages */
    block *b = kiln_big_malloc(sizeof(block) + size + ARENA_ALIGN, NULL);
    if (!b)
        return NULL;
    uintptr_t p = (uintptr_t)(b + 1);
    p = (p + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1);
    b->base = (unsigned char *)p;
    b->size = size;
    b->used = 0;
    b->next = NULL;
    return b;
}

kiln_arena *kiln_arena_create(void)
{
    return calloc(1, sizeof(kiln_arena));
}

void kiln_arena_destroy(kiln_arena *a)
{
    if (!a)
        return;
    block *b = a->head;
    while (b) {
        block *n = b->next;
        free(b);
        b = n;
    }
    free(a);
}

void *kiln_arena_alloc(kiln_arena *a, size_t size)
{
    if (size > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0)
        need = ARENA_ALIGN;
    if (need > ARENA_BLOCK / 4) {
        block *b = block_new(need);
        if (!b)
            return NULL;
        b->used = need;
        if (a->head) { /* keep the current small block at the head */
            b->next = a->head->next;
            a->head->next = b;
        } else {
            a->head = b;
        }
        a->total += need;
        return b->base;
    }
    if (!a->head || a->head->size - a->head->used < need) {
        block *b = block_new(ARENA_BLOCK);
        if (!b)
            return NULL;
        b->next = a->head;
        a->head = b;
    }
    void *p = a->head->base + a->head->used;
    a->head->used += need;
    a->total += need;
    return p;
}

void *kiln_arena_calloc(kiln_arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    void *p = kiln_arena_alloc(a, count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void *kiln_arena_memdup(kiln_arena *a, const void *src, size_t size)
{
    void *p = kiln_arena_alloc(a, size);
    if (p && size)
        memcpy(p, src, size);
    return p;
}

char *kiln_arena_strdup(kiln_arena *a, const char *s)
{
    if (!s)
        return NULL;
    return kiln_arena_memdup(a, s, strlen(s) + 1);
}

size_t kiln_arena_used(const kiln_arena *a)
{
    return a ? a->total : 0;
}
