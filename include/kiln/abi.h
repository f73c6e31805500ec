/* kiln/abi.h: the contract between a compiled model (.so) and the runtime.
 *
 * The compiler generates C that includes this header (and nothing else from
 * kiln) and defines one kiln_abi_model, returned by the exported function
 * kiln_model_get(). The runtime dlopen()s the .so, checks abi_version, plans
 * the arena, resolves every step's argument pointers once at load time, and
 * then runs the steps in order, allocating nothing.
 *
 * Self-contained C11: no includes beyond <stdint.h>. Changing anything here
 * means bumping KILN_ABI_VERSION.
 */
#ifndef KILN_ABI_H
#define KILN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 3

/* ---- what a kernel sees ---------------------------------------------------- */

/* A chunk of a parallel loop: iterations [begin, end), run by pool thread
 * `thread` (0 is the calling thread). */
typedef void (*kiln_task_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* The runtime context handed to every kernel call. Kernels parallelize only
 * through parallel_for (no threads of their own); it splits [0, n) into
 * chunks of at least `grain` iterations over the pool, the calling thread
 * taking part, and returns when every chunk is done. `workspace` is scratch
 * memory planned at load time: num_threads slices of workspace_bytes each
 * (the per-thread maximum any step declares); a task uses slice `thread`,
 * i.e. (char *)workspace + thread * workspace_bytes. */
typedef struct kiln_rt {
    void *pool;
    void (*parallel_for)(void *pool, int64_t n, int64_t grain, kiln_task_fn fn, void *ctx);
    int32_t num_threads;
    int32_t extent;     /* the running step's kiln_abi_step.extent */
    void *workspace;
    int64_t workspace_bytes;
} kiln_rt;

/* One fused kernel: args[i] points at the data of tensor step->args[i]. */
typedef void (*kiln_kernel_fn)(void *const *args, const kiln_rt *rt);

/* ---- the model descriptor -------------------------------------------------- */

enum {
    KILN_STORAGE_ARENA = 0,   /* activations, inputs, outputs: arena + offset */
    KILN_STORAGE_WEIGHTS = 1, /* constants: weights blob + offset */
    KILN_STORAGE_FILE = 2,    /* constants: the file `file` beside the .so, mapped at load
                                 (a model in the cache whose large weights are shared) */
};

typedef struct kiln_abi_tensor {
    const char *name;
    int32_t dtype;       /* kiln_dtype (kiln/types.h) */
    int32_t rank;        /* of dims */
    int64_t dims[8];     /* logical (unblocked) shape */
    const char *layout;  /* "NCHW", "NCHW16c", "OIHW16i16o", "row-major", ... */
    int32_t storage;     /* KILN_STORAGE_* */
    int32_t reserved;
    int64_t offset;      /* bytes into the arena or the weights blob (64-byte aligned) */
    int64_t nbytes;      /* bytes of storage (blocked layouts may pad) */
    const char *file;    /* KILN_STORAGE_FILE: a file name (no '/') in the .so's folder,
                            nbytes long or longer; NULL otherwise */
} kiln_abi_tensor;

/* A step is a generated kernel (fn) or, for a node no kernel template
 * takes, that node run by the runtime's reference kernel (fn NULL, ref_node
 * set): "every valid graph compiles". ref_node is the node as text (op,
 * inputs and outputs as indices into args, absent optional inputs, every
 * attribute with its type, each argument's dtype and shape), parsed once at
 * load; docs/RUNTIME.md ("Fallback steps") gives the format. */
typedef struct kiln_abi_step {
    const char *name;       /* fused group, e.g. "layer1.0.conv1+bn1+relu" */
    const char *op;         /* kernel template, e.g. "conv2d_nchwc", "dense"; "ref:<Op>" for a
                               fallback step */
    kiln_kernel_fn fn;      /* NULL for a fallback step */
    int32_t n_args;
    int32_t extent;         /* > 0: the kernel takes its rows at run time (rt->extent), this
                               step's count; 0: the kernel's extents are all in its code */
    const int32_t *args;    /* tensor ids, inputs first then outputs */
    const char *workload;   /* workload key (op, shapes, dtypes, attrs, layouts, target) */
    uint64_t workload_hash; /* hash of `workload` */
    double flops;           /* floating-point operations of one call; 0 if unknown */
    const char *shapes;     /* argument shapes for reports: "[1,64,56,56], [64,64,3,3]" */
    const char *layouts;    /* "data/kernel/out" layouts for reports */
    const char *config;     /* the knobs used, JSON, with "source": "default" | "records" */
    const char *ref_node;   /* fallback step: the node (see above); NULL for a kernel */
} kiln_abi_step;

typedef struct kiln_abi_model {
    uint32_t abi_version; /* KILN_ABI_VERSION */
    uint32_t reserved;
    const char *name;
    const char *target;        /* e.g. "x86_64-avx512" */
    const char *build_id;      /* content hash of the compiled model */
    const char *metadata_json; /* compiler flags, tuning records used, fallbacks */
    int32_t n_tensors;
    int32_t n_steps;
    const kiln_abi_tensor *tensors;
    const kiln_abi_step *steps;
    int32_t n_inputs;
    int32_t n_outputs;
    const int32_t *inputs;  /* tensor ids of the graph inputs (ARENA, logical layout) */
    const int32_t *outputs; /* tensor ids of the graph outputs (ARENA, logical layout) */
    int64_t arena_bytes;
    int64_t workspace_bytes; /* per thread; see kiln_rt */
    const unsigned char *weights; /* 64-byte aligned */
    int64_t weights_bytes;
} kiln_abi_model;

/* The one symbol a compiled model exports. */
#define KILN_MODEL_SYMBOL "kiln_model_get"
typedef const kiln_abi_model *(*kiln_model_get_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* KILN_ABI_H */
