/* ir/op.h: the op registry generated from ops.def. */
#ifndef KILN_IR_OP_H
#define KILN_IR_OP_H

#include "kiln/types.h"

#define KILN_VARIADIC 0x7fffffff

typedef enum kiln_op {
#define KILN_OP(id, name, mi, xi, mo, xo, pat, inf, ref) KILN_OP_##id,
#include "ir/ops.def"
#undef KILN_OP
    KILN_OP_COUNT
} kiln_op;

/* Fusion pattern kinds (TVM's OpPatternKind, in the same order: a fusion pass
 * may compare them). */
typedef enum kiln_pattern {
    KILN_PATTERN_ELEMWISE = 0,
    KILN_PATTERN_BROADCAST = 1,
    KILN_PATTERN_INJECTIVE = 2,
    KILN_PATTERN_COMM_REDUCE = 3,
    KILN_PATTERN_OUT_ELEMWISE_FUSABLE = 4,
    KILN_PATTERN_OPAQUE = 8,
} kiln_pattern;

struct kiln_node;
struct kiln_value;

/* Shape inference: reads the input values' dtype/shape (in[i] is NULL for an
 * absent optional input; constant data is in in[i]->data when known) and the
 * node's attributes; writes dtype and shape of every out[k]. On failure the
 * message says what is wrong; the caller prefixes the node name. */
typedef kiln_status (*kiln_infer_fn)(const struct kiln_node *n, const struct kiln_value *const *in,
                                     struct kiln_value *const *out, kiln_error *err);

/* Reference kernel: in[i] NULL for an absent optional input; out[k] are
 * allocated by the caller with the inferred dtype and shape. */
typedef kiln_status (*kiln_ref_fn)(const struct kiln_node *n, const kiln_tensor *const *in,
                                   kiln_tensor *const *out, kiln_error *err);

typedef struct kiln_op_info {
    const char *name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
    kiln_pattern pattern;
    kiln_infer_fn infer;
    kiln_ref_fn ref;
} kiln_op_info;

/* Info for `op` (NULL if out of range). */
const kiln_op_info *kiln_op_get(kiln_op op);
/* Runs n's reference kernel: nothing when every output is empty (its loops
 * could still walk the other extents: a [1.5e14, 0, 4] Expand folded at
 * import looped for minutes in Concat before this), else the op's ref. */
kiln_status kiln_op_run_ref(const struct kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err);
/* Op by its name ("Conv"); KILN_OP_COUNT if unknown. */
kiln_op kiln_op_from_name(const char *name);
const char *kiln_op_name(kiln_op op);

/* Declarations of every infer and ref function named in ops.def. */
#define KILN_OP(id, name, mi, xi, mo, xo, pat, inf, ref)                                          \
    kiln_status inf(const struct kiln_node *, const struct kiln_value *const *,                   \
                    struct kiln_value *const *, kiln_error *);                                    \
    kiln_status ref(const struct kiln_node *, const kiln_tensor *const *, kiln_tensor *const *,   \
                    kiln_error *);
#include "ir/ops.def"
#undef KILN_OP

#endif
