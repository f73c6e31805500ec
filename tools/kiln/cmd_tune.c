/* tools/kiln/cmd_tune.c: `kiln tune MODEL --records R.jsonl`: tunes the
 * model's tasks into a records file (src/tune, docs/TUNING.md) and prints
 * the summary. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tune/tune.h"

int kiln_cmd_tune(int argc, char **argv);
/* tune_mpi.c */
kiln_status kiln_tune_mpi_run(const char *model, kiln_tune_options *o, kiln_tune_summary *sum,
                              bool *root, kiln_error *err);
bool kiln_tune_mpi_available(void);
bool kiln_tune_mpi_launched(void);
int kiln_tune_mpi_finish(int rc); /* MPI_Finalize (or leave without it), then rc */

static void tune_help(void)
{
    printf("usage: kiln tune MODEL --records R.jsonl [--time-budget S] [--trials N]\n"
           "                 [--tuner droplet|ga|random|grid] [--tasks PATTERN] [--workers 1|mpi]\n"
           "                 [--batch N] [--rounds N] [--timeout S] [--threads N]\n"
           "                 [--target T] [--seed N] [--cache-dir DIR] [--jobs N] [--no-e2e]\n"
           "                 [--no-warm-start] [--no-layouts | --layouts-only]\n"
           "\n"
           "Tunes the knobs of MODEL's tasks (see `kiln tasks`) on this machine and\n"
           "appends the measurements to R.jsonl; `kiln compile --records R.jsonl` then\n"
           "applies the validated result of each task. Each task starts from its analytic\n"
           "default (always measured first) and moves to another configuration only when\n"
           "it is faster beyond the noise, measured interleaved with the incumbent in a\n"
           "separate process (a crashing or hanging candidate costs one trial). Where the\n"
           "template has a cost model (dense, conv2d_nchwc), each batch also measures what\n"
           "the model, corrected by the measurements so far, predicts faster than the\n"
           "incumbent. A rerun with the same records resumes: configurations measured\n"
           "before are skipped and tasks tuned before are not tuned again.\n"
           "\n"
           "First, the layout stage: every conv offered several block sizes (see\n"
           "docs/TUNING.md) has each choice timed as its task; alter-layout's choice is\n"
           "made again on those times, and a choice that differs from the analytic one\n"
           "is kept only when the model is not slower end to end (a quarter of the time\n"
           "budget at most; not with --tasks).\n"
           "\n"
           "Options:\n"
           "  --records R       the records file (JSON lines; created, appended to)\n"
           "  --time-budget S   seconds for the whole run, split across tasks by their\n"
           "                    estimated share of the model's time (default: none)\n"
           "  --trials N        new configurations per task at most (default 32 when no\n"
           "                    time budget is given)\n"
           "  --tuner T         droplet (coordinate descent from the default, the default),\n"
           "                    ga (a genetic search bred from the fastest measured), or\n"
           "                    the baselines random and grid\n"
           "  --tasks PATTERN   task numbers and ranges (\"1,3-5\", as `kiln tasks` numbers\n"
           "                    them), or a substring of the template name or workload key\n"
           "  --workers W       1 (a forked worker measures; the default) or mpi: run as\n"
           "                    `mpirun -n N kiln tune ...` (implied under mpirun with N > 1):\n"
           "                    rank 0 searches and writes the records, the other ranks\n"
           "                    build candidates in parallel and one of them measures;\n"
           "                    add --enable-recovery so a dying rank costs only its trial\n"
           "  --batch N         candidates per batch (default 4)\n"
           "  --rounds N        interleaved rounds per batch (default 3)\n"
           "  --timeout S       seconds per measurement, build included (default 60)\n"
           "  --threads N       threads of the measured kernels (default: the cores)\n"
           "  --target T        host (default), avx512, avx2 or generic\n"
           "  --seed N          weight seed of zoo networks (default 0)\n"
           "  --cache-dir DIR   object and model cache\n"
           "  --jobs N          parallel compiler processes\n"
           "  --no-e2e          skip the end-to-end A/B of the tuned and untuned builds\n"
           "  --no-layouts      skip the layout stage\n"
           "  --layouts-only    the layout stage alone (no task's knobs tuned)\n"
           "  --no-warm-start   do not measure the nearest tuned task's configuration\n"
           "                    (same template, nearest shapes) in a task's first batch\n"
           "  -h, --help        show this message\n");
}

static void print_summary(const char *model, const kiln_tune_options *o,
                          const kiln_tune_summary *s);

static int num_opt(const char *v, double lo, double hi, double *out)
{
    return cli_parse_double(v, out) && *out >= lo && *out <= hi;
}

int kiln_cmd_tune(int argc, char **argv)
{
    const char *model = NULL, *v = NULL;
    kiln_tune_options o = {0};
    o.workers = 1;
    bool use_mpi = false;
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            tune_help();
            return KILN_EXIT_OK;
        }
    for (int i = 1; i < argc; i++) {
        int r;
        double d;
        uint64_t u;
#define OPT(name) ((r = cli_opt_value("tune", argc, argv, &i, name, &v)) != 0)
        if (OPT("--records")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            o.records = v;
        } else if (OPT("--time-budget")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!num_opt(v, 0.001, 1e7, &d))
                return cli_usage_error("tune", "--time-budget: expected seconds, got '%s'", v);
            o.time_budget_s = d;
        } else if (OPT("--trials")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!num_opt(v, 1, 1e6, &d) || d != (int)d)
                return cli_usage_error("tune", "--trials: expected a count, got '%s'", v);
            o.trials = (int)d;
        } else if (OPT("--tuner")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (strcmp(v, "droplet") && strcmp(v, "ga") && strcmp(v, "random") &&
                strcmp(v, "grid"))
                return cli_usage_error("tune", "--tuner: droplet, ga, random or grid, not '%s'",
                                       v);
            o.tuner = v;
        } else if (OPT("--tasks")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            o.tasks = v;
        } else if (OPT("--workers")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!strcmp(v, "mpi")) {
                use_mpi = true;
                continue;
            }
            if (!num_opt(v, 1, 1024, &d) || d != (int)d)
                return cli_usage_error("tune", "--workers: expected a count or mpi, got '%s'", v);
            o.workers = (int)d;
        } else if (OPT("--batch")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!num_opt(v, 1, 16, &d) || d != (int)d)
                return cli_usage_error("tune", "--batch: expected 1 to 16, got '%s'", v);
            o.batch = (int)d;
        } else if (OPT("--rounds")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!num_opt(v, 1, 20, &d) || d != (int)d)
                return cli_usage_error("tune", "--rounds: expected 1 to 20, got '%s'", v);
            o.rounds = (int)d;
        } else if (OPT("--timeout")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!num_opt(v, 0.1, 86400, &d))
                return cli_usage_error("tune", "--timeout: expected seconds, got '%s'", v);
            o.timeout_s = d;
        } else if (OPT("--threads")) {
            if (r < 0 || !cli_parse_threads("tune", v, &o.num_threads))
                return KILN_EXIT_ERROR;
        } else if (OPT("--target")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            o.target = v;
        } else if (OPT("--seed")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!cli_parse_u64(v, &o.seed))
                return cli_usage_error("tune", "--seed: expected a number, got '%s'", v);
        } else if (OPT("--cache-dir")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            o.cache_dir = v;
        } else if (OPT("--jobs")) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!cli_parse_u64(v, &u) || u < 1 || u > 256)
                return cli_usage_error("tune", "--jobs: expected 1 to 256, got '%s'", v);
            o.jobs = (int)u;
        } else if (!strcmp(argv[i], "--no-e2e")) {
            o.skip_e2e = true;
        } else if (!strcmp(argv[i], "--no-layouts")) {
            o.skip_layouts = true;
        } else if (!strcmp(argv[i], "--layouts-only")) {
            o.layouts_only = true;
        } else if (!strcmp(argv[i], "--no-warm-start")) {
            o.no_warm_start = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error("tune", "unknown option '%s'", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            return cli_usage_error("tune", "unexpected argument '%s'", argv[i]);
        }
#undef OPT
    }
    if (!model)
        return cli_usage_error("tune", "missing MODEL");
    if (!o.records)
        return cli_usage_error("tune", "missing --records R.jsonl");
    if (o.layouts_only && (o.skip_layouts || o.tasks))
        return cli_usage_error("tune", "--layouts-only with %s: nothing would be tuned",
                               o.skip_layouts ? "--no-layouts" : "--tasks");
    if (cli_ends_with(model, ".so"))
        return cli_usage_error("tune", "'%s' is a compiled model: tune a zoo name or an .onnx file",
                               model);
    o.log = stdout;
    kiln_tune_summary sum;
    kiln_error err = {0};
    kiln_status s;
    if (use_mpi || kiln_tune_mpi_launched()) {
        if (!kiln_tune_mpi_available()) {
            /* under mpirun every rank would tune into the same file */
            cli_error("%s: MPI workers are not available: this kiln was built without MPI "
                      "(install libopenmpi-dev and build again; docs/TUNING.md)",
                      use_mpi ? "--workers mpi" : "started by mpirun with several ranks");
            return KILN_EXIT_ERROR;
        }
        bool root = true;
        s = kiln_tune_mpi_run(model, &o, &sum, &root, &err);
        if (!root || s != KILN_OK)
            return kiln_tune_mpi_finish(s == KILN_OK ? KILN_EXIT_OK : cli_lib_error(&err));
        print_summary(model, &o, &sum);
        return kiln_tune_mpi_finish(KILN_EXIT_OK);
    }
    s = kiln_tune_run(model, &o, &sum, &err);
    if (s != KILN_OK)
        return cli_lib_error(&err);
    print_summary(model, &o, &sum);
    return KILN_EXIT_OK;
}

static void print_summary(const char *model, const kiln_tune_options *o,
                          const kiln_tune_summary *s)
{
    kiln_tune_summary sum = *s;
    printf("\nSummary: %d tasks (%d tunable): %d tuned (%d faster than the default, %d from "
           "records before), %d skipped for time\n",
           sum.tasks, sum.tunable, sum.tuned, sum.improved, sum.resumed, sum.skipped);
    if (sum.layout_convs > 0)
        printf("         layouts: %d conv%s with block choices, %d costed by measured times, "
               "%d changed%s\n",
               sum.layout_convs, sum.layout_convs == 1 ? "" : "s", sum.layout_measured,
               sum.layout_changed,
               sum.layout_changed == 0 ? ""
               : sum.layout_accepted   ? " (accepted end to end)"
                                       : " (slower end to end: not applied)");
    printf("         %d trials (%d failed: crash, timeout, error or mismatch) in %.1f s\n",
           sum.trials, sum.failed, sum.seconds);
    if (sum.slow_requests > 0)
        printf("         %d measurement request%s dropped as slow (median over %.1fx its "
               "configuration's fastest in the batch: the machine at a fraction of its speed)\n",
               sum.slow_requests, sum.slow_requests == 1 ? "" : "s", KILN_TUNE_SLOW_REQUEST);
    printf("         estimated end-to-end: %.3fx (validated task speedups weighted by "
           "estimated time)\n",
           sum.est_gain);
    if (sum.e2e_speedup > 0 && sum.e2e_tuned_ms == 0)
        printf("         measured end-to-end: not timed, 1.000x (no task's configuration "
               "differs from its default: the tuned build runs the untuned one's kernels)\n");
    else if (sum.e2e_speedup > 0)
        printf("         measured end-to-end: %.3fx (median over %d interleaved rounds of "
               "untuned/tuned in the round; medians untuned %.3f ms, tuned %.3f ms)\n",
               sum.e2e_speedup, KILN_TUNE_E2E_ROUNDS, sum.e2e_untuned_ms, sum.e2e_tuned_ms);
    printf("Records: %s (apply with `kiln compile %s --records %s`)\n", o->records, model,
           o->records);
}
