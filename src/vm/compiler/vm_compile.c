/* vm/compiler/vm_compile.c: the VM's compiler, libkiln's side of the VM.
 *
 * The VM (src/vm, in the runtime library) converts and runs data-dependent
 * nodes with the importer and the reference kernels; what it compiles (an
 * .onnx model's static part, a heavy Gemm/MatMul/Conv class) goes through
 * kiln_vm_options.compile. kiln_vm_compile_graph is libkiln's: a build
 * into the model cache (a graph compiled before, by any process, is found
 * there), then kiln_module_load. kiln_vm_create, kiln_vm_create_buffer and
 * kiln_vm_load are the runtime's kiln_vm_open, kiln_vm_open_buffer and
 * kiln_vm_open_so with it filled in. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "vm/vm.h"

/* The .so files this process built or loaded for shape classes, newest
 * first, with their targets: where a later class finds its kernels
 * (kiln_build_load_reusing). A path whose .so is no longer loaded is a miss
 * there, never an error. */
#define RECENT 8
static pthread_mutex_t recent_mu = PTHREAD_MUTEX_INITIALIZER;
static char *recent_so[RECENT], *recent_target[RECENT];

static void remember(const char *so, const char *target)
{
    char *p = strdup(so), *t = strdup(target ? target : "");
    if (!p || !t) {
        free(p);
        free(t);
        return;
    }
    pthread_mutex_lock(&recent_mu);
    int k = 0;
    while (k < RECENT - 1 && recent_so[k] && strcmp(recent_so[k], so) != 0)
        k++;
    free(recent_so[k]); /* the same path moves to the front; else the oldest goes */
    free(recent_target[k]);
    memmove(recent_so + 1, recent_so, sizeof recent_so[0] * (size_t)k);
    memmove(recent_target + 1, recent_target, sizeof recent_target[0] * (size_t)k);
    recent_so[0] = p;
    recent_target[0] = t;
    pthread_mutex_unlock(&recent_mu);
}

/* A copy of the k-th remembered .so for `target`, or NULL. */
static char *recall(int k, const char *target)
{
    char *p = NULL;
    pthread_mutex_lock(&recent_mu);
    for (int i = 0; i < RECENT && recent_so[i] && !p; i++)
        if (strcmp(recent_target[i], target ? target : "") == 0 && k-- == 0)
            p = strdup(recent_so[i]);
    pthread_mutex_unlock(&recent_mu);
    return p;
}

kiln_status kiln_vm_compile_graph(const kiln_graph *g, const char *cache_dir, const char *target,
                                  const char *records, int num_threads, kiln_module **out,
                                  kiln_error *err)
{
    /* through the model cache (<cache>/models/<build id>.so, as
     * kiln_compile_cached): a graph compiled before, in this process or
     * another, costs its passes and codegen, not $CC, the weights' assembly
     * and the link (a BERT-base class: about 8 of 17 s) */
    kiln_compile_options co = {.cache_dir = cache_dir, .target = target, .records = records};
    kiln_module_options mo = {.num_threads = num_threads, .bind_threads = -1};
    kiln_build *b = NULL;
    *out = NULL;
    kiln_status s = kiln_build_create(g, &co, &b, err);
    if (s == KILN_OK) /* large weights in files the shape classes share */
        kiln_build_share_weights(b);
    /* a new class whose kernels an earlier class's .so holds: from those,
     * nothing compiled or linked */
    for (int k = 0; s == KILN_OK && !*out && k < RECENT; k++) {
        char *so = recall(k, target);
        if (!so)
            break;
        s = kiln_build_load_reusing(b, so, &mo, out, err);
        free(so);
    }
    if (s == KILN_OK && !*out && (s = kiln_build_link(b, NULL, err)) == KILN_OK &&
        (s = kiln_module_load(kiln_build_output(b), &mo, out, err)) == KILN_OK)
        remember(kiln_build_output(b), target);
    kiln_build_destroy(b);
    return s;
}

/* opts with the compiler filled in where it is NULL */
static kiln_vm_options with_compiler(const kiln_vm_options *opts)
{
    kiln_vm_options o = opts ? *opts : (kiln_vm_options){0};
    if (!o.compile)
        o.compile = kiln_vm_compile_graph;
    return o;
}

kiln_status kiln_vm_create(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                           kiln_error *err)
{
    kiln_vm_options o = with_compiler(opts);
    return kiln_vm_open(path, &o, out, err);
}

kiln_status kiln_vm_create_buffer(const void *data, size_t size, const char *base_dir,
                                  const kiln_vm_options *opts, kiln_vm **out, kiln_error *err)
{
    kiln_vm_options o = with_compiler(opts);
    return kiln_vm_open_buffer(data, size, base_dir, &o, out, err);
}

kiln_status kiln_vm_load(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                         kiln_error *err)
{
    kiln_vm_options o = with_compiler(opts);
    return kiln_vm_open_so(path, &o, out, err);
}
