/* tools/kiln/cmd_tasks.c: `kiln tasks MODEL`: the unique tasks of a model
 * (kiln_tasks_extract): a table like AutoTVM's task list, then each task's
 * workload key and knob space; or one JSON object with --json. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void tasks_help(void)
{
    printf("usage: kiln tasks MODEL [--json] [--target T] [--seed N]\n"
           "\n"
           "Lists the unique tasks of MODEL (a zoo name or an .onnx file): each fused\n"
           "kernel the compiler makes, once per workload key, with its template, the\n"
           "steps of the model that run it, its floating-point operations per call, and\n"
           "its knob space (each knob's kind, choices and analytic default). Nothing is\n"
           "compiled. A workload key builds back into the task alone (kiln_workload_create\n"
           "in kiln.h): what tuning measures.\n"
           "\n"
           "Options:\n"
           "  --json        print one JSON object: {model, target, steps, tasks: [{index,\n"
           "                workload, template, steps, flops, space_size, knobs: [{name,\n"
           "                kind, default, choices}], default_config, picks: [{knob:\n"
           "                value}], shapes, layouts}]}\n"
           "  --target T    host (default), avx512, avx2 or generic\n"
           "  --seed N      weight seed of zoo networks (default 0)\n"
           "  -h, --help    show this message\n"
           "\n"
           "Knob kinds: tile (a tile or split size), order (a loop order), block (a\n"
           "layout block size, decided with the neighbouring kernels: fixed in a model).\n"
           "Picks: the configurations the template's cost model ranks next after the\n"
           "default, best first; kiln tune measures them beside the default.\n");
}

/* "1 2 3 4" (at most `size` bytes, "..." when cut). */
static char *choices_str(const kiln_knob_info *k, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (int c = 0; c < k->n_choices; c++) {
        int w = snprintf(buf + n, size - n, "%s%d", c ? " " : "", k->choices[c]);
        if (w < 0 || (size_t)w >= size - n - 4) {
            snprintf(buf + n, size - n, " ...");
            break;
        }
        n += (size_t)w;
    }
    return buf;
}

static int print_json(const char *model, const kiln_tasks *ts)
{
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    if (!j || !arr) {
        cJSON_Delete(j);
        cJSON_Delete(arr);
        cli_error("out of memory");
        return KILN_EXIT_ERROR;
    }
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddStringToObject(j, "target", kiln_tasks_target(ts));
    cJSON_AddNumberToObject(j, "steps", kiln_tasks_num_steps(ts));
    cJSON_AddItemToObject(j, "tasks", arr);
    kiln_error err = {0};
    for (int i = 0; i < kiln_tasks_count(ts); i++) {
        kiln_task_info ti;
        if (kiln_tasks_info(ts, i, &ti, &err) != KILN_OK) {
            cJSON_Delete(j);
            return cli_lib_error(&err);
        }
        cJSON *t = cJSON_CreateObject(), *knobs = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, t);
        cJSON_AddNumberToObject(t, "index", i + 1);
        cJSON_AddStringToObject(t, "workload", ti.workload);
        cJSON_AddStringToObject(t, "template", ti.template_name);
        cJSON_AddNumberToObject(t, "steps", ti.steps);
        cJSON_AddNumberToObject(t, "flops", ti.flops);
        cJSON_AddNumberToObject(t, "space_size", (double)ti.space_size);
        cJSON_AddItemToObject(t, "knobs", knobs);
        for (int k = 0; k < ti.n_knobs; k++) {
            kiln_knob_info ki;
            if (kiln_tasks_knob(ts, i, k, &ki, &err) != KILN_OK) {
                cJSON_Delete(j);
                return cli_lib_error(&err);
            }
            cJSON *kn = cJSON_CreateObject();
            cJSON_AddItemToArray(knobs, kn);
            cJSON_AddStringToObject(kn, "name", ki.name);
            cJSON_AddStringToObject(kn, "kind", ki.kind);
            cJSON_AddNumberToObject(kn, "default", ki.value);
            cJSON_AddItemToObject(kn, "choices", cJSON_CreateIntArray(ki.choices, ki.n_choices));
        }
        cJSON *cfg = cJSON_Parse(ti.default_config);
        cJSON_AddItemToObject(t, "default_config", cfg ? cfg : cJSON_CreateObject());
        cJSON *picks = cJSON_CreateArray();
        cJSON_AddItemToObject(t, "picks", picks);
        for (int p = 0; p < ti.n_picks; p++) {
            cJSON *pk = cJSON_CreateObject();
            cJSON_AddItemToArray(picks, pk);
            for (int k = 0; k < ti.n_knobs; k++) {
                kiln_knob_info ki;
                if (kiln_tasks_knob(ts, i, k, &ki, &err) != KILN_OK) {
                    cJSON_Delete(j);
                    return cli_lib_error(&err);
                }
                cJSON_AddNumberToObject(pk, ki.name, ti.picks[p * ti.n_knobs + k]);
            }
        }
        cJSON_AddStringToObject(t, "shapes", ti.shapes);
        cJSON_AddStringToObject(t, "layouts", ti.layouts);
    }
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) {
        cli_error("out of memory");
        return KILN_EXIT_ERROR;
    }
    printf("%s\n", s);
    free(s);
    return KILN_EXIT_OK;
}

static int print_table(const char *model, uint64_t seed, const kiln_tasks *ts)
{
    kiln_error err = {0};
    int n = kiln_tasks_count(ts);
    printf("model:  %s", model);
    if (!cli_ends_with(model, ".onnx"))
        printf(" (zoo, seed %llu)", (unsigned long long)seed);
    printf("\ntarget: %s\ntasks:  %d unique in %d steps\n\n", kiln_tasks_target(ts), n,
           kiln_tasks_num_steps(ts));
    printf("%5s  %-18s %5s %12s %12s  %s\n", "TASK", "TEMPLATE", "STEPS", "MFLOP/CALL", "SPACE",
           "ARGUMENT SHAPES");
    for (int i = 0; i < n; i++) {
        kiln_task_info ti;
        if (kiln_tasks_info(ts, i, &ti, &err) != KILN_OK)
            return cli_lib_error(&err);
        char space[32];
        cli_thousands(ti.space_size, space, sizeof space);
        printf("%5d  %-18s %5d %12.3f %12s  %s\n", i + 1, ti.template_name, ti.steps,
               ti.flops / 1e6, space, ti.shapes);
    }
    for (int i = 0; i < n; i++) {
        kiln_task_info ti;
        if (kiln_tasks_info(ts, i, &ti, &err) != KILN_OK)
            return cli_lib_error(&err);
        printf("\n[Task %2d/%2d] %s, %d step%s, %.2f MFLOP per call\n", i + 1, n,
               ti.template_name, ti.steps, ti.steps == 1 ? "" : "s", ti.flops / 1e6);
        printf("  workload: %s\n", ti.workload);
        if (ti.n_knobs == 0) {
            printf("  knobs:    none\n");
            continue;
        }
        printf("  %-14s %-6s %7s  %s\n", "knob", "kind", "default", "choices");
        for (int k = 0; k < ti.n_knobs; k++) {
            kiln_knob_info ki;
            if (kiln_tasks_knob(ts, i, k, &ki, &err) != KILN_OK)
                return cli_lib_error(&err);
            char ch[512];
            printf("  %-14s %-6s %7d  %s\n", ki.name, ki.kind, ki.value,
                   choices_str(&ki, ch, sizeof ch));
        }
        printf("  default:  %s\n", ti.default_config);
        for (int p = 0; p < ti.n_picks; p++) {
            printf("  pick %d:   {", p + 1);
            for (int k = 0; k < ti.n_knobs; k++) {
                kiln_knob_info ki;
                if (kiln_tasks_knob(ts, i, k, &ki, &err) != KILN_OK)
                    return cli_lib_error(&err);
                printf("%s\"%s\": %d", k ? ", " : "", ki.name, ti.picks[p * ti.n_knobs + k]);
            }
            printf("}\n");
        }
    }
    return KILN_EXIT_OK;
}

int kiln_cmd_tasks(int argc, char **argv)
{
    const char *model = NULL, *v = NULL;
    kiln_compile_options opts = {0};
    uint64_t seed = 0;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            tasks_help();
            return KILN_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_opt_value("tasks", argc, argv, &i, "--target", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            opts.target = v;
        } else if ((r = cli_opt_value("tasks", argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0)
                return KILN_EXIT_ERROR;
            if (!cli_parse_u64(v, &seed))
                return cli_usage_error("tasks", "--seed: expected a number, got '%s'", v);
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error("tasks", "unknown option '%s'", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            return cli_usage_error("tasks", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!model)
        return cli_usage_error("tasks", "missing MODEL");
    if (cli_ends_with(model, ".so"))
        return cli_usage_error("tasks",
                               "'%s' is a compiled model: tasks and their knob spaces come from "
                               "the model itself (a zoo name or an .onnx file)",
                               model);
    kiln_error err = {0};
    kiln_graph *g = NULL;
    if (kiln_model_load(model, seed, &g, &err) != KILN_OK)
        return cli_lib_error(&err);
    kiln_tasks *ts = NULL;
    kiln_status s = kiln_tasks_extract(g, &opts, &ts, &err);
    kiln_graph_destroy(g);
    if (s != KILN_OK)
        return cli_lib_error(&err);
    int rc = json ? print_json(model, ts) : print_table(model, seed, ts);
    kiln_tasks_destroy(ts);
    return rc;
}
