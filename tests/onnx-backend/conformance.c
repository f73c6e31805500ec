/* tests/onnx-backend/conformance.c: runs the ONNX backend conformance suite
 * (Debian's libonnx-testdata) through kiln's importer and reference executor.
 *
 * For every model directory under DATA/{node,pytorch-converted,
 * pytorch-operator,simple}: import model.onnx, run every test_data_set_N on
 * its input_K.pb and compare with output_K.pb (floats: |got-exp| <= atol +
 * rtol*|exp|, rtol 1e-3, atol 1e-7, NaN matches NaN; other types: exact).
 *
 * Each model runs in a forked child with a time limit, so a crash or a hang is
 * recorded as such and never takes the runner down. The child writes one line
 * "STATUS reason" to a pipe. Inputs that an op needs as constants (a Reshape's
 * shape, a Slice's starts, ...) are kiln attributes: when the import names
 * such an input, the runner binds it to its value from test_data_set_0 and
 * imports again, and says it did in the reason column.
 *
 * --inputs data binds nothing: every graph input is run-time data, as in
 * `kiln check` (the suite's honest count; onnx_check_compiled runs the CLI
 * itself and holds that count's regression list, expected-cli.txt).
 *
 * --executor graph compiles each imported graph (inputs bound as above) with
 * kiln_compile into a temporary .so instead, and runs it with the runtime:
 * every model the reference executor passes must pass compiled too (nodes
 * without a kernel template run their reference kernels inside the model).
 *
 * Results: one line per model, a summary, and with --expected FILE a
 * comparison against the committed list: a model expected to pass that no
 * longer passes is a regression and fails the run (exit 1); a newly passing
 * model is reported so the list can be updated (--write-expected FILE). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "import/onnx/onnx.h"
#include "kiln/kiln.h"
#include "kiln/runtime.h"
#include "util/error.h"

#include "suite_runner.h"

#define MAX_IO 64
#define RTOL 1e-3
#define ATOL 1e-7

typedef enum { R_PASS, R_MISMATCH, R_UNSUPPORTED, R_CRASH, R_HANG, R_COUNT } result_kind;
static const char *const result_names[R_COUNT] = {"passed", "mismatched", "unsupported",
                                                  "crashed", "hung"};

typedef struct model_result {
    char *name; /* "node/test_abs" */
    result_kind kind;
    char reason[512];
    bool listed; /* in the expected list */
} model_result;

/* ---- child side ---------------------------------------------------------- */

typedef struct data_set {
    int n_in, n_out;
    kiln_tensor in[MAX_IO], out[MAX_IO];
} data_set;

static void free_set(data_set *s)
{
    for (int i = 0; i < s->n_in; i++)
        kiln_tensor_release(&s->in[i]);
    for (int i = 0; i < s->n_out; i++)
        kiln_tensor_release(&s->out[i]);
    s->n_in = s->n_out = 0;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Reads input_K.pb / output_K.pb of one data set directory. */
static kiln_status load_set(const char *dir, data_set *s, kiln_error *err)
{
    char p[4096];
    s->n_in = s->n_out = 0;
    for (int k = 0; k < MAX_IO; k++) {
        snprintf(p, sizeof p, "%s/input_%d.pb", dir, k);
        if (!file_exists(p))
            break;
        kiln_status st = kiln_tensor_read(p, &s->in[k], NULL, err);
        if (st != KILN_OK)
            return st;
        s->n_in++;
    }
    for (int k = 0; k < MAX_IO; k++) {
        snprintf(p, sizeof p, "%s/output_%d.pb", dir, k);
        if (!file_exists(p))
            break;
        kiln_status st = kiln_tensor_read(p, &s->out[k], NULL, err);
        if (st != KILN_OK)
            return st;
        s->n_out++;
    }
    return KILN_OK;
}

static double load_f(const kiln_tensor *t, int64_t i)
{
    return onnx_load_f64(t->dtype, t->data, i);
}

static bool is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}

/* Compares one output; on mismatch writes the reason and returns false. */
static bool compare(const kiln_tensor *got, const kiln_tensor *exp, int k, char *why, size_t n)
{
    char a[160], b[160];
    if (got->dtype != exp->dtype) {
        snprintf(why, n, "output %d: dtype %s, expected %s", k, kiln_dtype_name(got->dtype),
                 kiln_dtype_name(exp->dtype));
        return false;
    }
    if (!kiln_shape_equal(&got->shape, &exp->shape)) {
        snprintf(why, n, "output %d: shape %s, expected %s", k,
                 kiln_shape_str(&got->shape, a, sizeof a),
                 kiln_shape_str(&exp->shape, b, sizeof b));
        return false;
    }
    int64_t count = kiln_shape_numel(&exp->shape);
    bool fl = is_float(exp->dtype);
    for (int64_t i = 0; i < count; i++) {
        bool ok;
        double g, e;
        if (fl) {
            g = load_f(got, i);
            e = load_f(exp, i);
            if (isnan(e))
                ok = isnan(g);
            else if (isinf(e))
                ok = g == e;
            else
                ok = fabs(g - e) <= ATOL + RTOL * fabs(e);
        } else {
            size_t es = kiln_dtype_size(exp->dtype);
            ok = memcmp((const char *)got->data + i * (int64_t)es,
                        (const char *)exp->data + i * (int64_t)es, es) == 0;
            g = load_f(got, i);
            e = load_f(exp, i);
        }
        if (!ok) {
            snprintf(why, n, "output %d: element %lld is %.9g, expected %.9g", k, (long long)i, g,
                     e);
            return false;
        }
    }
    return true;
}

/* The ONNX graph's real inputs (inputs that are not initializers), in order. */
static int model_inputs(const char *path, char names[][256], int32_t *types, int max,
                        kiln_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot open", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(size > 0 ? (size_t)size : 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    Onnx__ModelProto *m = NULL;
    if (got != (size_t)size || onnx_decode_model(buf, got, &m, err) != KILN_OK) {
        free(buf);
        return -1;
    }
    free(buf);
    int n = 0;
    const Onnx__GraphProto *g = m->graph;
    for (size_t i = 0; g && i < g->n_input && n < max; i++) {
        const char *nm = g->input[i]->name ? g->input[i]->name : "";
        bool init = false;
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = g->initializer[j]->name && strcmp(g->initializer[j]->name, nm) == 0;
        if (init)
            continue;
        snprintf(names[n], 256, "%s", nm);
        const Onnx__TypeProto *tp = g->input[i]->type;
        types[n] = (tp && tp->tensor_type) ? tp->tensor_type->elem_type : 0;
        n++;
    }
    onnx_free_model(m);
    return n;
}

static bool use_graph;          /* --executor graph: compile, run with the runtime */
static bool bind_params = true; /* --inputs data: false, every input is data */

/* Compiles g into a temporary .so and loads it (the file is removed at once:
 * the loaded module keeps it mapped). */
static kiln_status compile_load(const kiln_graph *g, kiln_module **m, kiln_error *err)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/kiln-conformance-%ld.so", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    kiln_compile_options opts = {.jobs = 1};
    kiln_status s = kiln_compile(g, &opts, path, err);
    if (s == KILN_OK) {
        kiln_module_options mo = {.num_threads = 1, .bind_threads = 0};
        s = kiln_module_load(path, &mo, m, err);
    }
    unlink(path);
    return s;
}

static void child_run(const char *dir, int fd)
{
    char line[600];
    char path[4096];
    kiln_error err = {0};
    result_kind kind = R_PASS;
    char reason[512] = "";
    char in_names[MAX_IO][256];
    int32_t in_types[MAX_IO];
    data_set sets[16];
    int n_sets = 0;
    kiln_graph *g = NULL;
    kiln_ref_executor *ex = NULL;
    kiln_module *mod = NULL;
    bool bound = false;

    snprintf(path, sizeof path, "%s/model.onnx", dir);
    int n_inputs = model_inputs(path, in_names, in_types, MAX_IO, &err);
    if (n_inputs < 0) {
        kind = R_UNSUPPORTED;
        snprintf(reason, sizeof reason, "%s", err.msg);
        goto done;
    }
    for (int i = 0; i < 16; i++) {
        char sd[4096];
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, i);
        if (!file_exists(sd))
            break;
        if (load_set(sd, &sets[n_sets], &err) != KILN_OK) {
            n_sets++;
            kind = R_UNSUPPORTED;
            snprintf(reason, sizeof reason, "test data: %s", err.msg);
            goto done;
        }
        n_sets++;
    }
    if (n_sets == 0) {
        kind = R_UNSUPPORTED;
        snprintf(reason, sizeof reason, "no test data sets");
        goto done;
    }

    /* Retry loop: each "input k (what, 'name') must be a constant" error binds
     * that graph input to its test_data_set_0 value, then imports again. */
    kiln_onnx_options opts = {0};
    kiln_onnx_binding binds[MAX_IO];
    int nb = 0;
    kiln_status s;
    for (;;) {
        opts.bindings = binds;
        opts.n_bindings = nb;
        kiln_error_clear(&err);
        s = kiln_onnx_load_ex(path, &opts, &g, &err);
        const char *m = s == KILN_ERR_UNSUPPORTED ? strstr(err.msg, "') must be a constant") : NULL;
        if (!m || nb == MAX_IO || !bind_params)
            break;
        const char *q = m;
        while (q > err.msg && q[-1] != '\'')
            q--;
        char want[256];
        snprintf(want, sizeof want, "%.*s", (int)(m - q), q);
        int k = 0;
        while (k < n_inputs && strcmp(in_names[k], want) != 0)
            k++;
        bool dup = false;
        for (int b = 0; b < nb; b++)
            dup = dup || strcmp(binds[b].name, want) == 0;
        if (k >= n_inputs || k >= sets[0].n_in || dup)
            break; /* not a graph input with test data: report the error */
        binds[nb].name = in_names[k];
        binds[nb].shape = NULL;
        binds[nb].value = &sets[0].in[k];
        nb++;
        bound = true;
    }
    if (s != KILN_OK) {
        kind = R_UNSUPPORTED;
        snprintf(reason, sizeof reason, "%s: %s", kiln_status_str(s), err.msg);
        goto done;
    }
    s = use_graph ? compile_load(g, &mod, &err) : kiln_ref_executor_create(g, &ex, &err);
    if (s != KILN_OK) {
        kind = R_UNSUPPORTED;
        snprintf(reason, sizeof reason, "%s: %s", kiln_status_str(s), err.msg);
        goto done;
    }
    for (int si = 0; si < n_sets && kind == R_PASS; si++) {
        data_set *ds = &sets[si];
        int gi = mod ? kiln_module_num_inputs(mod) : kiln_graph_num_inputs(g);
        for (int i = 0; i < gi; i++) {
            const char *nm = "";
            if (mod)
                kiln_module_input_info(mod, i, &nm, NULL, NULL);
            else
                kiln_graph_input_info(g, i, &nm, NULL, NULL);
            int k = 0;
            while (k < n_inputs && strcmp(in_names[k], nm) != 0)
                k++;
            if (k >= ds->n_in) {
                kind = R_UNSUPPORTED;
                snprintf(reason, sizeof reason, "no test data for input '%s'", nm);
                break;
            }
            s = mod ? kiln_module_set_input(mod, i, &ds->in[k], &err)
                    : kiln_ref_executor_set_input(ex, i, &ds->in[k], &err);
            if (s != KILN_OK) {
                kind = R_UNSUPPORTED;
                snprintf(reason, sizeof reason, "set input: %s", err.msg);
                break;
            }
        }
        if (kind != R_PASS)
            break;
        s = mod ? kiln_module_run(mod, &err) : kiln_ref_executor_run(ex, &err);
        if (s != KILN_OK) {
            kind = R_UNSUPPORTED;
            snprintf(reason, sizeof reason, "run: %s: %s", kiln_status_str(s), err.msg);
            break;
        }
        if ((mod ? kiln_module_num_outputs(mod) : kiln_graph_num_outputs(g)) != ds->n_out) {
            kind = R_MISMATCH;
            snprintf(reason, sizeof reason, "%d outputs, the test expects %d",
                     kiln_graph_num_outputs(g), ds->n_out);
            break;
        }
        for (int k = 0; k < ds->n_out; k++) {
            const kiln_tensor *got =
                mod ? kiln_module_output(mod, k) : kiln_ref_executor_output(ex, k);
            if (!compare(got, &ds->out[k], k, reason, sizeof reason)) {
                kind = R_MISMATCH;
                break;
            }
        }
    }
    if (kind == R_PASS && bound)
        snprintf(reason, sizeof reason, "inputs the ops take as attributes were bound to their test values");
done:
    kiln_ref_executor_destroy(ex);
    kiln_module_destroy(mod);
    kiln_graph_destroy(g);
    for (int i = 0; i < n_sets; i++)
        free_set(&sets[i]);
    for (char *p = reason; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    int len = snprintf(line, sizeof line, "%d %s\n", (int)kind, reason);
    if (len > (int)sizeof line - 1)
        len = (int)sizeof line - 1;
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
}

/* ---- parent side ---------------------------------------------------------- */

static void finish(void *ctx, int index, char *out, size_t len, int status, bool timed_out,
                   double seconds)
{
    (void)seconds;
    model_result *m = &((model_result *)ctx)[index];
    if (timed_out) {
        m->kind = R_HANG;
        snprintf(m->reason, sizeof m->reason, "no result within the time limit");
    } else if (WIFSIGNALED(status)) {
        m->kind = R_CRASH;
        snprintf(m->reason, sizeof m->reason, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0) {
        m->kind = R_CRASH;
        snprintf(m->reason, sizeof m->reason, "child exited with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = 0;
        int k = atoi(out);
        const char *sp = strchr(out, ' ');
        m->kind = (k >= 0 && k < R_COUNT) ? (result_kind)k : R_CRASH;
        snprintf(m->reason, sizeof m->reason, "%s", sp ? sp + 1 : "");
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: onnx_conformance [--data DIR] [--jobs N] [--timeout S] [--filter SUBSTR]\n"
            "                        [--expected FILE] [--write-expected FILE] [--quiet]\n"
            "                        [--executor ref|graph] [--inputs bind|data]\n"
            "Runs the ONNX backend conformance suite through kiln's importer and reference\n"
            "executor (or, with --executor graph, compiled and run by the runtime). DIR\n"
            "defaults to /usr/share/libonnx-testdata/data (libonnx-testdata). --inputs data\n"
            "feeds every graph input as run-time data (as kiln check does) instead of\n"
            "binding the inputs kiln takes as attributes to their test values.\n");
}

int main(int argc, char **argv)
{
    const char *data = "/usr/share/libonnx-testdata/data";
    const char *expected = NULL, *write_expected = NULL, *filter = NULL;
    int jobs = 2;
    double timeout = 60;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--data") && v)
            data = argv[++i];
        else if (!strcmp(a, "--jobs") && v)
            jobs = atoi(argv[++i]);
        else if (!strcmp(a, "--timeout") && v)
            timeout = atof(argv[++i]);
        else if (!strcmp(a, "--expected") && v)
            expected = argv[++i];
        else if (!strcmp(a, "--write-expected") && v)
            write_expected = argv[++i];
        else if (!strcmp(a, "--filter") && v)
            filter = argv[++i];
        else if (!strcmp(a, "--quiet"))
            quiet = true;
        else if (!strcmp(a, "--inputs") && v && (!strcmp(v, "bind") || !strcmp(v, "data")))
            bind_params = !strcmp(argv[++i], "bind");
        else if (!strcmp(a, "--executor") && v && (!strcmp(v, "ref") || !strcmp(v, "graph")))
            use_graph = !strcmp(argv[++i], "graph");
        else {
            usage();
            return !strcmp(a, "--help") ? 0 : 2;
        }
    }
    char **names = NULL;
    int n = suite_list("onnx_conformance", data, filter, &names);
    if (n < 0)
        return 2;
    model_result *res = calloc((size_t)(n ? n : 1), sizeof *res);
    for (int i = 0; i < n; i++)
        res[i].name = names[i];
    if (suite_run(data, names, n, jobs, timeout, child_run, finish, res) != 0)
        return 2;

    int counts[R_COUNT] = {0};
    suite_outcome *o = calloc((size_t)(n ? n : 1), sizeof *o);
    for (int i = 0; i < n; i++) {
        counts[res[i].kind]++;
        o[i] = (suite_outcome){res[i].kind == R_PASS, result_names[res[i].kind], res[i].reason};
        if (!quiet || res[i].kind >= R_CRASH)
            printf("%-11s %-60s %s\n", result_names[res[i].kind], res[i].name, res[i].reason);
    }
    printf("\nonnx conformance: %d models: %d passed, %d mismatched, %d unsupported, %d crashed, "
           "%d hung\n",
           n, counts[R_PASS], counts[R_MISMATCH], counts[R_UNSUPPORTED], counts[R_CRASH],
           counts[R_HANG]);

    int rc = (counts[R_CRASH] || counts[R_HANG]) ? 1 : 0;
    if (expected && suite_check_expected("onnx_conformance", expected, names, o, n,
                                         filter != NULL, 20) != 0)
        rc = 1;
    if (write_expected &&
        suite_write_list("onnx_conformance", write_expected,
                         "# ONNX conformance models that kiln passes (written by onnx_conformance\n"
                         "# --write-expected). A model listed here that stops passing fails the "
                         "suite.\n",
                         names, o, n) != 0)
        rc = 2;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(res);
    free(o);
    return rc;
}
