/* driver/driver.c: the compile pipeline as stages (driver.h), and
 * kiln_compile / kiln_compile_cached on top of them.
 *
 *   passes     kiln_pass_run_all on a copy of the graph (pass/)
 *   lower      fused groups -> tasks with the templates' default knobs (lower/)
 *   configure  explicit configurations, then tuning records (configs.c)
 *   codegen    one C file per unique kernel, model.c, the weights blob and
 *              weights.S into the toolchain's private workspace; the build
 *              id hashes all of it (codegen/c)
 *   link       $CC on the kernels the object cache lacks, model.c and
 *              weights.S, one link into the .so (toolchain/)
 *
 * kiln_compile_cached keeps the .so itself in <cache>/models/<build id>.so:
 * codegen computes the id, and link finds the model there instead of
 * compiling. A node no template takes is a fallback step (no kernel; the
 * runtime runs its reference kernel), listed in the metadata and, with
 * opts.verbose, on stderr. */
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/c/codegen.h"
#include "codegen/c/ref_node.h"
#include "driver/driver.h"
#include "lower/hash.h"
#include "kiln/abi.h"
#include "util/error.h"
#include "util/packmemo.h"

#define KILN_XSTR_(x) #x
#define KILN_STR_(x) KILN_XSTR_(x)

double kiln_driver_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void kiln_build_destroy(kiln_build *b)
{
    if (!b)
        return;
    kiln_tc_end(b->tc);
    kiln_lowered_destroy(b->low);
    kiln_pass_ctx_destroy(b->ctx);
    kiln_pack_memo_destroy(b->memo);
    kiln_driver_free_layout_hints(b->rec_hints);
    free(b->explicit_cfg);
    free(b->meta);
    free(b->out_path);
    free(b->records);
    free(b->cache_dir);
    free(b->dump_code_dir);
    free(b->print_ir_after);
    free(b);
}

kiln_status kiln_build_create(const kiln_graph *g, const kiln_compile_options *opts,
                              kiln_build **out, kiln_error *err)
{
    if (!g || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_build_create: no graph");
    kiln_build *b = calloc(1, sizeof *b);
    if (!b)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (opts)
        b->opts = *opts;
    b->g = g;
    b->t_start = kiln_driver_now();
    b->records = dup_or_null(b->opts.records && *b->opts.records ? b->opts.records : NULL);
    b->cache_dir = dup_or_null(b->opts.cache_dir);
    b->dump_code_dir = dup_or_null(b->opts.dump_code_dir);
    b->print_ir_after = dup_or_null(b->opts.print_ir_after);
    b->opts.records = b->records;
    b->opts.cache_dir = b->cache_dir;
    b->opts.dump_code_dir = b->dump_code_dir;
    b->opts.print_ir_after = b->print_ir_after;
    kiln_status s = KILN_OK;
    if ((b->opts.records && !b->records) || (opts && opts->cache_dir && !b->cache_dir) ||
        (opts && opts->dump_code_dir && !b->dump_code_dir) ||
        (opts && opts->print_ir_after && !b->print_ir_after))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    else if (b->print_ir_after && !kiln_pass_known(b->print_ir_after))
        s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                        "--print-ir-after: no pass named '%s' (see kiln compile --help)",
                        b->print_ir_after);
    else if (b->records && access(b->records, R_OK) != 0)
        s = kiln_errorf(err, KILN_ERR_IO, "cannot read tuning records '%s': %s", b->records,
                        strerror(errno));
    else
        s = kiln_target_resolve(b->opts.target, &b->target, err);
    if (s != KILN_OK) {
        kiln_build_destroy(b);
        return s;
    }
    *out = b;
    return KILN_OK;
}

void kiln_build_set_knob_seed(kiln_build *b, uint64_t knob_seed)
{
    b->knob_seed = knob_seed;
}

void kiln_build_share_weights(kiln_build *b)
{
    b->share_weights = true;
}

kiln_status kiln_build_passes(kiln_build *b, kiln_error *err)
{
    if (b->stage >= BUILD_PASSES)
        return KILN_OK;
    kiln_status s = kiln_pass_ctx_create(b->g, &b->target, &b->ctx, err);
    if (s != KILN_OK)
        return s;
    b->ctx->print_after = b->print_ir_after;
    b->ctx->verbose = b->opts.verbose;
    if (!b->layout_hints && b->records && !b->rec_hints &&
        (s = kiln_driver_read_layout_records(b, err)) != KILN_OK)
        return s;
    b->ctx->layout_hints = b->layout_hints ? b->layout_hints : b->rec_hints;
    if ((s = kiln_pass_run_all(b->ctx, err)) != KILN_OK)
        return s;
    if (b->rec_hints && !b->layout_hints)
        kiln_driver_report_layouts(b);
    b->t_passes = kiln_driver_now();
    b->stage = BUILD_PASSES;
    return KILN_OK;
}

/* One line naming the nodes that run their reference kernel (at most 10). */
static void print_fallbacks(const kiln_lowered *low)
{
    int n = 0;
    for (int i = 0; i < low->n_tasks; i++)
        n += kiln_task_is_fallback(low, &low->tasks[i]);
    if (!n)
        return;
    fprintf(stderr, "kiln compile: %d node%s run%s %s reference kernel (no template):", n,
            n == 1 ? "" : "s", n == 1 ? "s" : "", n == 1 ? "its" : "their");
    for (int i = 0, k = 0; i < low->n_tasks && k < 10; i++)
        if (kiln_task_is_fallback(low, &low->tasks[i])) {
            const kiln_node *nd = low->ctx->g->nodes[low->tasks[i].anchor];
            fprintf(stderr, "%s %s '%s'", k++ ? "," : "", kiln_op_name(nd->op),
                    nd->name ? nd->name : "");
        }
    if (n > 10)
        fprintf(stderr, ", and %d more", n - 10);
    fputc('\n', stderr);
}

/* A build into the model cache packs through the pack memo's disk tier
 * there (util/packmemo.h): weights another process packed the same way are
 * mapped from their file, not packed again. The graph's memo (a VM's) gets
 * the folder; a graph without one gets a memo of this build's. */
static kiln_status attach_memo(kiln_build *b, kiln_error *err)
{
    if (!b->ctx->pack_memo && !(b->ctx->pack_memo = b->memo = kiln_pack_memo_create()))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    char *cache = kiln_cache_dir(b->cache_dir);
    char *dir = cache ? malloc(strlen(cache) + 8) : NULL;
    if (dir)
        sprintf(dir, "%s/models", cache);
    bool ok = !cache || (dir && kiln_pack_memo_set_dir(b->ctx->pack_memo, dir));
    free(dir);
    free(cache);
    return ok ? KILN_OK : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
}

kiln_status kiln_build_lower(kiln_build *b, kiln_error *err)
{
    if (b->stage >= BUILD_LOWERED)
        return KILN_OK;
    kiln_status s = kiln_build_passes(b, err);
    if (s == KILN_OK && b->share_weights)
        s = attach_memo(b, err);
    if (s != KILN_OK || (s = kiln_lower(b->ctx, b->knob_seed, &b->low, err)) != KILN_OK)
        return s;
    b->explicit_cfg = calloc((size_t)b->low->n_tasks + 1, sizeof *b->explicit_cfg);
    if (!b->explicit_cfg)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (b->opts.verbose)
        print_fallbacks(b->low);
    b->t_lower = kiln_driver_now();
    b->stage = BUILD_LOWERED;
    return KILN_OK;
}

kiln_status kiln_build_set_config(kiln_build *b, int task, const char *config_json,
                                  kiln_error *err)
{
    kiln_status s = kiln_build_lower(b, err);
    if (s != KILN_OK)
        return s;
    if (b->stage > BUILD_LOWERED)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_build_set_config: the build is already configured");
    if (task < 0 || task >= b->low->n_tasks)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no task %d (the model has %d)", task,
                           b->low->n_tasks);
    s = kiln_driver_set_knobs(&b->low->tasks[task], config_json, "explicit", err);
    if (s == KILN_OK)
        b->explicit_cfg[task] = true;
    return s;
}

kiln_status kiln_build_configure(kiln_build *b, kiln_error *err)
{
    if (b->stage >= BUILD_CONFIGURED)
        return KILN_OK;
    kiln_status s = kiln_build_lower(b, err);
    if (s != KILN_OK)
        return s;
    if (b->records && (s = kiln_driver_apply_records(b, err)) != KILN_OK)
        return s;
    if ((s = kiln_lowered_finalize(b->low, err)) != KILN_OK)
        return s;
    b->t_config = kiln_driver_now();
    b->stage = BUILD_CONFIGURED;
    return KILN_OK;
}

/* The metadata JSON the .so carries (docs/COMPILER.md). */
static char *metadata(const kiln_build *b, const kiln_cc *cc)
{
    const kiln_lowered *low = b->low;
    const kiln_pass_ctx *ctx = b->ctx;
    cJSON *j = cJSON_CreateObject();
    cJSON *fb = cJSON_CreateArray();
    if (!j || !fb) {
        cJSON_Delete(j);
        cJSON_Delete(fb);
        return NULL;
    }
    cJSON_AddStringToObject(j, "compiler", "kiln " KILN_VERSION);
    cJSON_AddStringToObject(j, "cc", cc->id);
    cJSON_AddStringToObject(j, "flags", cc->flags);
    cJSON_AddStringToObject(j, "target", b->target.name);
    if (b->records)
        cJSON_AddStringToObject(j, "records", b->records);
    else
        cJSON_AddNullToObject(j, "records");
    cJSON_AddNumberToObject(j, "tuned_tasks", b->n_tuned);
    for (int i = 0; i < low->n_tasks; i++)
        if (kiln_task_is_fallback(low, &low->tasks[i])) {
            const kiln_node *n = ctx->g->nodes[low->tasks[i].anchor];
            char s[300];
            snprintf(s, sizeof s, "%s '%s'", kiln_op_name(n->op), n->name ? n->name : "");
            cJSON_AddItemToArray(fb, cJSON_CreateString(s));
        }
    cJSON_AddItemToObject(j, "fallbacks", fb);
    cJSON_AddNumberToObject(j, "kernels", b->n_kernels);
    cJSON_AddNumberToObject(j, "steps", low->n_tasks);
    cJSON_AddNumberToObject(j, "bn_folded", ctx->stat_bn_folded);
    cJSON_AddNumberToObject(j, "const_folded", ctx->stat_const_folded);
    cJSON_AddNumberToObject(j, "layout_transforms", ctx->stat_transforms);
    cJSON_AddNumberToObject(j, "inplace", ctx->stat_inplace);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static kiln_status dump_file(const char *dir, const char *name, const char *text, kiln_error *err)
{
    if (!dir)
        return KILN_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return kiln_write_text(path, text, err);
}

kiln_status kiln_build_codegen(kiln_build *b, kiln_error *err)
{
    if (b->stage >= BUILD_GENERATED)
        return KILN_OK;
    kiln_status s = kiln_build_configure(b, err);
    if (s != KILN_OK || (s = kiln_tc_begin(&b->target, b->cache_dir, &b->tc, err)) != KILN_OK)
        return s;
    const kiln_lowered *low = b->low;
    const char *dump = b->dump_code_dir;
    if (dump && ((s = kiln_mkdirs(dump, err)) != KILN_OK || (s = kiln_write_headers(dump, err)) != KILN_OK))
        return s;
    if ((s = kiln_codegen_name_by_source(b->low, err)) != KILN_OK)
        return s;
    kiln_hash bid;
    kiln_hash_init(&bid, 11);
    /* model.c names the ABI version, not its value: a cached model of
     * another ABI must not be found */
    kiln_hash_str(&bid, "abi " KILN_STR_(KILN_ABI_VERSION));
    /* kernels: one per unique (workload, config); fallback steps have none */
    for (int i = 0; i < low->n_tasks; i++) {
        const kiln_task *t = &low->tasks[i];
        if (t->kernel != i || kiln_task_is_fallback(low, t))
            continue;
        b->n_kernels++;
        char *src = NULL, name[160], hex[33];
        if ((s = kiln_codegen_kernel(low, t, &src, err)) != KILN_OK)
            return s;
        snprintf(name, sizeof name, "%s.c", t->fn_name);
        s = dump_file(dump, name, src, err);
        if (s == KILN_OK)
            s = kiln_tc_add_kernel(b->tc, name, src, hex, err);
        free(src);
        if (s != KILN_OK)
            return s;
        kiln_hash_str(&bid, hex);
    }
    /* the large weights' files are named by their bytes (shared weights) */
    for (int i = 0; i < low->n_tensors && b->share_weights; i++) {
        kiln_tensor_entry *e = &b->low->tensors[i];
        if (!e->weights || e->nbytes < KILN_SHARE_MIN_BYTES || e->mapped)
            continue; /* a mapped file (the pack memo's) has its name */
        kiln_hash fh;
        kiln_hash_init(&fh, 19);
        kiln_hash_update(&fh, &e->nbytes, sizeof e->nbytes);
        kiln_hash_update(&fh, e->data, (size_t)e->nbytes);
        char hex[33];
        kiln_hash_hex(&fh, hex);
        snprintf(e->file, sizeof e->file, "%s.w", hex);
    }
    /* the build id: kernels, weights (a file's name is its bytes' hash, in
     * model.c), and the model tables */
    int64_t wbytes = 0;
    if ((s = kiln_codegen_weights(b->low, NULL, &wbytes, err)) != KILN_OK)
        return s;
    for (int i = 0; i < low->n_tensors; i++)
        if (low->tensors[i].weights && !low->tensors[i].file[0])
            kiln_hash_update(&bid, low->tensors[i].data, (size_t)low->tensors[i].nbytes);
    b->meta = metadata(b, kiln_tc_cc(b->tc));
    if (!b->meta)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    const char *mname = b->g->name ? b->g->name : "model";
    char *model_src = NULL;
    if ((s = kiln_codegen_model(low, mname, b->target.name, "", b->meta, wbytes, &model_src, err)) !=
        KILN_OK)
        return s;
    kiln_hash_str(&bid, model_src);
    free(model_src);
    kiln_hash_hex(&bid, b->build_id);
    b->t_codegen = kiln_driver_now();
    b->stage = BUILD_GENERATED;
    return KILN_OK;
}

/* The shared weights' files beside the model's cache path `model`: each one
 * there is marked used (mtime), each missing one written (beside, then
 * renamed: a reader never sees half a file). A model found in the cache
 * whose files the cache bound deleted gets them back here. */
kiln_status kiln_driver_weight_files(kiln_build *b, const char *model, kiln_error *err)
{
    const char *slash = strrchr(model, '/');
    int dl = slash ? (int)(slash - model) : 1;
    const char *dir = slash ? model : ".";
    for (int i = 0; i < b->low->n_tensors; i++) {
        const kiln_tensor_entry *e = &b->low->tensors[i];
        if (!e->weights || !e->file[0])
            continue;
        char p[4300], tmp[4400];
        snprintf(p, sizeof p, "%.*s/%s", dl, dir, e->file);
        if (kiln_tc_have(p)) {
            kiln_tc_touch(p);
        } else {
            snprintf(tmp, sizeof tmp, "%s.tmp-%ld", p, (long)getpid());
            FILE *f = fopen(tmp, "wb");
            bool ok = f && fwrite(e->data, 1, (size_t)e->nbytes, f) == (size_t)e->nbytes;
            if (f && fclose(f) != 0)
                ok = false;
            if (!ok || rename(tmp, p) != 0) {
                unlink(tmp);
                return kiln_errorf(err, KILN_ERR_IO,
                                   "cannot write the weights file '%s' (disk full?)", p);
            }
        }
        /* the next build of this model (a VM's next class) maps it; so does
         * another process's (the disk tier; a .pm not written is a miss) */
        if (e->memo_key && b->low->ctx->pack_memo &&
            !kiln_pack_memo_put(b->low->ctx->pack_memo, e->memo_src, (size_t)e->memo_src_bytes,
                                e->memo_key, p, e->nbytes))
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (e->memo_key && e->memo_ckey[0] && b->low->ctx->pack_memo)
            kiln_pack_memo_put_disk(b->low->ctx->pack_memo, e->memo_ckey, p, e->nbytes);
    }
    return KILN_OK;
}

/* Writes the weights, model.c and weights.S into the workspace. */
static kiln_status write_model(kiln_build *b, kiln_error *err)
{
    char blob[4200];
    snprintf(blob, sizeof blob, "%s/weights.bin", kiln_tc_dir(b->tc));
    int64_t wbytes = 0;
    kiln_status s = kiln_codegen_weights(b->low, blob, &wbytes, err);
    if (s != KILN_OK)
        return s;
    const char *mname = b->g->name ? b->g->name : "model";
    char *model_src = NULL, *asm_src = NULL;
    s = kiln_codegen_model(b->low, mname, b->target.name, b->build_id, b->meta, wbytes, &model_src,
                           err);
    if (s == KILN_OK && !(asm_src = kiln_codegen_weights_asm(blob)))
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = kiln_tc_add_source(b->tc, "model.c", model_src, err);
    if (s == KILN_OK)
        s = kiln_tc_add_source(b->tc, "weights.S", asm_src, err);
    if (s == KILN_OK)
        s = dump_file(b->dump_code_dir, "model.c", model_src, err);
    if (s == KILN_OK)
        s = dump_file(b->dump_code_dir, "weights.S", asm_src, err);
    free(model_src);
    free(asm_src);
    return s;
}

kiln_status kiln_build_link(kiln_build *b, const char *out_path, kiln_error *err)
{
    if (b->stage >= BUILD_LINKED)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_build_link: already linked");
    kiln_status s = kiln_build_codegen(b, err);
    if (s != KILN_OK)
        return s;
    char *path = out_path ? strdup(out_path) : kiln_tc_model_path(b->tc, b->build_id, err);
    if (!path)
        return out_path ? kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory") : KILN_ERR_IO;
    b->out_path = path;
    if (out_path && b->share_weights)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_build_link: shared weights are for the model cache only");
    time_t since = time(NULL) - 1; /* what this build touches is newer */
    if (b->share_weights && (s = kiln_driver_weight_files(b, path, err)) != KILN_OK)
        return s;
    if (!out_path && kiln_tc_have(path) && !b->dump_code_dir) {
        b->from_cache = true; /* the model cache has it */
        kiln_tc_touch(path);
    } else {
        if ((s = write_model(b, err)) != KILN_OK)
            return s;
        b->t_compile = kiln_driver_now();
        if ((s = kiln_tc_link(b->tc, path, b->opts.jobs, err)) != KILN_OK)
            return s;
        /* the model cache stays within its bound (toolchain/modelcache.c) */
        int64_t limit = kiln_tc_model_cache_limit();
        int gone = out_path ? 0 : kiln_tc_prune_models(path, since, limit);
        if (gone && b->opts.verbose)
            fprintf(stderr, "kiln compile: %d least recently used model(s) deleted from the cache "
                            "(KILN_MODEL_CACHE_MB=%lld)\n",
                    gone, (long long)(limit >> 20));
    }
    b->t_link = kiln_driver_now();
    b->stage = BUILD_LINKED;
    if (b->opts.verbose) {
        if (b->from_cache)
            fprintf(stderr,
                    "kiln compile: passes %.2f s, lower %.2f s, configs %.2f s, codegen %.2f s; "
                    "model %s found in the cache\n",
                    b->t_passes - b->t_start, b->t_lower - b->t_passes, b->t_config - b->t_lower,
                    b->t_codegen - b->t_config, b->build_id);
        else
            fprintf(stderr,
                    "kiln compile: passes %.2f s, lower %.2f s, configs %.2f s%s, codegen %.2f s, "
                    "compile+link %.2f s (%d kernels, %d cached, %d steps), total %.2f s\n",
                    b->t_passes - b->t_start, b->t_lower - b->t_passes, b->t_config - b->t_lower,
                    b->n_tuned ? " (records applied)" : "", b->t_compile - b->t_config,
                    b->t_link - b->t_compile, b->n_kernels, kiln_tc_cached(b->tc), b->low->n_tasks,
                    b->t_link - b->t_start);
    }
    return KILN_OK;
}

const char *kiln_build_output(const kiln_build *b)
{
    return b && b->stage >= BUILD_LINKED ? b->out_path : NULL;
}

int kiln_build_tuned_tasks(const kiln_build *b)
{
    return b ? b->n_tuned : 0;
}

/* ---- one-call compiles ------------------------------------------------------- */

kiln_status kiln_compile_ex(const kiln_graph *g, const kiln_compile_options *opts,
                            uint64_t knob_seed, const char *out_path, kiln_error *err)
{
    if (!out_path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_compile: no output path");
    kiln_build *b = NULL;
    kiln_status s = kiln_build_create(g, opts, &b, err);
    if (s != KILN_OK)
        return s;
    kiln_build_set_knob_seed(b, knob_seed);
    s = kiln_build_link(b, out_path, err);
    kiln_build_destroy(b);
    return s;
}

kiln_status kiln_compile(const kiln_graph *g, const kiln_compile_options *opts,
                         const char *out_path, kiln_error *err)
{
    return kiln_compile_ex(g, opts, 0, out_path, err);
}

kiln_status kiln_compile_cached(const char *model, uint64_t seed,
                                const kiln_compile_options *opts, char **so_path,
                                kiln_error *err)
{
    if (!model || !so_path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_compile_cached: no model");
    double t0 = kiln_driver_now();
    kiln_graph *g = NULL;
    kiln_status s = kiln_model_load(model, seed, &g, err);
    if (s != KILN_OK)
        return s;
    if (opts && opts->verbose)
        fprintf(stderr, "kiln compile: import %.2f s (%s)\n", kiln_driver_now() - t0, model);
    kiln_build *b = NULL;
    s = kiln_build_create(g, opts, &b, err);
    if (s == KILN_OK) {
        /* large weights in files of their own, found packed by the next
         * process that loads this model from the cache */
        kiln_build_share_weights(b);
        s = kiln_build_link(b, NULL, err);
    }
    char *path = s == KILN_OK ? strdup(kiln_build_output(b)) : NULL;
    if (s == KILN_OK && !path)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    kiln_build_destroy(b);
    kiln_graph_destroy(g);
    if (s == KILN_OK)
        *so_path = path;
    return s;
}
