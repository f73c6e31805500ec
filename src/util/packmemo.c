/* util/packmemo.c: the packed-weights memo (packmemo.h): stable source
 * ranges kept sorted by start, entries in a list searched linearly (a
 * model has at most a few hundred packed tensors, looked up once per class
 * each); the disk tier's entries are files (packmemo.h). */
#include "util/packmemo.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    char *dir; /* the disk tier's folder, or NULL */
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
    free(m->dir);
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

bool kiln_pack_memo_set_dir(kiln_pack_memo *m, const char *dir)
{
    pthread_mutex_lock(&m->mu);
    bool ok = true;
    if (!m->dir || strcmp(m->dir, dir) != 0) {
        char *d = strdup(dir);
        if (d) {
            free(m->dir);
            m->dir = d;
        }
        ok = d != NULL;
    }
    pthread_mutex_unlock(&m->mu);
    return ok;
}

bool kiln_pack_memo_has_dir(const kiln_pack_memo *m)
{
    pthread_mutex_lock((pthread_mutex_t *)&m->mu);
    bool has = m->dir != NULL;
    pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
    return has;
}

/* <dir>/<ckey>.pm into p (cap bytes); false when there is no folder, the key
 * is not a plain name, or it does not fit. */
static bool pm_path(kiln_pack_memo *m, const char *ckey, char *p, size_t cap, char *dir,
                    size_t dcap)
{
    if (!ckey[0] || strspn(ckey, "0123456789abcdef") != strlen(ckey))
        return false;
    pthread_mutex_lock(&m->mu);
    bool ok = m->dir && strlen(m->dir) < dcap;
    if (ok)
        memcpy(dir, m->dir, strlen(m->dir) + 1);
    pthread_mutex_unlock(&m->mu);
    if (!ok)
        return false;
    int k = snprintf(p, cap, "%s/%s.pm", dir, ckey);
    return k > 0 && (size_t)k < cap;
}

#define PM_MAGIC "kiln-pack-memo 1"

bool kiln_pack_memo_find_disk(kiln_pack_memo *m, const char *ckey, char *path, size_t cap,
                              int64_t *nbytes)
{
    char p[4400], dir[4096], text[256] = {0}, name[128];
    if (!pm_path(m, ckey, p, sizeof p, dir, sizeof dir))
        return false;
    FILE *f = fopen(p, "rb");
    if (!f)
        return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    long long nb = -1;
    /* "<magic>\n<name>\n<bytes>\n"; the name a plain .w file beside */
    if (strncmp(text, PM_MAGIC "\n", sizeof PM_MAGIC) != 0 ||
        sscanf(text + sizeof PM_MAGIC, "%127s %lld", name, &nb) != 2 || nb <= 0 ||
        strlen(name) < 3 ||
        strspn(name, "0123456789abcdef") != strlen(name) - 2 ||
        strcmp(name + strlen(name) - 2, ".w") != 0)
        return false;
    int k = snprintf(path, cap, "%s/%s", dir, name);
    if (k <= 0 || (size_t)k >= cap)
        return false;
    utimensat(AT_FDCWD, p, NULL, 0); /* used: the cache bound keeps it */
    *nbytes = nb;
    return true;
}

bool kiln_pack_memo_put_disk(kiln_pack_memo *m, const char *ckey, const char *path,
                             int64_t nbytes)
{
    char p[4400], tmp[4500], dir[4096];
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    if (!pm_path(m, ckey, p, sizeof p, dir, sizeof dir) || strlen(name) > 120)
        return false;
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", p, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fprintf(f, PM_MAGIC "\n%s\n%" PRId64 "\n", name, nbytes) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, p) != 0) {
        unlink(tmp);
        return false;
    }
    return true;
}
