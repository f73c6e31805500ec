/* ir/batch_axis.c: whether a graph computes each item of its batch on its
 * own (ir/batch_axis.h).
 *
 * Every value is either free (it depends on no batched input: weights,
 * constants folded from shapes) or batched: one of its axes, `ax`, holds
 * the batch, with extent o x c x m, index j along it belonging to item
 * (j / m) mod c (a reshape may merge the batch with the axis after it, m >
 * 1, as nn.MultiheadAttention's [S, B x H, D] does, or with the one before
 * it, o > 1, as its [S x B, E] does), and item i of the value
 * depends on item i of the inputs alone. The batched graph inputs start
 * with the batch at axis 0, m = 1. A node with no batched input makes free
 * outputs. A node with one gets a rule by op: it must not work across its
 * batch axis (a reduction, normalization, concatenation or gather along
 * it), its free inputs must not vary along it (they broadcast over it, or
 * are constants whose items' rows are all the same, which is what an
 * Expand of a class token to the batch folds into), and the rule says
 * where the batch goes (a transpose moves it, a reshape may merge or split
 * it). The graph outputs must end with the batch at axis 0, m = 1. Anything
 * else refuses, naming the node. */
#include "ir/batch_axis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ba_state {
    const kiln_graph *g;
    int *ax;    /* per value: its batch axis, -1 when free */
    int64_t *o; /* per value: the outer factor of ax's extent */
    int64_t *m; /* per value: consecutive indices per item along ax */
    int64_t c;
    char *why;
    size_t why_size;
} ba_state;

/* Where a node's outputs hold the batch. */
typedef struct ba_out {
    int ax;
    int64_t o, m;
} ba_out;

static bool same(ba_out a, ba_out b)
{
    return a.ax == b.ax && a.o == b.o && a.m == b.m;
}

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
    return v && st->ax[v->id] >= 0;
}

/* Input k's batch axis and multiplicity (it must be batched). */
static ba_out where(const ba_state *st, const kiln_node *n, int k)
{
    const kiln_value *v = in_val(st, n, k);
    return (ba_out){st->ax[v->id], st->o[v->id], st->m[v->id]};
}

static int rank_of(const ba_state *st, const kiln_node *n, int k)
{
    const kiln_value *v = in_val(st, n, k);
    return v ? v->shape.rank : 0;
}

static int64_t norm_axis(int64_t a, int rank)
{
    return a < 0 ? a + rank : a;
}

/* An axis attribute (default def) of input k's rank, normalized. */
static int64_t axis_of(const ba_state *st, const kiln_node *n, const char *name, int64_t def, int k)
{
    return norm_axis(kiln_attr_int(n, name, def), rank_of(st, n, k));
}

/* A constant of extent c x m along axis 0 whose items (m rows each) are
 * all the same bytes (o: the batch's outer factor, which must be 1). */
static bool uniform_items(const ba_state *st, const kiln_value *v, int64_t o, int64_t m)
{
    if (o != 1)
        return false;
    if (v->kind != KILN_VALUE_CONST || v->shape.rank < 1 || v->shape.dims[0] != st->c * m)
        return false;
    if (st->c == 1)
        return true;
    if (!v->data)
        return false;
    int64_t item = (int64_t)kiln_dtype_size(v->dtype) * m;
    for (int d = 1; d < v->shape.rank; d++)
        item *= v->shape.dims[d];
    if (item <= 0)
        return item == 0;
    for (int64_t i = 1; i < st->c; i++)
        if (memcmp(v->data, (const char *)v->data + i * item, (size_t)item) != 0)
            return false;
    return true;
}

/* A free operand of a broadcasting op whose output (rank r) holds the batch
 * at `o`: numpy broadcasting aligns trailing dims, so it reaches that axis
 * at position o - (r - its rank), where it must have extent 1 (or be the
 * same for every item). */
static bool free_broadcasts(const ba_state *st, const kiln_value *v, int r, ba_out o)
{
    int p = o.ax - (r - v->shape.rank);
    return p < 0 || v->shape.dims[p] == 1 || (p == 0 && uniform_items(st, v, o.o, o.m));
}

/* Inputs from `from` on are all free. */
static bool rest_free(const ba_state *st, const kiln_node *n, int from)
{
    for (int k = from; k < n->n_inputs; k++)
        if (batched(st, n, k))
            return false;
    return true;
}

static bool broadcast_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    int r = kiln_graph_value(st->g, n->outputs[0])->shape.rank;
    o->ax = -1;
    for (int k = 0; k < n->n_inputs; k++) {
        if (!batched(st, n, k))
            continue;
        ba_out w = where(st, n, k);
        w.ax += r - rank_of(st, n, k);
        if (o->ax >= 0 && !same(w, *o))
            return refuse(st, n, "inputs hold the batch at different axes");
        *o = w;
    }
    for (int k = 0; k < n->n_inputs; k++) {
        const kiln_value *v = in_val(st, n, k);
        if (v && st->ax[v->id] < 0 && !free_broadcasts(st, v, r, *o))
            return refuse(st, n, "input %d varies along the batch axis", k);
    }
    return true;
}

/* MatMul (numpy semantics; both operands of rank >= 2). */
static bool matmul_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    const kiln_value *a = in_val(st, n, 0), *b = in_val(st, n, 1);
    int ra = a->shape.rank, rb = b->shape.rank, r = ra > rb ? ra : rb;
    if (ra < 2 || rb < 2)
        return refuse(st, n, "a vector operand");
    bool ba = st->ax[a->id] >= 0, bb = st->ax[b->id] >= 0;
    ba_out none = {-1, 0, 0}, wa = ba ? where(st, n, 0) : none, wb = bb ? where(st, n, 1) : none;
    if ((ba && wa.ax == ra - 1) || (bb && wb.ax == rb - 2))
        return refuse(st, n, "the batch is the reduction axis");
    if (ba && wa.ax == ra - 2) { /* rows of A */
        *o = (ba_out){r - 2, wa.o, wa.m};
        return bb ? refuse(st, n, "the batch is both A's rows and B's") : true;
    }
    if (bb && wb.ax == rb - 1) { /* columns of B */
        *o = (ba_out){r - 1, wb.o, wb.m};
        return ba ? refuse(st, n, "the batch is both B's columns and A's") : true;
    }
    /* a batch of matrices: the broadcast dims */
    ba_out w = ba ? wa : wb;
    w.ax += r - (ba ? ra : rb);
    if (ba && bb && (wb.ax + r - rb != w.ax || wb.o != w.o || wb.m != w.m))
        return refuse(st, n, "A and B hold the batch at different axes");
    const kiln_value *f = ba && bb ? NULL : ba ? b : a;
    int p = f ? w.ax - (r - f->shape.rank) : -1;
    if (f && p >= 0 && f->shape.dims[p] != 1)
        return refuse(st, n, "the other operand varies along the batch axis");
    *o = w;
    return true;
}

static bool gemm_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    bool ta = kiln_attr_int(n, "transA", 0) != 0, tb = kiln_attr_int(n, "transB", 0) != 0;
    if (batched(st, n, 0) && !batched(st, n, 1) && where(st, n, 0).ax == (ta ? 1 : 0))
        *o = where(st, n, 0), o->ax = 0; /* rows of A */
    else if (batched(st, n, 1) && !batched(st, n, 0) && where(st, n, 1).ax == (tb ? 0 : 1))
        *o = where(st, n, 1), o->ax = 1; /* columns of B */
    else
        return refuse(st, n, "the batch is not A's rows nor B's columns");
    const kiln_value *cv = in_val(st, n, 2);
    if (!cv)
        return true;
    if (st->ax[cv->id] >= 0) {
        ba_out w = where(st, n, 2);
        return w.ax + 2 - cv->shape.rank == o->ax && w.o == o->o && w.m == o->m
                   ? true
                   : refuse(st, n, "C holds the batch at another axis");
    }
    return free_broadcasts(st, cv, 2, *o) ? true : refuse(st, n, "C varies along the batch axis");
}

/* Reshape or Flatten: the data keeps its order. Write a flat index as
 * (before, i, after) with i the item and `after` below it, ib = m x (the
 * input's dims after ax) elements per step of i, ob = (the dims before ax) x
 * o steps above it. The batch is at the output axis b whose later dims
 * divide ib (m' = ib / their product) and whose extent is o' x c x m' with
 * (the dims before b) x o' = ob. */
static bool reshape_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    const kiln_value *x = in_val(st, n, 0);
    const kiln_value *y = kiln_graph_value(st->g, n->outputs[0]);
    ba_out w = where(st, n, 0);
    int64_t ob = w.o, ib = w.m;
    for (int d = 0; d < w.ax; d++)
        ob *= x->shape.dims[d];
    for (int d = w.ax + 1; d < x->shape.rank; d++)
        ib *= x->shape.dims[d];
    int64_t before = 1;
    for (int b = 0; b < y->shape.rank; b++) {
        int64_t e = y->shape.dims[b], after = 1;
        for (int d = b + 1; d < y->shape.rank; d++)
            after *= y->shape.dims[d];
        if (e > 0 && after > 0 && ib % after == 0 && e % (st->c * (ib / after)) == 0 &&
            before * (e / (st->c * (ib / after))) == ob) {
            *o = (ba_out){b, e / (st->c * (ib / after)), ib / after};
            return true;
        }
        before *= e;
    }
    return refuse(st, n, "splits the items of the batch");
}

static bool reduce_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    const int64_t *axes = NULL;
    int na = kiln_attr_ints(n, "axes", &axes), r = rank_of(st, n, 0);
    *o = where(st, n, 0);
    if (na <= 0)
        return kiln_attr_int(n, "noop_with_empty_axes", 0) == 1
                   ? true
                   : refuse(st, n, "reduces every axis, the batch's included");
    int before = 0;
    for (int i = 0; i < na; i++) {
        int64_t a = norm_axis(axes[i], r);
        if (a == o->ax)
            return refuse(st, n, "reduces the batch axis");
        before += a < o->ax;
    }
    if (kiln_attr_int(n, "keepdims", 1) == 0)
        o->ax -= before;
    return true;
}

static bool slice_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    const int64_t *axes = NULL, *steps = NULL;
    int na = kiln_attr_ints(n, "axes", &axes), ns = kiln_attr_ints(n, "steps", &steps);
    int r = rank_of(st, n, 0);
    *o = where(st, n, 0);
    int count = na < 0 ? r : na;
    for (int i = 0; i < count; i++) /* the batch axis whole, in order (its extent checked) */
        if ((na < 0 ? i : norm_axis(axes[i], r)) == o->ax && i < ns && steps[i] != 1)
            return refuse(st, n, "steps along the batch axis");
    return true;
}

static bool gather_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    bool bd = batched(st, n, 0), bi = batched(st, n, 1);
    int64_t g = axis_of(st, n, "axis", 0, 0);
    int q = rank_of(st, n, 1);
    if (bd && !bi) {
        ba_out w = where(st, n, 0);
        if (g == w.ax)
            return refuse(st, n, "gathers along the batch axis");
        *o = w;
        o->ax = g < w.ax ? w.ax - 1 + q : w.ax;
        return true;
    }
    if (!bd && bi) { /* a table looked up by batched indices */
        *o = where(st, n, 1);
        o->ax += (int)g;
        return true;
    }
    return refuse(st, n, "batched data gathered by batched indices");
}

/* Ops that work along one axis (attribute `name`, default def) and keep
 * the others: it must not be the batch's. */
static bool along_rule(ba_state *st, const kiln_node *n, const char *name, int64_t def,
                       const char *what, ba_out *o)
{
    *o = where(st, n, 0);
    return axis_of(st, n, name, def, 0) != o->ax ? true : refuse(st, n, "%s the batch axis", what);
}

/* A node with at least one batched input: whether it keeps the items
 * apart, and where its outputs hold the batch. */
static bool node_rule(ba_state *st, const kiln_node *n, ba_out *o)
{
    const kiln_op_info *info = kiln_op_get(n->op);
    switch (n->op) {
    case KILN_OP_RESIZE: /* a crop's region may move along axis 0 */
        if (!strcmp(kiln_attr_string(n, "coordinate_transformation_mode", ""),
                    "tf_crop_and_resize"))
            return refuse(st, n, "crops a region that may move along the batch axis");
        /* fall through */
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
    case KILN_OP_MAXPOOL:
    case KILN_OP_GRIDSAMPLE:
        /* images along axis 0 (MaxPool's indices count across the batch) */
        if (!batched(st, n, 0) || where(st, n, 0).ax != 0)
            return refuse(st, n, "the batch is not the images' axis");
        if (n->op == KILN_OP_MAXPOOL && n->n_outputs > 1)
            return refuse(st, n, "indices output");
        *o = where(st, n, 0);
        if (n->op == KILN_OP_GRIDSAMPLE)
            return batched(st, n, 1) && same(where(st, n, 1), *o)
                       ? true
                       : refuse(st, n, "the grid is not batched as the images");
        return rest_free(st, n, 1) ? true : refuse(st, n, "a weight or parameter input is batched");
    case KILN_OP_GEMM:
        return gemm_rule(st, n, o);
    case KILN_OP_MATMUL:
        return matmul_rule(st, n, o);
    case KILN_OP_FLATTEN:
    case KILN_OP_RESHAPE:
        return batched(st, n, 0) && rest_free(st, n, 1) ? reshape_rule(st, n, o)
                                                        : refuse(st, n, "batched shape input");
    case KILN_OP_TILE: /* repeats along the batch axis: checked by the output's extent */
        *o = where(st, n, 0);
        return true;
    case KILN_OP_TRANSPOSE: {
        const int64_t *perm = NULL;
        int np = kiln_attr_ints(n, "perm", &perm), r = rank_of(st, n, 0);
        *o = where(st, n, 0);
        int a = o->ax;
        o->ax = r - 1 - a; /* no perm: reversed */
        for (int j = 0; j < np; j++)
            if (norm_axis(perm[j], r) == a)
                o->ax = j;
        return true;
    }
    case KILN_OP_CONCAT: {
        int64_t axis = axis_of(st, n, "axis", 0, 0);
        o->ax = -1;
        for (int k = 0; k < n->n_inputs; k++)
            if (batched(st, n, k)) {
                ba_out w = where(st, n, k);
                if (o->ax >= 0 && !same(w, *o))
                    return refuse(st, n, "inputs hold the batch at different axes");
                *o = w;
            }
        if (axis == o->ax)
            return refuse(st, n, "concatenates along the batch axis");
        for (int k = 0; k < n->n_inputs; k++) {
            const kiln_value *v = in_val(st, n, k);
            if (v && st->ax[v->id] < 0 && (o->ax != 0 || !uniform_items(st, v, o->o, o->m)))
                return refuse(st, n, "input %d varies along the batch axis", k);
        }
        return true;
    }
    case KILN_OP_SPLIT:
        return along_rule(st, n, "axis", 0, "splits", o);
    case KILN_OP_SLICE:
        return slice_rule(st, n, o);
    case KILN_OP_PAD: {
        const int64_t *pads = NULL;
        int np = kiln_attr_ints(n, "pads", &pads), r = rank_of(st, n, 0);
        *o = where(st, n, 0);
        if (kiln_node_attr(n, "axes"))
            return refuse(st, n, "pads given per axis");
        return np == 2 * r && (pads[o->ax] != 0 || pads[o->ax + r] != 0)
                   ? refuse(st, n, "pads the batch axis")
                   : true;
    }
    case KILN_OP_GATHER:
        return gather_rule(st, n, o);
    case KILN_OP_GATHERELEMENTS:
        *o = where(st, n, 0);
        return batched(st, n, 0) && batched(st, n, 1) && same(where(st, n, 1), *o) &&
                       axis_of(st, n, "axis", 0, 0) != o->ax
                   ? true
                   : refuse(st, n, "not a per-item gather");
    case KILN_OP_SOFTMAX:
    case KILN_OP_LOGSOFTMAX:
    case KILN_OP_HARDMAX:
    case KILN_OP_LPNORM:
        return along_rule(st, n, "axis", -1, "normalizes", o);
    case KILN_OP_CUMSUM:
        return along_rule(st, n, "axis", 0, "sums along", o);
    case KILN_OP_TOPK:
        return along_rule(st, n, "axis", -1, "sorts along", o);
    case KILN_OP_ARGMAX:
    case KILN_OP_ARGMIN: {
        int64_t a = axis_of(st, n, "axis", 0, 0);
        if (!along_rule(st, n, "axis", 0, "reduces", o))
            return false;
        o->ax -= kiln_attr_int(n, "keepdims", 1) == 0 && a < o->ax;
        return true;
    }
    case KILN_OP_LAYERNORM: /* normalizes from its axis to the last */
        *o = where(st, n, 0);
        return batched(st, n, 0) && rest_free(st, n, 1) && axis_of(st, n, "axis", -1, 0) > o->ax
                   ? true
                   : refuse(st, n, "normalizes over the batch axis");
    case KILN_OP_TRILU: /* masks by row and column index: a batch of matrices only */
        *o = where(st, n, 0);
        return o->ax < rank_of(st, n, 0) - 2 ? true : refuse(st, n, "rows or columns are items");
    case KILN_OP_ONEHOT: {
        if (!batched(st, n, 0) || batched(st, n, 1))
            return refuse(st, n, "the depth is batched");
        *o = where(st, n, 0);
        int64_t p = norm_axis(kiln_attr_int(n, "axis", -1), rank_of(st, n, 0) + 1);
        o->ax += p <= o->ax;
        return true;
    }
    default:
        break;
    }
    if (info && info->pattern == KILN_PATTERN_COMM_REDUCE) /* the Reduce ops */
        return reduce_rule(st, n, o);
    if (info && (info->pattern == KILN_PATTERN_ELEMWISE || info->pattern == KILN_PATTERN_BROADCAST))
        return broadcast_rule(st, n, o);
    return refuse(st, n, "no rule for this op");
}

bool kiln_graph_batch_separable(const kiln_graph *g, const bool *batched_in, int64_t c, char *why,
                                size_t why_size)
{
    if (why && why_size)
        why[0] = '\0';
    ba_state st = {.g = g, .c = c, .why = why, .why_size = why_size};
    st.ax = malloc(((size_t)g->n_values + 1) * sizeof *st.ax);
    st.o = calloc((size_t)g->n_values + 1, sizeof *st.o);
    st.m = calloc((size_t)g->n_values + 1, sizeof *st.m);
    if (c < 1 || !st.ax || !st.o || !st.m) {
        if (why && why_size)
            snprintf(why, why_size, c < 1 ? "no batch" : "out of memory");
        free(st.ax);
        free(st.o);
        free(st.m);
        return false;
    }
    for (int i = 0; i < g->n_values; i++)
        st.ax[i] = -1;
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
        st.ax[v->id] = 0;
        st.o[v->id] = 1;
        st.m[v->id] = 1;
    }
    /* one item: nothing to keep apart (and extents of 1 say nothing of
     * where the batch is); the outputs must still lead with it */
    for (int i = 0; i < g->n_outputs && ok && c == 1; i++) {
        const kiln_value *v = kiln_graph_value(g, g->outputs[i]);
        if (v->shape.rank < 1 || v->shape.dims[0] != 1) {
            if (why && why_size)
                snprintf(why, why_size, "output '%s' does not hold the batch at axis 0", v->name);
            ok = false;
        }
    }
    for (int i = 0; i < g->n_nodes && ok && c > 1; i++) {
        const kiln_node *n = g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_inputs; k++)
            any |= batched(&st, n, k);
        if (!any)
            continue;
        ba_out o = {-1, 0, 0};
        ok = node_rule(&st, n, &o);
        for (int k = 0; k < n->n_outputs && ok; k++) {
            const kiln_value *y = kiln_graph_value(g, n->outputs[k]);
            if (!y)
                continue;
            if (o.ax < 0 || o.ax >= y->shape.rank || y->shape.dims[o.ax] != o.o * c * o.m)
                ok = refuse(&st, n, "output %d does not keep the batch", k);
            st.ax[y->id] = o.ax;
            st.o[y->id] = o.o;
            st.m[y->id] = o.m;
        }
    }
    for (int i = 0; i < g->n_outputs && ok && c > 1; i++) {
        const kiln_value *v = kiln_graph_value(g, g->outputs[i]);
        if (st.ax[v->id] != 0 || st.o[v->id] != 1 || st.m[v->id] != 1) {
            if (why && why_size)
                snprintf(why, why_size,
                         st.ax[v->id] < 0 ? "output '%s' does not depend on the batch"
                                          : "output '%s' does not hold the batch at axis 0",
                         v->name);
            ok = false;
        }
    }
    free(st.ax);
    free(st.o);
    free(st.m);
    return ok;
}
