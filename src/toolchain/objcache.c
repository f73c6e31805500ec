/* toolchain/objcache.c: one build's files, the object cache and the link
 * (toolchain.h, "build workspace").
 *
 * A workspace is a private directory <cache>/tmp/build-XXXXXX holding the
 * embedded headers and whatever the build writes. A kernel source is looked
 * up in <cache>/objects/<hash(compiler key, source)>.o; a miss is written
 * out and queued. kiln_tc_link compiles the queued kernels and the other
 * sources in parallel, publishes the new objects to the cache, links
 * everything into one shared object beside out_path and renames it into
 * place, so a failed build never leaves a half-written model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lower/hash.h"
#include "toolchain/toolchain.h"
#include "util/error.h"

typedef struct tc_file {
    char *src, *obj, *log; /* in the workspace */
    char *cached;          /* kernels: the cache object it becomes; NULL: not cached */
    bool compile;          /* queued for the compiler */
} tc_file;

struct kiln_tc_build {
    kiln_cc cc;
    char *cache;  /* cache root */
    char *dir;    /* private workspace */
    tc_file *files;
    int n_files, cap_files;
    int n_cached; /* kernels found in the cache */
};

static char *path2(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

kiln_status kiln_tc_move_file(const char *from, const char *to, kiln_error *err)
{
    if (rename(from, to) == 0)
        return KILN_OK;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", to, (long)getpid());
    kiln_status s = kiln_copy_file(from, tmp, err);
    if (s == KILN_OK && rename(tmp, to) != 0)
        s = kiln_errorf(err, KILN_ERR_IO, "cannot create '%s': %s", to, strerror(errno));
    unlink(from);
    return s;
}

void kiln_tc_end(kiln_tc_build *b)
{
    if (!b)
        return;
    if (b->dir)
        kiln_rmtree(b->dir);
    for (int i = 0; i < b->n_files; i++) {
        free(b->files[i].src);
        free(b->files[i].obj);
        free(b->files[i].log);
        free(b->files[i].cached);
    }
    free(b->files);
    free(b->dir);
    free(b->cache);
    kiln_cc_free(&b->cc);
    free(b);
}

kiln_status kiln_tc_begin(const kiln_target *tg, const char *cache_dir, kiln_tc_build **out,
                          kiln_error *err)
{
    kiln_tc_build *b = calloc(1, sizeof *b);
    if (!b)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_status s = kiln_cc_init(&b->cc, tg, err);
    if (s != KILN_OK)
        goto fail;
    b->cache = kiln_cache_dir(cache_dir);
    char *objdir = b->cache ? path2(b->cache, "objects") : NULL;
    char *tmpdir = b->cache ? path2(b->cache, "tmp") : NULL;
    if (!objdir || !tmpdir) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    } else if ((s = kiln_mkdirs(objdir, err)) == KILN_OK && (s = kiln_mkdirs(tmpdir, err)) == KILN_OK) {
        b->dir = path2(tmpdir, "build-XXXXXX");
        if (!b->dir || !mkdtemp(b->dir)) {
            s = kiln_errorf(err, KILN_ERR_IO, "cannot create a build directory under '%s': %s",
                            tmpdir, strerror(errno));
            free(b->dir);
            b->dir = NULL;
        }
    }
    free(objdir);
    free(tmpdir);
    if (s != KILN_OK) /* the headers go in at the first compile (kiln_tc_link) */
        goto fail;
    *out = b;
    return KILN_OK;
fail:
    kiln_tc_end(b);
    return s;
}

const char *kiln_tc_dir(const kiln_tc_build *b)
{
    return b->dir;
}

const kiln_cc *kiln_tc_cc(const kiln_tc_build *b)
{
    return &b->cc;
}

int kiln_tc_cached(const kiln_tc_build *b)
{
    return b->n_cached;
}

static tc_file *add_file(kiln_tc_build *b, const char *name)
{
    if (b->n_files == b->cap_files) {
        int nc = b->cap_files ? b->cap_files * 2 : 64;
        tc_file *p = realloc(b->files, sizeof *p * (size_t)nc);
        if (!p)
            return NULL;
        b->files = p;
        b->cap_files = nc;
    }
    tc_file *f = &b->files[b->n_files];
    memset(f, 0, sizeof *f);
    char base[1024];
    snprintf(base, sizeof base, "%s/%s", b->dir, name);
    size_t n = strlen(base);
    if (n > 2 && (!strcmp(base + n - 2, ".c") || !strcmp(base + n - 2, ".S")))
        base[n - 2] = 0;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s/%s", b->dir, name);
    f->src = strdup(tmp);
    snprintf(tmp, sizeof tmp, "%s.o", base);
    f->obj = strdup(tmp);
    snprintf(tmp, sizeof tmp, "%s.log", base);
    f->log = strdup(tmp);
    if (!f->src || !f->obj || !f->log) {
        free(f->src);
        free(f->obj);
        free(f->log);
        return NULL;
    }
    b->n_files++;
    return f;
}

kiln_status kiln_tc_add_kernel(kiln_tc_build *b, const char *name, const char *source,
                               char hex[33], kiln_error *err)
{
    kiln_hash h;
    kiln_hash_init(&h, 5);
    kiln_hash_str(&h, b->cc.key);
    kiln_hash_str(&h, source);
    kiln_hash_hex(&h, hex);
    tc_file *f = add_file(b, name);
    if (!f)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    char obj[64];
    snprintf(obj, sizeof obj, "objects/%s.o", hex);
    f->cached = path2(b->cache, obj);
    if (!f->cached)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (file_exists(f->cached)) {
        b->n_cached++;
        return KILN_OK;
    }
    f->compile = true;
    return kiln_write_text(f->src, source, err);
}

kiln_status kiln_tc_add_source(kiln_tc_build *b, const char *name, const char *source,
                               kiln_error *err)
{
    tc_file *f = add_file(b, name);
    if (!f)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    f->compile = true;
    return kiln_write_text(f->src, source, err);
}

char *kiln_tc_model_path(const kiln_tc_build *b, const char *build_id, kiln_error *err)
{
    char *mdir = path2(b->cache, "models");
    char name[64];
    snprintf(name, sizeof name, "%s.so", build_id);
    char *p = mdir ? path2(mdir, name) : NULL;
    if (!p)
        kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    else if (kiln_mkdirs(mdir, err) != KILN_OK) {
        free(p);
        p = NULL;
    }
    free(mdir);
    return p;
}

bool kiln_tc_have(const char *path)
{
    return file_exists(path);
}

kiln_status kiln_tc_link(kiln_tc_build *b, const char *out_path, int parallel, kiln_error *err)
{
    kiln_cc_job *jobs = calloc((size_t)b->n_files + 1, sizeof *jobs);
    const char **objs = calloc((size_t)b->n_files + 1, sizeof *objs);
    char *inc = path2(b->dir, "include");
    char *tmp_so = path2(b->dir, "model.so"), *llog = path2(b->dir, "link.log");
    kiln_status s = KILN_OK;
    if (!jobs || !objs || !inc || !tmp_so || !llog) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    int n_jobs = 0;
    for (int i = 0; i < b->n_files; i++)
        if (b->files[i].compile)
            jobs[n_jobs++] = (kiln_cc_job){b->files[i].src, b->files[i].obj, b->files[i].log};
    if (parallel <= 0)
        parallel = (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* the headers the sources include: written only when something compiles
     * (a build the caches answer, or run from loaded kernels, writes none) */
    if (n_jobs > 0 && (s = kiln_write_headers(b->dir, err)) != KILN_OK)
        goto done;
    if ((s = kiln_cc_compile(&b->cc, jobs, n_jobs, parallel, inc, err)) != KILN_OK)
        goto done;
    for (int i = 0; i < b->n_files; i++) {
        tc_file *f = &b->files[i];
        if (f->cached && f->compile && (s = kiln_tc_move_file(f->obj, f->cached, err)) != KILN_OK)
            goto done;
        objs[i] = f->cached ? f->cached : f->obj;
    }
    if ((s = kiln_cc_link(&b->cc, objs, b->n_files, tmp_so, llog, err)) != KILN_OK)
        goto done;
    s = kiln_tc_move_file(tmp_so, out_path, err);
done:
    free(jobs);
    free(objs);
    free(inc);
    free(tmp_so);
    free(llog);
    return s;
}
