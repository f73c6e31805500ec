/* util/packmemo.c: the packed-weights memo (packmemo.h): stable source
 * ranges kept sorted by start, entries in a list searched linearly (a
 * model has at most a few hundred packed tensors, looked up once per class
 * each). */
#include "util/packmemo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct range {
    uintptr_t lo, hi; /* [lo, hi) */
} range;

typedef struct entry {
    const void *src;
    size_t n;
    char *key, *path;
    int64_t nbytes;
} entry;

struct kiln_pack_memo {
    pthread_mutex_t mu;
    range *ranges;
    int n_ranges, cap_ranges;
    entry *entries;
    int n_entries, cap_entries;
};

kiln_pack_memo *kiln_pack_memo_create(void)
{
    kiln_pack_memo *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void kiln_pack_memo_destroy(kiln_pack_memo *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_entries; i++) {
        free(m->entries[i].key);
        free(m->entries[i].path);
    }
    free(m->entries);
    free(m->ranges);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = nc;
    return true;
}

bool kiln_pack_memo_add_source(kiln_pack_memo *m, const void *p, size_t n)
{
    if (!p || !n)
        return true;
    pthread_mutex_lock(&m->mu);
    bool ok = grow((void **)&m->ranges, &m->cap_ranges, m->n_ranges + 1, sizeof(range));
    if (ok) {
        range r = {(uintptr_t)p, (uintptr_t)p + n};
        int i = m->n_ranges;
        while (i > 0 && m->ranges[i - 1].lo > r.lo) {
            m->ranges[i] = m->ranges[i - 1];
            i--;
        }
        m->ranges[i] = r;
        m->n_ranges++;
    }
    pthread_mutex_unlock(&m->mu);
    return ok;
}

/* with m->mu held */
static bool stable(const kiln_pack_memo *m, const void *p, size_t n)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    if (!p || hi < lo)
        return false;
    int a = 0, b = m->n_ranges; /* the last range starting at or before lo */
    while (a < b) {
        int mid = (a + b) / 2;
        if (m->ranges[mid].lo <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a > 0 && hi <= m->ranges[a - 1].hi;
}

bool kiln_pack_memo_stable(const kiln_pack_memo *m, const void *p, size_t n)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    bool s = stable(m, p, n);
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return s;
}

static entry *lookup(kiln_pack_memo *m, const void *src, size_t n, const char *key)
{
    for (int i = 0; i < m->n_entries; i++) {
        entry *e = &m->entries[i];
        if (e->src == src && e->n == n && strcmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

bool kiln_pack_memo_find(kiln_pack_memo *m, const void *src, size_t n, const char *key,
                         char *path, size_t cap, int64_t *nbytes)
{
    pthread_mutex_lock(&m->mu);
    const entry *e = stable(m, src, n) ? lookup(m, src, n, key) : NULL;
    bool found = e && strlen(e->path) < cap;
    if (found) {
        memcpy(path, e->path, strlen(e->path) + 1);
        *nbytes = e->nbytes;
    }
    pthread_mutex_unlock(&m->mu);
    return found;
}

bool kiln_pack_memo_put(kiln_pack_memo *m, const void *src, size_t n, const char *key,
                        const char *path, int64_t nbytes)
{
    bool ok = true;
    pthread_mutex_lock(&m->mu);
    if (stable(m, src, n)) {
        char *p = strdup(path);
        entry *e = lookup(m, src, n, key);
        if (!p) {
            ok = false;
        } else if (e) {
            free(e->path);
            e->path = p;
            e->nbytes = nbytes;
        } else if (!(ok = grow((void **)&m->entries, &m->cap_entries, m->n_entries + 1,
                               sizeof(entry))) ||
                   !(m->entries[m->n_entries].key = strdup(key))) {
            free(p);
            ok = false;
        } else {
            e = &m->entries[m->n_entries++];
            e->src = src;
            e->n = n;
            e->path = p;
            e->nbytes = nbytes;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return ok;
}

int kiln_pack_memo_count(const kiln_pack_memo *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    int n = m->n_entries;
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return n;
}
