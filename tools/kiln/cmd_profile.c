/* tools/kiln/cmd_profile.c: `kiln profile`: per-operator profile of a model
 * (TVM debug-executor style report) that checks itself against `kiln bench`,
 * and `kiln profile --compare A.json B.json`.
 *
 * Profile: open MODEL as bench does (cli_model.c), set the default input,
 * warm up, measure the FMA peak, then alternate R rounds of
 *     a share of the instrumented runs   (runtime/profile.h: the steps of
 *                                         kiln_module_run with clock reads)
 *     one kiln_module_bench measurement  (number N, repeat 1)
 * so that both see the same machine state; the bench figures are the mean,
 * median, min and max over the R measurements. Everything runs in one
 * process on one module: build, executor and threads cannot differ. The
 * report (src/report) is written in the chosen format. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report/profile_run.h"
#include "report/report.h"
#include "runtime/profile.h"
#include "util/error.h"
#include "vm/vm.h"

#define DEFAULT_RUNS KILN_PROFILE_DEFAULT_RUNS
#define DEFAULT_WARMUP KILN_PROFILE_DEFAULT_WARMUP
#define DEFAULT_BENCH_NUMBER KILN_PROFILE_DEFAULT_BENCH_NUMBER
#define DEFAULT_BENCH_REPEAT KILN_PROFILE_DEFAULT_BENCH_REPEAT
#define SLOW_RUN_MS 200.0   /* (help text) above this, the unset counts shrink */

static void profile_help(void)
{
    printf("usage: kiln profile MODEL [--input FILE]... [--runs N] [--warmup W] [--threads N]\n"
           "                    [--executor graph|ref] [--seed N]\n"
           "                    [--format table|csv|json|chrome|html] [--output FILE]\n"
           "                    [--save-json FILE] [--sort time|order|name]\n"
           "                    [--aggregate none|hash|op] [--top N]\n"
           "                    [--bench-number N] [--bench-repeat R] [--no-bench]\n"
           "                    [--peak-gflops G] [--input-shape NAME=DIMS]...\n"
           "       kiln profile --compare A.json B.json [--format table|csv|json]\n"
           "                    [--aggregate none|hash|op] [--top N] [--output FILE]\n"
           "\n"
           "Profiles MODEL (a compiled .so, a zoo network name or an .onnx file) per\n"
           "fused kernel on the default input of `kiln run` (or --input): W warm-up runs, then N\n"
           "instrumented runs (each kernel timed with CLOCK_MONOTONIC; durations are\n"
           "per-kernel medians). Prints a table like TVM's debug executor (Name,\n"
           "Duration (us), Percent, Device, Count, Argument Shapes, Layouts, Hash,\n"
           "GFLOP/s, %% of peak), a Sum row, a Total row (median wall time of an\n"
           "instrumented run), the configuration, and how the profile agrees with a\n"
           "bench of the same module and threads run in the same process.\n"
           "\n"
           "Options:\n"
           "  --input FILE       input tensor (.npy or .pb), once per model input, in order\n"
           "                     (default: the pseudo-random input of `kiln run`)\n"
           CLI_INPUT_SHAPE_HELP("                     ")
           "  --runs N           instrumented runs (default %d, more for fast models: about\n"
           "                     0.4 s of runs, at most 500)\n"
           "  --warmup W         warm-up runs (default %d)\n"
           "  --threads N        threads (default $KILN_NUM_THREADS, else the physical cores)\n"
           "  --executor E       graph (default) or ref (reference kernels, one row per node)\n"
           "  --seed N           seed of the zoo network's weights (default 0)\n"
           "  --format F         table (default), csv, json, chrome (Chrome trace JSON, for\n"
           "                     Perfetto), html (self-contained, with a bar chart)\n"
           "  --output FILE      write the report to FILE instead of stdout\n"
           "  --save-json FILE   also write the JSON report to FILE (for --compare)\n"
           "  --sort S           time (default, longest first), order (execution), name\n"
           "  --aggregate A      none (default: a row per kernel), hash (kernels with one\n"
           "                     workload), op (per kernel template / op type)\n"
           "  --top N            show the first N rows (Sum and Total still cover all)\n"
           "  --bench-number N   runs per bench measurement (default %d)\n"
           "  --bench-repeat R   bench measurements, interleaved with the profile (default %d)\n"
           "  --no-bench         skip the agreement bench\n"
           "  --peak-gflops G    peak for the fraction-of-peak column (default: measured\n"
           "                     with an FMA loop on 1 and N threads)\n"
           "  --compare A B      compare two JSON reports row by row\n"
           "  -h, --help         show this message\n"
           "\n"
           "Models slower than %.0f ms per run get fewer runs unless --runs, --warmup,\n"
           "--bench-number or --bench-repeat are given. See docs/PROFILE.md.\n"
           "\n"
           "Exit status: 0 success, 2 any error.\n",
           DEFAULT_RUNS, DEFAULT_WARMUP, DEFAULT_BENCH_NUMBER, DEFAULT_BENCH_REPEAT, SLOW_RUN_MS);
}

typedef struct prof_opts {
    const char *model, *executor, *format, *output, *save_json, *sort, *aggregate;
    const char *cmp_a, *cmp_b;
    int runs, warmup, threads, top, bench_number, bench_repeat, no_bench;
    int set_runs, set_warmup, set_number, set_repeat;
    double peak;
    uint64_t seed;
    const char *input_paths[64];
    int n_input_paths;
    cli_input_shapes shapes; /* --input-shape */
} prof_opts;

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out)
{
    uint64_t n;
    if (!cli_parse_u64(v, &n) || n < (uint64_t)lo || n > (uint64_t)hi) {
        cli_usage_error("profile", "%s: '%s' is not an integer in %d..%d", opt, v, lo, hi);
        return 0;
    }
    *out = (int)n;
    return 1;
}

static int one_of(const char *opt, const char *v, const char *const *allowed)
{
    for (int i = 0; allowed[i]; i++)
        if (strcmp(v, allowed[i]) == 0)
            return 1;
    char list[128] = "";
    for (int i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 allowed[i]);
    cli_usage_error("profile", "%s: unknown value '%s' (available: %s)", opt, v, list);
    return 0;
}

/* 1 ok, 0 error (printed), -1 help printed */
static int parse_args(int argc, char **argv, prof_opts *o)
{
    static const char *const formats[] = {"table", "csv", "json", "chrome", "html", NULL};
    static const char *const sorts[] = {"time", "order", "name", NULL};
    static const char *const aggs[] = {"none", "hash", "op", NULL};
    const char *v;
    int r;
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            profile_help();
            return -1;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((r = cli_opt_value("profile", argc, argv, &i, "--input", &v)) != 0) {
            if (r < 0)
                return 0;
            if (o->n_input_paths >= (int)(sizeof o->input_paths / sizeof *o->input_paths)) {
                cli_usage_error("profile", "more than %d --input files",
                                (int)(sizeof o->input_paths / sizeof *o->input_paths));
                return 0;
            }
            o->input_paths[o->n_input_paths++] = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--input-shape", &v)) != 0) {
            if (r < 0 || !cli_parse_input_shape("profile", v, &o->shapes))
                return 0;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--runs", &v)) != 0) {
            if (r < 0 || !parse_int("--runs", v, 1, 100000, &o->runs))
                return 0;
            o->set_runs = 1;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--warmup", &v)) != 0) {
            if (r < 0 || !parse_int("--warmup", v, 0, 100000, &o->warmup))
                return 0;
            o->set_warmup = 1;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--threads", &v)) != 0) {
            if (r < 0 || !cli_parse_threads("profile", v, &o->threads))
                return 0;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--executor", &v)) != 0) {
            if (r < 0)
                return 0;
            o->executor = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                return 0;
            if (!cli_parse_u64(v, &o->seed)) {
                cli_usage_error("profile", "--seed: '%s' is not a non-negative integer", v);
                return 0;
            }
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0 || !one_of("--format", v, formats))
                return 0;
            o->format = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                return 0;
            o->output = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--save-json", &v)) != 0) {
            if (r < 0)
                return 0;
            o->save_json = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--sort", &v)) != 0) {
            if (r < 0 || !one_of("--sort", v, sorts))
                return 0;
            o->sort = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--aggregate", &v)) != 0) {
            if (r < 0 || !one_of("--aggregate", v, aggs))
                return 0;
            o->aggregate = v;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--top", &v)) != 0) {
            if (r < 0 || !parse_int("--top", v, 1, 1 << 30, &o->top))
                return 0;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--bench-number", &v)) != 0) {
            if (r < 0 || !parse_int("--bench-number", v, 1, 1 << 20, &o->bench_number))
                return 0;
            o->set_number = 1;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--bench-repeat", &v)) != 0) {
            if (r < 0 || !parse_int("--bench-repeat", v, 1, 1000, &o->bench_repeat))
                return 0;
            o->set_repeat = 1;
        } else if ((r = cli_opt_value("profile", argc, argv, &i, "--peak-gflops", &v)) != 0) {
            if (r < 0)
                return 0;
            if (!cli_parse_double(v, &o->peak) || !(o->peak > 0) || o->peak > 1e9) {
                cli_usage_error("profile", "--peak-gflops: '%s' is not a positive number", v);
                return 0;
            }
        } else if (strcmp(a, "--compare") == 0) {
            if (i + 2 >= argc) {
                cli_usage_error("profile", "--compare needs two JSON files");
                return 0;
            }
            o->cmp_a = argv[++i];
            o->cmp_b = argv[++i];
        } else if (strcmp(a, "--no-bench") == 0) {
            o->no_bench = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_usage_error("profile", "unknown option '%s'", a);
            return 0;
        } else if (!o->model) {
            o->model = a;
        } else {
            cli_usage_error("profile", "unexpected argument '%s' (MODEL is '%s')", a, o->model);
            return 0;
        }
    }
    if (o->cmp_a && o->model) {
        cli_usage_error("profile", "--compare takes two JSON reports, not a MODEL ('%s')",
                        o->model);
        return 0;
    }
    if (!o->cmp_a && !o->model) {
        cli_usage_error("profile", "no MODEL given");
        return 0;
    }
    if (o->cmp_a && o->format && strcmp(o->format, "table") != 0 &&
        strcmp(o->format, "csv") != 0 && strcmp(o->format, "json") != 0) {
        cli_usage_error("profile", "--compare writes table, csv or json, not '%s'", o->format);
        return 0;
    }
    return 1;
}

static FILE *open_out(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        cli_error("%s: cannot write: %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path)
{
    if (f == stdout)
        return fflush(stdout) == 0;
    int ok = !ferror(f);
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        cli_error("%s: write error", path);
    return ok;
}

static int run_compare(const prof_opts *o)
{
    kiln_report a = {0}, b = {0};
    kiln_error err = {0};
    int rc = KILN_EXIT_ERROR;
    FILE *f = NULL;
    if (kiln_report_read_json(o->cmp_a, &a, &err) != KILN_OK ||
        kiln_report_read_json(o->cmp_b, &b, &err) != KILN_OK ||
        kiln_report_rows(&a, o->aggregate, "time", 0, &err) != KILN_OK ||
        kiln_report_rows(&b, o->aggregate, "time", 0, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    if (!(f = open_out(o->output)))
        goto done;
    if (kiln_report_compare(f, &a, o->cmp_a, &b, o->cmp_b, o->format, o->top, &err) != KILN_OK) {
        cli_lib_error(&err);
        close_out(f, o->output);
        goto done;
    }
    rc = close_out(f, o->output) ? KILN_EXIT_OK : KILN_EXIT_ERROR;
done:
    kiln_report_free(&a);
    kiln_report_free(&b);
    return rc;
}

static kiln_status ref_step(void *ctx, int i, kiln_error *err)
{
    return kiln_ref_executor_run_node(ctx, i, err);
}

static kiln_status vm_step(void *ctx, int i, kiln_error *err)
{
    return kiln_vm_run_step(ctx, i, err);
}

static kiln_status run_cli_model(void *ctx, kiln_error *err)
{
    return cli_model_run(ctx, err);
}

/* Fills the report's steps and configuration from the open model. */
static kiln_status describe(cli_model *cm, const prof_opts *o, kiln_report *r, kiln_error *err)
{
    kiln_report_config *c = &r->cfg;
    kiln_status st;
    c->model = kiln_report_strdup(o->model);
    c->executor = kiln_report_strdup(cm->executor);
    c->kiln_version = kiln_report_strdup(KILN_VERSION);
    c->threads = cm->threads;
    c->warmup = o->warmup;
    if (cm->mod) {
        int n = kiln_module_num_steps(cm->mod), bound = kiln_module_num_bound(cm->mod);
        char bind[64] = "off";
        if (bound > 0)
            snprintf(bind, sizeof bind, "on (%d worker%s pinned)", bound, bound == 1 ? "" : "s");
        c->binding = kiln_report_strdup(bind);
        c->target = kiln_report_strdup(kiln_module_target(cm->mod));
        c->build_id = kiln_report_strdup(kiln_module_build_id(cm->mod));
        if ((st = kiln_report_set_metadata(r, kiln_module_metadata_json(cm->mod), err)) != KILN_OK)
            return st;
        if ((st = kiln_report_alloc_steps(r, n, err)) != KILN_OK)
            return st;
        for (int i = 0; i < n; i++) {
            kiln_step_info si;
            if (kiln_module_step_info(cm->mod, i, &si) != KILN_OK)
                return kiln_errorf(err, KILN_ERR_INTERNAL, "step %d: no info", i);
            if ((st = kiln_report_set_step(r, i, si.name, si.op, si.shapes, si.layouts, 1,
                                           si.workload_hash, si.flops, err)) != KILN_OK)
                return st;
        }
    } else if (cm->vm) {
        if ((st = kiln_vm_report_describe(cm->vm, r, err)) != KILN_OK)
            return st;
    } else {
        int n = kiln_ref_executor_num_nodes(cm->ex);
        c->binding = kiln_report_strdup("off");
        c->target = kiln_report_strdup("reference kernels (plain C)");
        c->build_id = kiln_report_strdup("");
        if ((st = kiln_report_alloc_steps(r, n, err)) != KILN_OK)
            return st;
        char shapes[2048];
        for (int i = 0; i < n; i++) {
            kiln_ref_node_info ni;
            if (kiln_ref_executor_node_info(cm->ex, i, &ni) != KILN_OK)
                return kiln_errorf(err, KILN_ERR_INTERNAL, "node %d: no info", i);
            kiln_ref_executor_node_shapes(cm->ex, i, shapes, sizeof shapes);
            if ((st = kiln_report_set_step(r, i, ni.name, ni.op, shapes, "", 0, 0, ni.flops,
                                           err)) != KILN_OK)
                return st;
        }
    }
    if (!c->model || !c->executor || !c->kiln_version || !c->binding || !c->target ||
        !c->build_id)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return KILN_OK;
}

static kiln_status cm_profile(void *ctx, int runs, int64_t *stamps, kiln_error *err)
{
    cli_model *cm = ctx;
    if (cm->vm)
        return kiln_profile_steps(vm_step, cm->vm, kiln_vm_num_steps(cm->vm), runs, stamps, err);
    return cm->mod ? kiln_module_profile(cm->mod, runs, stamps, err)
                   : kiln_profile_steps(ref_step, cm->ex, kiln_ref_executor_num_nodes(cm->ex),
                                        runs, stamps, err);
}

static kiln_status cm_bench(void *ctx, const kiln_bench_options *bo, kiln_bench_result *b,
                            kiln_error *err)
{
    cli_model *cm = ctx;
    return cm->mod ? kiln_module_bench(cm->mod, bo, b, err)
                   : kiln_bench_function(run_cli_model, cm, cm->threads, bo, b, err);
}

/* warm-up, instrumented runs interleaved with bench measurements: the
 * library's measurement (report/profile_run.h), which kiln_profile_module
 * shares */
static kiln_status measure(cli_model *cm, prof_opts *o, kiln_report *r, kiln_error *err)
{
    kiln_profile_target t = {.ctx = cm, .run = run_cli_model, .profile = cm_profile,
                             .bench = cm_bench};
    kiln_profile_plan plan = {.runs = o->runs, .warmup = o->warmup, .number = o->bench_number,
                              .repeat = o->bench_repeat, .no_bench = o->no_bench,
                              .set_runs = o->set_runs, .set_number = o->set_number,
                              .set_repeat = o->set_repeat};
    return kiln_profile_measure(&t, &plan, r, err);
}

int kiln_cmd_profile(int argc, char **argv)
{
    prof_opts o = {.runs = DEFAULT_RUNS, .warmup = DEFAULT_WARMUP,
                   .bench_number = DEFAULT_BENCH_NUMBER, .bench_repeat = DEFAULT_BENCH_REPEAT};
    int pr = parse_args(argc, argv, &o);
    if (pr < 0)
        return KILN_EXIT_OK;
    if (pr == 0)
        return KILN_EXIT_ERROR;
    if (o.cmp_a)
        return run_compare(&o);

    int rc = KILN_EXIT_ERROR, n_inputs = 0;
    kiln_tensor *inputs = NULL;
    cli_model cm = {0};
    kiln_report r = {0};
    kiln_error err = {0};
    FILE *f = NULL;
    if (o.shapes.n && o.n_input_paths) {
        cli_usage_error("profile", "--input-shape shapes the default input: not with --input "
                                   "(a file gives its own shape)");
        goto done;
    }
    if (cli_model_open(&cm, "profile", o.model, o.executor, o.seed, o.threads) != KILN_EXIT_OK)
        goto done;
    cm.input_shapes = &o.shapes;
    n_inputs = cli_model_num_inputs(&cm);
    inputs = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *inputs);
    if (!inputs) {
        cli_error("out of memory");
        goto done;
    }
    if (cli_model_inputs(&cm, o.model, o.input_paths, o.n_input_paths, inputs) != KILN_EXIT_OK)
        goto done;
    if (describe(&cm, &o, &r, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    char how[256];
    if (o.peak > 0) {
        r.cfg.peak_gflops = o.peak;
        r.cfg.peak_source = kiln_report_strdup("given by --peak-gflops");
    } else {
        kiln_peak_measure_pair(cm.threads, &r.cfg.peak_gflops, &r.cfg.peak_gflops_1, how,
                               sizeof how);
        r.cfg.peak_source = kiln_report_strdup(how);
    }
    r.clock_ns = kiln_profile_clock_ns();
    if (measure(&cm, &o, &r, &err) != KILN_OK ||
        kiln_report_rows(&r, o.aggregate, o.sort, o.top, &err) != KILN_OK) {
        cli_lib_error(&err);
        goto done;
    }
    if (o.save_json) {
        FILE *j = open_out(o.save_json);
        if (!j)
            goto done;
        kiln_status st = kiln_report_write_json(j, &r, &err);
        if (!close_out(j, o.save_json))
            goto done;
        if (st != KILN_OK) {
            cli_lib_error(&err);
            goto done;
        }
    }
    if (!(f = open_out(o.output)))
        goto done;
    if (kiln_report_write(f, &r, o.format, &err) != KILN_OK) {
        cli_lib_error(&err);
        close_out(f, o.output);
        goto done;
    }
    if (!close_out(f, o.output))
        goto done;
    rc = KILN_EXIT_OK;
done:
    for (int i = 0; inputs && i < n_inputs; i++)
        kiln_tensor_release(&inputs[i]);
    free(inputs);
    kiln_report_free(&r);
    cli_model_close(&cm);
    return rc;
}
