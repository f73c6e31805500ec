/* ref/scratch.c: the reference kernels' scratch (see scratch.h). */
#include "ref/scratch.h"

#include <stdint.h>
#include <stdlib.h>

#include "ir/graph.h"
#include "ref/elemwise_common.h"

static _Thread_local kiln_ref_scratch_loan lent;

kiln_ref_scratch_loan kiln_ref_scratch_lend(void *buf, size_t cap)
{
    kiln_ref_scratch_loan prev = lent;
    lent.buf = buf;
    lent.cap = buf ? cap : 0;
    lent.used = 0;
    return prev;
}

void kiln_ref_scratch_end(kiln_ref_scratch_loan prev)
{
    lent = prev;
}

void *kiln_ref_scratch_get(size_t bytes)
{
    size_t need = kiln_ref_scratch_round(bytes ? bytes : 1);
    if (lent.buf && need >= bytes && lent.cap - lent.used >= need) {
        void *p = lent.buf + lent.used;
        lent.used += need;
        return p;
    }
    return malloc(bytes ? bytes : 1);
}

void kiln_ref_scratch_put(void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)lent.buf;
    if (lent.buf && a >= b && a < b + lent.cap)
        return;
    free(p);
}

/* The float32 copies kiln_ew_via_f32 makes of n's float16 tensors. Every
 * kernel but Cast's that meets float16 computes through them. */
static size_t f16_copies(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out)
{
    if (n->op == KILN_OP_CAST || !kiln_ew_has_f16(n, in, out))
        return 0;
    size_t b = 0;
    for (int i = 0; i < n->n_inputs; i++)
        if (in[i] && in[i]->dtype == KILN_DTYPE_FLOAT16)
            b += kiln_ref_scratch_round(sizeof(float) * (size_t)kiln_shape_numel(&in[i]->shape));
    for (int i = 0; i < n->n_outputs; i++)
        if (out[i] && out[i]->dtype == KILN_DTYPE_FLOAT16)
            b += kiln_ref_scratch_round(sizeof(float) * (size_t)kiln_shape_numel(&out[i]->shape));
    return b;
}

size_t kiln_ref_scratch_bytes(const kiln_node *n, const kiln_tensor *const *in,
                              kiln_tensor *const *out)
{
    size_t b = f16_copies(n, in, out);
    switch (n->op) {
    case KILN_OP_RESIZE: return b + kiln_ref_resize_scratch(n, in);
    case KILN_OP_RNN:
    case KILN_OP_GRU:
    case KILN_OP_LSTM: return b + kiln_ref_rnn_scratch(n, in);
    case KILN_OP_ATTENTION: return b + kiln_ref_attention_scratch(n, in);
    default: return b;
    }
}
