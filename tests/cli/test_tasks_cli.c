/* tests/cli/test_tasks_cli.c: `kiln tasks`: the table and the knob spaces of
 * resnet-50, the JSON form (every task with a workload key, a template, a
 * step count, flops, knobs with kinds and choices holding their defaults,
 * and steps summing to the model's), help, and the errors (exit 2). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static void test_table(void **state)
{
    (void)state;
    expect_cli(0, "tasks resnet-50", "model:  resnet-50 (zoo, seed 0)", "target: ",
               "TEMPLATE", "STEPS", "MFLOP/CALL", "SPACE", "ARGUMENT SHAPES",
               "[Task  1/", "workload: layout_transform|",
               "workload: conv2d_nchwc|", "Conv(a0,a1,a2){kernel_shape=[7,7];", "knob",
               "ow_tile", "tile", "loop_order", "order", "cb_out", "block", "default:  {\"",
               "pool2d", "global_pool", "dense", "knobs:    none", KT_LACKS, "error");
}

static void test_json(void **state)
{
    (void)state;
    char *out = expect_cli_output(0, "tasks resnet-50 --json 2>/dev/null", "\"tasks\"");
    cJSON *j = cJSON_Parse(out);
    if (!j)
        fail_msg("not JSON:\n%.2000s", out);
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "resnet-50");
    int steps = cJSON_GetObjectItem(j, "steps")->valueint, sum = 0, with_knobs = 0;
    const cJSON *tasks = cJSON_GetObjectItem(j, "tasks"), *t;
    assert_true(cJSON_GetArraySize(tasks) > 10);
    cJSON_ArrayForEach(t, tasks)
    {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(t, "workload")));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(t, "template")));
        assert_true(cJSON_GetObjectItem(t, "flops")->valuedouble >= 0);
        sum += cJSON_GetObjectItem(t, "steps")->valueint;
        double space = 1;
        const cJSON *k, *cfg = cJSON_GetObjectItem(t, "default_config");
        assert_true(cJSON_IsObject(cfg));
        cJSON_ArrayForEach(k, cJSON_GetObjectItem(t, "knobs"))
        {
            const char *kind = cJSON_GetObjectItem(k, "kind")->valuestring;
            assert_true(!strcmp(kind, "tile") || !strcmp(kind, "order") || !strcmp(kind, "block"));
            const cJSON *ch = cJSON_GetObjectItem(k, "choices"), *c;
            int def = cJSON_GetObjectItem(k, "default")->valueint, found = 0;
            cJSON_ArrayForEach(c, ch) found |= c->valueint == def;
            assert_true(found);
            assert_int_equal(
                cJSON_GetObjectItem(cfg, cJSON_GetObjectItem(k, "name")->valuestring)->valueint,
                def);
            space *= cJSON_GetArraySize(ch);
            with_knobs++;
        }
        assert_true(cJSON_GetObjectItem(t, "space_size")->valuedouble == space);
    }
    assert_int_equal(sum, steps);
    assert_true(with_knobs > 0);
    cJSON_Delete(j);
    free(out);
}

static void test_help_and_errors(void **state)
{
    (void)state;
    expect_cli(0, "tasks --help", "usage: kiln tasks MODEL", "--json", "Knob kinds");
    expect_cli(0, "help tasks", "usage: kiln tasks MODEL");
    expect_cli(0, "--help", "tasks ");
    expect_cli(2, "tasks", "missing MODEL", "Try 'kiln tasks --help'");
    expect_cli(2, "tasks resnet-50 --bogus", "unknown option '--bogus'");
    expect_cli(2, "tasks resnet-50 mlp", "unexpected argument 'mlp'");
    expect_cli(2, "tasks no-such-net", "no-such-net");
    expect_cli(2, "tasks model.so", "compiled model");
    expect_cli(2, "tasks mlp --target sse9", "unknown target 'sse9'");
    expect_cli(2, "tasks mlp --seed x", "--seed");
    expect_cli(0, "tasks mlp --target generic", "target: generic", "dense");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_help_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
