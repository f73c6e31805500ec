/* tests/onnx-backend/suite_runner.c: see suite_runner.h. */
#include "suite_runner.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_JOBS 64

double suite_seconds(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int suite_list(const char *prog, const char *data, const char *filter, char ***names_out)
{
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator",
                                         "simple"};
    char **names = NULL;
    int n = 0, cap = 0;
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", data, suites[s]);
        DIR *d = opendir(p);
        if (!d) {
            fprintf(stderr, "%s: %s: %s (install libonnx-testdata)\n", prog, p, strerror(errno));
            for (int i = 0; i < n; i++)
                free(names[i]);
            free(names);
            return -1;
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            char nm[1024];
            snprintf(nm, sizeof nm, "%s/%s", suites[s], e->d_name);
            if (filter && !strstr(nm, filter))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                char **grown = realloc(names, sizeof *names * (size_t)cap);
                if (!grown)
                    break;
                names = grown;
            }
            names[n++] = strdup(nm);
        }
        closedir(d);
    }
    if (n)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    *names_out = names;
    return n;
}

typedef struct running {
    pid_t pid;
    int fd, index;
    struct timespec start;
    char buf[4096];
    size_t len;
} running;

static void reap(running *r, bool timed_out, suite_done_fn done, void *ctx)
{
    int status = 0;
    if (timed_out)
        kill(r->pid, SIGKILL);
    waitpid(r->pid, &status, 0);
    r->buf[r->len] = '\0';
    done(ctx, r->index, r->buf, r->len, status, timed_out, suite_seconds(&r->start));
    close(r->fd);
    r->pid = 0;
}

int suite_run(const char *data, char *const *names, int n, int jobs, double timeout,
              suite_child_fn child, suite_done_fn done, void *ctx)
{
    jobs = jobs < 1 ? 1 : jobs > MAX_JOBS ? MAX_JOBS : jobs;
    running *run = calloc((size_t)jobs, sizeof *run);
    if (!run) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    int next = 0, active = 0;
    while (next < n || active > 0) {
        while (active < jobs && next < n) {
            int pfd[2];
            if (pipe(pfd) != 0) {
                perror("pipe");
                free(run);
                return 2;
            }
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                free(run);
                return 2;
            }
            if (pid == 0) {
                close(pfd[0]);
                char dir[4096];
                snprintf(dir, sizeof dir, "%s/%s", data, names[next]);
                child(dir, pfd[1]);
                close(pfd[1]);
                _exit(0);
            }
            close(pfd[1]);
            int slot = 0;
            while (run[slot].pid)
                slot++;
            run[slot] = (running){.pid = pid, .fd = pfd[0], .index = next};
            clock_gettime(CLOCK_MONOTONIC, &run[slot].start);
            next++;
            active++;
        }
        struct pollfd pf[MAX_JOBS];
        int map[MAX_JOBS], np = 0;
        for (int j = 0; j < jobs; j++)
            if (run[j].pid) {
                pf[np].fd = run[j].fd;
                pf[np].events = POLLIN;
                map[np++] = j;
            }
        poll(pf, (nfds_t)np, 100);
        for (int q = 0; q < np; q++) {
            running *r = &run[map[q]];
            if (pf[q].revents & (POLLIN | POLLHUP)) {
                ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
                if (got > 0) {
                    r->len += (size_t)got;
                    continue;
                }
                reap(r, false, done, ctx);
                active--;
            } else if (suite_seconds(&r->start) > timeout) {
                reap(r, true, done, ctx);
                active--;
            }
        }
    }
    free(run);
    return 0;
}

int suite_check_expected(const char *prog, const char *path, char *const *names,
                         const suite_outcome *o, int n, bool subset, int show_new)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return 1;
    }
    bool *listed = calloc((size_t)(n ? n : 1), sizeof *listed);
    char line[1024], nm[1024];
    int regress = 0, newly = 0, n_expected = 0;
    while (listed && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%1023s", nm) != 1)
            continue;
        n_expected++;
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (!strcmp(names[i], nm))
                found = i;
        if (found < 0 && !subset) {
            printf("regression: %s is in the expected list but not in the suite\n", nm);
            regress++;
        } else if (found >= 0 && !o[found].pass) {
            printf("regression: %s was passing, now %s: %s\n", nm, o[found].verdict,
                   o[found].why);
            regress++;
        }
        if (found >= 0)
            listed[found] = true;
    }
    fclose(f);
    for (int i = 0; i < n && listed; i++)
        if (o[i].pass && !listed[i]) {
            if (newly < show_new)
                printf("newly passing: %s (update %s)\n", names[i], path);
            newly++;
        }
    printf("expected list: %d models expected to pass, %d regressions, %d newly passing\n",
           n_expected, regress, newly);
    bool ok = listed != NULL;
    free(listed);
    return ok ? regress : regress + 1;
}

int suite_write_list(const char *prog, const char *path, const char *header,
                     char *const *names, const suite_outcome *o, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return 1;
    }
    fputs(header, f);
    for (int i = 0; i < n; i++)
        if (o[i].pass)
            fprintf(f, "%s\n", names[i]);
    return fclose(f) == 0 ? 0 : 1;
}
