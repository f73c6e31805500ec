/* tools/kiln/cmd_run.c: `kiln run`: load a model, feed it one input (from a
 * file, or deterministic pseudo-random data), run it once with the reference
 * executor and print the output's shape, top-5, checksum and timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/rng.h"

/* The generator seed of the default input: fixed, independent of --seed
 * (which seeds the zoo weights), so that the same model and weights always see
 * the same input. ASCII "kiln". */
#define KILN_RUN_INPUT_SEED 0x6b696c6eULL

static void run_help(void)
{
    printf("usage: kiln run MODEL [--input FILE]... [--output FILE] [--seed N]\n"
           "                [--executor ref]\n"
           "\n"
           "Runs MODEL (a zoo network name or an .onnx file) once and prints its\n"
           "inputs and outputs, the top-5 elements of the first output (index and\n"
           "value; all elements if it has fewer than 5), a checksum of every output\n"
           "(sum of the elements and 64-bit FNV-1a hash of the output bytes), and\n"
           "the load+build and run times in milliseconds.\n"
           "\n"
           "Options:\n"
           "  --input FILE     input tensor (.npy or ONNX TensorProto .pb); give it once\n"
           "                   per graph input, in order. Its dtype and shape must match\n"
           "                   the graph input exactly. Default: pseudo-random data,\n"
           "                   uniform in [-1, 1) for floating-point inputs (zeros for\n"
           "                   integer and bool inputs), from a fixed seed: the same on\n"
           "                   every run and independent of --seed.\n"
           "  --output FILE    write the first output to FILE: NumPy if FILE ends in\n"
           "                   .npy, otherwise ONNX TensorProto (named after the output).\n"
           "  --seed N         seed of the zoo network's weights (default 0); ignored\n"
           "                   for .onnx models.\n"
           "  --executor ref   the executor: only 'ref' (reference kernels) exists now.\n"
           "  -h, --help       show this message\n"
           "\n"
           "Exit status: 0 success, 2 any error.\n");
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

int kiln_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *output_path = NULL, *executor = "ref", *v;
    const char **input_paths = calloc((size_t)argc, sizeof *input_paths);
    int n_input_paths = 0, rc = KILN_EXIT_ERROR, r;
    uint64_t seed = 0;
    kiln_graph *g = NULL;
    kiln_ref_executor *ex = NULL;
    kiln_tensor *inputs = NULL;
    int n_inputs = 0;
    kiln_error err = {0};
    if (!input_paths) {
        cli_error("out of memory");
        return KILN_EXIT_ERROR;
    }

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            run_help();
            rc = KILN_EXIT_OK;
            goto done;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((r = cli_opt_value("run", argc, argv, &i, "--input", &v)) != 0) {
            if (r < 0)
                goto done;
            input_paths[n_input_paths++] = v;
        } else if ((r = cli_opt_value("run", argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                goto done;
            output_path = v;
        } else if ((r = cli_opt_value("run", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                goto done;
            if (!cli_parse_u64(v, &seed)) {
                cli_usage_error("run", "--seed: '%s' is not a non-negative integer", v);
                goto done;
            }
        } else if ((r = cli_opt_value("run", argc, argv, &i, "--executor", &v)) != 0) {
            if (r < 0)
                goto done;
            executor = v;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error("run", "unknown option '%s'", a);
            goto done;
        } else if (!model) {
            model = a;
        } else {
            cli_usage_error("run", "unexpected argument '%s' (MODEL is '%s')", a, model);
            goto done;
        }
    }
    if (!model) {
        cli_usage_error("run", "no MODEL given");
        goto done;
    }
    if (strcmp(executor, "graph") == 0) {
        cli_error("executor 'graph' is not available yet; use --executor ref");
        goto done;
    }
    if (strcmp(executor, "ref") != 0) {
        cli_usage_error("run", "unknown executor '%s' (available: ref)", executor);
        goto done;
    }

    double t0 = cli_now_ms();
    if (kiln_model_load(model, seed, &g, &err) != KILN_OK ||
        kiln_ref_executor_create(g, &ex, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    double t_load = cli_now_ms() - t0;

    n_inputs = kiln_graph_num_inputs(g);
    if (n_input_paths && n_input_paths != n_inputs) {
        cli_error("model '%s' has %d input%s but %d --input file%s given", model, n_inputs,
                  n_inputs == 1 ? "" : "s", n_input_paths, n_input_paths == 1 ? " was" : "s were");
        goto done;
    }
    inputs = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *inputs);
    if (!inputs) {
        cli_error("out of memory");
        goto done;
    }
    printf("model:   %s", model);
    if (!cli_ends_with(model, ".onnx"))
        printf(" (zoo, seed %llu)", (unsigned long long)seed);
    printf("\n");

    kiln_rng rng;
    kiln_rng_seed(&rng, KILN_RUN_INPUT_SEED);
    for (int i = 0; i < n_inputs; i++) {
        const char *name;
        kiln_dtype dt;
        kiln_shape shape;
        char tb[300];
        if (kiln_graph_input_info(g, i, &name, &dt, &shape) != KILN_OK) {
            cli_error("cannot query graph input %d", i);
            goto done;
        }
        if (n_input_paths) {
            if (kiln_tensor_read(input_paths[i], &inputs[i], NULL, &err) != KILN_OK) {
                cli_lib_error(&err);
                goto done;
            }
        } else {
            if (kiln_tensor_alloc(&inputs[i], dt, &shape, &err) != KILN_OK) {
                cli_error("input %d '%s': %s", i, name, err.msg);
                goto done;
            }
            fill_default_input(&inputs[i], &rng);
        }
        if (kiln_ref_executor_set_input(ex, i, &inputs[i], &err) != KILN_OK) {
            if (n_input_paths)
                cli_error("%s: input %d '%s': %s", input_paths[i], i, name, err.msg);
            else
                cli_error("input %d '%s': %s", i, name, err.msg);
            goto done;
        }
        printf("input:   %s %s  <- %s\n", name, cli_type_str(dt, &shape, tb, sizeof tb),
               n_input_paths ? input_paths[i]
               : (dt == KILN_DTYPE_FLOAT32 || dt == KILN_DTYPE_FLOAT16 ||
                  dt == KILN_DTYPE_FLOAT64)
                   ? "uniform [-1, 1), fixed seed"
                   : "zeros");
    }

    t0 = cli_now_ms();
    if (kiln_ref_executor_run(ex, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    double t_run = cli_now_ms() - t0;

    int n_outputs = kiln_graph_num_outputs(g);
    for (int i = 0; i < n_outputs; i++) {
        const kiln_tensor *o = kiln_ref_executor_output(ex, i);
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        char tb[300];
        kiln_graph_output_info(g, i, &name, &dt, &shape);
        if (!o) {
            cli_error("output %d '%s' is missing after the run", i, name);
            goto done;
        }
        printf("output:  %s %s\n", name, cli_type_str(o->dtype, &o->shape, tb, sizeof tb));
    }
    for (int i = 0; i < n_outputs; i++) {
        const kiln_tensor *o = kiln_ref_executor_output(ex, i);
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        kiln_graph_output_info(g, i, &name, &dt, &shape);
        if (i == 0) {
            int64_t idx[5];
            int k = cli_top_k(o, 5, idx);
            printf("top-%d of %s:\n", k, name);
            for (int j = 0; j < k; j++)
                printf("  %d. index %-8lld %.9g\n", j + 1, (long long)idx[j],
                       cli_tensor_get(o, idx[j]));
        }
        int64_t nb = kiln_tensor_nbytes(o);
        printf("checksum of %s: sum %.9g  fnv1a64 0x%016llx\n", name, cli_tensor_sum(o),
               (unsigned long long)cli_fnv1a64(o->data, nb > 0 ? (size_t)nb : 0));
    }
    printf("time:    load+build %.3f ms, run %.3f ms\n", t_load, t_run);

    if (output_path && n_outputs > 0) {
        const char *name = NULL;
        kiln_dtype dt;
        kiln_shape shape;
        kiln_graph_output_info(g, 0, &name, &dt, &shape);
        if (cli_write_tensor(output_path, kiln_ref_executor_output(ex, 0), name, &err) !=
            KILN_OK) {
            cli_lib_error(&err);
            goto done;
        }
        printf("wrote:   %s -> %s\n", name ? name : "output 0", output_path);
    }
    rc = KILN_EXIT_OK;

done:
    for (int i = 0; inputs && i < n_inputs; i++)
        kiln_tensor_release(&inputs[i]);
    free(inputs);
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);
    free(input_paths);
    return rc;
}
