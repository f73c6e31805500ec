/* kiln/runtime.h: the runtime-only API. Loads a compiled model (.so made by
 * `kiln compile`), sets inputs, runs, benchmarks. Usable without the compiler:
 * link libkiln_runtime only.
 *
 * Conventions as in kiln.h: kiln_status returns, an optional kiln_error with a
 * message, destroy(NULL) is a no-op, out-parameters untouched on failure.
 * A module is not thread-safe (it owns its thread pool and arena); use one
 * module per thread that runs models concurrently.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_module kiln_module;

typedef struct kiln_module_options {
    int num_threads;   /* 0: $KILN_NUM_THREADS, else the number of physical cores */
    int bind_threads;  /* -1: $KILN_BIND_THREADS (default off); 0 off; 1 pin thread i to core i */
} kiln_module_options;

/* Loads `path` (dlopen), checks the ABI version, allocates the arena and the
 * workspace and starts the thread pool. `opts` may be NULL (defaults). */
kiln_status kiln_module_load(const char *path, const kiln_module_options *opts, kiln_module **out,
                             kiln_error *err);
void kiln_module_destroy(kiln_module *m);

int kiln_module_num_inputs(const kiln_module *m);
int kiln_module_num_outputs(const kiln_module *m);
kiln_status kiln_module_input_info(const kiln_module *m, int i, const char **name,
                                   kiln_dtype *dtype, kiln_shape *shape);
kiln_status kiln_module_output_info(const kiln_module *m, int i, const char **name,
                                    kiln_dtype *dtype, kiln_shape *shape);
/* Copies `t` into input i; dtype and shape must match exactly. */
kiln_status kiln_module_set_input(kiln_module *m, int i, const kiln_tensor *t, kiln_error *err);
/* Runs every step once. Allocates nothing. */
kiln_status kiln_module_run(kiln_module *m, kiln_error *err);
/* Output i after a run: data owned by the module, valid until the next run. */
const kiln_tensor *kiln_module_output(const kiln_module *m, int i);
int kiln_module_num_threads(const kiln_module *m);

/* Descriptor strings of the compiled model ("" when absent); owned by the
 * loaded .so, valid until kiln_module_destroy. */
const char *kiln_module_name(const kiln_module *m);
const char *kiln_module_target(const kiln_module *m);
const char *kiln_module_build_id(const kiln_module *m);
const char *kiln_module_metadata_json(const kiln_module *m);

/* The steps (fused kernels) in execution order, for profilers and reports. */
typedef struct kiln_step_info {
    const char *name, *op, *workload, *shapes, *layouts, *config; /* never NULL */
    uint64_t workload_hash;
    double flops; /* of one call; 0 if unknown */
} kiln_step_info;
int kiln_module_num_steps(const kiln_module *m);
kiln_status kiln_module_step_info(const kiln_module *m, int i, kiln_step_info *info);
/* Runs step i alone (a profiler times the steps one by one; running all of
 * them in order equals kiln_module_run). Allocates nothing. */
kiln_status kiln_module_run_step(kiln_module *m, int i);

/* Evicts the module's weights (its constants, packed weights included)
 * from every cache level, as they are in a run of a network whose other
 * layers read far more than the caches hold since these weights were last
 * read: clflush on x86-64, `dc civac` on AArch64, nothing elsewhere. The
 * arena (activations) stays where it is. Then the module's worker threads,
 * asleep while the calling thread evicted, are woken (within 2 ms, when they sleep), so the
 * call timed next starts with them running, as a kernel inside a network
 * does. A kiln_bench_fn, for kiln_bench_options.preproc with the module as
 * ctx; always KILN_OK. */
kiln_status kiln_module_evict_weights(void *module, kiln_error *err);
/* The same for a network whose weights all fit the last-level cache (then a
 * run reads them from there, not from memory): the weights are evicted from
 * every level, read once by the calling thread, and pushed out of its L1
 * and L2 by writing over a buffer of twice the L2 (allocated by the first
 * call, freed with the module), so the next call finds them in the LLC
 * only; the workers are woken as above. KILN_ERR_OUT_OF_MEMORY when that
 * buffer cannot be allocated. */
kiln_status kiln_module_evict_weights_to_llc(void *module, kiln_error *err);

/* Physical cores this process may run on (the default number of threads). */
int kiln_runtime_physical_cores(void);

/* ---- benchmarking: TVM time_evaluator semantics ---------------------------
 * One warm-up run; then `repeat` measurements, each timing `number`
 * back-to-back runs and reporting the mean per run. When min_repeat_ms > 0,
 * number grows until one measurement lasts at least min_repeat_ms. Optional
 * cooldown between measurements and cache flush before each. */

/* One run of a benchmarked callable (kiln_bench_function), or a preproc
 * hook: ctx is the caller's. A failing run stops the benchmark with its
 * status. */
typedef kiln_status (*kiln_bench_fn)(void *ctx, kiln_error *err);

typedef struct kiln_bench_options {
    int number;           /* >= 1 (default 1; 0 means the default) */
    int repeat;           /* >= 1 (default 3; 0 means the default) */
    double min_repeat_ms; /* default 0 */
    double cooldown_ms;   /* default 0 */
    int flush_cache;      /* nonzero: evict caches before each measurement */
    /* NULL, or called with preproc_ctx before every run (the warm-up's too),
     * outside the timed region: each run is then timed alone and a
     * measurement is the sum of its runs' times (min_repeat_ms counts that
     * sum). kiln_module_evict_weights is one: every run with cold weights. */
    kiln_bench_fn preproc;
    void *preproc_ctx;
} kiln_bench_options;

#define KILN_BENCH_MAX_REPEAT 10000
typedef struct kiln_bench_result {
    double mean, median, min, max, std; /* seconds per run */
    int number, repeat, threads;
    double results[KILN_BENCH_MAX_REPEAT]; /* repeat entries, seconds per run */
} kiln_bench_result;

/* `opts` may be NULL (defaults). `out` is untouched on failure; out->threads
 * is the module's thread count. The cache flush writes over a buffer of twice
 * the L2 + last-level cache size, allocated for the call. */
kiln_status kiln_module_bench(kiln_module *m, const kiln_bench_options *opts,
                              kiln_bench_result *out, kiln_error *err);

/* The same time evaluator over any callable: `fn(ctx, err)` is one run (a
 * failing run stops the benchmark with its status). out->threads = threads. */
kiln_status kiln_bench_function(kiln_bench_fn fn, void *ctx, int threads,
                                const kiln_bench_options *opts, kiln_bench_result *out,
                                kiln_error *err);

/* ---- Tensor files: ONNX TensorProto (.pb) and NumPy (.npy) ---------------
 * (in the runtime library: src/io)
 * kiln_tensor_read picks the format from the content (NumPy magic) and falls
 * back to TensorProto. `name_out` (may be NULL) receives a malloc'ed copy of
 * the TensorProto's name, or NULL. The tensor's data is allocated by kiln:
 * release it with kiln_tensor_release. */
kiln_status kiln_tensor_read(const char *path, kiln_tensor *out, char **name_out,
                             kiln_error *err);
kiln_status kiln_tensor_read_pb_buffer(const void *buf, size_t size, kiln_tensor *out,
                                       char **name_out, kiln_error *err);
kiln_status kiln_tensor_read_npy_buffer(const void *buf, size_t size, kiln_tensor *out,
                                        kiln_error *err);
kiln_status kiln_tensor_write_pb(const char *path, const kiln_tensor *t, const char *name,
                                 kiln_error *err);
kiln_status kiln_tensor_write_npy(const char *path, const kiln_tensor *t, kiln_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KILN_RUNTIME_H */
