/* tools/kiln/cmd_bench.c: `kiln bench`: time a model with TVM's time_evaluator
 * semantics (kiln_module_bench / kiln_bench_function, src/runtime/bench.c) on
 * the default input of `kiln run`, and print TVM's ProfileResult and tvmc's
 * summary table, or JSON. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void bench_help(void)
{
    printf("usage: kiln bench MODEL [--number N] [--repeat R] [--min-repeat-ms M]\n"
           "                  [--cooldown-ms C] [--flush-cache] [--threads N]\n"
           "                  [--executor graph|ref] [--seed N] [--input FILE]...\n"
           "                  [--input-shape NAME=DIMS]... [--json]\n"
           "\n"
           "Times MODEL (a compiled .so, a zoo network name or an .onnx file, compiled\n"
           "through the cache) on the default input of `kiln run`, like TVM's\n"
           "time_evaluator: one warm-up run; then R measurements, each timing N\n"
           "back-to-back runs and recording the mean time per run. When one\n"
           "measurement lasts less than M ms, N grows (to max(M / time per run + 1,\n"
           "1.618 N)) and the measurement is redone; the grown N is kept.\n"
           "\n"
           "Options:\n"
           "  --number N         runs per measurement (default 1)\n"
           "  --repeat R         measurements (default 3, at most 10000)\n"
           "  --min-repeat-ms M  grow N until a measurement lasts M ms (default 0)\n"
           "  --cooldown-ms C    sleep C ms between measurements (default 0)\n"
           "  --flush-cache      write over twice the L2 + last-level cache before\n"
           "                     each measurement\n"
           "  --threads N        threads (default $KILN_NUM_THREADS, else the number of\n"
           "                     physical cores); KILN_BIND_THREADS=1 pins them\n"
           "  --executor E       graph (the default) or ref (reference kernels)\n"
           "  --seed N           seed of the zoo network's weights (default 0)\n"
           "  --input FILE       input tensor (.npy or .pb) instead of the default input;\n"
           "                     once per model input, in order (a detection network's\n"
           "                     work depends on its input)\n"
           CLI_INPUT_SHAPE_HELP("                     ")
           "  --json             print only a JSON object: {mean, median, min, max,\n"
           "                     std, results, number, repeat, threads}, times in\n"
           "                     seconds per run\n"
           "  -h, --help         show this message\n"
           "\n"
           "Output: the settings, ProfileResult(mean=..., median=..., min=..., max=...,\n"
           "std=..., results=(...)) in seconds per run, and a table in milliseconds.\n"
           "\n"
           "Exit status: 0 success, 2 any error.\n");
}

static kiln_status run_cli_model(void *ctx, kiln_error *err)
{
    return cli_model_run(ctx, err);
}

static int parse_count(const char *opt, const char *v, int max, int *out)
{
    uint64_t n;
    if (!cli_parse_u64(v, &n) || n < 1 || n > (uint64_t)max) {
        cli_usage_error("bench", "%s: '%s' is not an integer in 1..%d", opt, v, max);
        return 0;
    }
    *out = (int)n;
    return 1;
}

static int parse_ms(const char *opt, const char *v, double *out)
{
    if (!cli_parse_double(v, out) || *out < 0 || *out > 3.6e6) {
        cli_usage_error("bench", "%s: '%s' is not a number of milliseconds (0..3600000)", opt,
                        v);
        return 0;
    }
    return 1;
}

int kiln_cmd_bench(int argc, char **argv)
{
    const char *model = NULL, *executor = NULL, *v;
    int rc = KILN_EXIT_ERROR, r, threads = 0, json = 0;
    uint64_t seed = 0;
    kiln_bench_options o = {.number = 1, .repeat = 3};
    kiln_bench_result *res = NULL;
    kiln_tensor *inputs = NULL;
    int n_inputs = 0, n_input_paths = 0;
    const char *input_paths[64];
    cli_model cm = {0};
    cli_input_shapes shapes = {0};
    kiln_error err = {0};

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            bench_help();
            return KILN_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((r = cli_opt_value("bench", argc, argv, &i, "--number", &v)) != 0) {
            if (r < 0 || !parse_count("--number", v, 1 << 30, &o.number))
                goto done;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--repeat", &v)) != 0) {
            if (r < 0 || !parse_count("--repeat", v, KILN_BENCH_MAX_REPEAT, &o.repeat))
                goto done;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--min-repeat-ms", &v)) != 0) {
            if (r < 0 || !parse_ms("--min-repeat-ms", v, &o.min_repeat_ms))
                goto done;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--cooldown-ms", &v)) != 0) {
            if (r < 0 || !parse_ms("--cooldown-ms", v, &o.cooldown_ms))
                goto done;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--threads", &v)) != 0) {
            if (r < 0 || !cli_parse_threads("bench", v, &threads))
                goto done;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--executor", &v)) != 0) {
            if (r < 0)
                goto done;
            executor = v;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                goto done;
            if (!cli_parse_u64(v, &seed)) {
                cli_usage_error("bench", "--seed: '%s' is not a non-negative integer", v);
                goto done;
            }
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--input", &v)) != 0) {
            if (r < 0)
                goto done;
            if (n_input_paths >= (int)(sizeof input_paths / sizeof *input_paths)) {
                cli_usage_error("bench", "more than %d --input files",
                                (int)(sizeof input_paths / sizeof *input_paths));
                goto done;
            }
            input_paths[n_input_paths++] = v;
        } else if ((r = cli_opt_value("bench", argc, argv, &i, "--input-shape", &v)) != 0) {
            if (r < 0 || !cli_parse_input_shape("bench", v, &shapes))
                goto done;
        } else if (strcmp(a, "--flush-cache") == 0) {
            o.flush_cache = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error("bench", "unknown option '%s'", a);
            goto done;
        } else if (!model) {
            model = a;
        } else {
            cli_usage_error("bench", "unexpected argument '%s' (MODEL is '%s')", a, model);
            goto done;
        }
    }
    if (!model) {
        cli_usage_error("bench", "no MODEL given");
        goto done;
    }
    if (shapes.n && n_input_paths) {
        cli_usage_error("bench", "--input-shape shapes the default input: not with --input "
                                 "(a file gives its own shape)");
        goto done;
    }
    if (cli_model_open(&cm, "bench", model, executor, seed, threads) != KILN_EXIT_OK)
        goto done;
    cm.input_shapes = &shapes;
    n_inputs = cli_model_num_inputs(&cm);
    inputs = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *inputs);
    res = calloc(1, sizeof *res);
    if (!inputs || !res) {
        cli_error("out of memory");
        goto done;
    }
    if (cli_model_inputs(&cm, model, input_paths, n_input_paths, inputs) != KILN_EXIT_OK)
        goto done;

    kiln_status st = cm.mod ? kiln_module_bench(cm.mod, &o, res, &err)
                            : kiln_bench_function(run_cli_model, &cm, cm.threads, &o, res, &err);
    if (st != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }

    if (json) {
        printf("{\"mean\": %.9g, \"median\": %.9g, \"min\": %.9g, \"max\": %.9g, \"std\": %.9g, "
               "\"results\": [",
               res->mean, res->median, res->min, res->max, res->std);
        for (int i = 0; i < res->repeat; i++)
            printf("%s%.9g", i ? ", " : "", res->results[i]);
        printf("], \"number\": %d, \"repeat\": %d, \"threads\": %d}\n", res->number, res->repeat,
               res->threads);
    } else {
        char desc[1200];
        printf("model:    %s", model);
        if (!cli_ends_with(model, ".onnx") && !cli_ends_with(model, ".so"))
            printf(" (zoo, seed %llu)", (unsigned long long)seed);
        printf("\nexecutor: %s\n", cli_model_describe(&cm, desc, sizeof desc));
        char grown[64] = "";
        if (res->number != o.number)
            snprintf(grown, sizeof grown, " (grown from %d by --min-repeat-ms)", o.number);
        printf("settings: threads %d, number %d%s, repeat %d, min-repeat-ms %g, cooldown-ms %g, "
               "flush-cache %s\n",
               res->threads, res->number, grown, res->repeat, o.min_repeat_ms, o.cooldown_ms,
               o.flush_cache ? "yes" : "no");
        printf("ProfileResult(mean=%.9g, median=%.9g, min=%.9g, max=%.9g, std=%.9g, results=(",
               res->mean, res->median, res->min, res->max, res->std);
        for (int i = 0; i < res->repeat; i++)
            printf("%s%.9g", i ? ", " : "", res->results[i]);
        printf("%s))  [seconds per run]\n", res->repeat == 1 ? "," : "");
        printf("Execution time summary:\n");
        printf(" %-12s %-12s %-12s %-12s %-12s\n", "mean (ms)", "median (ms)", "max (ms)",
               "min (ms)", "std (ms)");
        printf(" %-12.4f %-12.4f %-12.4f %-12.4f %-12.4f\n", res->mean * 1e3, res->median * 1e3,
               res->max * 1e3, res->min * 1e3, res->std * 1e3);
    }
    rc = KILN_EXIT_OK;

done:
    for (int i = 0; inputs && i < n_inputs; i++)
        kiln_tensor_release(&inputs[i]);
    free(inputs);
    free(res);
    cli_model_close(&cm);
    return rc;
}
