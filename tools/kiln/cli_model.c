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
 *   their reference kernels;
 * - an .onnx whose graph inputs have symbolic or unknown dims (dynamic axes):
 *   the VM too, which imports and compiles the model per input-shape class at
 *   its first run (the shapes come from --input files, or --input-shape for
 *   the default input);
 * - a .so with a VM section (`kiln compile` of a model the VM runs): the VM
 *   over the .so's compiled static part and its section's dynamic nodes
 *   (kiln_vm_load: no compiler for the static part). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/rng.h"
#include "vm/vm.h"

/* Whether a failed import or compile of an .onnx stopped on a parameter
 * input that is run-time data, on control flow, or on a graph input with
 * symbolic or unknown dims: the VM runs such a model. */
static bool needs_vm(const char *model, const kiln_error *err)
{
    return cli_ends_with(model, ".onnx") && kiln_vm_needed(err->status, err->msg);
}

static int open_vm(cli_model *cm, const char *executor, int threads, double t0)
{
    kiln_error err = {0};
    kiln_vm_options o = {.reference = strcmp(executor, "ref") == 0, .num_threads = threads};
    kiln_status s = cli_ends_with(cm->model, ".so") ? kiln_vm_load(cm->model, &o, &cm->vm, &err)
                                                    : kiln_vm_create(cm->model, &o, &cm->vm, &err);
    if (s != KILN_OK) {
        cli_model_close(cm);
        return cli_lib_error(&err);
    }
    cm->executor = "vm";
    cm->vm_reference = o.reference;
    cm->threads = kiln_vm_num_threads(cm->vm);
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
    /* a .so `kiln compile` wrote for a model the VM runs: its VM section */
    if (is_so && kiln_vm_so_has_section(model))
        return open_vm(cm, executor, threads, t0);
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

void cli_model_print_batch(const cli_model *cm)
{
    const char *why = "";
    if (!cm->vm || !kiln_vm_symbolic(cm->vm))
        return;
    int n = kiln_vm_batch_chunks(cm->vm, &why);
    const kiln_tensor *o = kiln_vm_output(cm->vm, 0);
    if (n && o && o->shape.rank > 0)
        printf("batch:   %lld items in %d chunk%s of at most 8 (one specialization per chunk "
               "extent, %lld made so far)\n",
               (long long)o->shape.dims[0], n, n == 1 ? "" : "s",
               (long long)kiln_vm_num_specializations(cm->vm));
    else if (*why)
        printf("batch:   one specialization per input-shape class (%lld made so far): %s\n",
               (long long)kiln_vm_num_specializations(cm->vm), why);
}

const kiln_tensor *cli_model_output(const cli_model *cm, int i)
{
    if (cm->vm)
        return kiln_vm_output(cm->vm, i);
    return cm->mod ? kiln_module_output(cm->mod, i) : kiln_ref_executor_output(cm->ex, i);
}

char *cli_model_describe(const cli_model *cm, char *buf, size_t size)
{
    if (cm->vm && kiln_vm_symbolic(cm->vm) && !kiln_vm_num_specializations(cm->vm))
        snprintf(buf, size,
                 "vm (symbolic input dims: imported per input-shape class at its first "
                 "run, the 4 last classes kept, or, for a batch whose items are computed "
                 "apart, per chunk of 8, 4, 2 or 1 items; static part: %s)",
                 cm->vm_reference ? "reference kernels" : "compiled");
    else if (cm->vm && kiln_vm_batch_chunks(cm->vm, NULL))
        snprintf(buf, size,
                 "vm (symbolic batch in %d chunk%s of 8, 4, 2 or 1 items, one specialization "
                 "per chunk extent; static part: %s)",
                 kiln_vm_batch_chunks(cm->vm, NULL),
                 kiln_vm_batch_chunks(cm->vm, NULL) == 1 ? "" : "s", kiln_vm_static_part(cm->vm));
    else if (cm->vm && kiln_vm_symbolic(cm->vm) && !kiln_vm_num_dynamic_nodes(cm->vm))
        snprintf(buf, size, "vm (symbolic input dims, imported for these shapes: a static "
                            "graph, static part: %s)",
                 kiln_vm_static_part(cm->vm));
    else if (cm->vm)
        snprintf(buf, size,
                 "vm (%s%d data-dependent node%s: the VM's kernels, or converted per shape "
                 "class; static part: %s)",
                 kiln_vm_symbolic(cm->vm) ? "symbolic input dims, specialized for these "
                                            "shapes; "
                                          : "",
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

/* Whether every --input-shape names a model input; prints the error. */
static int check_shape_names(const cli_model *cm)
{
    const cli_input_shapes *s = cm->input_shapes;
    for (int k = 0; s && k < s->n; k++) {
        bool found = false;
        for (int i = 0; i < cli_model_num_inputs(cm) && !found; i++) {
            const char *name = "";
            cli_model_input_info(cm, i, &name, NULL, NULL);
            found = name && strcmp(name, s->name[k]) == 0;
        }
        if (!found) {
            char list[512] = "";
            for (int i = 0; i < cli_model_num_inputs(cm); i++) {
                const char *name = "";
                cli_model_input_info(cm, i, &name, NULL, NULL);
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i ? ", " : "",
                         name ? name : "");
            }
            cli_error("--input-shape: the model has no input named '%s' (its inputs: %s)",
                      s->name[k], list);
            return KILN_EXIT_ERROR;
        }
    }
    return KILN_EXIT_OK;
}

/* A VM input with a symbolic or unknown dim and no --input-shape: the error
 * names the dim and the two ways to give the shape. */
static int symbolic_input_error(const cli_model *cm, int i, const char *name, const kiln_shape *s)
{
    char ex[256] = "";
    const char *any = kiln_vm_input_dim_param(cm->vm, i, -1);
    int d = 0;
    while (!any && d < s->rank && !kiln_vm_input_dim_param(cm->vm, i, d))
        d++;
    for (int k = 0; !any && k < s->rank; k++) /* an example: 1 for each symbolic dim */
        snprintf(ex + strlen(ex), sizeof ex - strlen(ex), "%s%lld", k ? "x" : "",
                 (long long)(s->dims[k] >= 0 ? s->dims[k] : 1));
    if (any)
        cli_error("input %d '%s' declares no shape: give its data (--input FILE, once per "
                  "input) or its shape (--input-shape %s=DIMS, e.g. %s=1x3x224x224)",
                  i, name, name, name);
    else {
        const char *p = kiln_vm_input_dim_param(cm->vm, i, d);
        char pn[300] = "";
        if (p && *p)
            snprintf(pn, sizeof pn, " ('%s')", p);
        cli_error("input %d '%s' dim %d%s is symbolic: give its data (--input FILE, once per "
                  "input) or its shape (--input-shape %s=DIMS, e.g. --input-shape %s=%s)",
                  i, name, d, pn, name, name, ex);
    }
    return KILN_EXIT_ERROR;
}

int cli_model_default_inputs(cli_model *cm, kiln_tensor *inputs)
{
    kiln_rng rng;
    kiln_error err = {0};
    kiln_rng_seed(&rng, KILN_RUN_INPUT_SEED);
    if (check_shape_names(cm) != KILN_EXIT_OK)
        return KILN_EXIT_ERROR;
    for (int i = 0; i < cli_model_num_inputs(cm); i++) {
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        if (cli_model_input_info(cm, i, &name, &dt, &shape) != KILN_OK) {
            cli_error("cannot query input %d", i);
            return KILN_EXIT_ERROR;
        }
        const kiln_shape *given = cli_input_shape_find(cm->input_shapes, name);
        if (given)
            shape = *given;
        else if (cm->vm && kiln_vm_symbolic(cm->vm)) {
            bool sym = kiln_vm_input_dim_param(cm->vm, i, -1) != NULL;
            for (int d = 0; d < shape.rank && !sym; d++)
                sym = kiln_vm_input_dim_param(cm->vm, i, d) != NULL;
            if (sym)
                return symbolic_input_error(cm, i, name, &shape);
        }
        if (kiln_tensor_alloc(&inputs[i], dt, &shape, &err) != KILN_OK) {
            cli_error("input %d '%s': %s", i, name, err.msg);
            return KILN_EXIT_ERROR;
        }
        fill_default_input(&inputs[i], &rng);
        if (cli_model_set_input(cm, i, &inputs[i], &err) != KILN_OK) {
            cli_error("input %d '%s'%s: %s", i, name, given ? " (--input-shape)" : "", err.msg);
            return KILN_EXIT_ERROR;
        }
    }
    return KILN_EXIT_OK;
}

int cli_model_prepare(cli_model *cm)
{
    if (!cm->vm || !kiln_vm_symbolic(cm->vm))
        return KILN_EXIT_OK;
    kiln_error err = {0};
    double t0 = cli_now_ms();
    if (kiln_vm_run_step(cm->vm, 0, &err) != KILN_OK)
        return cli_lib_error(&err);
    cm->load_ms += cli_now_ms() - t0;
    return KILN_EXIT_OK;
}

int cli_parse_input_shape(const char *cmd, const char *v, cli_input_shapes *s)
{
    const char *eq = strrchr(v, '=');
    char name[sizeof s->name[0]];
    kiln_shape sh = {.rank = 0};
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof name) {
        cli_usage_error(cmd, "--input-shape: expected NAME=DIMS (e.g. x=1x3x224x224), got '%s'",
                        v);
        return 0;
    }
    if (s->n >= CLI_MAX_INPUT_SHAPES) {
        cli_usage_error(cmd, "more than %d --input-shape options", CLI_MAX_INPUT_SHAPES);
        return 0;
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - v), v);
    if (cli_input_shape_find(s, name)) {
        cli_usage_error(cmd, "--input-shape: input '%s' given twice", name);
        return 0;
    }
    for (const char *p = eq + 1; *p;) {
        char num[32];
        size_t n = strcspn(p, "x,");
        uint64_t e = 0;
        if (n > 0 && n < sizeof num) {
            memcpy(num, p, n);
            num[n] = '\0';
        }
        if (n == 0 || n >= sizeof num || sh.rank >= KILN_MAX_RANK || !cli_parse_u64(num, &e) ||
            e > ((uint64_t)1 << 40) || (p[n] && !p[n + 1])) {
            cli_usage_error(cmd,
                            "--input-shape %s: '%s' is not extents joined by 'x' (at most %d, "
                            "e.g. 1x3x224x224)",
                            name, eq + 1, KILN_MAX_RANK);
            return 0;
        }
        sh.dims[sh.rank++] = (int64_t)e;
        p += n + (p[n] != '\0');
    }
    snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
    s->shape[s->n++] = sh;
    return 1;
}

const kiln_shape *cli_input_shape_find(const cli_input_shapes *s, const char *name)
{
    for (int k = 0; s && name && k < s->n; k++)
        if (strcmp(s->name[k], name) == 0)
            return &s->shape[k];
    return NULL;
}

int cli_model_inputs(cli_model *cm, const char *model, const char *const *paths, int n_paths,
                     kiln_tensor *inputs)
{
    int n_inputs = cli_model_num_inputs(cm);
    kiln_error err = {0};
    if (!n_paths)
        return cli_model_default_inputs(cm, inputs) != KILN_EXIT_OK ? KILN_EXIT_ERROR
                                                                    : cli_model_prepare(cm);
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
    return cli_model_prepare(cm);
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
