/* kiln_kernels_common.h: what the kernel templates share: the epilogue flags,
 * ISA selection, forced inlining and small helpers.
 *
 * The kernel headers (kiln_kernels_conv.h, _dwconv.h, _dense.h, _layout.h)
 * are header-only C11, included both by generated model code (compiled with
 * -O3 and the target's ISA flags, params as `static const` literals so gcc
 * folds every knob) and by libkiln (weight packing at compile time, built
 * without ISA flags). Each header includes this one by a relative name.
 *
 * ISA: the channel-block width picks the microkernel. A block of 16 output
 * channels runs the AVX-512 microkernels when __AVX512F__ is defined, a block
 * of 8 the AVX2+FMA ones when __AVX2__ and __FMA__ are, and anything else the
 * portable C ones (correct for every block width; gcc auto-vectorizes them).
 * Defining KILN_KERNELS_PORTABLE before the include disables the SIMD paths. */
#ifndef KILN_KERNELS_COMMON_H
#define KILN_KERNELS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(KILN_KERNELS_PORTABLE) && (defined(__AVX512F__) || defined(__AVX2__))
#include <immintrin.h>
#endif
#if !defined(KILN_KERNELS_PORTABLE) && defined(__AVX512F__)
#define KILN_KERNELS_AVX512 1
#endif
#if !defined(KILN_KERNELS_PORTABLE) && defined(__AVX2__) && defined(__FMA__)
#define KILN_KERNELS_AVX2 1
#endif

/* Epilogue flags (bit set): out = act(acc + bias + residual), where act is
 * relu then clip when both are set. The residual is added before the
 * activation. */
#define KILN_EPI_BIAS 1
#define KILN_EPI_RELU 2
#define KILN_EPI_CLIP 4
#define KILN_EPI_RESIDUAL 8

#if defined(__GNUC__)
#define KILN_KINLINE inline __attribute__((always_inline))
#define KILN_KNOINLINE __attribute__((noinline, unused))
#define KILN_KUNROLL _Pragma("GCC unroll 32")
#else
#define KILN_KINLINE inline
#define KILN_KNOINLINE
#define KILN_KUNROLL
#endif

/* The tile dispatchers (a switch over every register-tile width) are inlined
 * into each loop that calls them: generated code's widths are constants, so
 * each call folds to one microkernel. Where the widths are run-time values
 * (the kernel tests), inlining copies the whole switch into every call site
 * (test_dense_kernels took 102 s of CPU to compile, 27 s with the dispatch
 * out of line): such a file defines KILN_KDISPATCH before the headers as
 * __attribute__((noinline, unused)). */
#ifndef KILN_KDISPATCH
#define KILN_KDISPATCH KILN_KINLINE
#endif

static inline int64_t kiln_k_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kiln_k_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t kiln_k_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/* floor(a / b) for b > 0 and any a */
static inline int64_t kiln_k_fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The scalar epilogue for one value (the portable paths). */
static inline float kiln_k_epi1(float v, int epi, float lo, float hi)
{
    if (epi & KILN_EPI_RELU)
        v = v > 0.0f ? v : 0.0f;
    if (epi & KILN_EPI_CLIP) {
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
    }
    return v;
}

#endif /* KILN_KERNELS_COMMON_H */
