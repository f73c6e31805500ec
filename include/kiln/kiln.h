/* kiln/kiln.h: the compiler API.
 *
 * Conventions (see docs/API.md):
 * - Every fallible call returns kiln_status and, when `err` is not NULL, fills
 *   it with the status and a message naming what was wrong and where.
 * - Handles come from *_create / builders and go back through *_destroy;
 *   destroy(NULL) is a no-op. Out-parameters are untouched on failure.
 * - Nothing here exits or aborts on bad input.
 * - Handles are not thread-safe; distinct handles may be used from distinct
 *   threads.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/runtime.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION "0.1.0"

/* ---- Graph ----------------------------------------------------------------
 * A network: values (inputs, constants, intermediates), nodes, outputs, all in
 * one arena owned by the graph. Built by an importer (the zoo, ONNX). */
typedef struct kiln_graph kiln_graph;

void kiln_graph_destroy(kiln_graph *g);

/* Graph inputs and outputs: count, and the name/dtype/shape of the i-th. The
 * returned name is owned by the graph. */
int kiln_graph_num_inputs(const kiln_graph *g);
int kiln_graph_num_outputs(const kiln_graph *g);
kiln_status kiln_graph_input_info(const kiln_graph *g, int i, const char **name,
                                  kiln_dtype *dtype, kiln_shape *shape);
kiln_status kiln_graph_output_info(const kiln_graph *g, int i, const char **name,
                                   kiln_dtype *dtype, kiln_shape *shape);

/* Checks the graph: dangling edges, cycles, arity, and that every node's
 * recorded output types agree with shape inference. The message names the
 * offending node. */
kiln_status kiln_graph_validate(const kiln_graph *g, kiln_error *err);

/* Runs shape inference over the whole graph, recording every value's dtype and
 * shape. */
kiln_status kiln_graph_infer_shapes(kiln_graph *g, kiln_error *err);

/* Totals over the graph: number of constant (weight) elements, and the
 * multiply-accumulates of one inference (Conv, Gemm, MatMul). Shapes must be
 * inferred. */
int64_t kiln_graph_num_params(const kiln_graph *g);
int64_t kiln_graph_macs(const kiln_graph *g);

/* ---- Zoo: built-in networks with seeded weights ------------------------- */
typedef struct kiln_zoo_info {
    const char *name;        /* "resnet-50" */
    const char *description; /* one line */
    kiln_shape input_shape;  /* [1, 3, 224, 224] */
} kiln_zoo_info;

int kiln_zoo_count(void);
/* The i-th network, 0 <= i < kiln_zoo_count(); NULL otherwise. */
const kiln_zoo_info *kiln_zoo_get(int i);
/* By name; NULL if there is no such network. */
const kiln_zoo_info *kiln_zoo_find(const char *name);

enum {
    KILN_ZOO_NO_WEIGHTS = 1 << 0, /* constants get shapes but no data (counting, listing) */
};

/* Builds network `name` with weights drawn from a generator seeded by `seed`
 * (same name + seed => bit-identical weights). Shapes are inferred. */
kiln_status kiln_zoo_build(const char *name, uint64_t seed, unsigned flags, kiln_graph **out,
                           kiln_error *err);

/* ---- ONNX import --------------------------------------------------------
 * Reads a ModelProto (external data files are resolved relative to the
 * model's directory), converts every node with the converter for its
 * (domain, op_type, opset), folds shape arithmetic on constants, and infers
 * shapes. An unsupported op or attribute is KILN_ERR_UNSUPPORTED naming the op,
 * the node and the opset; a malformed file is KILN_ERR_PARSE. */
kiln_status kiln_onnx_load(const char *path, kiln_graph **out, kiln_error *err);
kiln_status kiln_onnx_load_buffer(const void *buf, size_t size, const char *base_dir,
                                  kiln_graph **out, kiln_error *err);

/* ---- Models by name ----------------------------------------------------
 * `model` is a zoo name or a path ending in .onnx. Zoo networks get weights
 * from `seed`. */
kiln_status kiln_model_load(const char *model, uint64_t seed, kiln_graph **out,
                            kiln_error *err);

/* ---- Compiler: graph -> one .so -------------------------------------------
 * Optimizes the graph (passes), generates C for every fused kernel, compiles
 * it with $CC (content-hash cache of objects under cache_dir) and links
 * kernels, graph, storage plan and weights into one shared object that the
 * runtime (kiln/runtime.h) loads. */
typedef struct kiln_compile_options {
    const char *target;         /* NULL: the host ("avx512", "avx2", "generic") */
    const char *records;        /* tuning records file, or NULL */
    const char *cache_dir;      /* NULL: $XDG_CACHE_HOME/kiln or ~/.cache/kiln */
    const char *dump_code_dir;  /* write the generated C here too, or NULL */
    const char *print_ir_after; /* pass name whose output IR is printed to stderr, or NULL */
    int verbose;                /* print the time of each stage to stderr */
    int jobs;                   /* parallel $CC invocations; 0: number of cores */
} kiln_compile_options;

kiln_status kiln_compile(const kiln_graph *g, const kiln_compile_options *opts,
                         const char *out_path, kiln_error *err);
/* `model` as in kiln_model_load; the .so lands in the cache, keyed by the
 * graph's content and the options; *so_path receives its malloc'ed path.
 * Its large weights are files beside it in the cache (shared, and mapped
 * packed by the next process that builds the model: docs/COMPILER.md), so
 * it is not one deployable file: kiln_compile writes one. */
kiln_status kiln_compile_cached(const char *model, uint64_t seed,
                                const kiln_compile_options *opts, char **so_path,
                                kiln_error *err);

/* ---- Compiling in stages (src/driver) --------------------------------------
 * kiln_compile is these stages in one call. A build holds one compilation:
 *   kiln_build_passes     graph passes (shapes, folding, layouts, fusion, memory)
 *   kiln_build_lower      fused groups -> tasks, each with its template's
 *                         knob space and analytic default configuration
 *   kiln_build_configure  explicit configurations (kiln_build_set_config),
 *                         else the best tuning record per workload key
 *                         (opts->records), else the default
 *   kiln_build_codegen    C for every unique kernel and the model tables
 *   kiln_build_link       $CC through the object cache, one .so
 * Each stage runs the ones before it that have not run yet. The graph and
 * the options' strings are read during create (strings copied); the graph
 * must outlive the build. Not thread-safe; one build per thread. */
typedef struct kiln_build kiln_build;

kiln_status kiln_build_create(const kiln_graph *g, const kiln_compile_options *opts,
                              kiln_build **out, kiln_error *err);
void kiln_build_destroy(kiln_build *b); /* NULL: no-op */
kiln_status kiln_build_passes(kiln_build *b, kiln_error *err);
kiln_status kiln_build_lower(kiln_build *b, kiln_error *err);
/* Task `task`'s knobs from a JSON object {"knob": value, ...} (after lower,
 * before configure): every knob named must exist and the value be in its
 * space, else KILN_ERR_INVALID_ARGUMENT and nothing changes. */
kiln_status kiln_build_set_config(kiln_build *b, int task, const char *config_json,
                                  kiln_error *err);
kiln_status kiln_build_configure(kiln_build *b, kiln_error *err);
kiln_status kiln_build_codegen(kiln_build *b, kiln_error *err);
/* out_path NULL: the model cache (<cache>/models/<build id>.so), reused
 * when present. */
kiln_status kiln_build_link(kiln_build *b, const char *out_path, kiln_error *err);
/* The .so written (or found) by link; NULL before. Owned by the build. */
const char *kiln_build_output(const kiln_build *b);
/* Tasks whose configuration came from the tuning records. */
int kiln_build_tuned_tasks(const kiln_build *b);

/* ---- Tasks: the kernels of a model, each buildable and timed alone ------
 * A task is one fused kernel of a compiled model: its template, its workload
 * key (everything its code depends on but the knobs; grammar in
 * docs/COMPILER.md, "Workload keys"), its knob space with the analytic
 * defaults, and its flops. Steps of a model with equal keys are one task.
 *
 * A workload key parses back into a task that builds alone (what tuning
 * measures): kiln_workload_create makes a small graph of it (the key's nodes;
 * a graph input per activation argument, followed by a layout transform when
 * the key's layout is blocked; a constant of seeded random data per weight
 * argument, integer weights with the values the key records), lowers it and
 * checks that lowering gives the identical key. kiln_workload_measure builds
 * it with a configuration into a small .so, runs it once on seeded inputs,
 * checks every output against the reference executor on the same graph, and
 * times the task's step alone with the time evaluator (kiln_module_bench's
 * semantics over kiln_module_run_step): the transforms around it are steps
 * of their own and are not timed. In-process: a kernel that crashes takes the
 * caller with it (the tuner measures in a child process). Not thread-safe
 * per handle. */
typedef struct kiln_tasks kiln_tasks;
typedef struct kiln_workload kiln_workload;

/* One knob of a task's space. Strings and choices are owned by the handle. */
typedef struct kiln_knob_info {
    const char *name;   /* "ow_tile" */
    const char *kind;   /* "tile" (a tile or split size), "order" (a loop order),
                           "block" (a layout block size: fixed within a model) */
    int value;          /* the analytic default */
    int n_choices;
    const int *choices; /* the space, in the template's order */
} kiln_knob_info;

/* Strings are owned by the handle and valid until it is destroyed. */
typedef struct kiln_task_info {
    const char *workload;       /* the workload key */
    const char *template_name;  /* "conv2d_nchwc"; "ref" for a reference-kernel fallback */
    const char *target;         /* "x86_64-avx512" */
    const char *shapes;         /* "[1, 64, 56, 56], [64, 64, 3, 3], ..." (arguments) */
    const char *layouts;        /* "NCHW16c/OIHW16i16o/..." (weights as packed by the default) */
    const char *default_config; /* {"knob": value, ...}: the analytic defaults */
    double flops;               /* of one call */
    int steps;                  /* steps of the model running it (1 for a workload) */
    int n_knobs;
    int64_t space_size;         /* product of the knobs' choice counts (1: nothing to tune) */
    /* The template's next analytic picks after the default, best first (what
     * its cost model ranks next; the tuner measures them beside the
     * default): pick j's value of knob k is picks[j * n_knobs + k], always
     * one of the knob's choices. */
    int n_picks;
    const int *picks;
} kiln_task_info;

/* The unique tasks of graph g compiled with `opts` (NULL: defaults; target,
 * verbose, print_ir_after and the block lines of records are used: the
 * tasks of the blocks they choose, with their analytic default knobs), in
 * the order the model first runs them. Runs the passes and lowering, compiles nothing. The graph must have
 * weights (the conv templates choose layouts by them). */
kiln_status kiln_tasks_extract(const kiln_graph *g, const kiln_compile_options *opts,
                               kiln_tasks **out, kiln_error *err);
void kiln_tasks_destroy(kiln_tasks *t); /* NULL: no-op */
int kiln_tasks_count(const kiln_tasks *t);
int kiln_tasks_num_steps(const kiln_tasks *t); /* steps of the model (kernels and fallbacks) */
const char *kiln_tasks_target(const kiln_tasks *t);
/* Task i (0 <= i < count) and its knob k (0 <= k < n_knobs). */
kiln_status kiln_tasks_info(const kiln_tasks *t, int i, kiln_task_info *info, kiln_error *err);
kiln_status kiln_tasks_knob(const kiln_tasks *t, int i, int k, kiln_knob_info *info,
                            kiln_error *err);

/* A task from its workload key, with weights from `seed`. A key that does not
 * parse is KILN_ERR_PARSE naming the offset; one that parses but does not
 * build back into the identical key (a key of another kiln version, or an
 * edited one) is KILN_ERR_INVALID_ARGUMENT showing where the rebuilt key
 * differs. The target is the key's: building one for another ISA works;
 * measuring one for an ISA this machine lacks is KILN_ERR_UNSUPPORTED. */
kiln_status kiln_workload_create(const char *key, uint64_t seed, kiln_workload **out,
                                 kiln_error *err);
void kiln_workload_destroy(kiln_workload *w); /* NULL: no-op */
kiln_status kiln_workload_info(const kiln_workload *w, kiln_task_info *info, kiln_error *err);
kiln_status kiln_workload_knob(const kiln_workload *w, int k, kiln_knob_info *info,
                               kiln_error *err);

typedef struct kiln_measure_options {
    const char *config;       /* {"knob": value, ...} (a subset; NULL: the defaults) */
    kiln_bench_options bench; /* zeros: the time evaluator's defaults */
    int num_threads;          /* 0: as kiln_module_load ($KILN_NUM_THREADS, physical cores) */
    const char *cache_dir;    /* object and model cache (NULL: the default) */
    int jobs;                 /* parallel $CC (0: the cores) */
    double rtol, atol;        /* an output element differs when |got - want| > atol * max(1,
                                 max |want|) + rtol * |want|; 0: 1e-4 each */
    int build_only;           /* nonzero: build (into the model cache) and stop: out gets
                                 build_s, config and so_path; nothing is run or timed */
    int cold_weights;         /* 1: the task's weights are evicted from the caches before
                                 every call timed (kiln_module_evict_weights), as in a run
                                 of a network whose weights exceed the last-level cache;
                                 2: evicted to the last-level cache only
                                 (kiln_module_evict_weights_to_llc), as in a run of one
                                 whose weights fit it; 0: they stay warm from the call
                                 before */
} kiln_measure_options;

typedef struct kiln_measure_result {
    kiln_bench_result time;  /* seconds per call of the task's step alone */
    double gflops;           /* flops / median time */
    double max_abs_diff;     /* against the reference executor, over every output */
    int step, num_steps;     /* the step timed, of the small model's steps */
    double build_s;          /* lowering, code generation, $CC and link (0 s from the cache) */
    char config[512];        /* the configuration built: every knob, with "source" */
    char so_path[1024];      /* the small model (in the model cache) */
    char measured[512];      /* what was timed, in words */
} kiln_measure_result;

/* Builds w with opts->config and measures it (see the top of this section).
 * A configuration naming a knob the task lacks or a value outside its space
 * is KILN_ERR_INVALID_ARGUMENT and nothing is built; outputs that differ from
 * the reference are KILN_ERR_MISMATCH naming the first element; `out` is
 * untouched on any failure. */
kiln_status kiln_workload_measure(kiln_workload *w, const kiln_measure_options *opts,
                                  kiln_measure_result *out, kiln_error *err);

/* ---- Reference executor: runs any valid graph with the reference kernels -- */
typedef struct kiln_ref_executor kiln_ref_executor;

/* Plans every buffer up front; `g` must outlive the executor and have
 * constants with data. */
kiln_status kiln_ref_executor_create(const kiln_graph *g, kiln_ref_executor **out,
                                     kiln_error *err);
void kiln_ref_executor_destroy(kiln_ref_executor *ex);
/* Copies `t` into graph input `index`; dtype and shape must match exactly. */
kiln_status kiln_ref_executor_set_input(kiln_ref_executor *ex, int index, const kiln_tensor *t,
                                        kiln_error *err);
kiln_status kiln_ref_executor_run(kiln_ref_executor *ex, kiln_error *err);
/* Graph output `index` after a run; the data is owned by the executor and valid
 * until the next run or destroy. NULL if index is out of range. */
const kiln_tensor *kiln_ref_executor_output(const kiln_ref_executor *ex, int index);

/* Per-node stepping, for profilers: the nodes in execution order; running
 * every node once, in order, equals kiln_ref_executor_run. Strings are owned
 * by the graph (valid while it lives). */
typedef struct kiln_ref_node_info {
    const char *name; /* never NULL */
    const char *op;   /* the op's name, e.g. "Conv" */
    double flops;     /* 2 x multiply-accumulates (Conv, Gemm, MatMul); 0 if unknown */
} kiln_ref_node_info;
int kiln_ref_executor_num_nodes(const kiln_ref_executor *ex);
kiln_status kiln_ref_executor_node_info(const kiln_ref_executor *ex, int i,
                                        kiln_ref_node_info *info);
/* "float32[1, 64, 56, 56], float32[64, 64, 3, 3], float32[1, 64, 56, 56]":
 * the node's inputs then outputs (an absent optional input is skipped);
 * truncated to fit `size`. Returns buf ("" when i is out of range). */
char *kiln_ref_executor_node_shapes(const kiln_ref_executor *ex, int i, char *buf, size_t size);
/* Runs node i alone on the current contents of its inputs. */
kiln_status kiln_ref_executor_run_node(kiln_ref_executor *ex, int i, kiln_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KILN_H */
