/* tests/support/test_support.c */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/rng.h"

kiln_shape ks(int rank, ...)
{
    kiln_shape s = {.rank = rank};
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dims[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

void kt_assert_allclose(const float *a, const float *b, int64_t n, double rtol, double atol,
                        const char *file, int line)
{
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= atol + rtol * fabs((double)b[i]))) {
            print_error("%s:%d: mismatch at index %lld: got %.9g, expected %.9g\n", file, line,
                           (long long)i, (double)a[i], (double)b[i]);
            _fail(file, line);
        }
    }
}

void kt_fill_random(float *dst, int64_t n, uint64_t seed, float lo, float hi)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        dst[i] = kiln_rng_uniformf(&r, lo, hi);
}

int kt_run_cli(const char *args, char **output)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", KILN_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1024 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, p);
        if (got == 0)
            break;
        n += got;
    }
    buf[n] = 0;
    int st = pclose(p);
    if (output)
        *output = buf;
    else
        free(buf);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

const char *kt_fmt(const char *fmt, ...)
{
    static char buf[8][2048];
    static int k;
    char *b = buf[k++ & 7];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof buf[0], fmt, ap);
    va_end(ap);
    return b;
}

/* Only its address matters: it marks where the must-not-contain strings begin. */
const char kt_lacks[] = "";

char *kt_expect_cli(int want_rc, const char *args, const char *const *strings, const char *file,
                    int line)
{
    char *out = NULL;
    int rc = kt_run_cli(args, &out);
    const char *why = NULL, *what = NULL;
    char status[64];
    if (rc != want_rc) {
        snprintf(status, sizeof status, "exit %d, expected %d", rc, want_rc);
        why = status;
    }
    int lacking = 0;
    for (const char *const *s = strings; !why && *s; s++) {
        if (*s == kt_lacks) {
            lacking = 1;
        } else if ((strstr(out, *s) != NULL) == lacking) {
            why = lacking ? "unexpected" : "missing";
            what = *s;
        }
    }
    if (why) {
        print_error("%s:%d: kiln %s: %s%s%s%s; output:\n%s\n", file, line, args, why,
                    what ? " \"" : "", what ? what : "", what ? "\"" : "", out ? out : "");
        free(out);
        _fail(file, line);
    }
    return out;
}

char *kt_tempdir(void)
{
    char tmpl[] = "/tmp/kiln-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

void kt_rmdir(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
}

static char **exit_dirs;
static int n_exit_dirs;
static pid_t exit_pid; /* a forked child that exits leaves them to its parent */

static void remove_exit_dirs(void)
{
    for (int i = 0; i < n_exit_dirs && getpid() == exit_pid; i++) {
        kt_rmdir(exit_dirs[i]);
        free(exit_dirs[i]);
    }
    free(exit_dirs);
    exit_dirs = NULL;
    n_exit_dirs = 0;
}

const char *kt_tempdir_until_exit(void)
{
    char *d = kt_tempdir();
    char **grown = d ? realloc(exit_dirs, sizeof *grown * (size_t)(n_exit_dirs + 1)) : NULL;
    if (!grown) {
        free(d);
        return NULL;
    }
    if (!exit_dirs) {
        exit_pid = getpid();
        atexit(remove_exit_dirs);
    }
    exit_dirs = grown;
    exit_dirs[n_exit_dirs++] = d;
    return d;
}

char *kt_dir;

int kt_dir_setup(void **state)
{
    (void)state;
    kt_dir = kt_tempdir();
    return kt_dir ? 0 : -1;
}

int kt_dir_teardown(void **state)
{
    (void)state;
    kt_rmdir(kt_dir);
    free(kt_dir);
    kt_dir = NULL;
    return 0;
}
