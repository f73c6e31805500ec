/* ir/einsum.h: Einsum's equation, parsed against the operand shapes (shared by
 * the shape inference in ir/infer_einsum.c and the kernel in ref/einsum.c). */
#ifndef KILN_IR_EINSUM_H
#define KILN_IR_EINSUM_H

#include "ir/graph.h"

#define KILN_EINSUM_MAX_OPS 16
/* labels: 'a'..'z' are 0..25, 'A'..'Z' 26..51, ellipsis dims 52.. */
#define KILN_EINSUM_ELLIPSIS 52
#define KILN_EINSUM_MAX_LABELS (KILN_EINSUM_ELLIPSIS + KILN_MAX_RANK)

typedef struct kiln_einsum {
    int n_ops;
    int64_t size[KILN_EINSUM_MAX_LABELS]; /* extent of each label (broadcast over operands) */
    bool used[KILN_EINSUM_MAX_LABELS];    /* appears in some operand */
    int op_rank[KILN_EINSUM_MAX_OPS];
    int op_label[KILN_EINSUM_MAX_OPS][KILN_MAX_RANK]; /* label of each operand dim */
    int out_rank;
    int out_label[KILN_MAX_RANK];
    kiln_shape out_shape;
} kiln_einsum;

/* Parses `eq` (numpy syntax: terms of letters and at most one "...", separated
 * by commas, optional "->" and output term; spaces ignored; without "->" the
 * output is the broadcast ellipsis dims followed by the letters that appear
 * once, in ASCII order) against the `n` operand shapes. Letter extents must
 * agree; ellipsis dims broadcast numpy-style. */
kiln_status kiln_einsum_parse(const char *eq, int n, const kiln_shape *const *shapes,
                              kiln_einsum *e, kiln_error *err);

#endif
