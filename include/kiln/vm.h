/* kiln/vm.h: the VM, for ONNX models whose shapes depend on run-time data,
 * with control flow (If, Loop, Scan) or sequences, or with symbolic input
 * dims (docs/VM.md). In the runtime library: a model the VM runs, compiled
 * by `kiln compile` into one .so, runs with libkiln_runtime alone
 * (kiln_vm_open_so; the importer that converts its data-dependent nodes and
 * the reference kernels are in the runtime). Compiling (an .onnx model's
 * static part, a heavy Gemm/MatMul/Conv class of a data-dependent node) is
 * libkiln's, handed in as kiln_vm_options.compile; libkiln's kiln_vm_create,
 * kiln_vm_create_buffer and kiln_vm_load (kiln/kiln.h users: src/vm/vm.h)
 * fill it in. Not thread-safe: one run at a time per VM. */
#ifndef KILN_VM_H
#define KILN_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_vm kiln_vm;
typedef struct kiln_graph kiln_graph; /* kiln/kiln.h */

/* Compiles graph g into a loaded module through the object cache
 * (cache_dir, target, records: NULL for the defaults; num_threads as
 * kiln_module_options has it). KILN_ERR_NOT_FOUND when no C compiler is
 * found. libkiln's is kiln_vm_compile_graph. */
typedef kiln_status (*kiln_vm_compile_fn)(const kiln_graph *g, const char *cache_dir,
                                          const char *target, const char *records,
                                          int num_threads, kiln_module **out, kiln_error *err);

typedef struct kiln_vm_options {
    bool reference;         /* the static part on the reference executor, not compiled */
    int num_threads;        /* threads of the compiled static part; 0: the default */
    const char *cache_dir;  /* object cache of the compiled static part; NULL: default */
    const char *target;     /* target of the compiled parts (kiln_compile_options); NULL: host */
    const char *records;    /* tuning records applied to the compiled parts, or NULL */
    /* the compiler; NULL: none (the runtime alone): an .onnx model's static
     * part then needs `reference`, and heavy classes run on reference
     * kernels. kiln_vm_create, kiln_vm_create_buffer and kiln_vm_load set
     * kiln_vm_compile_graph where it is NULL. */
    kiln_vm_compile_fn compile;
} kiln_vm_options;

/* The runtime's kiln_vm_create and kiln_vm_create_buffer: opts->compile as
 * given (NULL: no compiler; a static part compiles only with `reference`). */
kiln_status kiln_vm_open(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                         kiln_error *err);
kiln_status kiln_vm_open_buffer(const void *data, size_t size, const char *base_dir,
                                const kiln_vm_options *opts, kiln_vm **out, kiln_error *err);
void kiln_vm_destroy(kiln_vm *vm);

/* The model's inputs (ONNX graph inputs that are not initializers) and
 * outputs, in ONNX order. Unknown extents (symbolic in the file, or set by
 * data) are -1 in *shape. */
int kiln_vm_num_inputs(const kiln_vm *vm);
int kiln_vm_num_outputs(const kiln_vm *vm);
kiln_status kiln_vm_input_info(const kiln_vm *vm, int i, const char **name, kiln_dtype *dtype,
                               kiln_shape *shape);
kiln_status kiln_vm_output_info(const kiln_vm *vm, int i, const char **name, kiln_dtype *dtype,
                                kiln_shape *shape);
/* Symbolic input dims: the name of input i's declared dim d (its dim_param,
 * e.g. "batch"; "" for an unknown dim without a name), NULL where the dim is
 * a number (or i, d are out of range). d = -1: "" when the input declares no
 * shape at all (any rank), else NULL. */
const char *kiln_vm_input_dim_param(const kiln_vm *vm, int i, int d);
/* Whether some input has a symbolic or unknown dim (shapes come from the
 * inputs set; one specialization per input-shape class). */
bool kiln_vm_symbolic(const kiln_vm *vm);
/* Specializations created so far (imports of the model with its input
 * shapes bound; 0 for a model without symbolic dims). */
int64_t kiln_vm_num_specializations(const kiln_vm *vm);
/* A symbolic batch (docs/VM.md, "Symbolic batch: chunks"): when the only
 * symbolic dims are axis 0 of the inputs and the graph computes each item
 * on its own, a batch runs as chunks of 8, 4, 2 and 1 items, one
 * specialization per chunk extent. The number of chunks of the last run (0:
 * not in chunks); *why (may be NULL) says why the model does not run in
 * chunks ("" while it does, or before its first run). */
int kiln_vm_batch_chunks(const kiln_vm *vm, const char **why);

/* Copies t into input i. Its dtype must match, and its shape the declared
 * rank and every fixed dim (the error names the input and the dim); a
 * symbolic dim takes any extent, the same for every input that names it. */
kiln_status kiln_vm_set_input(kiln_vm *vm, int i, const kiln_tensor *t, kiln_error *err);
/* Runs the model on the inputs set. With symbolic input dims, the first run
 * of an input-shape class imports and compiles the model for it (a failure
 * there, e.g. shapes the graph's ops refuse, names the input shapes). */
kiln_status kiln_vm_run(kiln_vm *vm, kiln_error *err);
/* Output i after a run, owned by the VM, valid until the next run (NULL
 * before the first run of a model with symbolic input dims). */
const kiln_tensor *kiln_vm_output(const kiln_vm *vm, int i);

int kiln_vm_num_dynamic_nodes(const kiln_vm *vm);
bool kiln_vm_static_compiled(const kiln_vm *vm);
/* "compiled", "reference kernels" or "none" (every node is data-dependent). */
const char *kiln_vm_static_part(const kiln_vm *vm);
/* Whether a failed static import or compile (kiln_onnx_load,
 * kiln_compile_cached: st and its message) stopped on what the VM runs: a
 * parameter input that is run-time data, If/Loop/Scan, a sequence op, or a
 * graph input with symbolic or unknown dims. The CLI and the Python package
 * open such a model on the VM. */
bool kiln_vm_needed(kiln_status st, const char *msg);

/* Threads of the compiled parts: the options' num_threads resolved as a
 * module resolves it (0: $KILN_NUM_THREADS, else the physical cores); 1 with
 * `reference`. */
int kiln_vm_num_threads(const kiln_vm *vm);

/* `kiln bench` for a VM on the inputs set: kiln_module_bench's time
 * evaluator over kiln_vm_run (out->threads: kiln_vm_num_threads). */
kiln_status kiln_vm_bench(kiln_vm *vm, const kiln_bench_options *opts, kiln_bench_result *out,
                          kiln_error *err);

/* Whether the .so at path carries a VM section (then kiln_vm_load opens it,
 * kiln_module_load does not). */
bool kiln_vm_so_has_section(const char *path);

/* kiln_vm_load (libkiln) without a compiler unless opts->compile is set:
 * heavy classes run on reference kernels. */
kiln_status kiln_vm_open_so(const char *path, const kiln_vm_options *opts, kiln_vm **out,
                            kiln_error *err);

/* Whether vm came from kiln_vm_load; whether heavy Gemm/MatMul/Conv classes
 * run on reference kernels because no C compiler was found (said once on
 * stderr, and in a profile's configuration). */
bool kiln_vm_from_so(const kiln_vm *vm);
bool kiln_vm_heavy_on_reference(const kiln_vm *vm);
/* Whether vm was opened with a compiler (kiln_vm_options.compile). */
bool kiln_vm_compiles(const kiln_vm *vm);

/* Shape classes converted so far (cache misses), over all dynamic nodes and
 * the bodies of If, Loop and Scan. */
int64_t kiln_vm_num_conversions(const kiln_vm *vm);

#ifdef __cplusplus
}
#endif
#endif /* KILN_VM_H */
