/* runtime/module_internal.h: the module's layout, shared by module.c and bench.c. */
#ifndef KILN_RUNTIME_MODULE_INTERNAL_H
#define KILN_RUNTIME_MODULE_INTERNAL_H

#include "kiln/abi.h"
#include "kiln/runtime.h"
#include "runtime/fpenv.h"
#include "runtime/pool.h"
#include "runtime/ref_step.h"
#include "util/arena.h"

struct kiln_module {
    void *dl;                   /* dlopen handle */
    const kiln_abi_model *desc; /* validated descriptor, owned by the .so */
    kiln_pool *pool;
    kiln_rt rt;                 /* handed to every kernel */
    void *arena;                /* 64-byte aligned, desc->arena_bytes rounded up */
    unsigned char *weights;     /* a copy of desc->weights on huge pages, or NULL */
    void *workspace;            /* num_threads slices of rt.workspace_bytes */
    void **args;                /* every step's argument pointers, back to back */
    void ***step_args;          /* step s: args + (sum of earlier n_args) */
    kiln_tensor *outputs;       /* views of the graph outputs in the arena */
    kiln_ref_step **ref;        /* per step: the fallback node, NULL for a kernel */
    kiln_arena *ref_arena;      /* what the fallback steps were parsed into */
    int num_threads;
    unsigned char *spill;       /* kiln_module_evict_weights_to_llc's buffer, or NULL */
    size_t spill_bytes;
    void **fmap;                /* per tensor: a KILN_STORAGE_FILE tensor's mapping, else NULL */
    size_t *fmap_len;           /* ... and its length */
    void *owner;                /* kiln_module_load_desc: the descriptor's memory, */
    void (*owner_free)(void *); /* released at destroy */
};

/* A module from a descriptor built in memory (the VM's next shape class whose
 * kernels a loaded .so already holds: driver.c's kiln_build_load_reusing),
 * not from a .so of its own. `path` names it in messages and its folder
 * holds the KILN_STORAGE_FILE tensors' files (the model cache's); `dl_path`
 * is the .so its steps' kernels live in, kept loaded as long as the module.
 * The descriptor is validated as a .so's is; `owner` (holding it) is released
 * by owner_free when the module is destroyed, or here on failure. */
kiln_status kiln_module_load_desc(const kiln_abi_model *d, const char *path, const char *dl_path,
                                  void *owner, void (*owner_free)(void *),
                                  const kiln_module_options *opts, kiln_module **out,
                                  kiln_error *err);

/* Whether the ELF file at path holds every byte its program and section
 * headers say it has (else an error naming the file): dlopen maps a
 * truncated .so's missing pages, and reading them is SIGBUS. kiln_module_load
 * and the VM's .so loader (vm/vm_so.c) check it before dlopen. */
kiln_status kiln_so_complete(const char *path, kiln_error *err);

/* Runs step s: its kernel, or its node's reference kernel (the only kind of
 * step that can fail). */
static inline kiln_status kiln_module_exec_step(kiln_module *m, int s, kiln_error *err)
{
    const kiln_abi_step *st = &m->desc->steps[s];
    if (st->fn) {
        unsigned csr = kiln_fp_flush_begin(); /* runtime/fpenv.h */
        m->rt.extent = st->extent;
        st->fn((void *const *)m->step_args[s], &m->rt);
        kiln_fp_restore(csr);
        return KILN_OK;
    }
    return kiln_ref_step_run(m->ref[s], err);
}

/* Bytes of the level-`level` cache of CPU 0 (2, 3: /sys, else sysconf); 0
 * when unknown. bench.c. */
long kiln_cache_bytes(int level);

/* Data pointer of tensor `id` (validated) in the arena or the weights blob. */
void *kiln_module_tensor_data(const kiln_module *m, int id);

#endif
