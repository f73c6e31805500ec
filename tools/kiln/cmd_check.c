/* tools/kiln/cmd_check.c: `kiln check`: run a model (compiled by default, or
 * with the reference executor) on inputs read from files and compare every
 * output with an expected tensor, elementwise:
 *     |got - expected| <= atol + rtol * |expected|
 * (NaN matches only NaN; equal infinities match). Files are matched to graph
 * inputs/outputs by TensorProto name when every file's name is one of the
 * graph's names (each used once), otherwise in order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_RTOL 1e-3
#define DEFAULT_ATOL 1e-4

static void check_help(void)
{
    printf("usage: kiln check MODEL --inputs FILE... --outputs FILE...\n"
           "                  [--rtol R] [--atol A] [--seed N]\n"
           "                  [--executor graph|ref] [--threads N]\n"
           "\n"
           "Runs MODEL (a compiled .so, a zoo network name or an .onnx file) on the\n"
           "given inputs and compares each output with the expected\n"
           "tensor: an element matches when |got - expected| <= atol + rtol * |expected|\n"
           "(NaN matches only NaN). Tensor files are NumPy (.npy) or ONNX TensorProto\n"
           "(.pb). Give one file per graph input and one per graph output (a model\n"
           "with no inputs takes no --inputs, or --inputs with no file). They are\n"
           "matched by TensorProto name when all names are graph names, otherwise in\n"
           "order.\n"
           "\n"
           "An .onnx whose inputs have symbolic or unknown dims (dynamic axes) takes\n"
           "its shapes from the input files: it runs on the VM, imported and compiled\n"
           "for those shapes (a batch whose items are computed apart: in chunks of 8,\n"
           "4, 2 and 1 items). A file whose rank or fixed dim differs from the model's\n"
           "declared input is an error naming the input and the dim.\n"
           "\n"
           "Options:\n"
           "  --inputs FILE...    input tensors (the files up to the next option)\n"
           "  --outputs FILE...   expected output tensors\n"
           "  --rtol R            relative tolerance (default 1e-3)\n"
           "  --atol A            absolute tolerance (default 1e-4)\n"
           "  --seed N            seed of the zoo network's weights (default 0)\n"
           "  --executor E        graph (compiled kernels; a zoo name or .onnx file is\n"
           "                      compiled through the cache; the default) or ref\n"
           "                      (reference kernels)\n"
           "  --threads N         threads of the graph executor (default\n"
           "                      $KILN_NUM_THREADS, else the physical cores)\n"
           "  -h, --help          show this message\n"
           "\n"
           "Prints OK and the largest errors when everything matches; otherwise, for\n"
           "each failing output, the max abs and rel errors, the number of bad\n"
           "elements and the first bad one (flat index and multi-index, got and\n"
           "expected), or the differing dtype/shape.\n"
           "\n"
           "Exit status: 0 all outputs match, 1 a mismatch (values, shape or dtype),\n"
           "2 any error (unknown model, unreadable or malformed file, wrong number of\n"
           "files, an input whose dtype or shape the model does not accept).\n");
}

typedef struct tensor_file {
    const char *path;
    char *name; /* TensorProto name or NULL */
    kiln_tensor t;
} tensor_file;

static int read_files(tensor_file *files, int n)
{
    kiln_error err = {0};
    for (int i = 0; i < n; i++)
        if (kiln_tensor_read(files[i].path, &files[i].t, &files[i].name, &err) != KILN_OK)
            return cli_lib_error(&err);
    return KILN_EXIT_OK;
}

static void free_files(tensor_file *files, int n)
{
    for (int i = 0; files && i < n; i++) {
        kiln_tensor_release(&files[i].t);
        free(files[i].name);
    }
    free(files);
}

typedef kiln_status (*info_fn)(const cli_model *, int, const char **, kiln_dtype *,
                               kiln_shape *);

/* order[k] = index of the file for graph slot k: by name when every file's name
 * names a distinct graph slot, else identity. */
static void match_files(const cli_model *g, info_fn info, const tensor_file *files, int n,
                        int *order)
{
    for (int k = 0; k < n; k++)
        order[k] = -1;
    for (int f = 0; f < n; f++) {
        int slot = -1;
        for (int k = 0; k < n && files[f].name; k++) {
            const char *name = NULL;
            kiln_dtype dt;
            kiln_shape s;
            if (info(g, k, &name, &dt, &s) == KILN_OK && name && strcmp(name, files[f].name) == 0)
                slot = k;
        }
        if (slot < 0 || order[slot] >= 0)
            goto in_order;
        order[slot] = f;
    }
    return;
in_order:
    for (int k = 0; k < n; k++)
        order[k] = k;
}

/* Compares one output; prints the verdict. Returns 1 when it matches. */
static int compare_output(int index, const char *name, const kiln_tensor *got,
                          const tensor_file *exp, double rtol, double atol)
{
    char gb[300], eb[300];
    if (got->dtype != exp->t.dtype || !kiln_shape_equal(&got->shape, &exp->t.shape)) {
        printf("output %d '%s': MISMATCH: %s differs: got %s, expected %s (%s)\n", index, name,
               got->dtype != exp->t.dtype ? "dtype" : "shape",
               cli_type_str(got->dtype, &got->shape, gb, sizeof gb),
               cli_type_str(exp->t.dtype, &exp->t.shape, eb, sizeof eb), exp->path);
        return 0;
    }
    int64_t n = kiln_shape_numel(&got->shape), bad = 0, first = -1;
    double max_abs = 0, max_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = cli_tensor_get(got, i), e = cli_tensor_get(&exp->t, i);
        double d;
        int ok;
        if (isnan(e) || isnan(a)) {
            ok = isnan(e) && isnan(a);
            d = ok ? 0 : INFINITY;
        } else if (a == e) {
            ok = 1;
            d = 0;
        } else {
            d = fabs(a - e);
            ok = d <= atol + rtol * fabs(e);
        }
        double rel = d == 0 ? 0 : e != 0 && !isnan(e) ? d / fabs(e) : INFINITY;
        if (d > max_abs)
            max_abs = d;
        if (rel > max_rel)
            max_rel = rel;
        if (!ok && bad++ == 0)
            first = i;
    }
    if (!bad) {
        printf("output %d '%s': OK  %lld elements, max abs error %.3g, max rel error %.3g\n",
               index, name, (long long)n, max_abs, max_rel);
        return 1;
    }
    printf("output %d '%s': MISMATCH: %lld of %lld elements outside tolerance (%s)\n", index,
           name, (long long)bad, (long long)n, exp->path);
    printf("  max abs error %.6g, max rel error %.6g\n", max_abs, max_rel);
    printf("  first bad element: index %lld %s: got %.9g, expected %.9g\n", (long long)first,
           cli_multi_index(&got->shape, first, gb, sizeof gb), cli_tensor_get(got, first),
           cli_tensor_get(&exp->t, first));
    return 0;
}

int kiln_cmd_check(int argc, char **argv)
{
    const char *model = NULL, *v;
    double rtol = DEFAULT_RTOL, atol = DEFAULT_ATOL;
    uint64_t seed = 0;
    int rc = KILN_EXIT_ERROR, r, n_in = 0, n_out = 0;
    tensor_file *in = calloc((size_t)argc, sizeof *in), *out = calloc((size_t)argc, sizeof *out);
    int *order = NULL;
    const char *executor = NULL;
    int threads = 0;
    cli_model cm = {0};
    kiln_error err = {0};
    if (!in || !out) {
        cli_error("out of memory");
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            check_help();
            rc = KILN_EXIT_OK;
            goto done;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--inputs") == 0 || strcmp(a, "--outputs") == 0) {
            tensor_file *list = a[2] == 'i' ? in : out;
            int *count = a[2] == 'i' ? &n_in : &n_out;
            int before = *count;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
                list[(*count)++].path = argv[++i];
            /* --inputs with no file: a model with no inputs (the count is
             * checked against the model's below) */
            if (*count == before && a[2] == 'o') {
                cli_usage_error("check", "%s needs at least one file", a);
                goto done;
            }
        } else if ((r = cli_opt_value("check", argc, argv, &i, "--rtol", &v)) != 0) {
            if (r < 0)
                goto done;
            if (!cli_parse_double(v, &rtol) || rtol < 0) {
                cli_usage_error("check", "--rtol: '%s' is not a non-negative number", v);
                goto done;
            }
        } else if ((r = cli_opt_value("check", argc, argv, &i, "--atol", &v)) != 0) {
            if (r < 0)
                goto done;
            if (!cli_parse_double(v, &atol) || atol < 0) {
                cli_usage_error("check", "--atol: '%s' is not a non-negative number", v);
                goto done;
            }
        } else if ((r = cli_opt_value("check", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                goto done;
            if (!cli_parse_u64(v, &seed)) {
                cli_usage_error("check", "--seed: '%s' is not a non-negative integer", v);
                goto done;
            }
        } else if ((r = cli_opt_value("check", argc, argv, &i, "--executor", &v)) != 0) {
            if (r < 0)
                goto done;
            executor = v;
        } else if ((r = cli_opt_value("check", argc, argv, &i, "--threads", &v)) != 0) {
            if (r < 0 || !cli_parse_threads("check", v, &threads))
                goto done;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error("check", "unknown option '%s'", a);
            goto done;
        } else if (!model) {
            model = a;
        } else {
            cli_usage_error("check", "unexpected argument '%s' (MODEL is '%s')", a, model);
            goto done;
        }
    }
    if (!model) {
        cli_usage_error("check", "no MODEL given");
        goto done;
    }
    if (n_out == 0) {
        cli_usage_error("check", "no expected outputs given (--outputs FILE...)");
        goto done;
    }
    if (read_files(in, n_in) != KILN_EXIT_OK || read_files(out, n_out) != KILN_EXIT_OK)
        goto done;

    if (cli_model_open(&cm, "check", model, executor, seed, threads) != KILN_EXIT_OK)
        goto done;
    const cli_model *g = &cm;
    int gin = cli_model_num_inputs(g), gout = cli_model_num_outputs(g);
    if (n_in != gin || n_out != gout) {
        int ins = n_in != gin, want = ins ? gin : gout, got = ins ? n_in : n_out;
        cli_error("model '%s' has %d %s%s but %d file%s given with --%ss", model, want,
                  ins ? "input" : "output", want == 1 ? "" : "s", got, got == 1 ? " was" : "s were",
                  ins ? "input" : "output");
        goto done;
    }
    order = calloc((size_t)(argc + 1), sizeof *order);
    if (!order) {
        cli_error("out of memory");
        goto done;
    }
    match_files(g, cli_model_input_info, in, n_in, order);
    for (int k = 0; k < n_in; k++) {
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape s;
        cli_model_input_info(g, k, &name, &dt, &s);
        if (cli_model_set_input(&cm, k, &in[order[k]].t, &err) != KILN_OK) {
            cli_error("%s: input %d '%s': %s", in[order[k]].path, k, name, err.msg);
            goto done;
        }
    }
    if (cli_model_run(&cm, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    char desc[1200];
    printf("model:   %s\n", model);
    printf("executor: %s\n", cli_model_describe(&cm, desc, sizeof desc));
    match_files(g, cli_model_output_info, out, n_out, order);
    int failed = 0;
    for (int k = 0; k < n_out; k++) {
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape s;
        cli_model_output_info(g, k, &name, &dt, &s);
        const kiln_tensor *got = cli_model_output(&cm, k);
        if (!got) {
            cli_error("output %d '%s' is missing after the run", k, name);
            goto done;
        }
        if (!compare_output(k, name, got, &out[order[k]], rtol, atol))
            failed++;
    }
    if (failed) {
        printf("MISMATCH: %d of %d output%s differ%s (rtol %g, atol %g)\n", failed, n_out,
               n_out == 1 ? "" : "s", failed == 1 ? "s" : "", rtol, atol);
        rc = KILN_EXIT_MISMATCH;
    } else {
        printf("OK: %d output%s (rtol %g, atol %g)\n", n_out,
               n_out == 1 ? " matches" : "s match", rtol, atol);
        rc = KILN_EXIT_OK;
    }

done:
    free(order);
    free_files(in, n_in);
    free_files(out, n_out);
    cli_model_close(&cm);
    return rc;
}
