/* ref/scratch.h: the temporaries of the reference kernels that need some
 * (Resize's interpolation taps, the RNN family's state, Attention's score
 * row, float16 arithmetic's float32 copies).
 *
 * A compiled model's fallback step (runtime/ref_step.c) sizes them at load
 * with kiln_ref_scratch_bytes, keeps a buffer of that size, and lends it to
 * the calling thread for each call of its kernel: the run allocates
 * nothing. Elsewhere (the reference executor, the VM's nodes) nothing is
 * lent and the kernel's kiln_ref_scratch_get mallocs. A kernel takes its
 * pieces with kiln_ref_scratch_get and gives each back with
 * kiln_ref_scratch_put; kiln_ref_scratch_bytes must count every piece a
 * call takes, each rounded up by kiln_ref_scratch_round (a piece that does
 * not fit what is left is malloc'ed, so a wrong count costs an allocation,
 * never a wrong result). */
#ifndef KILN_REF_SCRATCH_H
#define KILN_REF_SCRATCH_H

#include <stddef.h>

#include "kiln/types.h"

struct kiln_node;

/* Bytes a piece of `bytes` takes in a lent buffer (64-byte steps). */
static inline size_t kiln_ref_scratch_round(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* The scratch one call of n's reference kernel takes on these tensors
 * (0: none). */
size_t kiln_ref_scratch_bytes(const struct kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out);

/* A loan of scratch to this thread's kernels. */
typedef struct kiln_ref_scratch_loan {
    char *buf;
    size_t cap, used;
} kiln_ref_scratch_loan;

/* Lends buf (cap bytes, 64-byte aligned) to this thread's kernels; returns
 * the loan it replaces, which kiln_ref_scratch_end gives back (a kernel
 * that runs a nested executor, a Loop's body, leaves its caller's loan as
 * it was). */
kiln_ref_scratch_loan kiln_ref_scratch_lend(void *buf, size_t cap);
void kiln_ref_scratch_end(kiln_ref_scratch_loan prev);

/* `bytes` of scratch (not zeroed), from the lent buffer when what is left
 * of it fits, else malloc'ed; NULL when out of memory. */
void *kiln_ref_scratch_get(size_t bytes);

/* Gives p back (free unless it lies in the lent buffer); NULL-safe. */
void kiln_ref_scratch_put(void *p);

/* Scratch sizes of the kernels that take some (their own files). */
size_t kiln_ref_resize_scratch(const struct kiln_node *n, const kiln_tensor *const *in);
size_t kiln_ref_rnn_scratch(const struct kiln_node *n, const kiln_tensor *const *in);
size_t kiln_ref_attention_scratch(const struct kiln_node *n, const kiln_tensor *const *in);

#endif
