/* toolchain/toolchain.h: the system C compiler, the object cache, linking.
 *
 * The compiler is $CC (which may carry arguments, e.g. "ccache gcc"), else
 * the first of cc, gcc, clang found on PATH. Kernels compile with
 * -O3 -fPIC -std=gnu11 -fno-math-errno plus the target's ISA flags, in
 * parallel, each object cached under <cache>/objects/<hash>.o where the hash
 * covers the source, the flags, the compiler's identity and the embedded
 * headers; the link puts kernels, model and weights into one shared object.
 */
#ifndef KILN_TOOLCHAIN_TOOLCHAIN_H
#define KILN_TOOLCHAIN_TOOLCHAIN_H

#include <stddef.h>

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

/* kiln_compile with knob values drawn at random from each template's knob
 * space (knob_seed != 0; 0 = the analytic defaults): tests of the spaces. */
kiln_status kiln_compile_ex(const kiln_graph *g, const kiln_compile_options *opts,
                            uint64_t knob_seed, const char *out_path, kiln_error *err);

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
