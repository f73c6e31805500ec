/* tests/onnx-backend/check_compiled.c: the ONNX backend conformance suite
 * checked the way a user checks a model, with `kiln check`, once per
 * executor:
 *
 *     kiln check MODEL/model.onnx --inputs input_*.pb --outputs output_*.pb
 *         [--executor ref]
 *
 * for every test_data_set_N of every model (Debian's libonnx-testdata:
 * node, pytorch-converted, pytorch-operator, simple). The claim it checks:
 * every valid graph compiles, so the default (compiled) executor passes every
 * model the reference executor passes, and no model leaves the compiled path
 * (its check says "executor: graph", or "executor: vm" for a model whose
 * shapes depend on run-time data: its static part compiled, its
 * data-dependent nodes on the VM, docs/VM.md). Nodes without a kernel
 * template run their reference kernels inside the compiled model
 * (docs/COMPILER.md).
 *
 * `kiln check` runs in-process: the CLI's own kiln_cmd_check (tools/kiln is
 * linked in) in a forked child per model, with its output captured; no
 * process is exec'ed per check, and a crash or a hang in one model is
 * recorded as such. Compiled models come from the kiln model cache
 * ($XDG_CACHE_HOME/kiln or ~/.cache/kiln), so a second run is fast.
 *
 * Every graph input is run-time data, as for a user: this is the suite's
 * honest count (onnx_conformance binds the inputs that kiln takes as
 * attributes to their test values instead).
 *
 * Output: per model "ref" and "graph" verdicts (pass, mismatch, error, crash,
 * hung) with the reason; a summary (ref passes N, graph passes M); and every
 * model where the two differ. Exit status 1 when a model passes on ref but
 * not compiled, or a check crashed or hung; 0 otherwise.
 *
 * --expected FILE: the regression list (tests/onnx-backend/expected-cli.txt),
 * the models whose compiled check passes: one that stops passing fails the
 * run (exit 1); newly passing ones are reported. --write-expected FILE
 * writes the list of this run's compiled passes.
 *
 * usage: onnx_check_compiled [--data DIR] [--jobs N] [--timeout S]
 *                            [--filter SUBSTR] [--list FILE] [--quiet]
 *                            [--expected FILE] [--write-expected FILE] */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "suite_runner.h"

int kiln_cmd_check(int argc, char **argv); /* tools/kiln/cmd_check.c */

enum { V_PASS, V_MISMATCH, V_ERROR, V_CRASH, V_HANG, V_COUNT };
static const char *const verdicts[V_COUNT] = {"pass", "mismatch", "error", "crash", "hung"};

#define REASON 400
#define MAX_FILES 64

typedef struct model_result {
    char *name;
    int v[2]; /* ref, graph */
    char why[2][REASON];
    int fallbacks; /* "kiln: N nodes run their reference kernel" in the graph check */
    bool vm;       /* the graph check ran on the VM (data-dependent shapes) */
    double seconds;
} model_result;

/* ---- child: the two checks of one model ------------------------------------- */

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Runs kiln_cmd_check(argv) with stdout and stderr captured into out
 * (NUL-terminated, truncated to size); returns its exit status. */
static int captured_check(int argc, char **argv, char *out, size_t size)
{
    fflush(stdout);
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved1 = dup(1), saved2 = dup(2);
    if (!tmp || saved1 < 0 || saved2 < 0) {
        snprintf(out, size, "runner: cannot capture output: %s", strerror(errno));
        return 2;
    }
    dup2(fileno(tmp), 1);
    dup2(fileno(tmp), 2);
    int rc = kiln_cmd_check(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved1, 1);
    dup2(saved2, 2);
    close(saved1);
    close(saved2);
    rewind(tmp);
    size_t n = fread(out, 1, size - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return rc;
}

/* The line of `text` that says why a check failed: an error, else the first
 * mismatch. */
static void reason(const char *text, char *why, size_t size)
{
    const char *p = strstr(text, "kiln: error:");
    if (!p)
        p = strstr(text, "MISMATCH");
    if (!p)
        p = text;
    while (p > text && p[-1] != '\n')
        p--;
    size_t n = strcspn(p, "\n");
    snprintf(why, size, "%.*s", (int)n, p);
}

static void child_run(const char *dir, int fd)
{
    static char text[1 << 16];
    char model[4096], line[2 * REASON + 64];
    int v[2] = {V_PASS, V_PASS}, fallbacks = 0;
    bool vm = false;
    char why[2][REASON] = {"", ""};
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    int sets = 0;
    for (int s = 0; s < 64; s++) {
        char sd[4096];
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, s);
        if (!exists(sd))
            break;
        sets++;
        static char files[2][MAX_FILES][4200];
        int n[2] = {0, 0};
        for (int io = 0; io < 2; io++)
            for (int k = 0; k < MAX_FILES; k++) {
                snprintf(files[io][k], sizeof files[io][k], "%s/%s_%d.pb", sd,
                         io ? "output" : "input", k);
                if (!exists(files[io][k]))
                    break;
                n[io]++;
            }
        for (int e = 0; e < 2; e++) {
            if (v[e] != V_PASS)
                continue; /* the first failing set says why */
            char *argv[2 * MAX_FILES + 16];
            int argc = 0;
            argv[argc++] = "check";
            argv[argc++] = model;
            if (n[0]) /* a model with no inputs takes no --inputs */
                argv[argc++] = "--inputs";
            for (int k = 0; k < n[0]; k++)
                argv[argc++] = files[0][k];
            argv[argc++] = "--outputs";
            for (int k = 0; k < n[1]; k++)
                argv[argc++] = files[1][k];
            argv[argc++] = "--threads";
            argv[argc++] = "1";
            if (e == 0) {
                argv[argc++] = "--executor";
                argv[argc++] = "ref";
            }
            argv[argc] = NULL;
            int rc = captured_check(argc, argv, text, sizeof text);
            if (e == 1) {
                const char *fb = strstr(text, "kiln: ");
                int k;
                if (fb && sscanf(fb, "kiln: %d node", &k) == 1)
                    fallbacks = k;
            }
            if (e == 1 && strstr(text, "executor: vm ("))
                vm = true; /* data-dependent shapes: the VM, its static part compiled */
            if (rc == 0 && e == 1 && !strstr(text, "executor: graph (") && !vm) {
                v[e] = V_ERROR;
                snprintf(why[e], REASON, "left the compiled path: %s", text);
                continue;
            }
            if (rc != 0) {
                v[e] = rc == 1 ? V_MISMATCH : V_ERROR;
                char r[REASON - 16];
                reason(text, r, sizeof r);
                snprintf(why[e], REASON, "set %d: %s", s, r);
            }
        }
    }
    if (!sets) {
        v[0] = v[1] = V_ERROR;
        snprintf(why[0], REASON, "no test data sets");
        snprintf(why[1], REASON, "no test data sets");
    }
    for (int e = 0; e < 2; e++)
        for (char *p = why[e]; *p; p++)
            if (*p == '\t' || *p == '\n')
                *p = ' ';
    int len = snprintf(line, sizeof line, "%d %d %d %d %s\t%s\n", v[0], v[1], fallbacks, (int)vm,
                       why[0], why[1]);
    if (len > (int)sizeof line - 1)
        len = (int)sizeof line - 1;
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
}

/* ---- parent ------------------------------------------------------------------ */

static void finish(void *ctx, int index, char *out, size_t len, int status, bool timed_out,
                   double seconds)
{
    model_result *m = &((model_result *)ctx)[index];
    m->seconds = seconds;
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0) {
        int v = timed_out ? V_HANG : V_CRASH;
        m->v[0] = m->v[1] = v;
        snprintf(m->why[0], REASON, "%s",
                 timed_out ? "no result within the time limit"
                 : WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
                                       : "the child exited without a result");
        snprintf(m->why[1], REASON, "%s", m->why[0]);
        return;
    }
    int a = 0, b = 0, f = 0, vm = 0, off = 0;
    sscanf(out, "%d %d %d %d %n", &a, &b, &f, &vm, &off);
    m->vm = vm != 0;
    m->v[0] = a >= 0 && a < V_COUNT ? a : V_CRASH;
    m->v[1] = b >= 0 && b < V_COUNT ? b : V_CRASH;
    m->fallbacks = f;
    char *tab = strchr(out + off, '\t'), *nl = strchr(out + off, '\n');
    if (nl)
        *nl = '\0';
    if (tab)
        *tab = '\0';
    snprintf(m->why[0], REASON, "%s", out + off);
    snprintf(m->why[1], REASON, "%s", tab ? tab + 1 : "");
}

static bool listed(char **list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], name))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *data = "/usr/share/libonnx-testdata/data", *filter = NULL, *list_file = NULL;
    const char *expected = NULL, *write_expected = NULL;
    int jobs = 2;
    double timeout = 300;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--data") && v)
            data = argv[++i];
        else if (!strcmp(a, "--jobs") && v)
            jobs = atoi(argv[++i]);
        else if (!strcmp(a, "--timeout") && v)
            timeout = atof(argv[++i]);
        else if (!strcmp(a, "--filter") && v)
            filter = argv[++i];
        else if (!strcmp(a, "--list") && v)
            list_file = argv[++i];
        else if (!strcmp(a, "--expected") && v)
            expected = argv[++i];
        else if (!strcmp(a, "--write-expected") && v)
            write_expected = argv[++i];
        else if (!strcmp(a, "--quiet"))
            quiet = true;
        else {
            fprintf(stderr, "usage: onnx_check_compiled [--data DIR] [--jobs N] [--timeout S]\n"
                            "                           [--filter SUBSTR] [--list FILE] "
                            "[--quiet]\n"
                            "                           [--expected FILE] "
                            "[--write-expected FILE]\n");
            return !strcmp(a, "--help") ? 0 : 2;
        }
    }
    jobs = jobs < 1 ? 1 : jobs > 64 ? 64 : jobs;
    /* --list FILE: only the models named in it (one per line, # comments) */
    char **only = NULL;
    int n_only = 0;
    if (list_file) {
        FILE *f = fopen(list_file, "r");
        if (!f) {
            fprintf(stderr, "onnx_check_compiled: %s: %s\n", list_file, strerror(errno));
            return 2;
        }
        char line[1024], nm[1024];
        while (fgets(line, sizeof line, f))
            if (line[0] != '#' && sscanf(line, "%1023s", nm) == 1) {
                only = realloc(only, sizeof *only * (size_t)(n_only + 1));
                only[n_only++] = strdup(nm);
            }
        fclose(f);
    }
    char **names = NULL;
    int n_all = suite_list("onnx_check_compiled", data, filter, &names), n = 0;
    if (n_all < 0)
        return 2;
    for (int i = 0; i < n_all; i++) {
        if (!only || listed(only, n_only, names[i]))
            names[n++] = names[i];
        else
            free(names[i]);
    }
    model_result *res = calloc((size_t)(n ? n : 1), sizeof *res);
    for (int i = 0; i < n; i++)
        res[i].name = names[i];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (suite_run(data, names, n, jobs, timeout, child_run, finish, res) != 0)
        return 2;
    double total = suite_seconds(&t0);

    int pass[2] = {0, 0}, crashed = 0, lost = 0, with_fb = 0, fb_nodes = 0, on_vm = 0;
    suite_outcome *o = calloc((size_t)(n ? n : 1), sizeof *o);
    for (int i = 0; i < n; i++) {
        model_result *m = &res[i];
        for (int e = 0; e < 2; e++)
            pass[e] += m->v[e] == V_PASS;
        on_vm += m->vm && m->v[1] == V_PASS;
        crashed += m->v[0] >= V_CRASH || m->v[1] >= V_CRASH;
        lost += m->v[0] == V_PASS && m->v[1] != V_PASS;
        with_fb += m->fallbacks > 0;
        fb_nodes += m->fallbacks;
        o[i] = (suite_outcome){m->v[1] == V_PASS, verdicts[m->v[1]], m->why[1]};
        bool same = m->v[0] && m->v[1] && !strcmp(m->why[0], m->why[1]);
        if (!quiet)
            printf("ref %-8s graph %-8s %-58s %5.1fs %s%s%s\n", verdicts[m->v[0]],
                   verdicts[m->v[1]], m->name, m->seconds, m->v[0] ? m->why[0] : "",
                   m->v[0] && m->v[1] && !same ? " | graph: " : "",
                   m->v[1] && !same ? m->why[1] : "");
    }
    printf("\nwhere the executors differ:\n");
    for (int i = 0; i < n; i++) {
        model_result *m = &res[i];
        if ((m->v[0] == V_PASS) != (m->v[1] == V_PASS))
            printf("  %-58s ref %s, graph %s: %s\n", m->name, verdicts[m->v[0]],
                   verdicts[m->v[1]], m->v[1] != V_PASS ? m->why[1] : m->why[0]);
    }
    printf("\nkiln check on %d models: ref passes %d, graph (compiled) passes %d (%d of them "
           "on the VM: shapes set by run-time data); %d pass on ref but not compiled; %d "
           "crashed or hung; %d compiled models run %d nodes on their reference kernels; %.0f s "
           "with %d jobs\n",
           n, pass[0], pass[1], on_vm, lost, crashed, with_fb, fb_nodes, total, jobs);
    int regress = expected ? suite_check_expected("onnx_check_compiled", expected, names, o, n,
                                                  filter || list_file, 40)
                           : 0;
    if (write_expected &&
        suite_write_list("onnx_check_compiled", write_expected,
                         "# ONNX conformance models whose `kiln check` passes compiled, every "
                         "input\n# as run-time data (written by onnx_check_compiled "
                         "--write-expected). A model\n# listed here that stops passing fails "
                         "onnx-backend/check-compiled.\n",
                         names, o, n) != 0)
        regress++;
    for (int i = 0; i < n; i++)
        free(names[i]);
    for (int i = 0; i < n_only; i++)
        free(only[i]);
    free(only);
    free(names);
    free(res);
    free(o);
    return lost || crashed || regress ? 1 : 0;
}
