/* toolchain/compile.c: kiln_compile and kiln_compile_cached.
 *
 * kiln_compile: passes -> lowering -> code generation into a private build
 * directory (headers, one C file per unique kernel, model.c, the weights blob
 * and weights.S) -> $CC on the kernels whose object is not in the cache
 * (<cache>/objects/<hash(source, flags, compiler, headers)>.o), in parallel
 * -> model.c and weights.S -> one link into out_path (written beside it and
 * renamed, so a failed build never leaves a half-written model). Stage times
 * go to stderr with opts->verbose.
 *
 * kiln_compile_cached: the .so itself is cached as
 * <cache>/models/<hash(graph content incl. weights, target, records,
 * compiler, kiln version)>.so.
 *
 * Graphs with ops that have no kernel template are refused with a message
 * naming the ops (they run on the reference executor: kiln run --executor
 * ref); see docs/COMPILER.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/c/codegen.h"
#include "lower/hash.h"
#include "toolchain/toolchain.h"
#include "util/error.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Moves `from` to `to` (copy + unlink across file systems). */
static kiln_status move_file(const char *from, const char *to, kiln_error *err)
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

static void json_str(kiln_sb *b, const char *s)
{
    kiln_sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            kiln_sb_printf(b, "\\%c", *p);
        else if (*p < 32)
            kiln_sb_printf(b, "\\u%04x", *p);
        else
            kiln_sb_printf(b, "%c", *p);
    }
    kiln_sb_puts(b, "\"");
}

typedef struct build {
    char *dir;       /* private build directory */
    char *cache;     /* cache root */
    char **paths;    /* strings to free */
    int n_paths, cap_paths;
} build;

static char *keep(build *b, char *s)
{
    if (!s)
        return NULL;
    if (b->n_paths == b->cap_paths) {
        int nc = b->cap_paths ? b->cap_paths * 2 : 64;
        char **p = realloc(b->paths, sizeof *p * (size_t)nc);
        if (!p) {
            free(s);
            return NULL;
        }
        b->paths = p;
        b->cap_paths = nc;
    }
    b->paths[b->n_paths++] = s;
    return s;
}

static char *fmt(build *b, const char *f, const char *x, const char *y)
{
    size_t n = strlen(f) + strlen(x) + (y ? strlen(y) : 0) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, f, x, y ? y : "");
    return keep(b, s);
}

static void build_free(build *b)
{
    for (int i = 0; i < b->n_paths; i++)
        free(b->paths[i]);
    free(b->paths);
    free(b->dir);
    free(b->cache);
}

static kiln_status dump_file(const char *dir, const char *name, const char *text, kiln_error *err)
{
    if (!dir)
        return KILN_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return kiln_write_text(path, text, err);
}

static kiln_status compile_impl(const kiln_graph *g, const kiln_compile_options *opts_in,
                                uint64_t knob_seed, const char *out_path, char **cached_path,
                                kiln_error *err);

kiln_status kiln_compile(const kiln_graph *g, const kiln_compile_options *opts_in,
                         const char *out_path, kiln_error *err)
{
    return kiln_compile_ex(g, opts_in, 0, out_path, err);
}

kiln_status kiln_compile_ex(const kiln_graph *g, const kiln_compile_options *opts_in,
                            uint64_t knob_seed, const char *out_path, kiln_error *err)
{
    return compile_impl(g, opts_in, knob_seed, out_path, NULL, err);
}

/* out_path NULL and cached_path set: the .so goes to (or is found in)
 * <cache>/models/<build id>.so, whose malloc'ed path lands in *cached_path. */
static kiln_status compile_impl(const kiln_graph *g, const kiln_compile_options *opts_in,
                                uint64_t knob_seed, const char *out_path, char **cached_path,
                                kiln_error *err)
{
    kiln_compile_options opts = {0};
    if (opts_in)
        opts = *opts_in;
    if (!g || (!out_path && !cached_path))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_compile: no graph or output path");
    if (opts.print_ir_after && !kiln_pass_known(opts.print_ir_after))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "--print-ir-after: no pass named '%s' (see kiln compile --help)",
                           opts.print_ir_after);
    if (opts.records && *opts.records && access(opts.records, R_OK) != 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read tuning records '%s': %s", opts.records,
                           strerror(errno));
    double t0 = now_s();
    kiln_target target;
    kiln_status s = kiln_target_resolve(opts.target, &target, err);
    if (s != KILN_OK)
        return s;
    kiln_pass_ctx *ctx = NULL;
    kiln_lowered *low = NULL;
    kiln_cc cc = {0};
    build bd = {0};
    kiln_cc_job *jobs = NULL;
    const char **objs = NULL;
    char **sources = NULL;
    char *model_src = NULL, *asm_src = NULL;
    int n_kernels = 0, n_cached = 0;
    double t_pass = 0, t_lower = 0, t_gen = 0, t_cc = 0, t_link = 0;

    if ((s = kiln_pass_ctx_create(g, &target, &ctx, err)) != KILN_OK)
        goto done;
    ctx->print_after = opts.print_ir_after;
    ctx->verbose = opts.verbose;
    if ((s = kiln_pass_run_all(ctx, err)) != KILN_OK)
        goto done;
    t_pass = now_s();
    if ((s = kiln_lower(ctx, knob_seed, &low, err)) != KILN_OK)
        goto done;
    if (low->n_fallback > 0) {
        s = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                        "no kernel template for %d node(s) (%s): this graph cannot be compiled "
                        "yet; run it on the reference executor (kiln run MODEL --executor ref)",
                        low->n_fallback, low->fallback_ops);
        goto done;
    }
    t_lower = now_s();
    if ((s = kiln_cc_init(&cc, &target, err)) != KILN_OK)
        goto done;

    /* ---- code generation into a private build directory ---- */
    bd.cache = kiln_cache_dir(opts.cache_dir);
    if (!bd.cache) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    char *objdir = fmt(&bd, "%s/objects", bd.cache, NULL);
    char *tmpdir = fmt(&bd, "%s/tmp", bd.cache, NULL);
    if (!objdir || !tmpdir || (s = kiln_mkdirs(objdir, err)) != KILN_OK ||
        (s = kiln_mkdirs(tmpdir, err)) != KILN_OK)
        goto done;
    bd.dir = fmt(&bd, "%s/build-XXXXXX", tmpdir, NULL) ? strdup(bd.paths[bd.n_paths - 1]) : NULL;
    if (!bd.dir || !mkdtemp(bd.dir)) {
        s = kiln_errorf(err, KILN_ERR_IO, "cannot create a build directory under '%s': %s", tmpdir,
                        strerror(errno));
        goto done;
    }
    if ((s = kiln_write_headers(bd.dir, err)) != KILN_OK)
        goto done;
    if (opts.dump_code_dir) {
        if ((s = kiln_mkdirs(opts.dump_code_dir, err)) != KILN_OK ||
            (s = kiln_write_headers(opts.dump_code_dir, err)) != KILN_OK)
            goto done;
    }
    jobs = calloc((size_t)low->n_tasks + 2, sizeof *jobs);
    objs = calloc((size_t)low->n_tasks + 2, sizeof *objs);
    sources = calloc((size_t)low->n_tasks + 1, sizeof *sources);
    if (!jobs || !objs || !sources) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    int n_jobs = 0, n_objs = 0;
    const char **cache_obj = calloc((size_t)low->n_tasks + 1, sizeof *cache_obj);
    if (!cache_obj) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    kiln_hash bid;
    kiln_hash_init(&bid, 11);
    for (int i = 0; i < low->n_tasks && s == KILN_OK; i++) {
        const kiln_task *t = &low->tasks[i];
        if (t->kernel != i)
            continue;
        n_kernels++;
        if ((s = kiln_codegen_kernel(low, t, &sources[i], err)) != KILN_OK)
            break;
        kiln_hash h;
        kiln_hash_init(&h, 5);
        kiln_hash_str(&h, cc.key);
        kiln_hash_str(&h, sources[i]);
        char hex[33];
        kiln_hash_hex(&h, hex);
        kiln_hash_str(&bid, hex);
        char *cached = fmt(&bd, "%s/%s.o", objdir, hex);
        char cname[160];
        snprintf(cname, sizeof cname, "%s.c", t->fn_name);
        if ((s = dump_file(opts.dump_code_dir, cname, sources[i], err)) != KILN_OK)
            break;
        if (!cached) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        objs[n_objs++] = cached;
        if (file_exists(cached)) {
            n_cached++;
            continue;
        }
        char *src = fmt(&bd, "%s/%s.c", bd.dir, t->fn_name);
        char *obj = fmt(&bd, "%s/%s.o", bd.dir, t->fn_name);
        char *log = fmt(&bd, "%s/%s.log", bd.dir, t->fn_name);
        if (!src || !obj || !log) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        if ((s = kiln_write_text(src, sources[i], err)) != KILN_OK)
            break;
        cache_obj[n_jobs] = cached;
        jobs[n_jobs++] = (kiln_cc_job){src, obj, log};
    }
    if (s != KILN_OK) {
        free(cache_obj);
        goto done;
    }
    /* the build id: kernels, weights, and the model tables */
    int64_t wbytes = 0;
    kiln_codegen_weights(low, NULL, &wbytes, err);
    for (int i = 0; i < low->n_tensors; i++)
        if (low->tensors[i].weights)
            kiln_hash_update(&bid, low->tensors[i].data, (size_t)low->tensors[i].nbytes);
    kiln_sb meta = {0};
    kiln_sb_puts(&meta, "{\"compiler\": \"kiln " KILN_VERSION "\", \"cc\": ");
    json_str(&meta, cc.id);
    kiln_sb_puts(&meta, ", \"flags\": ");
    json_str(&meta, cc.flags);
    kiln_sb_puts(&meta, ", \"target\": ");
    json_str(&meta, target.name);
    kiln_sb_puts(&meta, ", \"records\": ");
    if (opts.records)
        json_str(&meta, opts.records);
    else
        kiln_sb_puts(&meta, "null");
    kiln_sb_printf(&meta,
                   ", \"tuned_tasks\": 0, \"fallbacks\": [], \"kernels\": %d, \"steps\": %d, "
                   "\"bn_folded\": %d, \"const_folded\": %d, \"layout_transforms\": %d, "
                   "\"inplace\": %d}",
                   n_kernels, low->n_tasks, ctx->stat_bn_folded, ctx->stat_const_folded,
                   ctx->stat_transforms, ctx->stat_inplace);
    char *meta_s = kiln_sb_take(&meta);
    const char *mname = g->name ? g->name : "model";
    s = meta_s ? kiln_codegen_model(low, mname, target.name, "", meta_s, wbytes, &model_src, err)
               : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        kiln_hash_str(&bid, model_src);
    free(model_src);
    model_src = NULL;
    char build_id[33];
    kiln_hash_hex(&bid, build_id);
    if (s == KILN_OK && cached_path) {
        /* the compiled-model cache: keyed by everything the .so is made of */
        char *mdir = fmt(&bd, "%s/models", bd.cache, NULL);
        char *mpath = mdir ? fmt(&bd, "%s/%s.so", mdir, build_id) : NULL;
        if (!mpath || (s = kiln_mkdirs(mdir, err)) != KILN_OK) {
            if (s == KILN_OK)
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            *cached_path = strdup(mpath);
            out_path = *cached_path;
            if (!out_path)
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            else if (file_exists(out_path) && !opts.dump_code_dir) {
                free(meta_s);
                free(cache_obj);
                if (opts.verbose)
                    fprintf(stderr, "kiln compile: passes %.2f s, lower %.2f s, codegen %.2f s; "
                                    "model %s found in the cache\n",
                            t_pass - t0, t_lower - t_pass, now_s() - t_lower, build_id);
                goto done;
            }
        }
    }
    /* weights, model.c, weights.S */
    char *blob = fmt(&bd, "%s/weights.bin", bd.dir, NULL);
    if (s == KILN_OK && !blob)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = kiln_codegen_weights(low, blob, &wbytes, err);
    if (s == KILN_OK)
        s = kiln_codegen_model(low, mname, target.name, build_id, meta_s, wbytes, &model_src, err);
    free(meta_s);
    asm_src = s == KILN_OK ? kiln_codegen_weights_asm(blob) : NULL;
    if (s == KILN_OK && !asm_src)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    char *msrc = fmt(&bd, "%s/model.c", bd.dir, NULL), *mobj = fmt(&bd, "%s/model.o", bd.dir, NULL);
    char *mlog = fmt(&bd, "%s/model.log", bd.dir, NULL);
    char *asrc = fmt(&bd, "%s/weights.S", bd.dir, NULL), *aobj = fmt(&bd, "%s/weights.o", bd.dir, NULL);
    char *alog = fmt(&bd, "%s/weights.log", bd.dir, NULL);
    if (s == KILN_OK && (!msrc || !mobj || !mlog || !asrc || !aobj || !alog))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK && ((s = kiln_write_text(msrc, model_src, err)) != KILN_OK ||
                         (s = kiln_write_text(asrc, asm_src, err)) != KILN_OK ||
                         (s = dump_file(opts.dump_code_dir, "model.c", model_src, err)) != KILN_OK ||
                         (s = dump_file(opts.dump_code_dir, "weights.S", asm_src, err)) != KILN_OK)) {
    }
    if (s != KILN_OK) {
        free(cache_obj);
        goto done;
    }
    t_gen = now_s();
    /* ---- compile ---- */
    jobs[n_jobs] = (kiln_cc_job){msrc, mobj, mlog};
    jobs[n_jobs + 1] = (kiln_cc_job){asrc, aobj, alog};
    int parallel = opts.jobs > 0 ? opts.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    s = kiln_cc_compile(&cc, jobs, n_jobs + 2, parallel, fmt(&bd, "%s/include", bd.dir, NULL), err);
    for (int i = 0; i < n_jobs && s == KILN_OK; i++)
        s = move_file(jobs[i].obj, cache_obj[i], err);
    free(cache_obj);
    if (s != KILN_OK)
        goto done;
    t_cc = now_s();
    objs[n_objs++] = mobj;
    objs[n_objs++] = aobj;
    char *tmp_so = fmt(&bd, "%s/model.so", bd.dir, NULL);
    char *llog = fmt(&bd, "%s/link.log", bd.dir, NULL);
    if (!tmp_so || !llog) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((s = kiln_cc_link(&cc, objs, n_objs, tmp_so, llog, err)) != KILN_OK)
        goto done;
    if ((s = move_file(tmp_so, out_path, err)) != KILN_OK)
        goto done;
    t_link = now_s();
    if (opts.verbose)
        fprintf(stderr,
                "kiln compile: passes %.2f s, lower %.2f s, codegen %.2f s, compile %.2f s "
                "(%d kernels, %d cached, %d steps), link %.2f s, total %.2f s\n",
                t_pass - t0, t_lower - t_pass, t_gen - t_lower, t_cc - t_gen, n_kernels,
                n_cached, low->n_tasks, t_link - t_cc, t_link - t0);
done:
    if (bd.dir)
        kiln_rmtree(bd.dir);
    if (sources && low)
        for (int i = 0; i < low->n_tasks; i++)
            free(sources[i]);
    free(sources);
    free(jobs);
    free(objs);
    free(model_src);
    free(asm_src);
    build_free(&bd);
    kiln_cc_free(&cc);
    kiln_lowered_destroy(low);
    kiln_pass_ctx_destroy(ctx);
    return s;
}

/* ---- the model cache --------------------------------------------------------- */

kiln_status kiln_compile_cached(const char *model, uint64_t seed,
                                const kiln_compile_options *opts_in, char **so_path,
                                kiln_error *err)
{
    kiln_compile_options opts = {0};
    if (opts_in)
        opts = *opts_in;
    if (!model || !so_path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_compile_cached: no model");
    double t0 = now_s();
    kiln_graph *g = NULL;
    kiln_status s = kiln_model_load(model, seed, &g, err);
    if (s != KILN_OK)
        return s;
    if (opts.verbose)
        fprintf(stderr, "kiln compile: import %.2f s (%s)\n", now_s() - t0, model);
    char *path = NULL;
    s = compile_impl(g, &opts, 0, NULL, &path, err);
    kiln_graph_destroy(g);
    if (s != KILN_OK) {
        free(path);
        return s;
    }
    *so_path = path;
    return KILN_OK;
}
