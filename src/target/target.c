/* target/target.c: targets. "host" asks the CPU (cpuid through
 * __builtin_cpu_supports): AVX-512 needs avx512f/bw/vl, AVX2 needs avx2 and
 * fma; anything else is "generic" (portable C, SSE2 on x86-64). Cache sizes
 * for the analytic defaults come from sysconf when it knows them. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target/target.h"
#include "util/error.h"

static void set(kiln_target *t, kiln_isa isa)
{
    static const char *const names[] = {"generic", "x86_64-avx2", "x86_64-avx512"};
    t->isa = isa;
    snprintf(t->name, sizeof t->name, "%s", names[isa]);
    t->vec = isa == KILN_TARGET_AVX512 ? 16 : 8;
}

kiln_status kiln_target_resolve(const char *name, kiln_target *t, kiln_error *err)
{
    memset(t, 0, sizeof *t);
    t->l1_bytes = 32 << 10;
    t->l2_bytes = 1 << 20;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 > 0)
        t->l1_bytes = l1;
    if (l2 > 0)
        t->l2_bytes = l2;
#endif
    if (!name || !*name || !strcmp(name, "host") || !strcmp(name, "native")) {
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl"))
            set(t, KILN_TARGET_AVX512);
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            set(t, KILN_TARGET_AVX2);
        else
            set(t, KILN_TARGET_GENERIC);
#else
        set(t, KILN_TARGET_GENERIC);
#endif
        return KILN_OK;
    }
    const char *n = name;
    if (!strncmp(n, "x86_64-", 7))
        n += 7;
    if (!strcmp(n, "avx512"))
        set(t, KILN_TARGET_AVX512);
    else if (!strcmp(n, "avx2"))
        set(t, KILN_TARGET_AVX2);
    else if (!strcmp(n, "generic"))
        set(t, KILN_TARGET_GENERIC);
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "unknown target '%s' (expected host, avx512, avx2 or generic)", name);
    return KILN_OK;
}
