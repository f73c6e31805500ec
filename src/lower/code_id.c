/* lower/code_id.c: the identity of this kiln's code (hash.h).
 *
 * Keys that outlive the process and name what kiln's code computed (the
 * pack memo's files on disk, util/packmemo.h) must change whenever that code
 * does, not only with KILN_VERSION: a packing routine that changes its layout
 * between two builds of one version would otherwise find the old layout. The
 * identity is the hash of the file that holds this function (libkiln.so, or
 * the executable kiln is linked into), read once per process: about 2 MB,
 * a millisecond. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/hash.h"

static char code_id[33];
static bool code_stable; /* the id hashes kiln's file (else this process's) */
static pthread_once_t code_once = PTHREAD_ONCE_INIT;

static bool hash_file(const char *path, kiln_hash *h)
{
    FILE *f = path && path[0] ? fopen(path, "rb") : NULL;
    if (!f)
        return false;
    size_t cap = 1 << 20; /* whole 1 MiB blocks: the hash's steps stay aligned */
    unsigned char *buf = malloc(cap);
    bool ok = buf != NULL;
    size_t n = 0, total = 0;
    while (ok && (n = fread(buf, 1, cap, f)) > 0) {
        kiln_hash_update(h, buf, n);
        total += n;
    }
    ok = ok && !ferror(f) && total > 0;
    free(buf);
    fclose(f);
    return ok;
}

static void compute(void)
{
    kiln_hash h;
    kiln_hash_init(&h, 0x636f6465ULL); /* "code" */
    Dl_info info;
    char exe[4096];
    const char *path = NULL;
    if (dladdr((void *)&compute, &info) && info.dli_fname && info.dli_fname[0] == '/')
        path = info.dli_fname;
    if (!path) { /* the main executable: dladdr may name it by argv[0] */
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k > 0) {
            exe[k] = 0;
            path = exe;
        }
    }
    code_stable = hash_file(path, &h);
    if (!code_stable) { /* unreadable: an id of this process alone */
        uint64_t r[2] = {(uint64_t)getpid(), (uint64_t)(uintptr_t)&h};
        kiln_hash_update(&h, r, sizeof r);
    }
    kiln_hash_hex(&h, code_id);
}

const char *kiln_code_id(void)
{
    pthread_once(&code_once, compute);
    return code_id;
}

bool kiln_code_id_stable(void)
{
    kiln_code_id();
    return code_stable;
}
