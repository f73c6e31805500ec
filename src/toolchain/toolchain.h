/* toolchain/toolchain.h: the system C compiler, the object cache, linking.
 *
 * The compiler is $CC (which may carry arguments, e.g. "ccache gcc"), else
 * the first of cc, gcc, clang found on PATH. Kernels compile with
 * -O3 -fPIC -std=gnu11 -fno-math-errno plus the target's ISA flags, in
 * parallel, each object cached under <cache>/objects/<hash>.o where the hash
 * covers the source, the flags, the compiler's identity and the embedded
 * headers; the link puts kernels, model and weights into one shared object.
 * Toolchain only: what to compile is the driver's (src/driver).
 */
#ifndef KILN_TOOLCHAIN_TOOLCHAIN_H
#define KILN_TOOLCHAIN_TOOLCHAIN_H

#include <stddef.h>
#include <time.h>

#include "kiln/kiln.h"
#include "pass/pass.h"

typedef struct kiln_embedded_file {
    const char *name; /* relative path under include/ */
    const unsigned char *data;
    size_t size;
} kiln_embedded_file;

extern const kiln_embedded_file kiln_embedded_headers[];
extern const int kiln_embedded_header_count;

#define KILN_CC_MAX_ARGS 16

typedef struct kiln_cc {
    char *argv[KILN_CC_MAX_ARGS]; /* the compiler command (malloc'ed strings) */
    int argc;
    char id[256];                 /* first line of `cc --version` */
    char flags[512];              /* the flags every kernel gets */
    char key[33];                 /* hash of id + flags + embedded headers */
} kiln_cc;

/* Finds the compiler and its identity, and sets the flags for `target`. */
kiln_status kiln_cc_init(kiln_cc *cc, const kiln_target *target, kiln_error *err);
void kiln_cc_free(kiln_cc *cc);

/* One compile job: source file -> object file. */
typedef struct kiln_cc_job {
    const char *src;
    const char *obj;
    const char *log;    /* where the compiler's stderr goes */
} kiln_cc_job;

/* Runs the jobs, at most `jobs` at a time. On failure the message names the
 * file and quotes the compiler's stderr. */
kiln_status kiln_cc_compile(const kiln_cc *cc, const kiln_cc_job *jobs, int n, int parallel,
                            const char *include_dir, kiln_error *err);
/* Links objects into a shared object. */
kiln_status kiln_cc_link(const kiln_cc *cc, const char *const *objs, int n, const char *out,
                         const char *log, kiln_error *err);

/* ---- a build workspace (objcache.c) ----------------------------------------- */
/* One build's private directory (with the embedded headers), the object
 * cache and the final link. Kernels are cached by hash(compiler key,
 * source); other sources (model.c, weights.S) always compile. */
typedef struct kiln_tc_build kiln_tc_build;

kiln_status kiln_tc_begin(const kiln_target *tg, const char *cache_dir, kiln_tc_build **out,
                          kiln_error *err);
/* Removes the private directory and frees. NULL is a no-op. */
void kiln_tc_end(kiln_tc_build *b);
const char *kiln_tc_dir(const kiln_tc_build *b);
const kiln_cc *kiln_tc_cc(const kiln_tc_build *b);
/* A kernel source: found in the object cache, or written out and queued.
 * hex receives its cache key (part of the build id). */
kiln_status kiln_tc_add_kernel(kiln_tc_build *b, const char *name, const char *source,
                               char hex[33], kiln_error *err);
/* How many kernels the cache had. */
int kiln_tc_cached(const kiln_tc_build *b);
/* A source that always compiles (written under the workspace as `name`). */
kiln_status kiln_tc_add_source(kiln_tc_build *b, const char *name, const char *source,
                               kiln_error *err);
/* <cache>/models/<build_id>.so (directory created); malloc'ed. */
char *kiln_tc_model_path(const kiln_tc_build *b, const char *build_id, kiln_error *err);
/* A regular, non-empty file exists at path. */
bool kiln_tc_have(const char *path);
/* ---- the bound on <cache>/models (modelcache.c) ---- */
/* Marks a cached model used now (its mtime). */
void kiln_tc_touch(const char *path);
/* $KILN_MODEL_CACHE_MB in bytes (default 4096 MB). */
int64_t kiln_tc_model_cache_limit(void);
/* Deletes the least recently used .so, .w and .pm files beside `keep` (never
 * it, nor any whose mtime is `since` or later) until they all fit `limit`
 * bytes, and the temporary files (.tmp<pid>, .tmp-<pid>) of processes gone
 * or a day old; returns how many it deleted. */
int kiln_tc_prune_models(const char *keep, time_t since, int64_t limit);
/* Compiles what is queued (`parallel` at a time; <= 0: the cores), links
 * everything into out_path (written beside and renamed). */
kiln_status kiln_tc_link(kiln_tc_build *b, const char *out_path, int parallel, kiln_error *err);
/* Moves a file (copy + unlink across file systems). */
kiln_status kiln_tc_move_file(const char *from, const char *to, kiln_error *err);

/* ---- files ---------------------------------------------------------------- */
/* mkdir -p */
kiln_status kiln_mkdirs(const char *path, kiln_error *err);
/* Removes a directory tree (best effort). */
void kiln_rmtree(const char *path);
kiln_status kiln_write_text(const char *path, const char *text, kiln_error *err);
/* Copies a file (used to publish cached objects and models). */
kiln_status kiln_copy_file(const char *from, const char *to, kiln_error *err);
/* The cache directory: opts value, $XDG_CACHE_HOME/kiln, ~/.cache/kiln; malloc'ed. */
char *kiln_cache_dir(const char *configured);
/* Writes the embedded headers under dir/include. */
kiln_status kiln_write_headers(const char *dir, kiln_error *err);
/* Hash of the embedded headers (hex). */
void kiln_headers_hash(char out[33]);

#endif
