/* ir/broadcast.h: numpy-style multidirectional broadcasting.
 *
 * kiln_broadcast_shape computes the output shape of two shapes (rank-aligned
 * from the right; each pair of dims equal or one of them 1).
 *
 * kiln_bcast describes a walk over an output shape with up to
 * KILN_BCAST_MAX_OPS operands broadcast into it: per operand, an element
 * stride for every (coalesced) output dimension, 0 where the operand is
 * broadcast. Adjacent dimensions that every operand walks the same way are
 * merged and size-1 dimensions dropped, so the innermost loop is as long as
 * possible. Typical use (rows of the innermost dimension, contiguous output):
 *
 *     kiln_bcast bc;
 *     kiln_bcast_init(&bc, &out_shape, shapes, 2);
 *     int64_t idx[KILN_MAX_RANK] = {0}, off[KILN_BCAST_MAX_OPS] = {0};
 *     for (int64_t r = 0; r < bc.rows; r++) {
 *         for (int64_t i = 0; i < bc.inner; i++)
 *             o[r * bc.inner + i] = a[off[0] + i * bc.inner_stride[0]] + ...;
 *         kiln_bcast_next_row(&bc, idx, off);
 *     }
 */
#ifndef KILN_IR_BROADCAST_H
#define KILN_IR_BROADCAST_H

#include "kiln/types.h"

#define KILN_BCAST_MAX_OPS 4

/* Output shape of broadcasting `a` with `b` into *out. KILN_ERR_SHAPE_MISMATCH
 * (message naming both shapes and the offending dimension) if they do not
 * broadcast. *out is untouched on failure. */
kiln_status kiln_broadcast_shape(const kiln_shape *a, const kiln_shape *b, kiln_shape *out,
                                 kiln_error *err);

/* True if `in` broadcasts to exactly `out` (rank <= out's, each dim equal or 1). */
bool kiln_broadcasts_to(const kiln_shape *in, const kiln_shape *out);

/* Strides (in elements) of `in` viewed in `out`'s rank: 0 where `in` is
 * broadcast (missing or size-1 dimension). `in` must broadcast to `out`. */
void kiln_broadcast_strides(const kiln_shape *in, const kiln_shape *out, int64_t *strides);

typedef struct kiln_bcast {
    int n_ops;
    int rank;                                       /* coalesced rank, >= 1 */
    int64_t dims[KILN_MAX_RANK];                    /* coalesced output dims */
    int64_t strides[KILN_BCAST_MAX_OPS][KILN_MAX_RANK];
    int64_t inner;                                  /* dims[rank - 1] */
    int64_t inner_stride[KILN_BCAST_MAX_OPS];       /* strides[k][rank - 1] */
    int64_t rows;                                   /* numel / inner (0 if empty) */
} kiln_bcast;

/* Prepares a walk over `out` with operands `ins[0..n_ops)`, each of which must
 * broadcast to `out` (check with kiln_broadcasts_to). n_ops <= KILN_BCAST_MAX_OPS. */
void kiln_bcast_init(kiln_bcast *bc, const kiln_shape *out, const kiln_shape *const *ins,
                     int n_ops);

/* Advances the row counter `idx` (dims 0..rank-2) by one row and updates the
 * operand offsets `off` accordingly. */
static inline void kiln_bcast_next_row(const kiln_bcast *bc, int64_t *idx, int64_t *off)
{
    for (int d = bc->rank - 2; d >= 0; d--) {
        idx[d]++;
        for (int k = 0; k < bc->n_ops; k++)
            off[k] += bc->strides[k][d];
        if (idx[d] < bc->dims[d])
            return;
        for (int k = 0; k < bc->n_ops; k++)
            off[k] -= bc->strides[k][d] * bc->dims[d];
        idx[d] = 0;
    }
}

#endif
