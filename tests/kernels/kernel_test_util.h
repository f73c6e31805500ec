/* tests/kernels/kernel_test_util.h: shared by the kernel-template tests
 * (test_conv_kernels.c, test_dwconv_kernels.c, test_dense_kernels.c).
 *
 * The tests are built with the project's default flags (no -march), so on
 * x86-64 with gcc the kernel headers and the test bodies are compiled under
 * `#pragma GCC target` with AVX-512 (which implies AVX2+FMA): one binary then
 * covers all three microkernel families, picked by the block width (16:
 * AVX-512, 8: AVX2, anything else: portable). main() runs them only when the
 * CPU has AVX-512 (KT_BEGIN_SIMD ... KT_END_SIMD bracket the test bodies;
 * kt_cpu_ok() tells main). Elsewhere everything is portable.
 *
 * Each kernel test is also built a second time with KT_AVX2_ONLY (ctest's
 * kernels/<name>_avx2): the pragma then says AVX2+FMA only, as a target
 * without AVX-512 compiles the generated code (16 ymm registers, no EVEX),
 * block 8 runs the AVX2 microkernels, block 16 the portable ones, and it
 * runs wherever the CPU has AVX2: the only kernel test an AVX2 host runs. */
#ifndef KILN_TESTS_KERNEL_TEST_UTIL_H
#define KILN_TESTS_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Conv tiles that ran on the portable microkernel because their width was
 * outside the sets below (kiln_conv_tile_slow in kiln_kernels_conv.h): the
 * conv and prologue tests assert none, so a set that misses a width the
 * loops take fails here, not as a slow kernel nobody notices. */
static long kt_conv_slow_tiles __attribute__((unused));
#define KILN_CONV_COUNT_SLOW kt_conv_slow_tiles
/* The tile widths the conv dispatch instantiates, here set at run time per
 * case (kiln_conv_tile_sets) where generated code has constants; every
 * width by default. */
static uint32_t kt_conv_tiles_t __attribute__((unused)) = 0xffffffffu;
static uint32_t kt_conv_tiles_o __attribute__((unused)) = 0xffffffffu;
#define KILN_CONV_TILES_T kt_conv_tiles_t
#define KILN_CONV_TILES_O kt_conv_tiles_o
/* Likewise the input strides it instantiates (KILN_CONV_PS: kiln_conv_ps_set,
 * kiln_conv_ps_bit), all by default. */
static uint32_t kt_conv_ps __attribute__((unused)) = 7u;
#define KILN_CONV_PS kt_conv_ps
/* Here the tile widths are run-time values, so the dispatchers stay out of
 * line (kiln_kernels_common.h): one copy of each switch, not one per call
 * site. */
#define KILN_KDISPATCH __attribute__((noinline, unused))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KT_X86 1
#ifdef KT_AVX2_ONLY
#define KT_BEGIN_SIMD _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define KT_ISA_NAME "AVX2+FMA"
static inline int kt_cpu_ok(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
#define KT_BEGIN_SIMD                                                                              \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,avx512f,avx512bw,avx512vl,avx512dq\")")
#define KT_ISA_NAME "AVX-512"
static inline int kt_cpu_ok(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
}
#endif
#define KT_END_SIMD _Pragma("GCC pop_options")
#else
#define KT_BEGIN_SIMD
#define KT_END_SIMD
#define KT_ISA_NAME "nothing"
static inline int kt_cpu_ok(void) { return 1; }
#endif

/* xorshift64* */
typedef struct kt_rng {
    uint64_t s;
} kt_rng;
static inline uint64_t kt_next(kt_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
/* uniform in [lo, hi] */
static inline int kt_int(kt_rng *r, int lo, int hi)
{
    return lo + (int)(kt_next(r) % (uint64_t)(hi - lo + 1));
}
static inline float kt_float(kt_rng *r)
{
    return (float)((kt_next(r) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static inline float *kt_alloc(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p)
        abort();
    return p;
}
static inline float *kt_rand_buf(kt_rng *r, int64_t n)
{
    float *p = kt_alloc(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = kt_float(r);
    return p;
}
static inline float *kt_nan_buf(int64_t n)
{
    float *p = kt_alloc(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* NCHW [n][c][hw] -> NCHW{cb}c with `pad` in the padding channels (explicit
 * loops, independent of kiln_kernels_layout.h). */
static inline float *kt_to_blocked(const float *x, int n, int c, int64_t hw, int cb, float pad)
{
    int cbn = (c + cb - 1) / cb;
    float *y = kt_alloc((int64_t)n * cbn * cb * hw);
    for (int i = 0; i < n; i++)
        for (int b = 0; b < cbn; b++)
            for (int64_t s = 0; s < hw; s++)
                for (int l = 0; l < cb; l++) {
                    int ch = b * cb + l;
                    y[(((int64_t)i * cbn + b) * hw + s) * cb + l] =
                        ch < c ? x[((int64_t)i * c + ch) * hw + s] : pad;
                }
    return y;
}

/* Blocked -> NCHW; fails the test if a padding channel is not finite. */
static inline float *kt_from_blocked(const float *y, int n, int c, int64_t hw, int cb)
{
    int cbn = (c + cb - 1) / cb;
    float *x = kt_alloc((int64_t)n * c * hw);
    for (int i = 0; i < n; i++)
        for (int b = 0; b < cbn; b++)
            for (int64_t s = 0; s < hw; s++)
                for (int l = 0; l < cb; l++) {
                    int ch = b * cb + l;
                    float v = y[(((int64_t)i * cbn + b) * hw + s) * cb + l];
                    if (ch < c)
                        x[((int64_t)i * c + ch) * hw + s] = v;
                    else if (!isfinite(v))
                        fail_msg("padding channel %d of image %d pixel %lld is %g", ch, i,
                                 (long long)s, (double)v);
                }
    return x;
}

/* y = act(y + residual) in place, per the epilogue flags (the bias is part of
 * the reference convolution). */
static inline void kt_epilogue(float *y, const float *res, int64_t count, int epi, float lo,
                               float hi)
{
    for (int64_t i = 0; i < count; i++) {
        float v = y[i];
        if (epi & 8)
            v += res[i];
        if (epi & 2)
            v = v > 0 ? v : 0;
        if (epi & 4) {
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
        }
        y[i] = v;
    }
}

/* Splits [0, total) into ranges in one of several ways (mode): one range,
 * single tasks, random chunks, or two "threads" in reverse order; calls
 * fn(ctx, begin, end) for each. */
typedef void (*kt_range_fn)(void *ctx, int64_t begin, int64_t end);
static inline void kt_split(kt_rng *r, int mode, int64_t total, kt_range_fn fn, void *ctx)
{
    switch (mode % 4) {
    case 0:
        fn(ctx, 0, total);
        break;
    case 1:
        for (int64_t t = total - 1; t >= 0; t--)
            fn(ctx, t, t + 1);
        break;
    case 2:
        for (int64_t t = 0; t < total;) {
            int64_t len = 1 + (int64_t)(kt_next(r) % (uint64_t)(total - t));
            fn(ctx, t, t + len);
            t += len;
        }
        break;
    default:
        fn(ctx, total / 2, total);
        fn(ctx, 0, total / 2);
        break;
    }
}

/* Checks `cases` random configurations from one seed: case_fn(r, block,
 * knobs) draws one for block width `block` and checks it, with random knobs
 * on two cases in three and the analytic defaults on the third. */
typedef void (*kt_case_fn)(kt_rng *r, int block, int knobs);
static inline void kt_run_random(kt_case_fn case_fn, int block, uint64_t seed, int cases)
{
    kt_rng r = {seed};
    for (int i = 0; i < cases; i++)
        case_fn(&r, block, i % 3 != 0);
}

/* Defines the random tests of a template, one per microkernel family (which
 * the block width picks): prefix##_avx512 (block 16, 150 cases), _avx2
 * (block 8, 100 cases) and _portable (block 4, 40 cases, then block `odd`,
 * 30 cases), each from its own seed. */
#define KT_RANDOM_TESTS(prefix, case_fn, seed16, seed8, seed4, seed_odd, odd)                     \
    static void prefix##_avx512(void **state)                                                     \
    {                                                                                             \
        (void)state;                                                                              \
        kt_run_random(case_fn, 16, seed16, 150);                                                  \
    }                                                                                             \
    static void prefix##_avx2(void **state)                                                       \
    {                                                                                             \
        (void)state;                                                                              \
        kt_run_random(case_fn, 8, seed8, 100);                                                    \
    }                                                                                             \
    static void prefix##_portable(void **state)                                                   \
    {                                                                                             \
        (void)state;                                                                              \
        kt_run_random(case_fn, 4, seed4, 40);                                                     \
        kt_run_random(case_fn, odd, seed_odd, 30);                                                \
    }

/* Their entries in main()'s list. */
#define KT_RANDOM_UNIT_TESTS(prefix)                                                              \
    cmocka_unit_test(prefix##_avx512), cmocka_unit_test(prefix##_avx2),                           \
        cmocka_unit_test(prefix##_portable)

/* Defines prefix##_case, the arguments of one run of a template (its params
 * type, then input, packed weights, bias, residual, output, workspace: the
 * templates' run functions all take these), and prefix##_range, the
 * kt_range_fn that runs it on a range of tasks with run_fn. */
#define KT_TEMPLATE_RUN(prefix, params_type, run_fn)                                              \
    typedef struct prefix##_case {                                                                \
        params_type p;                                                                            \
        const float *in, *w, *bias, *res;                                                         \
        float *out;                                                                               \
        void *ws;                                                                                 \
    } prefix##_case;                                                                              \
    static void prefix##_range(void *ctx, int64_t b, int64_t e)                                   \
    {                                                                                             \
        prefix##_case *c = ctx;                                                                   \
        run_fn(&c->p, c->in, c->w, c->bias, c->res, c->out, b, e, c->ws);                         \
    }

/* What main() returns: the group's result where the CPU has what the test
 * bodies were compiled for, else 0 after saying they were skipped. */
#define KT_RUN_TESTS(tests)                                                                       \
    (kt_cpu_ok() ? cmocka_run_group_tests(tests, NULL, NULL)                                      \
                 : (printf("skipped: this build of the kernel tests needs " KT_ISA_NAME "\n"), 0))

#endif
