/* runtime/fpenv.h: the floating-point environment compiled kernels run in.
 *
 * On x86 a denormal operand or result costs ~50-100x a normal one (a GEMM
 * whose input was a quarter denormal ran at 1% of peak), and networks make
 * them: GELU's and Sigmoid's tails, products of small activations. Compiled
 * steps therefore run with the MXCSR's flush-to-zero (FTZ, bit 15) and
 * denormals-are-zero (DAZ, bit 6) bits set: values below 2^-126 in
 * magnitude read and write as zero, nothing else changes. The pool's own
 * worker threads keep the bits set for their life; the thread that calls
 * kiln_module_run / kiln_module_run_step gets its own MXCSR back after every
 * step. A fallback step (a reference kernel inside a module) and the
 * reference executor run without them: IEEE semantics. */
#ifndef KILN_RUNTIME_FPENV_H
#define KILN_RUNTIME_FPENV_H

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define KILN_FP_FLUSH_BITS 0x8040u

/* Sets FTZ and DAZ; returns the previous MXCSR for kiln_fp_restore. */
static inline unsigned kiln_fp_flush_begin(void)
{
    unsigned csr = _mm_getcsr();
    if ((csr & KILN_FP_FLUSH_BITS) != KILN_FP_FLUSH_BITS)
        _mm_setcsr(csr | KILN_FP_FLUSH_BITS);
    return csr;
}

static inline void kiln_fp_restore(unsigned csr)
{
    if ((csr & KILN_FP_FLUSH_BITS) != KILN_FP_FLUSH_BITS)
        _mm_setcsr(csr);
}
#else
static inline unsigned kiln_fp_flush_begin(void)
{
    return 0;
}

static inline void kiln_fp_restore(unsigned csr)
{
    (void)csr;
}
#endif

#endif
