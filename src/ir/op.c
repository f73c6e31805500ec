/* ir/op.c: the registry table, generated from ops.def. */
#include "ir/op.h"

#include <stdbool.h>
#include <string.h>

#include "ir/graph.h"

static const kiln_op_info op_table[KILN_OP_COUNT] = {
#define KILN_OP(id, nm, mi, xi, mo, xo, pat, inf, rf)                                             \
    [KILN_OP_##id] = {.name = nm,                                                                 \
                      .min_inputs = mi,                                                           \
                      .max_inputs = xi,                                                           \
                      .min_outputs = mo,                                                          \
                      .max_outputs = xo,                                                          \
                      .pattern = KILN_PATTERN_##pat,                                              \
                      .infer = inf,                                                               \
                      .ref = rf},
#include "ir/ops.def"
#undef KILN_OP
};

const kiln_op_info *kiln_op_get(kiln_op op)
{
    if ((unsigned)op >= KILN_OP_COUNT)
        return NULL;
    return &op_table[op];
}

kiln_status kiln_op_run_ref(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    bool empty = n->n_outputs > 0;
    for (int k = 0; k < n->n_outputs && empty; k++)
        empty = out[k] && kiln_shape_numel(&out[k]->shape) == 0;
    if (empty)
        return KILN_OK;
    return kiln_op_get(n->op)->ref(n, in, out, err);
}

kiln_op kiln_op_from_name(const char *name)
{
    for (int i = 0; i < KILN_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0)
            return (kiln_op)i;
    return KILN_OP_COUNT;
}

const char *kiln_op_name(kiln_op op)
{
    const kiln_op_info *info = kiln_op_get(op);
    return info ? info->name : "?";
}
