/* tools/kiln/cli_model.c: one way for run, check and bench to open MODEL and
 * drive whichever executor runs it:
 * - a path ending in .so: the runtime (kiln_module_load);
 * - a zoo name or .onnx with --executor graph (the default): compiled through
 *   the cache (kiln_compile_cached), then loaded by the runtime;
 * - --executor ref: the reference executor over the imported graph (only
 *   when asked for: every valid graph compiles, docs/COMPILER.md);
 * - an .onnx whose import stops on a parameter input that is run-time data
 *   (a Reshape's shape, a Slice's starts, ...): the VM (src/vm, docs/VM.md),
 *   its static part compiled (or on the reference executor with --executor
 *   ref) and its data-dependent nodes converted per shape class and run by
 *   their reference kernels. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/pool.h"
#include "util/rng.h"
#include "vm/vm.h"

/* Whether a failed import or compile of an .onnx stopped on a parameter
 * input that is run-time data, or on control flow: the VM runs such a model. */
static bool needs_vm(const char *model, const kiln_error *err)
{
    return cli_ends_with(model, ".onnx") && err->status == KILN_ERR_UNSUPPORTED &&
           (strstr(err->msg, "must be a constant") || strstr(err->msg, "unsupported op 'If'") ||
            strstr(err->msg, "unsupported op 'Loop'") || strstr(err->msg, "unsupported op 'Scan'") ||
            strstr(err->msg, "unsupported op 'Sequence") ||
            strstr(err->msg, "unsupported op 'ConcatFromSequence'") ||
            strstr(err->msg, "unsupported op 'SplitToSequence'"));
}

static int open_vm(cli_model *cm, const char *executor, int threads, double t0)
{
    kiln_error err = {0};
    kiln_vm_options o = {.reference = strcmp(executor, "ref") == 0, .num_threads = threads};
    if (kiln_vm_create(cm->model, &o, &cm->vm, &err) != KILN_OK) {
        cli_model_close(cm);
        return cli_lib_error(&err);
    }
    cm->executor = "vm";
    /* the static part's threads: as a module resolves 0 ($KILN_NUM_THREADS, else the cores) */
    if (!o.reference && threads <= 0 && kiln_threads_resolve(0, &threads, &err) != KILN_OK)
        threads = kiln_runtime_physical_cores();
    cm->threads = o.reference ? 1 : threads;
    cm->load_ms = cli_now_ms() - t0;
    return KILN_EXIT_OK;
}

/* One line naming the fallback steps (op "ref:<Op>"), at most 10 of them. */
static void print_fallbacks(const kiln_module *m)
{
    int n = 0, steps = kiln_module_num_steps(m);
    kiln_step_info si;
    for (int i = 0; i < steps; i++)
        n += kiln_module_step_info(m, i, &si) == KILN_OK && !strncmp(si.op, "ref:", 4);
    if (!n)
        return;
    fprintf(stderr, "kiln: %d node%s run%s %s reference kernel (no template):", n,
            n == 1 ? "" : "s", n == 1 ? "s" : "", n == 1 ? "its" : "their");
    for (int i = 0, k = 0; i < steps && k < 10; i++)
        if (kiln_module_step_info(m, i, &si) == KILN_OK && !strncmp(si.op, "ref:", 4))
            fprintf(stderr, "%s %s '%s'", k++ ? "," : "", si.op + 4, si.name);
    if (n > 10)
        fprintf(stderr, ", and %d more", n - 10);
    fputc('\n', stderr);
}

int cli_model_open(cli_model *cm, const char *cmd, const char *model, const char *executor,
                   uint64_t seed, int threads)
{
    kiln_error err = {0};
    memset(cm, 0, sizeof *cm);
    cm->model = model;
    int is_so = cli_ends_with(model, ".so");
    if (!executor)
        executor = "graph";
    if (strcmp(executor, "graph") != 0 && strcmp(executor, "ref") != 0)
        return cli_usage_error(cmd, "unknown executor '%s' (available: graph, ref)", executor);
    if (is_so && strcmp(executor, "ref") == 0) {
        cli_error("%s: a compiled model runs on the graph executor; --executor ref needs a zoo "
                  "name or an .onnx file",
                  model);
        return KILN_EXIT_ERROR;
    }
    double t0 = cli_now_ms();
    /* Every valid graph compiles: a node with no kernel template runs its
     * reference kernel inside the compiled model (a fallback step). The
     * reference executor runs only when the user asks for it. */
    if (!is_so && strcmp(executor, "graph") == 0 &&
        kiln_compile_cached(model, seed, NULL, &cm->so_path, &err) != KILN_OK)
        return needs_vm(model, &err) ? open_vm(cm, executor, threads, t0) : cli_lib_error(&err);
    cm->executor = strcmp(executor, "ref") == 0 ? "ref" : "graph";
    if (cm->executor[0] == 'r') {
        if ((!cm->g && kiln_model_load(model, seed, &cm->g, &err) != KILN_OK) ||
            kiln_ref_executor_create(cm->g, &cm->ex, &err) != KILN_OK) {
            cli_model_close(cm);
            if (needs_vm(model, &err)) {
                cm->model = model;
                return open_vm(cm, executor, threads, t0);
            }
            return cli_lib_error(&err);
        }
        cm->threads = 1;
    } else {
        kiln_module_options o = {.num_threads = threads, .bind_threads = -1};
        if (kiln_module_load(cm->so_path ? cm->so_path : model, &o, &cm->mod, &err) != KILN_OK) {
            cli_model_close(cm);
            return cli_lib_error(&err);
        }
        cm->threads = kiln_module_num_threads(cm->mod);
        print_fallbacks(cm->mod);
    }
    cm->load_ms = cli_now_ms() - t0;
    return KILN_EXIT_OK;
}

void cli_model_close(cli_model *cm)
{
    if (!cm)
        return;
    kiln_vm_destroy(cm->vm);
    kiln_module_destroy(cm->mod);
    kiln_ref_executor_destroy(cm->ex);
    kiln_graph_destroy(cm->g);
    free(cm->so_path);
    memset(cm, 0, sizeof *cm);
}

int cli_model_num_inputs(const cli_model *cm)
{
    if (cm->vm)
        return kiln_vm_num_inputs(cm->vm);
    return cm->mod ? kiln_module_num_inputs(cm->mod) : kiln_graph_num_inputs(cm->g);
}

int cli_model_num_outputs(const cli_model *cm)
{
    if (cm->vm)
        return kiln_vm_num_outputs(cm->vm);
    return cm->mod ? kiln_module_num_outputs(cm->mod) : kiln_graph_num_outputs(cm->g);
}

kiln_status cli_model_input_info(const cli_model *cm, int i, const char **name, kiln_dtype *dt,
                                 kiln_shape *shape)
{
    if (cm->vm)
        return kiln_vm_input_info(cm->vm, i, name, dt, shape);
    return cm->mod ? kiln_module_input_info(cm->mod, i, name, dt, shape)
                   : kiln_graph_input_info(cm->g, i, name, dt, shape);
}

kiln_status cli_model_output_info(const cli_model *cm, int i, const char **name, kiln_dtype *dt,
                                  kiln_shape *shape)
{
    if (cm->vm)
        return kiln_vm_output_info(cm->vm, i, name, dt, shape);
    return cm->mod ? kiln_module_output_info(cm->mod, i, name, dt, shape)
                   : kiln_graph_output_info(cm->g, i, name, dt, shape);
}

kiln_status cli_model_set_input(cli_model *cm, int i, const kiln_tensor *t, kiln_error *err)
{
    if (cm->vm)
        return kiln_vm_set_input(cm->vm, i, t, err);
    return cm->mod ? kiln_module_set_input(cm->mod, i, t, err)
                   : kiln_ref_executor_set_input(cm->ex, i, t, err);
}

kiln_status cli_model_run(cli_model *cm, kiln_error *err)
{
    if (cm->vm)
        return kiln_vm_run(cm->vm, err);
    return cm->mod ? kiln_module_run(cm->mod, err) : kiln_ref_executor_run(cm->ex, err);
}

const kiln_tensor *cli_model_output(const cli_model *cm, int i)
{
    if (cm->vm)
        return kiln_vm_output(cm->vm, i);
    return cm->mod ? kiln_module_output(cm->mod, i) : kiln_ref_executor_output(cm->ex, i);
}

char *cli_model_describe(const cli_model *cm, char *buf, size_t size)
{
    if (cm->vm)
        snprintf(buf, size,
                 "vm (%d data-dependent node%s: the VM's kernels, or converted per shape "
                 "class; static part: %s)",
                 kiln_vm_num_dynamic_nodes(cm->vm),
                 kiln_vm_num_dynamic_nodes(cm->vm) == 1 ? "" : "s",
                 kiln_vm_static_part(cm->vm));
    else if (cm->mod)
        snprintf(buf, size, "graph (%s, %d thread%s)", cm->so_path ? cm->so_path : cm->model,
                 cm->threads, cm->threads == 1 ? "" : "s");
    else
        snprintf(buf, size, "ref (reference kernels, 1 thread)");
    return buf;
}

/* float -> IEEE binary16 bits, round to nearest even (finite inputs). */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (exp >= 31)
        return sign | 0x7c00;
    if (exp <= 0) {
        if (exp < -10)
            return sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return sign | (uint16_t)h;
    }
    uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent, which is still correct */
    return sign | (uint16_t)h;
}

/* Fills t (already allocated) with the default input data. */
static void fill_default_input(kiln_tensor *t, kiln_rng *rng)
{
    int64_t n = kiln_shape_numel(&t->shape);
    switch (t->dtype) {
    case KILN_DTYPE_FLOAT32: kiln_rng_fill_uniform(rng, t->data, n, -1.0f, 1.0f); break;
    case KILN_DTYPE_FLOAT64:
        for (int64_t i = 0; i < n; i++)
            ((double *)t->data)[i] = kiln_rng_uniform(rng) * 2.0 - 1.0;
        break;
    case KILN_DTYPE_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)t->data)[i] = float_to_half(kiln_rng_uniformf(rng, -1.0f, 1.0f));
        break;
    default: break; /* integer and bool inputs stay zero */
    }
}

int cli_model_default_inputs(cli_model *cm, kiln_tensor *inputs)
{
    kiln_rng rng;
    kiln_error err = {0};
    kiln_rng_seed(&rng, KILN_RUN_INPUT_SEED);
    for (int i = 0; i < cli_model_num_inputs(cm); i++) {
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        if (cli_model_input_info(cm, i, &name, &dt, &shape) != KILN_OK) {
            cli_error("cannot query input %d", i);
            return KILN_EXIT_ERROR;
        }
        if (kiln_tensor_alloc(&inputs[i], dt, &shape, &err) != KILN_OK) {
            cli_error("input %d '%s': %s", i, name, err.msg);
            return KILN_EXIT_ERROR;
        }
        fill_default_input(&inputs[i], &rng);
        if (cli_model_set_input(cm, i, &inputs[i], &err) != KILN_OK) {
            cli_error("input %d '%s': %s", i, name, err.msg);
            return KILN_EXIT_ERROR;
        }
    }
    return KILN_EXIT_OK;
}

int cli_model_inputs(cli_model *cm, const char *model, const char *const *paths, int n_paths,
                     kiln_tensor *inputs)
{
    int n_inputs = cli_model_num_inputs(cm);
    kiln_error err = {0};
    if (!n_paths)
        return cli_model_default_inputs(cm, inputs);
    if (n_paths != n_inputs) {
        cli_error("model '%s' has %d input%s but %d --input file%s given", model, n_inputs,
                  n_inputs == 1 ? "" : "s", n_paths, n_paths == 1 ? " was" : "s were");
        return KILN_EXIT_ERROR;
    }
    for (int i = 0; i < n_paths; i++) {
        if (kiln_tensor_read(paths[i], &inputs[i], NULL, &err) != KILN_OK) {
            cli_error("%s: %s", paths[i], err.msg);
            return KILN_EXIT_ERROR;
        }
        if (cli_model_set_input(cm, i, &inputs[i], &err) != KILN_OK) {
            cli_error("%s: input %d: %s", paths[i], i, err.msg);
            return KILN_EXIT_ERROR;
        }
    }
    return KILN_EXIT_OK;
}

int cli_parse_threads(const char *cmd, const char *v, int *out)
{
    uint64_t n;
    if (!cli_parse_u64(v, &n) || n < 1 || n > 1024) {
        cli_usage_error(cmd, "--threads: '%s' is not a number of threads (1..1024)", v);
        return 0;
    }
    *out = (int)n;
    return 1;
}
