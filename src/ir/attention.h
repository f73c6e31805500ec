/* ir/attention.h: the geometry of the Attention op (kiln's fused
 * scaled-dot-product attention), shared by its shape inference, reference
 * kernel, fusion pass and template.
 *
 * Attention(Q, K, V[, M]) with attributes scale (float), q_perm, k_perm,
 * v_perm, o_perm (4 ints each, default 0 1 2 3):
 *   Q' = Transpose(Q, q_perm) [B, H, Sq, D]; K' = Transpose(K, k_perm) [B, H, Sk, D];
 *   V' = Transpose(V, v_perm) [B, H, Sk, Dv];
 *   O' = softmax(scale * Q' K'^T + M) V'   (M broadcasts to [B, H, Sq, Sk])
 *   Y  = Transpose(O', o_perm).
 * Rank 3 operands ([H, S, D], as torchvision's nn.MultiheadAttention export
 * merges batch and heads) read as [1, H, S, D], with perms of 3 entries.
 * The perms are how the pass folds the head split/merge transposes around an
 * exported attention into the op: the kernels read through strides. */
#ifndef KILN_IR_ATTENTION_H
#define KILN_IR_ATTENTION_H

#include "ir/graph.h"

/* What the C target's attention template takes (whole-row softmax in L1, K^T
 * of a head in the thread's workspace): the fuse-attention pass makes no
 * Attention beyond it, so a longer sequence keeps the matmul and softmax
 * templates instead of falling back to the reference kernel. */
#define KILN_ATTN_MAX_SK 4096
#define KILN_ATTN_MAX_KT (1 << 20) /* D x Sk rounded up to 64, floats */

typedef struct kiln_attn_geom {
    int64_t B, H, Sq, Sk, D, Dv;
    /* element strides of the logical dims [B, H, S, D] in each operand's
     * row-major storage; ms: the mask's against [B, H, Sq, Sk] (0: broadcast) */
    int64_t qs[4], ks[4], vs[4], os[4], ms[4];
    kiln_shape out; /* Y's shape */
    float scale;
    bool has_mask;
} kiln_attn_geom;

/* Resolves the geometry of Attention node n from its operand shapes (m NULL:
 * no mask); fails with a message when they do not fit. */
kiln_status kiln_attn_geom_of(const kiln_node *n, const kiln_shape *q, const kiln_shape *k,
                              const kiln_shape *v, const kiln_shape *m, kiln_attn_geom *out,
                              kiln_error *err);

#endif
