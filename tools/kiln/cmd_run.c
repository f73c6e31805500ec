/* tools/kiln/cmd_run.c: `kiln run`: open a model (a compiled .so, or a zoo
 * name / .onnx compiled through the cache, or run by the reference executor),
 * feed it one input (from files, or deterministic pseudo-random data), run it
 * once and print the output's shape, top-5, checksum and timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void run_help(void)
{
    printf("usage: kiln run MODEL [--input FILE]... [--output FILE]... [--seed N]\n"
           "                [--executor graph|ref] [--threads N] [--input-shape NAME=DIMS]...\n"
           "\n"
           "Runs MODEL once and prints its inputs and outputs, the top-5 elements of\n"
           "the first output (index and value; all elements if it has fewer than 5),\n"
           "a checksum of every output (sum of the elements and 64-bit FNV-1a hash of\n"
           "the output bytes), and the load and run times in milliseconds.\n"
           "\n"
           "MODEL is a compiled model (.so, from `kiln compile`), a zoo network name\n"
           "or an .onnx file. A zoo name or .onnx file is compiled (the result is\n"
           "cached) and run by the graph executor, or run by the reference executor\n"
           "with --executor ref.\n"
           "\n"
           "An .onnx whose inputs have symbolic or unknown dims (dynamic axes of a\n"
           "PyTorch export) runs on the VM: the shapes come from the --input files\n"
           "(or --input-shape for the default input); the model is imported and\n"
           "compiled for them (cached: a later run of the same shapes only loads it).\n"
           "One whose only symbolic dim is the batch, with items computed apart, runs\n"
           "its batch in chunks of 8, 4, 2 and 1 items, each chunk extent compiled once;\n"
           "the batch: line says so, or why not.\n"
           "\n"
           "Options:\n"
           "  --input FILE     input tensor (.npy or ONNX TensorProto .pb); give it once\n"
           "                   per model input, in order. Its dtype and shape must match\n"
           "                   the model input exactly (a symbolic dim takes any\n"
           "                   extent). Default: pseudo-random data,\n"
           "                   uniform in [-1, 1) for floating-point inputs (zeros for\n"
           "                   integer and bool inputs), from a fixed seed: the same on\n"
           "                   every run and independent of --seed.\n"
           CLI_INPUT_SHAPE_HELP("                   ")
           "  --output FILE    write the first output to FILE: NumPy if FILE ends in\n"
           "                   .npy, otherwise ONNX TensorProto (named after the output).\n"
           "                   Given k times, the k-th writes output k (at most one per\n"
           "                   model output).\n"
           "  --seed N         seed of the zoo network's weights (default 0); ignored\n"
           "                   for .onnx and .so models.\n"
           "  --executor E     graph (compiled kernels, the default) or ref (reference\n"
           "                   kernels, one thread; not for .so models).\n"
           "  --threads N      threads of the graph executor (default $KILN_NUM_THREADS,\n"
           "                   else the number of physical cores); KILN_BIND_THREADS=1\n"
           "                   pins them to cores.\n"
           "  -h, --help       show this message\n"
           "\n"
           "Exit status: 0 success, 2 any error.\n");
}

int kiln_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *executor = NULL, *v;
    const char **input_paths = calloc((size_t)argc, sizeof *input_paths);
    const char **output_paths = calloc((size_t)argc, sizeof *output_paths);
    int n_input_paths = 0, n_output_paths = 0, rc = KILN_EXIT_ERROR, r, threads = 0;
    uint64_t seed = 0;
    cli_model cm = {0};
    cli_input_shapes shapes = {0};
    kiln_tensor *inputs = NULL;
    int n_inputs = 0;
    kiln_error err = {0};
    if (!input_paths || !output_paths) {
        cli_error("out of memory");
        free(input_paths);
        free(output_paths);
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
            output_paths[n_output_paths++] = v;
        } else if ((r = cli_opt_value("run", argc, argv, &i, "--input-shape", &v)) != 0) {
            if (r < 0 || !cli_parse_input_shape("run", v, &shapes))
                goto done;
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
        } else if ((r = cli_opt_value("run", argc, argv, &i, "--threads", &v)) != 0) {
            if (r < 0 || !cli_parse_threads("run", v, &threads))
                goto done;
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
    if (shapes.n && n_input_paths) {
        cli_usage_error("run", "--input-shape shapes the default input: not with --input "
                               "(a file gives its own shape)");
        goto done;
    }
    if (cli_model_open(&cm, "run", model, executor, seed, threads) != KILN_EXIT_OK)
        goto done;
    cm.input_shapes = &shapes;

    n_inputs = cli_model_num_inputs(&cm);
    if (n_input_paths && n_input_paths != n_inputs) {
        cli_error("model '%s' has %d input%s but %d --input file%s given", model, n_inputs,
                  n_inputs == 1 ? "" : "s", n_input_paths, n_input_paths == 1 ? " was" : "s were");
        goto done;
    }
    if (n_output_paths > cli_model_num_outputs(&cm)) {
        cli_error("model '%s' has %d output%s but %d --output files were given", model,
                  cli_model_num_outputs(&cm), cli_model_num_outputs(&cm) == 1 ? "" : "s",
                  n_output_paths);
        goto done;
    }
    inputs = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *inputs);
    if (!inputs) {
        cli_error("out of memory");
        goto done;
    }
    char desc[1200];
    printf("model:   %s", model);
    if (!cli_ends_with(model, ".onnx") && !cli_ends_with(model, ".so"))
        printf(" (zoo, seed %llu)", (unsigned long long)seed);
    printf("\nexecutor: %s\n", cli_model_describe(&cm, desc, sizeof desc));

    if (!n_input_paths && cli_model_default_inputs(&cm, inputs) != KILN_EXIT_OK)
        goto done;
    for (int i = 0; i < n_inputs; i++) {
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        char tb[300];
        if (cli_model_input_info(&cm, i, &name, &dt, &shape) != KILN_OK) {
            cli_error("cannot query input %d", i);
            goto done;
        }
        if (n_input_paths) {
            if (kiln_tensor_read(input_paths[i], &inputs[i], NULL, &err) != KILN_OK) {
                cli_lib_error(&err);
                goto done;
            }
            if (cli_model_set_input(&cm, i, &inputs[i], &err) != KILN_OK) {
                cli_error("%s: input %d '%s': %s", input_paths[i], i, name, err.msg);
                goto done;
            }
        }
        /* the shape given (a symbolic dim has its extent from the data) */
        printf("input:   %s %s  <- %s\n", name,
               cli_type_str(dt, inputs[i].data ? &inputs[i].shape : &shape, tb, sizeof tb),
               n_input_paths ? input_paths[i]
               : (dt == KILN_DTYPE_FLOAT32 || dt == KILN_DTYPE_FLOAT16 ||
                  dt == KILN_DTYPE_FLOAT64)
                   ? "uniform [-1, 1), fixed seed"
                   : "zeros");
    }

    if (cli_model_prepare(&cm) != KILN_EXIT_OK)
        goto done;
    double t0 = cli_now_ms();
    if (cli_model_run(&cm, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    double t_run = cli_now_ms() - t0;

    int n_outputs = cli_model_num_outputs(&cm);
    for (int i = 0; i < n_outputs; i++) {
        const kiln_tensor *o = cli_model_output(&cm, i);
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        char tb[300];
        cli_model_output_info(&cm, i, &name, &dt, &shape);
        if (!o) {
            cli_error("output %d '%s' is missing after the run", i, name);
            goto done;
        }
        printf("output:  %s %s\n", name, cli_type_str(o->dtype, &o->shape, tb, sizeof tb));
    }
    for (int i = 0; i < n_outputs; i++) {
        const kiln_tensor *o = cli_model_output(&cm, i);
        const char *name = "?";
        kiln_dtype dt;
        kiln_shape shape;
        cli_model_output_info(&cm, i, &name, &dt, &shape);
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
    cli_model_print_batch(&cm);
    printf("time:    load+build %.3f ms, run %.3f ms\n", cm.load_ms, t_run);

    for (int i = 0; i < n_output_paths; i++) {
        const char *name = NULL;
        kiln_dtype dt;
        kiln_shape shape;
        cli_model_output_info(&cm, i, &name, &dt, &shape);
        if (cli_write_tensor(output_paths[i], cli_model_output(&cm, i), name, &err) != KILN_OK) {
            cli_lib_error(&err);
            goto done;
        }
        printf("wrote:   %s -> %s\n", name ? name : "output", output_paths[i]);
    }
    rc = KILN_EXIT_OK;

done:
    for (int i = 0; inputs && i < n_inputs; i++)
        kiln_tensor_release(&inputs[i]);
    free(inputs);
    cli_model_close(&cm);
    free(input_paths);
    free(output_paths);
    return rc;
}
