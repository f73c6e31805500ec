/* target/target.h: what a target is. A target names the instruction set the
 * generated code may use and the machine facts the templates' analytic
 * defaults read (vector width, cache sizes). The template set that serves a
 * target, and the one query passes make of it ("which template takes this
 * node, and which epilogue can it absorb"), are in target/template.h. */
#ifndef KILN_TARGET_TARGET_H
#define KILN_TARGET_TARGET_H

#include <stdint.h>

#include "util/error.h"

typedef enum kiln_isa { KILN_TARGET_GENERIC = 0, KILN_TARGET_AVX2 = 1, KILN_TARGET_AVX512 = 2 } kiln_isa;

typedef struct kiln_target {
    char name[32];     /* "x86_64-avx512", "x86_64-avx2", "generic" */
    kiln_isa isa;
    int vec;           /* floats per vector register: 16, 8, 4 */
    int64_t l1_bytes;  /* data cache sizes used by analytic defaults */
    int64_t l2_bytes;
} kiln_target;

/* `name` NULL or "host": the machine we run on; else "avx512", "avx2",
 * "generic" (optionally prefixed "x86_64-"). */
kiln_status kiln_target_resolve(const char *name, kiln_target *t, kiln_error *err);

#endif
