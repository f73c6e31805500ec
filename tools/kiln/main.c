/* tools/kiln/main.c: the kiln command-line tool: dispatch to the commands,
 * the top-level usage and --version. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kiln COMMAND [ARGS...]\n"
            "       kiln COMMAND --help\n"
            "\n"
            "kiln %s: a deep-learning compiler.\n"
            "\n"
            "Commands:\n"
            "  zoo     list the built-in networks (input shape, parameters, GMACs)\n"
            "  compile compile a model into one shared object (.so)\n"
            "  run     run a model once on an input and print a summary of its output\n"
            "  check   run a model on given inputs and compare with expected outputs\n"
            "  bench   time a model (TVM time_evaluator semantics)\n"
            "  profile time every kernel of a model (TVM-style report), or --compare two\n"
            "  tasks   list a model's unique tasks: workload key, template, flops, knob space\n"
            "  tune    tune a model's tasks on this machine into a records file\n"
            "  help    show this message\n"
            "\n"
            "MODEL is a compiled model (.so), a zoo network name (see `kiln zoo`) or a\n"
            "path to an .onnx file. Tensor files are ONNX TensorProto (.pb) or NumPy (.npy).\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this message\n"
            "  --version      print the version\n"
            "\n"
            "Exit status: 0 success, 1 check found a mismatch, 2 any error.\n",
            KILN_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        if (argc >= 3 && strcmp(argv[1], "help") == 0) {
            /* "kiln help CMD" == "kiln CMD --help" */
            char *sub[] = {argv[2], "--help", NULL};
            if (strcmp(argv[2], "zoo") == 0)
                return kiln_cmd_zoo(2, sub);
            if (strcmp(argv[2], "run") == 0)
                return kiln_cmd_run(2, sub);
            if (strcmp(argv[2], "check") == 0)
                return kiln_cmd_check(2, sub);
            if (strcmp(argv[2], "bench") == 0)
                return kiln_cmd_bench(2, sub);
            if (strcmp(argv[2], "tasks") == 0)
                return kiln_cmd_tasks(2, sub);
            if (strcmp(argv[2], "tune") == 0) {
                int kiln_cmd_tune(int, char **); /* tools/kiln/cmd_tune.c */
                return kiln_cmd_tune(2, sub);
            }
            if (strcmp(argv[2], "profile") == 0) {
                int kiln_cmd_profile(int, char **); /* tools/kiln/cmd_profile.c */
                return kiln_cmd_profile(2, sub);
            }
            return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
        }
        usage(stdout);
        return KILN_EXIT_OK;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s\n", KILN_VERSION);
        return KILN_EXIT_OK;
    }
    if (strcmp(cmd, "zoo") == 0)
        return kiln_cmd_zoo(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return kiln_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return kiln_cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return kiln_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "tasks") == 0)
        return kiln_cmd_tasks(argc - 1, argv + 1);
    /* compile: dispatched here by tools/kiln/cmd_compile.c's author */
    if (strcmp(cmd, "compile") == 0) {
        int kiln_cmd_compile(int, char **); /* tools/kiln/cmd_compile.c */
        return kiln_cmd_compile(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "profile") == 0) {
        int kiln_cmd_profile(int, char **); /* tools/kiln/cmd_profile.c */
        return kiln_cmd_profile(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "tune") == 0) {
        int kiln_cmd_tune(int, char **); /* tools/kiln/cmd_tune.c */
        return kiln_cmd_tune(argc - 1, argv + 1);
    }
    if (cmd[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s'", cmd);
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
