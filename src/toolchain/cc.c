/* toolchain/cc.c: finding and running the system C compiler.
 *
 * Compile jobs run as child processes (posix_spawnp), at most `parallel` at
 * once; each child's stderr goes to its own log file, which is quoted in the
 * error message when the child fails. Nothing here exits: a missing compiler
 * or a failing one is a status with a message. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lower/hash.h"
#include "toolchain/toolchain.h"
#include "util/error.h"

extern char **environ;

void kiln_cc_free(kiln_cc *cc)
{
    for (int i = 0; i < cc->argc; i++)
        free(cc->argv[i]);
    cc->argc = 0;
}

/* Whether `name` is an executable on PATH (or a path). */
static bool on_path(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char buf[4096];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, path, len);
            buf[len] = '/';
            strcpy(buf + len + 1, name);
            if (access(buf, X_OK) == 0)
                return true;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    return false;
}

/* Spawns argv with stdout/stderr to `log` (NULL: /dev/null); returns the pid
 * or -1. posix_spawnp, not fork: the child shares the parent's memory until
 * it execs, so a large parent (a Python process holding a model's weights,
 * building a VM's next shape class) does not copy its page tables per job. */
static pid_t spawn(char *const *argv, const char *log)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    pid_t pid = -1;
    if (posix_spawn_file_actions_addopen(&fa, 1, log ? log : "/dev/null",
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644) == 0 &&
        posix_spawn_file_actions_adddup2(&fa, 1, 2) == 0 &&
        posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

static int wait_status(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The first ~700 bytes of a log, for messages. */
static void read_log(const char *log, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = log ? fopen(log, "r") : NULL;
    if (!f)
        return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
}

/* The --version output of the compiler commands this process ran. */
#define VERSIONS 4
static pthread_mutex_t versions_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char cmd[1024], ver[512];
} versions[VERSIONS];
static int n_versions;

static bool version_known(const char *cmd, char *ver, size_t cap)
{
    bool found = false;
    pthread_mutex_lock(&versions_mu);
    for (int i = 0; i < n_versions && !found; i++)
        if (strcmp(versions[i].cmd, cmd) == 0) {
            snprintf(ver, cap, "%s", versions[i].ver);
            found = true;
        }
    pthread_mutex_unlock(&versions_mu);
    return found;
}

static void version_remember(const char *cmd, const char *ver)
{
    pthread_mutex_lock(&versions_mu);
    if (n_versions < VERSIONS) {
        snprintf(versions[n_versions].cmd, sizeof versions[n_versions].cmd, "%s", cmd);
        snprintf(versions[n_versions].ver, sizeof versions[n_versions].ver, "%s", ver);
        n_versions++;
    }
    pthread_mutex_unlock(&versions_mu);
}

kiln_status kiln_cc_init(kiln_cc *cc, const kiln_target *target, kiln_error *err)
{
    memset(cc, 0, sizeof *cc);
    const char *env = getenv("CC");
    char tried[256] = "";
    if (env && *env) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", env);
        for (char *tok = strtok(tmp, " \t"); tok && cc->argc < KILN_CC_MAX_ARGS - 8;
             tok = strtok(NULL, " \t"))
            cc->argv[cc->argc++] = strdup(tok);
        if (cc->argc == 0 || !on_path(cc->argv[0])) {
            kiln_cc_free(cc);
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "C compiler $CC='%s' not found: set CC to gcc or clang", env);
        }
    } else {
        static const char *const names[] = {"cc", "gcc", "clang"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", i ? ", " : "",
                     names[i]);
            if (on_path(names[i])) {
                cc->argv[cc->argc++] = strdup(names[i]);
                break;
            }
        }
        if (cc->argc == 0)
            return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                               "no C compiler found (tried $CC, %s on PATH): install gcc or "
                               "clang, or set CC",
                               tried);
    }
    for (int i = 0; i < cc->argc; i++)
        if (!cc->argv[i]) {
            kiln_cc_free(cc);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    /* identity: the first line of --version (asked once per process and
     * command: a VM builds a class per input shape) */
    char cmd[1024] = "", ver[512];
    for (int i = 0; i < cc->argc; i++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", cc->argv[i]);
    int rc = version_known(cmd, ver, sizeof ver) ? 0 : -1;
    if (rc != 0) {
        char log[] = "/tmp/kiln-ccver-XXXXXX";
        int fd = mkstemp(log);
        if (fd >= 0)
            close(fd);
        char *argv[KILN_CC_MAX_ARGS + 2];
        int a = 0;
        for (int i = 0; i < cc->argc; i++)
            argv[a++] = cc->argv[i];
        argv[a++] = "--version";
        argv[a] = NULL;
        pid_t pid = spawn(argv, fd >= 0 ? log : NULL);
        rc = pid < 0 ? -1 : wait_status(pid);
        read_log(fd >= 0 ? log : NULL, ver, sizeof ver);
        if (fd >= 0)
            unlink(log);
        if (rc == 0)
            version_remember(cmd, ver);
    }
    if (rc != 0) {
        kiln_status s = kiln_errorf(err, KILN_ERR_NOT_FOUND,
                                    "C compiler '%s' does not run (%s --version exited %d): %s",
                                    cc->argv[0], cc->argv[0], rc, ver);
        kiln_cc_free(cc);
        return s;
    }
    char *nl = strchr(ver, '\n');
    if (nl)
        *nl = 0;
    snprintf(cc->id, sizeof cc->id, "%.255s", ver);
    const char *isa = "";
    if (target->isa == KILN_TARGET_AVX512)
        isa = " -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c "
              "-mprefer-vector-width=512";
    else if (target->isa == KILN_TARGET_AVX2)
        isa = " -mavx2 -mfma -mf16c";
    snprintf(cc->flags, sizeof cc->flags, "-O3 -fPIC -std=gnu11 -fno-math-errno -Wall -Wextra%s", isa);
    kiln_hash h;
    kiln_hash_init(&h, 1);
    kiln_hash_str(&h, cc->id);
    /* $CC's own arguments (CC="gcc -fno-tree-vectorize") change the objects
     * as the flags do */
    for (int i = 1; i < cc->argc; i++)
        kiln_hash_str(&h, cc->argv[i]);
    kiln_hash_str(&h, cc->flags);
    char hh[33];
    kiln_headers_hash(hh);
    kiln_hash_str(&h, hh);
    kiln_hash_str(&h, KILN_VERSION);
    kiln_hash_hex(&h, cc->key);
    return KILN_OK;
}

/* argv for one compile: cc flags -I dir -c src -o obj */
static int compile_argv(const kiln_cc *cc, char *flagbuf, const char *inc, const char *src,
                        const char *obj, char **argv)
{
    int a = 0;
    for (int i = 0; i < cc->argc; i++)
        argv[a++] = cc->argv[i];
    for (char *tok = strtok(flagbuf, " "); tok && a < 60; tok = strtok(NULL, " "))
        argv[a++] = tok;
    argv[a++] = "-I";
    argv[a++] = (char *)inc;
    argv[a++] = "-c";
    argv[a++] = (char *)src;
    argv[a++] = "-o";
    argv[a++] = (char *)obj;
    argv[a] = NULL;
    return a;
}

kiln_status kiln_cc_compile(const kiln_cc *cc, const kiln_cc_job *jobs, int n, int parallel,
                            const char *include_dir, kiln_error *err)
{
    if (parallel < 1)
        parallel = 1;
    pid_t *pids = calloc((size_t)(n ? n : 1), sizeof(pid_t));
    if (!pids)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int next = 0, running = 0, failed = -1, fail_rc = 0;
    while ((next < n && failed < 0) || running > 0) {
        while (running < parallel && next < n && failed < 0) {
            char flagbuf[512];
            snprintf(flagbuf, sizeof flagbuf, "%s", cc->flags);
            char *argv[72];
            compile_argv(cc, flagbuf, include_dir, jobs[next].src, jobs[next].obj, argv);
            pids[next] = spawn(argv, jobs[next].log);
            if (pids[next] < 0) {
                failed = next;
                fail_rc = -1;
                break;
            }
            next++;
            running++;
        }
        if (running == 0)
            break;
        int st;
        pid_t p = wait(&st);
        if (p < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < next; i++)
            if (pids[i] == p) {
                running--;
                int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
                if (rc != 0 && failed < 0) {
                    failed = i;
                    fail_rc = rc;
                }
                pids[i] = 0;
            }
    }
    free(pids);
    if (failed >= 0) {
        char log[700];
        read_log(jobs[failed].log, log, sizeof log);
        return kiln_errorf(err, KILN_ERR_IO, "%s failed on %s (exit %d)%s%s", cc->argv[0],
                           jobs[failed].src, fail_rc, log[0] ? ":\n" : "", log);
    }
    return KILN_OK;
}

kiln_status kiln_cc_link(const kiln_cc *cc, const char *const *objs, int n, const char *out,
                         const char *log, kiln_error *err)
{
    char **argv = malloc(sizeof(char *) * (size_t)(n + cc->argc + 8));
    if (!argv)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int a = 0;
    for (int i = 0; i < cc->argc; i++)
        argv[a++] = cc->argv[i];
    argv[a++] = "-shared";
    argv[a++] = "-o";
    argv[a++] = (char *)out;
    for (int i = 0; i < n; i++)
        argv[a++] = (char *)objs[i];
    argv[a++] = "-lm";
    argv[a] = NULL;
    pid_t pid = spawn(argv, log);
    free(argv);
    int rc = pid < 0 ? -1 : wait_status(pid);
    if (rc != 0) {
        char msg[700];
        read_log(log, msg, sizeof msg);
        return kiln_errorf(err, KILN_ERR_IO, "linking %s failed (%s exit %d)%s%s", out,
                           cc->argv[0], rc, msg[0] ? ":\n" : "", msg);
    }
    return KILN_OK;
}
