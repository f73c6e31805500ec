/* ir/batch_axis.c: whether a graph computes each item of its batch on its
 * own (ir/batch_axis.h).
 *
 * Every value is either batched (it depends on a batched graph input, axis
 * 0 is the batch, extent c, and item i of it depends on item i of the
 * inputs only) or free (it depends on no batched input: weights, constants
 * folded from shapes). A node with no batched input makes free outputs. A
 * node with one gets a rule by op: the op must treat axis 0 as independent
 * items (elementwise, convolution, a reduction over other axes, a
 * reshape that keeps axis 0's extent, ...), its free inputs must not vary
 * along that axis (broadcast over it, or a constant whose rows along it are
 * all the same, which is what an Expand of a class token to the batch folds
 * into), and its outputs keep extent c at axis 0. Anything else refuses,
 * with the node's name. */
#include "ir/batch_axis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ba_state {
    const kiln_graph *g;
    bool *b; /* per value: batched */
    int64_t c;
    char *why;
    size_t why_size;
} ba_state;

static bool refuse(ba_state *st, const kiln_node *n, const char *fmt, ...)
{
    if (st->why && st->why_size) {
        int len = snprintf(st->why, st->why_size, "%s '%s': ", kiln_op_name(n->op),
                           n->name ? n->name : "");
        if (len >= 0 && (size_t)len < st->why_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(st->why + len, st->why_size - (size_t)len, fmt, ap);
            va_end(ap);
        }
    }
    return false;
}

static const kiln_value *in_val(const ba_state *st, const kiln_node *n, int k)
{
    return k < n->n_inputs ? kiln_graph_value(st->g, n->inputs[k]) : NULL;
}

static bool batched(const ba_state *st, const kiln_node *n, int k)
{
    const kiln_value *v = in_val(st, n, k);
    return v && st->b[v->id];
}

static int64_t norm_axis(int64_t a, int rank)
{
    return a < 0 ? a + rank : a;
}

/* A constant of extent c along axis 0 whose rows are all the same bytes. */
static bool uniform_rows(const ba_state *st, const kiln_value *v)
{
    if (v->kind != KILN_VALUE_CONST || v->shape.rank < 1 || v->shape.dims[0] != st->c)
        return false;
    if (st->c == 1)
        return true;
    if (!v->data)
        return false;
    int64_t row = (int64_t)kiln_dtype_size(v->dtype);
    for (int d = 1; d < v->shape.rank; d++)
        row *= v->shape.dims[d];
    if (row <= 0)
        return row == 0;
    for (int64_t i = 1; i < st->c; i++)
        if (memcmp(v->data, (const char *)v->data + i * row, (size_t)row) != 0)
            return false;
    return true;
}

/* A free input of a node whose output has rank r and the batch at axis 0:
 * it must be the same for every item (numpy broadcasting aligns trailing
 * dims, so a lower rank never reaches axis 0). */
static bool free_broadcasts(const ba_state *st, const kiln_value *v, int r)
{
    return v->shape.rank < r || v->shape.dims[0] == 1 || uniform_rows(st, v);
}

/* Every present input other than input 0 is free. */
static bool rest_free(const ba_state *st, const kiln_node *n, int from)
{
    for (int k = from; k < n->n_inputs; k++)
        if (batched(st, n, k))
            return false;
    return true;
}

/* An axis attribute (default def) of input k's rank, normalized. */
static int64_t axis_of(const ba_state *st, const kiln_node *n, const char *name, int64_t def, int k)
{
    const kiln_value *v = in_val(st, n, k);
    return norm_axis(kiln_attr_int(n, name, def), v ? v->shape.rank : 0);
}

static bool broadcast_rule(ba_state *st, const kiln_node *n)
{
    const kiln_value *o = kiln_graph_value(st->g, n->outputs[0]);
    int r = o->shape.rank;
    for (int k = 0; k < n->n_inputs; k++) {
        const kiln_value *v = in_val(st, n, k);
        if (!v)
            continue;
        if (st->b[v->id] && v->shape.rank != r)
            return refuse(st, n, "input %d's batch axis is not the output's axis 0", k);
        if (!st->b[v->id] && !free_broadcasts(st, v, r))
            return refuse(st, n, "input %d varies along the batch axis", k);
    }
    return true;
}

static bool matmul_rule(ba_state *st, const kiln_node *n)
{
    const kiln_value *a = in_val(st, n, 0), *b = in_val(st, n, 1);
    bool ba = st->b[a->id], bb = st->b[b->id];
    if (ba && bb)
        return a->shape.rank == b->shape.rank && a->shape.rank >= 3
                   ? true
                   : refuse(st, n, "both operands batched, not as a batch of matrices");
    if (ba) /* rows of A, or a batch of A's matrices against one B (B's own batch dims
               must broadcast over axis 0) */
        return a->shape.rank >= 2 && (b->shape.rank < a->shape.rank || b->shape.rank == 2 ||
                                      (b->shape.rank == a->shape.rank && b->shape.dims[0] == 1))
                   ? true
                   : refuse(st, n, "B's batch dims reach the output's axis 0");
    /* one A against a batch of B's matrices */
    return b->shape.rank >= 3 && (a->shape.rank < b->shape.rank || a->shape.dims[0] == 1)
               ? true
               : refuse(st, n, "the batch is B's reduction or column axis");
}

static bool reduce_rule(ba_state *st, const kiln_node *n)
{
    const int64_t *axes = NULL;
    int na = kiln_attr_ints(n, "axes", &axes);
    int r = in_val(st, n, 0)->shape.rank;
    if (na <= 0)
        return kiln_attr_int(n, "noop_with_empty_axes", 0) == 1
                   ? true
                   : refuse(st, n, "reduces every axis, the batch's included");
    for (int i = 0; i < na; i++)
        if (norm_axis(axes[i], r) == 0)
            return refuse(st, n, "reduces the batch axis");
    return true;
}

static bool slice_rule(ba_state *st, const kiln_node *n)
{
    const int64_t *axes = NULL, *steps = NULL;
    int na = kiln_attr_ints(n, "axes", &axes), ns = kiln_attr_ints(n, "steps", &steps);
    int r = in_val(st, n, 0)->shape.rank;
    if (na < 0) { /* every axis, in order */
        if (ns >= 1 && steps[0] != 1)
            return refuse(st, n, "steps along the batch axis");
        return true; /* axis 0 kept whole: checked by the output's extent */
    }
    for (int i = 0; i < na; i++)
        if (norm_axis(axes[i], r) == 0 && i < ns && steps[i] != 1)
            return refuse(st, n, "steps along the batch axis");
    return true;
}

static bool pad_rule(ba_state *st, const kiln_node *n)
{
    const int64_t *pads = NULL;
    int np = kiln_attr_ints(n, "pads", &pads);
    int r = in_val(st, n, 0)->shape.rank;
    if (kiln_node_attr(n, "axes"))
        return refuse(st, n, "pads given per axis");
    if (np == 2 * r && r > 0 && (pads[0] != 0 || pads[r] != 0))
        return refuse(st, n, "pads the batch axis");
    return true;
}

static bool gather_rule(ba_state *st, const kiln_node *n)
{
    bool bd = batched(st, n, 0), bi = batched(st, n, 1);
    int64_t axis = axis_of(st, n, "axis", 0, 0);
    if (bd && !bi)
        return axis != 0 ? true : refuse(st, n, "gathers along the batch axis");
    if (!bd && bi) /* a table looked up by batched indices: the indices' dims lead */
        return axis == 0
                   ? true
                   : refuse(st, n, "batched indices gathered along axis %lld", (long long)axis);
    return refuse(st, n, "batched data gathered by batched indices");
}

/* A node with at least one batched input: whether it keeps the items
 * apart, by op. */
static bool node_rule(ba_state *st, const kiln_node *n)
{
    const kiln_op_info *info = kiln_op_get(n->op);
    switch (n->op) {
    case KILN_OP_RESIZE: /* a crop's region may move along axis 0 */
        if (!strcmp(kiln_attr_string(n, "coordinate_transformation_mode", ""),
                    "tf_crop_and_resize"))
            return refuse(st, n, "crops a region that may move along the batch axis");
        return batched(st, n, 0) && rest_free(st, n, 1)
                   ? true
                   : refuse(st, n, "a weight or parameter input is batched");
    case KILN_OP_CONV:
    case KILN_OP_CONVTRANSPOSE:
    case KILN_OP_AVERAGEPOOL:
    case KILN_OP_GLOBALAVERAGEPOOL:
    case KILN_OP_GLOBALMAXPOOL:
    case KILN_OP_LPPOOL:
    case KILN_OP_LRN:
    case KILN_OP_INSTANCENORM:
    case KILN_OP_DEPTHTOSPACE:
    case KILN_OP_SPACETODEPTH:
        return batched(st, n, 0) && rest_free(st, n, 1)
                   ? true
                   : refuse(st, n, "a weight or parameter input is batched");
    case KILN_OP_MAXPOOL: /* its indices count across the whole batch */
        return n->n_outputs == 1 ? true : refuse(st, n, "indices output");
    case KILN_OP_GRIDSAMPLE:
        return batched(st, n, 0) && batched(st, n, 1) ? true : refuse(st, n, "one operand batched");
    case KILN_OP_GEMM:
        if (!batched(st, n, 0) || kiln_attr_int(n, "transA", 0) != 0 || batched(st, n, 1))
            return refuse(st, n, "the batch is not A's rows");
        if (in_val(st, n, 2) && !batched(st, n, 2) && !free_broadcasts(st, in_val(st, n, 2), 2))
            return refuse(st, n, "C varies along the batch axis");
        if (batched(st, n, 2) && in_val(st, n, 2)->shape.rank != 2)
            return refuse(st, n, "C's batch axis is not the output's axis 0");
        return true;
    case KILN_OP_MATMUL:
        return matmul_rule(st, n);
    case KILN_OP_FLATTEN:
    case KILN_OP_RESHAPE:
    case KILN_OP_TILE:
        /* contiguous data renamed (Tile: repeated): items stay whole blocks
         * when axis 0 keeps extent c (checked on the output) */
        return batched(st, n, 0) && rest_free(st, n, 1) ? true
                                                        : refuse(st, n, "batched shape input");
    case KILN_OP_TRANSPOSE: {
        const int64_t *perm = NULL;
        int np = kiln_attr_ints(n, "perm", &perm);
        int r = in_val(st, n, 0)->shape.rank;
        bool keeps = np > 0 ? perm[0] == 0 : r <= 1;
        return keeps ? true : refuse(st, n, "moves the batch axis");
    }
    case KILN_OP_CONCAT: {
        int64_t axis = axis_of(st, n, "axis", 0, 0);
        if (axis == 0)
            return refuse(st, n, "concatenates along the batch axis");
        for (int k = 0; k < n->n_inputs; k++) {
            const kiln_value *v = in_val(st, n, k);
            if (v && !st->b[v->id] && !uniform_rows(st, v))
                return refuse(st, n, "input %d varies along the batch axis", k);
        }
        return true;
    }
    case KILN_OP_SPLIT:
        return axis_of(st, n, "axis", 0, 0) != 0 ? true : refuse(st, n, "splits the batch axis");
    case KILN_OP_SLICE:
        return slice_rule(st, n);
    case KILN_OP_PAD:
        return pad_rule(st, n);
    case KILN_OP_GATHER:
        return gather_rule(st, n);
    case KILN_OP_GATHERELEMENTS:
        return batched(st, n, 0) && batched(st, n, 1) && axis_of(st, n, "axis", 0, 0) != 0
                   ? true
                   : refuse(st, n, "not a per-item gather");
    case KILN_OP_SOFTMAX:
    case KILN_OP_LOGSOFTMAX:
    case KILN_OP_HARDMAX:
        return axis_of(st, n, "axis", -1, 0) != 0 ? true
                                                  : refuse(st, n, "normalizes the batch axis");
    case KILN_OP_LAYERNORM:
        return batched(st, n, 0) && rest_free(st, n, 1) && axis_of(st, n, "axis", -1, 0) >= 1
                   ? true
                   : refuse(st, n, "normalizes over the batch axis");
    case KILN_OP_LPNORM:
        return axis_of(st, n, "axis", -1, 0) != 0 ? true
                                                  : refuse(st, n, "normalizes the batch axis");
    case KILN_OP_ARGMAX:
    case KILN_OP_ARGMIN:
    case KILN_OP_CUMSUM:
    case KILN_OP_TOPK:
        return axis_of(st, n, "axis", n->op == KILN_OP_TOPK ? -1 : 0, 0) != 0
                   ? true
                   : refuse(st, n, "works along the batch axis");
    case KILN_OP_REDUCEMEAN:
    case KILN_OP_REDUCESUM:
    case KILN_OP_REDUCEMAX:
    case KILN_OP_REDUCEMIN:
    case KILN_OP_REDUCEPROD:
    case KILN_OP_REDUCEL1:
    case KILN_OP_REDUCEL2:
    case KILN_OP_REDUCELOGSUM:
    case KILN_OP_REDUCELOGSUMEXP:
    case KILN_OP_REDUCESUMSQUARE:
        return reduce_rule(st, n);
    case KILN_OP_TRILU: /* masks by row index: a batch of matrices only */
        return in_val(st, n, 0)->shape.rank >= 3 ? true : refuse(st, n, "rows are items");
    case KILN_OP_ONEHOT: {
        int r = in_val(st, n, 0)->shape.rank + 1;
        return batched(st, n, 0) && !batched(st, n, 1) &&
                       norm_axis(kiln_attr_int(n, "axis", -1), r) != 0
                   ? true
                   : refuse(st, n, "the new axis is axis 0");
    }
    default:
        break;
    }
    if (info && (info->pattern == KILN_PATTERN_ELEMWISE || info->pattern == KILN_PATTERN_BROADCAST))
        return broadcast_rule(st, n);
    return refuse(st, n, "no rule for this op");
}

bool kiln_graph_batch_separable(const kiln_graph *g, const bool *batched_in, int64_t c, char *why,
                                size_t why_size)
{
    if (why && why_size)
        why[0] = '\0';
    ba_state st = {.g = g, .c = c, .why = why, .why_size = why_size};
    if (c < 1 || !(st.b = calloc((size_t)g->n_values + 1, sizeof *st.b))) {
        if (why && why_size)
            snprintf(why, why_size, c < 1 ? "no batch" : "out of memory");
        return false;
    }
    bool ok = true;
    for (int i = 0; i < g->n_inputs && ok; i++) {
        const kiln_value *v = kiln_graph_value(g, g->inputs[i]);
        if (!batched_in[i])
            continue;
        if (v->shape.rank < 1 || v->shape.dims[0] != c) {
            if (why && why_size)
                snprintf(why, why_size, "input '%s': axis 0 is not the batch", v->name);
            ok = false;
        }
        st.b[v->id] = true;
    }
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const kiln_node *n = g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_inputs; k++)
            any |= batched(&st, n, k);
        if (!any)
            continue;
        ok = node_rule(&st, n);
        for (int k = 0; k < n->n_outputs && ok; k++) {
            const kiln_value *o = kiln_graph_value(g, n->outputs[k]);
            if (!o)
                continue;
            if (o->shape.rank < 1 || o->shape.dims[0] != c)
                ok = refuse(&st, n, "output %d does not keep the batch at axis 0", k);
            st.b[o->id] = true;
        }
    }
    for (int i = 0; i < g->n_outputs && ok; i++) {
        const kiln_value *v = kiln_graph_value(g, g->outputs[i]);
        if (!st.b[v->id]) {
            if (why && why_size)
                snprintf(why, why_size, "output '%s' does not depend on the batch", v->name);
            ok = false;
        }
    }
    free(st.b);
    return ok;
}
