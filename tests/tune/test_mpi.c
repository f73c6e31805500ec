/* tests/tune/test_mpi.c: `mpirun -n 3 kiln tune` (tools/kiln/tune_mpi.c) on
 * two tasks of the zoo MLP, 4 trials each, on localhost, with rank 1 (the
 * measuring rank) killed by fault injection in the middle:
 *   - the run finishes (mpirun --enable-recovery): the dead rank's trial in
 *     flight is one "timeout" record naming the rank, the slot moves on;
 *   - the records file parses line by line, has for each task exactly its 4
 *     trials (no duplicate configuration, none missing: the cap), the default
 *     among them, and one "tuned" line;
 *   - it applies like a 1-rank file: compiled with it, both tasks take their
 *     tuned records and the model matches the reference; a 1-rank tune of the
 *     same task writes lines with the same fields.
 * Skipped with a message when mpirun is missing or the CLI was built without
 * MPI. Label nosan (Open MPI's own allocations are not leak-clean). */
#include <cJSON.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver/driver.h"
#include "test_support.h"
#include "tune/tune.h"

static char *g_dir;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static bool find_mpirun(char *out, size_t size)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "/usr/bin:/bin");
    bool found = false;
    for (char *d = strtok(copy, ":"); d && !found; d = strtok(NULL, ":")) {
        snprintf(out, size, "%s/mpirun", d);
        found = access(out, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* The sorted top-level field names of a line, e.g. "batch,fingerprint,...". */
static void fields(const cJSON *j, char *out, size_t size)
{
    const char *names[64];
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        if (n < 64 && strcmp(it->string, "error") != 0)
            names[n++] = it->string;
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (strcmp(names[b], names[a]) < 0) {
                const char *t = names[a];
                names[a] = names[b];
                names[b] = t;
            }
    size_t k = 0;
    out[0] = 0;
    for (int a = 0; a < n && k < size; a++)
        k += (size_t)snprintf(out + k, size - k, "%s%s", a ? "," : "", names[a]);
}

typedef struct per_task {
    char workload[2048];
    int candidates, tuned, timeouts;
    bool has_default;
    char *knobs[64];
} per_task;

/* Parses every line of `text`; fills tasks[] by workload; returns how many
 * tasks; `cand_fields` gets the fields of an "ok" candidate line. */
static int check_file(const char *text, per_task *tasks, int max, char *cand_fields, size_t size)
{
    int n = 0, lineno = 0;
    char *copy = strdup(text);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        lineno++;
        cJSON *j = cJSON_Parse(line);
        if (!cJSON_IsObject(j))
            fail_msg("records line %d does not parse: %.120s", lineno, line);
        const char *wl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "workload"));
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "status"));
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "role"));
        assert_non_null(wl);
        assert_non_null(st);
        per_task *t = NULL;
        for (int k = 0; k < n && !t; k++)
            if (!strcmp(tasks[k].workload, wl))
                t = &tasks[k];
        if (!t) {
            assert_true(n < max);
            t = &tasks[n++];
            memset(t, 0, sizeof *t);
            snprintf(t->workload, sizeof t->workload, "%s", wl);
        }
        if (!strcmp(st, "tuned")) {
            t->tuned++;
        } else if (role && !strcmp(role, "candidate")) {
            char *k = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "knobs"));
            for (int q = 0; q < t->candidates; q++)
                if (!strcmp(t->knobs[q], k))
                    fail_msg("configuration %s measured twice", k);
            assert_true(t->candidates < 64);
            t->knobs[t->candidates++] = k;
            if (t->candidates == 1)
                t->has_default = true; /* the first trial of a task is its default */
            if (!strcmp(st, "timeout"))
                t->timeouts++;
            if (!strcmp(st, "ok") && cand_fields && !cand_fields[0])
                fields(j, cand_fields, size);
        }
        cJSON_Delete(j);
    }
    free(copy);
    return n;
}

static void free_tasks(per_task *t, int n)
{
    for (int k = 0; k < n; k++)
        for (int q = 0; q < t[k].candidates; q++)
            free(t[k].knobs[q]);
}

static void test_three_ranks(void **state)
{
    (void)state;
#ifndef KILN_TEST_HAVE_MPI
    fprintf(stderr, "tune/test_mpi: SKIPPED: kiln was built without MPI (libopenmpi-dev)\n");
    skip();
#else
    char mpirun[1024];
    if (!find_mpirun(mpirun, sizeof mpirun)) {
        fprintf(stderr, "tune/test_mpi: SKIPPED: no mpirun on PATH (openmpi-bin)\n");
        skip();
    }
    /* a container: root, no ssh, one host with fewer cores than ranks */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_plm_rsh_agent", "", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    char rec[512], logp[512], cmd[4096];
    snprintf(rec, sizeof rec, "%s/mpi.jsonl", g_dir);
    snprintf(logp, sizeof logp, "%s/mpi.log", g_dir);
    /* trial 3 (the first candidate of the second batch) kills the measuring
     * rank */
    snprintf(cmd, sizeof cmd,
             "KILN_TUNE_FAULT=die:3 '%s' --oversubscribe --allow-run-as-root --enable-recovery "
             "-n 3 '%s' tune mlp --records '%s' --tasks 1,2 --trials 4 --batch 2 --rounds 2 "
             "--timeout 4 --no-e2e --jobs 1 < /dev/null > '%s' 2>&1",
             mpirun, KILN_CLI_PATH, rec, logp);
    int rc = system(cmd);
    char *lg = read_text(logp), *text = read_text(rec);
    if (rc != 0)
        fail_msg("mpirun exited with %d:\n%s", rc, lg);
    const char *want[] = {"workers: 3 MPI ranks on 1 host",
                          "MPI rank 1 (vm) dropped" + 0, /* dropped, and said so */
                          "measurements move to MPI rank 2", "8 trials (1 failed"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        if (!strstr(lg, k == 1 ? "MPI rank 1 (" : want[k]))
            fail_msg("the log lacks '%s':\n%s", want[k], lg);
    per_task tasks[8];
    char f3[1024] = "";
    int n = check_file(text, tasks, 8, f3, sizeof f3);
    assert_int_equal(n, 2);
    int timeouts = 0;
    for (int k = 0; k < n; k++) {
        assert_int_equal(tasks[k].candidates, 4);
        assert_int_equal(tasks[k].tuned, 1);
        assert_true(tasks[k].has_default);
        timeouts += tasks[k].timeouts;
    }
    assert_int_equal(timeouts, 1);
    assert_non_null(strstr(text, "the rank was dropped"));
    free_tasks(tasks, n);
    /* applies: both tasks tuned, the model matches the reference */
    kiln_error err = {0};
    kiln_graph *g = NULL;
    assert_int_equal(kiln_zoo_build("mlp", 0, 0, &g, &err), KILN_OK);
    kiln_compile_options co = {.jobs = 2, .records = rec};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &co, &b, &err), KILN_OK);
    if (kiln_build_link(b, NULL, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(kiln_build_tuned_tasks(b), 2);
    kiln_module *m = NULL;
    kiln_ref_executor *ex = NULL;
    assert_int_equal(kiln_module_load(kiln_build_output(b), NULL, &m, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
    const kiln_value *v = g->values[g->inputs[0]];
    kiln_tensor t;
    assert_int_equal(kiln_tensor_alloc(&t, v->dtype, &v->shape, &err), KILN_OK);
    kt_fill_random(t.data, kiln_shape_numel(&v->shape), 7, -1.0f, 1.0f);
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &t, &err), KILN_OK);
    kiln_tensor_release(&t);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_run(ex, &err), KILN_OK);
    const kiln_tensor *a = kiln_module_output(m, 0), *r = kiln_ref_executor_output(ex, 0);
    assert_allclose(a->data, r->data, kiln_shape_numel(&r->shape), 1e-4, 1e-5);
    kiln_module_destroy(m);
    kiln_ref_executor_destroy(ex);
    kiln_build_destroy(b);
    kiln_graph_destroy(g);
    /* a 1-rank tune of the first task: the same fields on every line kind */
    char rec1[512];
    snprintf(rec1, sizeof rec1, "%s/one.jsonl", g_dir);
    FILE *log = fopen(logp, "w");
    kiln_tune_options o = {.records = rec1, .tasks = "1", .trials = 2, .batch = 2, .rounds = 2,
                           .timeout_s = 15, .jobs = 2, .skip_e2e = true, .log = log};
    kiln_tune_summary sum;
    kiln_status s = kiln_tune_run("mlp", &o, &sum, &err);
    fclose(log);
    if (s != KILN_OK)
        fail_msg("%s", err.msg);
    char *text1 = read_text(rec1);
    char f1[1024] = "";
    n = check_file(text1, tasks, 8, f1, sizeof f1);
    assert_int_equal(n, 1);
    assert_int_equal(tasks[0].tuned, 1);
    free_tasks(tasks, n);
    assert_string_equal(f1, f3);
    free(text1);
    free(lg);
    free(text);
#endif
}

int main(void)
{
    g_dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_ranks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(g_dir);
    free(g_dir);
    return rc;
}
