/* tools/kiln/cmd_compile.c: `kiln compile MODEL -o model.so`: imports the
 * model, runs the compiler (kiln_compile) and prints the time of each stage. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "import/onnx/onnx.h"
#include "pass/pass.h"
#include "tune/tune.h"
#include "util/file.h"
#include "vm/vm.h"

int kiln_cmd_compile(int argc, char **argv);

static void compile_help(void)
{
    int n = 0;
    const kiln_pass_entry *p = kiln_pass_pipeline(&n);
    printf("usage: kiln compile MODEL -o model.so [--target T] [--records R]\n"
           "                    [--dump-code DIR] [--print-ir-after PASS] [--jobs N]\n"
           "                    [--seed N] [--cache-dir DIR] [--quiet]\n"
           "                    [--input-shape NAME=DIMS]...\n"
           "\n"
           "Compiles MODEL (a zoo name or an .onnx file) into one shared object that\n"
           "`kiln run`, `kiln check` and `kiln bench` (or kiln_module_load) run.\n"
           "\n"
           "Options:\n"
           "  -o, --output F        the shared object to write (required)\n"
           "  --target T            host (default), avx512, avx2 or generic\n"
           "  --records R           tuning records (JSON lines): each task takes the best\n"
           "                        record of its workload key (docs/TUNING.md); default:\n"
           "                        the shipped records (records/) tuned on this CPU class,\n"
           "                        if any; `none`: no records\n"
           "  --dump-code DIR       also write the generated C (kernels, model.c) to DIR\n"
           "  --print-ir-after P    print the IR after pass P to stderr ('input', 'all', or:\n");
    for (int i = 0; i < n; i++)
        printf("                          %-16s %s\n", p[i].name, p[i].what);
    printf("                        )\n"
           "  --jobs N              parallel compiler processes (default: the cores)\n"
           "  --seed N              weight seed of zoo networks (default 0)\n"
           "  --cache-dir DIR       object cache (default $XDG_CACHE_HOME/kiln or ~/.cache/kiln)\n"
           "  --quiet               do not print the stage times\n"
           "  --input-shape NAME=DIMS\n"
           "                        compile an .onnx whose input NAME has symbolic or\n"
           "                        unknown dims (dynamic axes) for this shape, e.g.\n"
           "                        --input-shape x=1x3x224x224; once per such input.\n"
           "                        The .so takes exactly that shape (`kiln run` on the\n"
           "                        .onnx instead specializes per input shape at run\n"
           "                        time). Without it such a model does not compile.\n"
           "  -h, --help            show this message\n"
           "\n"
           "A model that runs on the VM (If/Loop/Scan, run-time shape parameters,\n"
           "NonZero/NonMaxSuppression/TopK/RoiAlign on data: docs/VM.md) compiles to one\n"
           ".so too: its static part compiled as above, plus a VM section holding the\n"
           "ONNX bytes of its data-dependent nodes, which `kiln run`, `check`, `bench`,\n"
           "`profile` and kiln.load convert at run time (libkiln, no C compiler needed).\n"
           "\n"
           "The C compiler is $CC, else cc, gcc or clang from PATH.\n");
}

/* MODEL needs the VM: kiln_vm_export writes the static part compiled and
 * the VM section into one .so (docs/VM.md "One .so"). */
static int compile_vm(const char *model, const char *why, const kiln_compile_options *opts,
                      const cli_input_shapes *shapes, const char *out, bool quiet, double t0)
{
    kiln_error err = {0};
    void *data = NULL;
    size_t size = 0;
    if (kiln_file_read(model, (size_t)INT32_MAX, &data, &size, &err) != KILN_OK)
        return cli_lib_error(&err);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", model);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir ? 1 : 0] = '\0';
    const char *names[CLI_MAX_INPUT_SHAPES];
    for (int k = 0; k < shapes->n; k++)
        names[k] = shapes->name[k];
    kiln_vm_export_options eo = {.shape_names = names, .shapes = shapes->shape,
                                 .n_shapes = shapes->n};
    kiln_vm_export_info info;
    if (!quiet)
        fprintf(stderr, "kiln compile: %s runs on the VM (%s): its static part compiled, "
                        "its dynamic part in the .so's VM section\n",
                model, why);
    kiln_status s = kiln_vm_export(data, size, dir, opts, &eo, out, &info, &err);
    free(data);
    if (s != KILN_OK)
        return cli_lib_error(&err);
    if (!quiet)
        fprintf(stderr,
                "kiln compile: VM section: %d dynamic nodes, %d initializers (%d used only by "
                "the %d static nodes left out), %.1f KB of ONNX; static part %s\n"
                "kiln compile: wrote %s in %.2f s\n",
                info.dynamic_nodes, info.initializers_kept, info.initializers_dropped,
                info.static_nodes, (double)info.onnx_bytes / 1e3,
                info.static_part ? "compiled into the same .so" : "none (every node is dynamic)",
                out, (cli_now_ms() - t0) / 1e3);
    return KILN_EXIT_OK;
}

int kiln_cmd_compile(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *v = NULL;
    kiln_compile_options opts = {0};
    uint64_t seed = 0;
    bool quiet = false, records_given = false;
    cli_input_shapes shapes = {0};
    for (int i = 1; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            compile_help();
            return KILN_EXIT_OK;
        }
        if ((r = cli_opt_value("compile", argc, argv, &i, "-o", &v)) != 0 ||
            (r = cli_opt_value("compile", argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            out = v;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--target", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            opts.target = v;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--records", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            opts.records = v;
            records_given = true;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--dump-code", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            opts.dump_code_dir = v;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--print-ir-after", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!kiln_pass_known(v))
                return cli_usage_error("compile", "--print-ir-after: no pass named '%s'", v);
            opts.print_ir_after = v;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--cache-dir", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            opts.cache_dir = v;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--jobs", &v)) != 0) {
            uint64_t j;
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!cli_parse_u64(v, &j) || j < 1 || j > 256)
                return cli_usage_error("compile", "--jobs: expected 1 to 256, got '%s'", v);
            opts.jobs = (int)j;
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!cli_parse_u64(v, &seed))
                return cli_usage_error("compile", "--seed: expected a number, got '%s'", v);
        } else if ((r = cli_opt_value("compile", argc, argv, &i, "--input-shape", &v)) != 0) {
            if (r < 0 || !cli_parse_input_shape("compile", v, &shapes))
                return KILN_EXIT_ERROR;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error("compile", "unknown option '%s'", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            return cli_usage_error("compile", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!model)
        return cli_usage_error("compile", "missing MODEL");
    if (!out)
        return cli_usage_error("compile", "missing -o model.so");
    opts.verbose = !quiet;
    /* the shipped records (records/: applied only where tuned on this CPU
     * class with this kiln's templates) unless --records says otherwise */
    if (!records_given)
        opts.records = kiln_shipped_records_dir();
    else if (!strcmp(opts.records, "none"))
        opts.records = NULL;
    kiln_error err = {0};
    double t0 = cli_now_ms();
    kiln_graph *g = NULL;
    if (shapes.n && !cli_ends_with(model, ".onnx"))
        return cli_usage_error("compile", "--input-shape applies to an .onnx model");
    kiln_onnx_binding binds[CLI_MAX_INPUT_SHAPES];
    for (int k = 0; k < shapes.n; k++)
        binds[k] = (kiln_onnx_binding){.name = shapes.name[k], .shape = &shapes.shape[k]};
    kiln_onnx_options io = {.bindings = binds, .n_bindings = shapes.n};
    kiln_status ls = shapes.n ? kiln_onnx_load_ex(model, &io, &g, &err)
                              : kiln_model_load(model, seed, &g, &err);
    /* a model the VM runs (data parameters, control flow, data-dependent
     * ops): the static part compiled plus a VM section, in one .so */
    if (ls != KILN_OK && cli_ends_with(model, ".onnx") && kiln_vm_needed(ls, err.msg) &&
        (shapes.n || !(strstr(err.msg, "has a symbolic dimension") ||
                       strstr(err.msg, "has an unknown dimension") ||
                       strstr(err.msg, "has no declared shape"))))
        return compile_vm(model, err.msg, &opts, &shapes, out, quiet, t0);
    if (ls != KILN_OK) {
        if (ls == KILN_ERR_UNSUPPORTED &&
            (strstr(err.msg, "has a symbolic dimension") ||
             strstr(err.msg, "has an unknown dimension") ||
             strstr(err.msg, "has no declared shape"))) {
            /* the input's name: the message starts "...input 'NAME' has ..." */
            const char *q = strstr(err.msg, "input '");
            int len = 0;
            if (q) {
                q += 7;
                while (q[len] && q[len] != '\'')
                    len++;
            }
            cli_error("%s; kiln compile needs static input shapes: pass --input-shape "
                      "%.*s=DIMS (extents joined by 'x', e.g. 1x3x224x224; once per such "
                      "input)",
                      err.msg, q ? len : 4, q ? q : "NAME");
            return KILN_EXIT_ERROR;
        }
        return cli_lib_error(&err);
    }
    double t1 = cli_now_ms();
    if (!quiet)
        fprintf(stderr, "kiln compile: import %.2f s (%s)\n", (t1 - t0) / 1e3, model);
    kiln_status s = kiln_compile(g, &opts, out, &err);
    kiln_graph_destroy(g);
    if (s != KILN_OK)
        return cli_lib_error(&err);
    if (!quiet)
        fprintf(stderr, "kiln compile: wrote %s in %.2f s\n", out, (cli_now_ms() - t0) / 1e3);
    return KILN_EXIT_OK;
}
