/* runtime/module.c: loading a compiled model (.so) and running it: the graph
 * executor.
 *
 * Load: dlopen the file, call its kiln_model_get(), check the ABI version and
 * validate the whole descriptor before trusting any of it (a corrupt or
 * mismatched .so gives an error naming the bad field, never a crash: every
 * tensor lies inside the arena or the weights blob, every id is in range, every
 * shape is sane). Then allocate the 64-byte-aligned arena and the per-thread
 * workspace, start the thread pool, and resolve every step's argument pointers
 * into one flat array, and parse the node of every fallback step (a node no
 * kernel template takes, run by its reference kernel: runtime/ref_step.c).
 * Run is a loop over the steps calling fn(args, &rt), or the fallback node's
 * reference kernel: nothing is allocated and nothing is looked up.
 *
 * Validation cannot defend against a .so that is malicious: loading one runs
 * its code. It guards against stale, truncated-by-a-bug or mismatched models.
 */
#define _DEFAULT_SOURCE 1
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h> /* _mm_clflush, _mm_mfence (SSE2) */
#endif

#include "kiln/abi.h"
#include "kiln/runtime.h"
#include "runtime/module_internal.h"
#include "runtime/pool.h"
#include "util/bigmem.h"
#include "util/error.h"

/* sanity limits on descriptor fields (far above any real model) */
#define MAX_TENSORS (1 << 24)
#define MAX_STEPS (1 << 24)
#define MAX_ARGS_PER_STEP (1 << 16)
#define MAX_BYTES ((int64_t)1 << 44) /* 16 TiB */
#define ALIGN 64

static int64_t round_up(int64_t v, int64_t a)
{
    return (v + a - 1) / a * a;
}

static const char *tensor_name(const kiln_abi_tensor *t)
{
    return t->name ? t->name : "(unnamed)";
}

/* Checks tensor `i` of the descriptor. */
static kiln_status check_tensor(const char *path, const kiln_abi_model *d, int i, kiln_error *err)
{
    const kiln_abi_tensor *t = &d->tensors[i];
    const char *nm = tensor_name(t);
    if (t->dtype <= KILN_DTYPE_UNDEFINED || t->dtype >= KILN_DTYPE_COUNT)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': invalid dtype %d", path, i,
                           nm, (int)t->dtype);
    if (t->rank < 0 || t->rank > 8)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': invalid rank %d", path, i,
                           nm, (int)t->rank);
    int64_t numel = 1;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0 || t->dims[k] > MAX_BYTES)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': invalid dimension %d = %lld",
                               path, i, nm, k, (long long)t->dims[k]);
        if (t->dims[k] != 0 && numel > MAX_BYTES / t->dims[k])
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': shape too large", path, i,
                               nm);
        numel *= t->dims[k];
    }
    int64_t min_bytes = numel * (int64_t)kiln_dtype_size((kiln_dtype)t->dtype);
    if (t->storage != KILN_STORAGE_ARENA && t->storage != KILN_STORAGE_WEIGHTS &&
        t->storage != KILN_STORAGE_FILE)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': invalid storage kind %d",
                           path, i, nm, (int)t->storage);
    if (t->storage == KILN_STORAGE_FILE) { /* a plain name in the .so's folder */
        if (!t->file || !t->file[0] || t->file[0] == '.' || strchr(t->file, '/') ||
            strlen(t->file) > 255)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: tensor %d '%s': invalid weights file name",
                               path, i, nm);
        if (t->offset != 0 || t->nbytes < min_bytes)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "%s: tensor %d '%s': %lld bytes of storage for %lld elements of %s",
                               path, i, nm, (long long)t->nbytes, (long long)numel,
                               kiln_dtype_name((kiln_dtype)t->dtype));
        return KILN_OK;
    }
    int64_t limit = t->storage == KILN_STORAGE_ARENA ? d->arena_bytes : d->weights_bytes;
    const char *where = t->storage == KILN_STORAGE_ARENA ? "arena" : "weights";
    if (t->offset < 0 || t->nbytes < 0 || t->offset > limit || t->nbytes > limit - t->offset)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: tensor %d '%s': %lld bytes at offset %lld lie outside the %s "
                           "(%lld bytes)",
                           path, i, nm, (long long)t->nbytes, (long long)t->offset, where,
                           (long long)limit);
    if (t->offset % ALIGN != 0)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: tensor %d '%s': offset %lld is not 64-byte aligned", path, i, nm,
                           (long long)t->offset);
    if (t->nbytes < min_bytes)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s: tensor %d '%s': %lld bytes of storage for %lld elements of %s",
                           path, i, nm, (long long)t->nbytes, (long long)numel,
                           kiln_dtype_name((kiln_dtype)t->dtype));
    return KILN_OK;
}

/* Checks a list of graph input/output tensor ids. */
static kiln_status check_io(const char *path, const kiln_abi_model *d, const char *what, int n,
                            const int32_t *ids, kiln_error *err)
{
    if (n < 0 || n > MAX_TENSORS || (n > 0 && !ids))
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid number of %ss %d", path, what, n);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= d->n_tensors)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "%s: %s %d refers to tensor %d (the model has %d)", path, what, i,
                               (int)ids[i], (int)d->n_tensors);
        const kiln_abi_tensor *t = &d->tensors[ids[i]];
        if (t->storage != KILN_STORAGE_ARENA)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: %s %d '%s' is not stored in the arena",
                               path, what, i, tensor_name(t));
    }
    return KILN_OK;
}

static kiln_status validate(const char *path, const kiln_abi_model *d, kiln_error *err)
{
    if (d->abi_version != KILN_ABI_VERSION)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: compiled for kiln ABI version %u, but this runtime implements "
                           "version %d: recompile the model with this kiln",
                           path, (unsigned)d->abi_version, KILN_ABI_VERSION);
    if (d->n_tensors < 0 || d->n_tensors > MAX_TENSORS || (d->n_tensors > 0 && !d->tensors))
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid tensor table (%d tensors)", path,
                           (int)d->n_tensors);
    if (d->n_steps < 0 || d->n_steps > MAX_STEPS || (d->n_steps > 0 && !d->steps))
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid step table (%d steps)", path,
                           (int)d->n_steps);
    if (d->arena_bytes < 0 || d->arena_bytes > MAX_BYTES)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid arena size %lld", path,
                           (long long)d->arena_bytes);
    if (d->workspace_bytes < 0 || d->workspace_bytes > MAX_BYTES)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid workspace size %lld", path,
                           (long long)d->workspace_bytes);
    if (d->weights_bytes < 0 || d->weights_bytes > MAX_BYTES ||
        (d->weights_bytes > 0 && !d->weights))
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: invalid weights blob (%lld bytes at %p)",
                           path, (long long)d->weights_bytes, (const void *)d->weights);
    if (d->weights_bytes > 0 && (uintptr_t)d->weights % ALIGN != 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "%s: the weights blob is not 64-byte aligned",
                           path);
    for (int i = 0; i < d->n_tensors; i++) {
        kiln_status st = check_tensor(path, d, i, err);
        if (st != KILN_OK)
            return st;
    }
    for (int s = 0; s < d->n_steps; s++) {
        const kiln_abi_step *st = &d->steps[s];
        const char *nm = st->name ? st->name : "(unnamed)";
        if (!st->fn && !st->ref_node)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: step %d '%s' has no kernel", path, s, nm);
        if (st->n_args < 0 || st->n_args > MAX_ARGS_PER_STEP || (st->n_args > 0 && !st->args))
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: step %d '%s': invalid argument list (%d)",
                               path, s, nm, (int)st->n_args);
        if (st->extent < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "%s: step %d '%s': negative extent %d", path,
                               s, nm, (int)st->extent);
        for (int a = 0; a < st->n_args; a++)
            if (st->args[a] < 0 || st->args[a] >= d->n_tensors)
                return kiln_errorf(err, KILN_ERR_PARSE,
                                   "%s: step %d '%s': argument %d refers to tensor %d (the model "
                                   "has %d)",
                                   path, s, nm, a, (int)st->args[a], (int)d->n_tensors);
    }
    kiln_status st = check_io(path, d, "input", d->n_inputs, d->inputs, err);
    if (st == KILN_OK)
        st = check_io(path, d, "output", d->n_outputs, d->outputs, err);
    return st;
}

static void tensor_shape(const kiln_abi_tensor *t, kiln_shape *s)
{
    memset(s, 0, sizeof *s);
    s->rank = t->rank;
    for (int k = 0; k < t->rank; k++)
        s->dims[k] = t->dims[k];
}

/* Large buffers (the arena, the weights) on transparent huge pages where the
 * kernel offers them: a network streams its weights from DRAM on every run,
 * and with 4 KiB pages each page of them costs a TLB miss and a page walk,
 * and the hardware prefetchers stop at every page boundary. Aligned to 2 MiB
 * and advised MADV_HUGEPAGE; KILN_HUGE_PAGES=0 turns it off. */
#define HUGE_BYTES ((int64_t)KILN_HUGE_PAGE_BYTES)

/* *huge (may be NULL): whether the kernel accepted the advice */
static void *big_alloc(int64_t bytes, bool *huge)
{
    if (huge)
        *huge = false;
    /* rounded up to whole huge pages: the tail of the arena on one too */
    if (kiln_huge_pages_wanted((size_t)bytes)) {
        void *p = kiln_big_malloc((size_t)round_up(bytes, HUGE_BYTES), huge);
        if (p)
            return p;
    }
    return aligned_alloc(ALIGN, (size_t)round_up(bytes, ALIGN));
}

void kiln_module_destroy(kiln_module *m)
{
    if (!m)
        return;
    kiln_pool_destroy(m->pool);
    for (int i = 0; m->fmap && i < m->desc->n_tensors; i++)
        if (m->fmap[i])
            munmap(m->fmap[i], m->fmap_len[i]);
    free(m->fmap);
    free(m->fmap_len);
    free(m->arena);
    free(m->weights);
    free(m->workspace);
    free(m->args);
    free(m->step_args);
    free(m->outputs);
    free(m->ref);
    kiln_arena_destroy(m->ref_arena);
    free(m->spill);
    if (m->dl)
        dlclose(m->dl);
    if (m->owner_free)
        m->owner_free(m->owner);
    free(m);
}

/* Whether the ELF file at path holds every byte its headers say it has: a
 * truncated .so maps pages past its end, and reading them is SIGBUS, not a
 * dlopen error. */
kiln_status kiln_so_complete(const char *path, kiln_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "%s: cannot open", path);
    Elf64_Ehdr eh;
    kiln_status s = KILN_OK;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || fread(&eh, sizeof eh, 1, f) != 1 ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr)) {
        s = kiln_errorf(err, KILN_ERR_PARSE,
                        "%s: cannot load as a shared object: not a 64-bit ELF file", path);
        goto done;
    }
    /* offsets and sizes are at most 2^63 here: their sums do not wrap */
    const uint64_t big = UINT64_C(1) << 62;
    uint64_t size = (uint64_t)sb.st_size;
    uint64_t end =
        (eh.e_phoff < big ? eh.e_phoff : big) + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
    uint64_t sh = (eh.e_shoff < big ? eh.e_shoff : big) + (uint64_t)eh.e_shnum * eh.e_shentsize;
    end = sh > end ? sh : end;
    for (int i = 0; i < eh.e_phnum && end <= size; i++) {
        Elf64_Phdr ph;
        if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 ||
            fread(&ph, sizeof ph, 1, f) != 1)
            break;
        uint64_t seg =
            (ph.p_offset < big ? ph.p_offset : big) + (ph.p_filesz < big ? ph.p_filesz : big);
        if (ph.p_type == PT_LOAD && seg > end)
            end = seg;
    }
    if (end > size)
        s = kiln_errorf(err, KILN_ERR_PARSE,
                        "%s: cannot load as a shared object: truncated (its headers need %llu "
                        "bytes, the file has %llu)",
                        path, (unsigned long long)end, (unsigned long long)size);
done:
    fclose(f);
    return s;
}

/* Maps the KILN_STORAGE_FILE tensors' files (beside the .so), read-only. */
static kiln_status map_files(kiln_module *m, const char *path, kiln_error *err)
{
    const kiln_abi_model *d = m->desc;
    const char *slash = strrchr(path, '/');
    for (int i = 0; i < d->n_tensors; i++) {
        const kiln_abi_tensor *t = &d->tensors[i];
        if (t->storage != KILN_STORAGE_FILE)
            continue;
        if (!m->fmap) {
            m->fmap = calloc((size_t)d->n_tensors, sizeof *m->fmap);
            m->fmap_len = calloc((size_t)d->n_tensors, sizeof *m->fmap_len);
            if (!m->fmap || !m->fmap_len)
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        }
        char p[4400];
        snprintf(p, sizeof p, "%.*s/%s", slash ? (int)(slash - path) : 1, slash ? path : ".",
                 t->file);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < t->nbytes) {
            kiln_status s = kiln_errorf(
                err, KILN_ERR_IO, "%s: weights file %s of tensor '%s' %s: compile the model again",
                path, p, t->name ? t->name : "", fd < 0 ? "is missing" : "is too short");
            if (fd >= 0)
                close(fd);
            return s;
        }
        size_t len = t->nbytes > 0 ? (size_t)t->nbytes : 1;
        void *a = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (a == MAP_FAILED)
            return kiln_errorf(err, KILN_ERR_IO, "%s: cannot map %s: %s", path, p,
                               strerror(errno));
        m->fmap[i] = a;
        m->fmap_len[i] = len;
    }
    return KILN_OK;
}

static kiln_status module_init(kiln_module *m, const char *path, const kiln_abi_model *d,
                               int n_threads, int bind, kiln_error *err);

static kiln_status resolve_opts(const kiln_module_options *opts, int *n_threads, int *bind,
                                kiln_error *err)
{
    kiln_module_options o = {.num_threads = 0, .bind_threads = -1};
    if (opts)
        o = *opts;
    kiln_status st = kiln_threads_resolve(o.num_threads, n_threads, err);
    if (st == KILN_OK)
        st = kiln_bind_resolve(o.bind_threads, bind, err);
    return st;
}

kiln_status kiln_module_load_desc(const kiln_abi_model *d, const char *path, const char *dl_path,
                                  void *owner, void (*owner_free)(void *),
                                  const kiln_module_options *opts, kiln_module **out,
                                  kiln_error *err)
{
    int n_threads, bind;
    kiln_status st = resolve_opts(opts, &n_threads, &bind, err);
    kiln_module *m = st == KILN_OK ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        if (owner_free)
            owner_free(owner);
        return st != KILN_OK ? st : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    m->owner = owner;
    m->owner_free = owner_free;
    dlerror();
    m->dl = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL); /* its kernels stay loaded */
    if (!m->dl) {
        const char *why = dlerror();
        st = kiln_errorf(err, KILN_ERR_IO, "%s: cannot load the kernels' %s: %s", path, dl_path,
                         why ? why : "unknown error");
    } else if ((st = validate(path, d, err)) == KILN_OK) {
        m->desc = d;
        if ((st = map_files(m, path, err)) == KILN_OK &&
            (st = module_init(m, path, d, n_threads, bind, err)) == KILN_OK) {
            *out = m;
            return KILN_OK;
        }
    }
    kiln_module_destroy(m);
    return st;
}

kiln_status kiln_module_load(const char *path, const kiln_module_options *opts, kiln_module **out,
                             kiln_error *err)
{
    if (!path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_module_load: NULL argument");
    int n_threads, bind;
    kiln_status st = resolve_opts(opts, &n_threads, &bind, err);
    if (st != KILN_OK)
        return st;

    struct stat sb;
    if (stat(path, &sb) != 0)
        return kiln_errorf(err, KILN_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return kiln_errorf(err, KILN_ERR_IO, "%s: not a regular file", path);

    if ((st = kiln_so_complete(path, err)) != KILN_OK)
        return st;
    kiln_module *m = calloc(1, sizeof *m);
    if (!m)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    /* a path without '/' would make dlopen search the library path */
    char local[4096];
    const char *dl_path = path;
    if (!strchr(path, '/')) {
        snprintf(local, sizeof local, "./%s", path);
        dl_path = local;
    }
    dlerror();
    m->dl = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
    if (!m->dl) {
        const char *why = dlerror();
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: cannot load as a shared object: %s", path,
                         why ? why : "unknown error");
        goto fail;
    }
    dlerror();
    void *sym = dlsym(m->dl, KILN_MODEL_SYMBOL);
    if (!sym) {
        st = kiln_errorf(err, KILN_ERR_PARSE,
                         "%s: no symbol '%s': not a model compiled by kiln", path,
                         KILN_MODEL_SYMBOL);
        goto fail;
    }
    kiln_model_get_fn get;
    memcpy(&get, &sym, sizeof get); /* object pointer -> function pointer (POSIX) */
    const kiln_abi_model *d = get();
    if (!d) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: %s() returned no model descriptor", path,
                         KILN_MODEL_SYMBOL);
        goto fail;
    }
    if ((st = validate(path, d, err)) != KILN_OK)
        goto fail;
    m->desc = d;
    if ((st = map_files(m, path, err)) != KILN_OK ||
        (st = module_init(m, path, d, n_threads, bind, err)) != KILN_OK)
        goto fail;
    *out = m;
    return KILN_OK;
fail:
    kiln_module_destroy(m);
    return st;
}

/* Everything a validated descriptor (m->desc = d, its files mapped) needs to
 * run: arena, weights, workspace, argument pointers, fallback steps, the
 * thread pool. On failure m is the caller's to destroy. */
static kiln_status module_init(kiln_module *m, const char *path, const kiln_abi_model *d,
                               int n_threads, int bind, kiln_error *err)
{
    kiln_status st = KILN_OK;
    /* memory: arena, workspace (one 64-byte-aligned slice per thread) */
    int64_t arena = round_up(d->arena_bytes > 0 ? d->arena_bytes : ALIGN, ALIGN);
    m->arena = big_alloc(arena, NULL);
    /* the weights: copied out of the .so onto huge pages when it pays */
    if (kiln_huge_pages_wanted((size_t)d->weights_bytes)) {
        bool huge;
        m->weights = big_alloc(d->weights_bytes, &huge);
        if (m->weights && huge)
            memcpy(m->weights, d->weights, (size_t)d->weights_bytes);
        else {
            free(m->weights); /* no huge pages here: read the .so's own copy */
            m->weights = NULL;
        }
    }
    int64_t ws_slice = round_up(d->workspace_bytes, ALIGN);
    if (ws_slice > 0 && ws_slice > MAX_BYTES / n_threads) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: workspace too large", path);
        goto fail;
    }
    if (ws_slice > 0)
        m->workspace = aligned_alloc(ALIGN, (size_t)(ws_slice * n_threads));
    if (!m->arena || (ws_slice > 0 && !m->workspace)) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY,
                         "%s: cannot allocate the arena (%lld bytes) and workspace (%d x %lld bytes)",
                         path, (long long)arena, n_threads, (long long)ws_slice);
        goto fail;
    }
    memset(m->arena, 0, (size_t)arena);
    if (m->workspace)
        memset(m->workspace, 0, (size_t)(ws_slice * n_threads));

    /* resolve every step's argument pointers once */
    int64_t total_args = 0;
    for (int s = 0; s < d->n_steps; s++)
        total_args += d->steps[s].n_args;
    m->args = calloc((size_t)(total_args > 0 ? total_args : 1), sizeof *m->args);
    m->step_args = calloc((size_t)(d->n_steps > 0 ? d->n_steps : 1), sizeof *m->step_args);
    m->outputs = calloc((size_t)(d->n_outputs > 0 ? d->n_outputs : 1), sizeof *m->outputs);
    if (!m->args || !m->step_args || !m->outputs) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    void **a = m->args;
    for (int s = 0; s < d->n_steps; s++) {
        m->step_args[s] = a;
        for (int k = 0; k < d->steps[s].n_args; k++)
            *a++ = kiln_module_tensor_data(m, d->steps[s].args[k]);
    }
    /* fallback steps: each node parsed once, here */
    for (int s = 0; s < d->n_steps; s++) {
        if (d->steps[s].fn)
            continue;
        if (!m->ref) {
            m->ref = calloc((size_t)d->n_steps, sizeof *m->ref);
            m->ref_arena = kiln_arena_create();
            if (!m->ref || !m->ref_arena) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
                goto fail;
            }
        }
        if ((st = kiln_ref_step_create(path, d, s, (void *const *)m->step_args[s], m->ref_arena,
                                       &m->ref[s], err)) != KILN_OK)
            goto fail;
    }
    for (int i = 0; i < d->n_outputs; i++) {
        const kiln_abi_tensor *t = &d->tensors[d->outputs[i]];
        m->outputs[i].dtype = (kiln_dtype)t->dtype;
        tensor_shape(t, &m->outputs[i].shape);
        m->outputs[i].data = (char *)m->arena + t->offset;
    }

    if ((st = kiln_pool_create(n_threads, bind, -1, &m->pool, err)) != KILN_OK) {
        kiln_error_prefix(err, st, "%s: ", path);
        goto fail;
    }
    m->rt.pool = m->pool;
    m->rt.parallel_for = kiln_pool_parallel_for;
    m->rt.num_threads = n_threads;
    m->rt.workspace = m->workspace;
    m->rt.workspace_bytes = ws_slice;
    m->num_threads = n_threads;
    return KILN_OK;
fail:
    return st;
}

void *kiln_module_tensor_data(const kiln_module *m, int id)
{
    const kiln_abi_tensor *t = &m->desc->tensors[id];
    if (t->storage == KILN_STORAGE_FILE)
        return m->fmap[id];
    if (t->storage == KILN_STORAGE_WEIGHTS)
        return m->weights ? m->weights + t->offset
                          : (void *)(uintptr_t)(m->desc->weights + t->offset);
    return (char *)m->arena + t->offset;
}

int kiln_module_num_inputs(const kiln_module *m)
{
    return m ? m->desc->n_inputs : 0;
}

int kiln_module_num_outputs(const kiln_module *m)
{
    return m ? m->desc->n_outputs : 0;
}

static kiln_status io_info(const kiln_module *m, int i, int n, const int32_t *ids,
                           const char **name, kiln_dtype *dtype, kiln_shape *shape)
{
    if (!m || i < 0 || i >= n)
        return KILN_ERR_INVALID_ARGUMENT;
    const kiln_abi_tensor *t = &m->desc->tensors[ids[i]];
    if (name)
        *name = t->name ? t->name : "";
    if (dtype)
        *dtype = (kiln_dtype)t->dtype;
    if (shape)
        tensor_shape(t, shape);
    return KILN_OK;
}

kiln_status kiln_module_input_info(const kiln_module *m, int i, const char **name,
                                   kiln_dtype *dtype, kiln_shape *shape)
{
    return io_info(m, i, m ? m->desc->n_inputs : 0, m ? m->desc->inputs : NULL, name, dtype,
                   shape);
}

kiln_status kiln_module_output_info(const kiln_module *m, int i, const char **name,
                                    kiln_dtype *dtype, kiln_shape *shape)
{
    return io_info(m, i, m ? m->desc->n_outputs : 0, m ? m->desc->outputs : NULL, name, dtype,
                   shape);
}

kiln_status kiln_module_set_input(kiln_module *m, int i, const kiln_tensor *t, kiln_error *err)
{
    if (!m || !t)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_module_set_input: NULL argument");
    if (i < 0 || i >= m->desc->n_inputs)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "input index %d is out of range (the model has %d input%s)", i,
                           (int)m->desc->n_inputs, m->desc->n_inputs == 1 ? "" : "s");
    const kiln_abi_tensor *d = &m->desc->tensors[m->desc->inputs[i]];
    kiln_shape want;
    tensor_shape(d, &want);
    char gb[256], wb[256];
    if (t->dtype != (kiln_dtype)d->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input %d '%s': dtype %s, but the model expects %s", i, tensor_name(d),
                           kiln_dtype_name(t->dtype), kiln_dtype_name((kiln_dtype)d->dtype));
    if (!kiln_shape_equal(&t->shape, &want))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input %d '%s': shape %s, but the model expects %s", i, tensor_name(d),
                           kiln_shape_str(&t->shape, gb, sizeof gb),
                           kiln_shape_str(&want, wb, sizeof wb));
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb < 0 || (nb > 0 && !t->data))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input %d '%s': tensor has no data", i,
                           tensor_name(d));
    if (nb > 0)
        memcpy((char *)m->arena + d->offset, t->data, (size_t)nb);
    return KILN_OK;
}

kiln_status kiln_module_run(kiln_module *m, kiln_error *err)
{
    if (!m)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_module_run: NULL module");
    const int n = m->desc->n_steps;
    for (int s = 0; s < n; s++) {
        kiln_status st = kiln_module_exec_step(m, s, err);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

const kiln_tensor *kiln_module_output(const kiln_module *m, int i)
{
    if (!m || i < 0 || i >= m->desc->n_outputs)
        return NULL;
    return &m->outputs[i];
}

int kiln_module_num_threads(const kiln_module *m)
{
    return m ? m->num_threads : 0;
}

const char *kiln_module_name(const kiln_module *m)
{
    return m && m->desc->name ? m->desc->name : "";
}

const char *kiln_module_target(const kiln_module *m)
{
    return m && m->desc->target ? m->desc->target : "";
}

const char *kiln_module_build_id(const kiln_module *m)
{
    return m && m->desc->build_id ? m->desc->build_id : "";
}

const char *kiln_module_metadata_json(const kiln_module *m)
{
    return m && m->desc->metadata_json ? m->desc->metadata_json : "";
}

int kiln_module_num_steps(const kiln_module *m)
{
    return m ? m->desc->n_steps : 0;
}

kiln_status kiln_module_step_info(const kiln_module *m, int i, kiln_step_info *info)
{
    if (!m || !info || i < 0 || i >= m->desc->n_steps)
        return KILN_ERR_INVALID_ARGUMENT;
    const kiln_abi_step *s = &m->desc->steps[i];
    info->name = s->name ? s->name : "";
    info->op = s->op ? s->op : "";
    info->workload = s->workload ? s->workload : "";
    info->workload_hash = s->workload_hash;
    info->flops = s->flops;
    info->shapes = s->shapes ? s->shapes : "";
    info->layouts = s->layouts ? s->layouts : "";
    info->config = s->config ? s->config : "";
    return KILN_OK;
}

/* Writes back and invalidates the cache lines of [p, p + n) at every level. */
static void evict_range(const unsigned char *p, int64_t n)
{
#if defined(__x86_64__) || defined(__i386__)
    for (const unsigned char *c = p - ((uintptr_t)p & 63); c < p + n; c += 64)
        _mm_clflush(c);
    _mm_mfence(); /* the run that follows finds them gone */
#elif defined(__aarch64__)
    for (const unsigned char *c = p - ((uintptr_t)p & 63); c < p + n; c += 64)
        __asm__ __volatile__("dc civac, %0" : : "r"(c) : "memory");
    __asm__ __volatile__("dsb ish" : : : "memory");
#else
    (void)p;
    (void)n;
#endif
}

/* The evictions below are preprocs of a call timed alone: they end with the
 * module's workers woken (kiln_pool_wake), as a kernel inside a network finds
 * them. An eviction outlasts the pool's spin and the workers sleep meanwhile;
 * a timed call that has to wake them starts on the calling thread alone (the
 * worker took 25-65 us to join the first wake job of a tuner's request, on
 * the 2-vCPU AMD EPYC VM: 5-10% of a 500 us conv). Nothing is waited for
 * when no worker sleeps (a short eviction), and a worker still asleep after
 * 2 ms (a machine busy with other work) is left to join late: a tiny task
 * is timed hundreds of times per sample. */
#define KILN_EVICT_WAKE_TIMEOUT_US 2000

kiln_status kiln_module_evict_weights(void *module, kiln_error *err)
{
    (void)err;
    kiln_module *m = module;
    if (!m)
        return KILN_OK;
    if (m->desc->weights_bytes > 0)
        evict_range(m->weights ? m->weights : m->desc->weights, m->desc->weights_bytes);
    (void)kiln_pool_wake(m->pool, KILN_EVICT_WAKE_TIMEOUT_US);
    return KILN_OK;
}

kiln_status kiln_module_evict_weights_to_llc(void *module, kiln_error *err)
{
    kiln_module *m = module;
    if (!m || m->desc->weights_bytes <= 0)
        return KILN_OK;
    const unsigned char *w = m->weights ? m->weights : m->desc->weights;
    int64_t n = m->desc->weights_bytes;
    if (!m->spill) { /* twice this core's L2, streamed over after the weights */
        long l2 = kiln_cache_bytes(2);
        m->spill_bytes = (size_t)(l2 > 0 ? 2 * l2 : 4 << 20);
        if (!(m->spill = malloc(m->spill_bytes)))
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        memset(m->spill, 0, m->spill_bytes);
    }
    evict_range(w, n); /* out of every core's caches */
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < n; i += 64) /* into this core's, and the LLC */
        sink ^= w[i];
    (void)sink;
    for (size_t i = 0; i < m->spill_bytes; i += 64) /* this core's L1/L2 spill into the LLC */
        m->spill[i]++;
    __asm__ __volatile__("" : : "r"(m->spill) : "memory");
    (void)kiln_pool_wake(m->pool, KILN_EVICT_WAKE_TIMEOUT_US);
    return KILN_OK;
}

kiln_status kiln_module_run_step(kiln_module *m, int i)
{
    if (!m || i < 0 || i >= m->desc->n_steps)
        return KILN_ERR_INVALID_ARGUMENT;
    return kiln_module_exec_step(m, i, NULL);
}
