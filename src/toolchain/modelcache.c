/* toolchain/modelcache.c: the bound on <cache>/models (toolchain.h).
 *
 * Compiled models are kept there by build id (kiln_compile_cached, and every
 * shape class of a model with symbolic input dims that the VM builds), each
 * holding its weights: a BERT-base class is 435 MB. A model found there is
 * touched (its mtime set to now); after a new one is published, the least
 * recently used others are deleted until the folder's .so files and
 * shared weights files (*.w, kiln_build_share_weights) and the pack memo's
 * files that name them (*.pm, util/packmemo.h) fit
 * $KILN_MODEL_CACHE_MB (default 4096); never the new model, nor anything
 * the build that wrote it touched. A process that has one loaded keeps its
 * mapping (unlink only drops the name); a model whose weights files went
 * gets them back at its next build (driver.c). A temporary file a killed
 * build left (<name>.tmp<pid> or .tmp-<pid>, written then renamed) is
 * deleted by the next prune once its process is gone, or after a day. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "toolchain/toolchain.h"

#define DEFAULT_MB 4096

typedef struct model_file {
    char *path;
    int64_t bytes;
    struct timespec mtime;
} model_file;

void kiln_tc_touch(const char *path)
{
    utimensat(AT_FDCWD, path, NULL, 0);
}

int64_t kiln_tc_model_cache_limit(void)
{
    const char *e = getenv("KILN_MODEL_CACHE_MB");
    if (e && *e) {
        char *end = NULL;
        long long mb = strtoll(e, &end, 10);
        if (end && *end == 0 && mb >= 0)
            return (int64_t)mb << 20;
    }
    return (int64_t)DEFAULT_MB << 20;
}

static int older_first(const void *a, const void *b)
{
    const model_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : x->mtime.tv_nsec > y->mtime.tv_nsec;
}

#define STALE_TMP_SECONDS (24 * 3600)

/* Whether `name` is a temporary file (<name>.tmp<pid> or .tmp-<pid>); its
 * writer's pid in *pid. */
static bool temp_name(const char *name, long *pid)
{
    const char *t = strstr(name, ".tmp");
    if (!t)
        return false;
    t += 4;
    if (*t == '-')
        t++;
    if (*t < '0' || *t > '9')
        return false;
    char *end = NULL;
    *pid = strtol(t, &end, 10);
    return end && *end == 0 && *pid > 0;
}

/* A temporary file whose writer is gone (or a day old: its pid reused). */
static bool stale_temp(const struct stat *st, long pid)
{
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return true;
    return time(NULL) - st->st_mtim.tv_sec > STALE_TMP_SECONDS;
}

int kiln_tc_prune_models(const char *keep, time_t since, int64_t limit)
{
    char dir[4096];
    const char *slash = keep ? strrchr(keep, '/') : NULL;
    if (!slash || (size_t)(slash - keep) >= sizeof dir)
        return 0;
    memcpy(dir, keep, (size_t)(slash - keep));
    dir[slash - keep] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    model_file *f = NULL;
    int n = 0, cap = 0;
    int64_t total = 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        long pid = 0;
        if (temp_name(e->d_name, &pid)) {
            char p[4096 + 256];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && stale_temp(&st, pid) &&
                unlink(p) == 0)
                removed++;
            continue;
        }
        if (!(len > 3 && strcmp(e->d_name + len - 3, ".so") == 0) &&
            !(len > 2 && strcmp(e->d_name + len - 2, ".w") == 0) &&
            !(len > 3 && strcmp(e->d_name + len - 3, ".pm") == 0))
            continue;
        char p[4096 + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        total += st.st_size;
        if (strcmp(p, keep) == 0 || st.st_mtim.tv_sec >= since)
            continue;
        if (n == cap) {
            int nc = cap ? 2 * cap : 16;
            model_file *g = realloc(f, sizeof *g * (size_t)nc);
            if (!g)
                break;
            f = g;
            cap = nc;
        }
        if (!(f[n].path = strdup(p)))
            break;
        f[n].bytes = st.st_size;
        f[n].mtime = st.st_mtim;
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(f, (size_t)n, sizeof *f, older_first);
    for (int i = 0; i < n; i++) {
        if (total > limit && unlink(f[i].path) == 0) {
            total -= f[i].bytes;
            removed++;
        }
        free(f[i].path);
    }
    free(f);
    return removed;
}
