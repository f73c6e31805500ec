/* tools/kiln/cli.h: the kiln command-line tool's commands and shared helpers.
 *
 * Exit codes (docs/CLI.md): 0 success, 1 a comparison failed (kiln check),
 * 2 any error (usage, unreadable or malformed file, unknown model, a failing
 * library call). */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"
#include "kiln/runtime.h"

enum { KILN_EXIT_OK = 0, KILN_EXIT_MISMATCH = 1, KILN_EXIT_ERROR = 2 };

/* Each command gets argv[0] = its own name. */
int kiln_cmd_zoo(int argc, char **argv);
int kiln_cmd_run(int argc, char **argv);
int kiln_cmd_check(int argc, char **argv);
int kiln_cmd_bench(int argc, char **argv);
int kiln_cmd_tasks(int argc, char **argv); /* cmd_tasks.c */

/* Prints "kiln: error: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error and "Try 'kiln CMD --help'." and returns KILN_EXIT_ERROR. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints err's message (or "<status>" if empty) as an error; returns KILN_EXIT_ERROR. */
int cli_lib_error(const kiln_error *err);

/* ---- argument parsing ----------------------------------------------------
 * Options are "--name VALUE" or "--name=VALUE". cli_opt_value returns 1 when
 * argv[*i] is option `name`, storing its value (and advancing *i past a
 * separate value); it returns -1 (after printing the error) when the value is
 * missing, and 0 when argv[*i] is another argument. */
int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
                  const char **value);
int cli_is_help(const char *arg);
/* Strict number parsers: the whole string must be a number in range. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_double(const char *s, double *out);
int cli_ends_with(const char *s, const char *suffix);

/* ---- tensors ------------------------------------------------------------ */
/* Element i of any dtype as a double (float16 decoded). */
double cli_tensor_get(const kiln_tensor *t, int64_t i);
/* Indices of the k largest elements, largest first (NaN ranks lowest, ties by
 * lower index); returns how many were stored (min(k, numel)). */
int cli_top_k(const kiln_tensor *t, int k, int64_t *idx);
/* 64-bit FNV-1a of the tensor's data bytes, and the sum of its elements. */
uint64_t cli_fnv1a64(const void *data, size_t n);
double cli_tensor_sum(const kiln_tensor *t);
/* Writes the tensor as .npy or .pb depending on the path's extension. */
kiln_status cli_write_tensor(const char *path, const kiln_tensor *t, const char *name,
                             kiln_error *err);
/* "[0, 2, 1]": the multi-index of flat index `flat` in `shape`. */
char *cli_multi_index(const kiln_shape *shape, int64_t flat, char *buf, size_t size);
/* "float32 [1, 3, 224, 224]" */
char *cli_type_str(kiln_dtype dt, const kiln_shape *s, char *buf, size_t size);

/* ---- --input-shape NAME=DIMS ------------------------------------------------
 * run, bench and profile: the shape of the default input of a model input
 * whose declared shape has symbolic or unknown dims; compile: the shape that
 * input is compiled for. DIMS is extents joined by 'x' ("1x3x224x224"); an
 * empty DIMS is a scalar. */
#define CLI_MAX_INPUT_SHAPES 64
typedef struct cli_input_shapes {
    int n;
    char name[CLI_MAX_INPUT_SHAPES][256];
    kiln_shape shape[CLI_MAX_INPUT_SHAPES];
} cli_input_shapes;
/* Adds one option value to s; prints the usage error and returns 0 when
 * invalid (no '=', a bad extent, a name given twice, too many). */
int cli_parse_input_shape(const char *cmd, const char *v, cli_input_shapes *s);
/* The shape given for input `name`, or NULL. */
const kiln_shape *cli_input_shape_find(const cli_input_shapes *s, const char *name);
/* The option's --help lines, descriptions indented by I (a string of spaces). */
#define CLI_INPUT_SHAPE_HELP(I)                                                                \
    "  --input-shape NAME=DIMS\n" I "the shape of input NAME's default data when the\n" I      \
    "model declares it with symbolic or unknown dims\n" I                                     \
    "(an ONNX export's dynamic axes): DIMS like\n" I                                          \
    "1x3x224x224, once per such input. Not with --input\n" I                                  \
    "(a file gives its own shape).\n"

/* ---- models: one front for the runtime and the reference executor ---------
 * cli_model_open picks the executor (cli_model.c): MODEL ending in .so runs on
 * the runtime; a zoo name or .onnx is compiled through the cache and run by
 * the runtime (executor "graph", the default; NULL means it) or run by the
 * reference executor ("ref"). threads: 0 = $KILN_NUM_THREADS or the physical
 * cores. A compiled model's nodes without a kernel template (fallback steps,
 * run by their reference kernels inside it) are named in one line on stderr.
 * Prints any error; returns KILN_EXIT_OK or KILN_EXIT_ERROR. */
typedef struct cli_model {
    const char *model;
    const char *executor;  /* "graph" or "ref" (what actually runs) */
    int threads;
    double load_ms;        /* compile (or import) + load */
    char *so_path;         /* the compiled .so from the cache, or NULL */
    kiln_module *mod;      /* graph executor */
    kiln_graph *g;         /* ref executor */
    kiln_ref_executor *ex;
    struct kiln_vm *vm;    /* the VM: an .onnx whose shapes depend on data (src/vm) */
    bool vm_reference;     /* the VM's static part on the reference executor */
    /* --input-shape (set by the command after cli_model_open; may be NULL):
     * shapes of the default inputs */
    const cli_input_shapes *input_shapes;
} cli_model;

int cli_model_open(cli_model *cm, const char *cmd, const char *model, const char *executor,
                   uint64_t seed, int threads);
void cli_model_close(cli_model *cm);
int cli_model_num_inputs(const cli_model *cm);
int cli_model_num_outputs(const cli_model *cm);
kiln_status cli_model_input_info(const cli_model *cm, int i, const char **name, kiln_dtype *dt,
                                 kiln_shape *shape);
kiln_status cli_model_output_info(const cli_model *cm, int i, const char **name, kiln_dtype *dt,
                                  kiln_shape *shape);
kiln_status cli_model_set_input(cli_model *cm, int i, const kiln_tensor *t, kiln_error *err);
kiln_status cli_model_run(cli_model *cm, kiln_error *err);
const kiln_tensor *cli_model_output(const cli_model *cm, int i);
/* "graph (path.so, 2 threads)" or "ref (reference kernels, 1 thread)" */
char *cli_model_describe(const cli_model *cm, char *buf, size_t size);
/* For a model with symbolic input dims, after a run: how its batch ran
 * (the chunks, or why one specialization per input-shape class). */
void cli_model_print_batch(const cli_model *cm);
/* --threads N: 1..1024; prints the usage error and returns 0 when invalid. */
int cli_parse_threads(const char *cmd, const char *v, int *out);
/* The default input of run and bench: pseudo-random data, uniform in [-1, 1)
 * for floating-point inputs (zeros for integer and bool ones), drawn in input
 * order from a generator seeded with KILN_RUN_INPUT_SEED. Allocates every
 * input into inputs[0..n) and sets it; prints any error. */
#define KILN_RUN_INPUT_SEED 0x6b696c6eULL /* ASCII "kiln" */
int cli_model_default_inputs(cli_model *cm, kiln_tensor *inputs);
/* After every input is set: a model with symbolic input dims (on the VM) is
 * imported and compiled for these shapes now (through step 0), so that a
 * timed run does not include it; the time goes to load_ms. Prints any error. */
int cli_model_prepare(cli_model *cm);
/* The inputs of bench and profile: the default input when n_paths is 0, else
 * one tensor file per model input, in order (read into inputs[], then set),
 * then cli_model_prepare. Prints any error. */
int cli_model_inputs(cli_model *cm, const char *model, const char *const *paths, int n_paths,
                     kiln_tensor *inputs);

/* ---- misc ---------------------------------------------------------------- */
double cli_now_ms(void);
/* "11,689,512" */
char *cli_thousands(int64_t v, char *buf, size_t size);

#endif
