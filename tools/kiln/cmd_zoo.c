/* tools/kiln/cmd_zoo.c: `kiln zoo`: the table of built-in networks. Each is
 * built without weights (KILN_ZOO_NO_WEIGHTS), which is enough to count its
 * parameters and multiply-accumulates. */
#include <string.h>

#include "cli.h"

static void zoo_help(void)
{
    printf("usage: kiln zoo\n"
           "\n"
           "Lists the built-in networks: name, input shape (float32), number of\n"
           "parameters, multiply-accumulates of one inference in billions (GMACs),\n"
           "and a description. Any of the names can be used as MODEL in `kiln run`\n"
           "and `kiln check`.\n"
           "\n"
           "Options:\n"
           "  -h, --help   show this message\n");
}

int kiln_cmd_zoo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            zoo_help();
            return KILN_EXIT_OK;
        }
    }
    if (argc > 1)
        return cli_usage_error("zoo", argv[1][0] == '-' ? "unknown option '%s'"
                                                         : "unexpected argument '%s'",
                               argv[1]);
    int rc = KILN_EXIT_OK;
    printf("%-16s %-18s %13s %8s  %s\n", "NAME", "INPUT", "PARAMS", "GMACS", "DESCRIPTION");
    for (int i = 0; i < kiln_zoo_count(); i++) {
        const kiln_zoo_info *info = kiln_zoo_get(i);
        char shape[128], params[32], gmacs[32];
        kiln_shape_str(&info->input_shape, shape, sizeof shape);
        kiln_graph *g = NULL;
        kiln_error err = {0};
        if (kiln_zoo_build(info->name, 0, KILN_ZOO_NO_WEIGHTS, &g, &err) == KILN_OK) {
            cli_thousands(kiln_graph_num_params(g), params, sizeof params);
            snprintf(gmacs, sizeof gmacs, "%.2f", (double)kiln_graph_macs(g) / 1e9);
            kiln_graph_destroy(g);
        } else {
            cli_error("zoo network '%s': %s", info->name, err.msg);
            strcpy(params, "?");
            strcpy(gmacs, "?");
            rc = KILN_EXIT_ERROR;
        }
        printf("%-16s %-18s %13s %8s  %s\n", info->name, shape, params, gmacs,
               info->description);
    }
    return rc;
}
