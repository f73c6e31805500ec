/* pass/fuse.c: operator fusion by pattern kind.
 *
 * Algorithm: one walk in node order. Every node either joins the group of one
 * of its producers or opens a group of its own:
 *  - An elementwise/broadcast node n (kiln_target_epilogue_op) joins the group G that
 *    produced one of its inputs (the "tip") when every value G produced so far
 *    is read only by G's nodes and n (never by anyone else, never a graph
 *    output) and G's template accepts n as an epilogue step (its match
 *    hook says which kind, target/template.h):
 *      templates whose epilogue is only their kernel header's: residual
 *        Add of an activation of the same shape and layout, then Relu, then
 *        Clip, each at most once;
 *      other anchored templates (conv, pool, dense, ...): any supported
 *        float op whose other operand is the same-shaped activation, a
 *        scalar, a per-channel or a per-last-dim constant, or an earlier
 *        value of the group (SiLU: x * sigmoid(x));
 *      elementwise groups: any supported float op of the same output shape
 *        (external operands broadcast in row-major groups; per-channel
 *        constants in blocked ones).
 *    So a group has exactly one output, and every external input of a group is
 *    final before the group runs: ordering groups by their last node is
 *    topological.
 *  - Reshape/Flatten on row-major data form VIEW groups (no kernel: the output
 *    aliases the input).
 *  - A Concat whose inputs are each produced by a kernel group and laid out
 *    contiguously in its output (all dims before the axis are 1) becomes
 *    CONCAT_INPLACE: no kernel, its producers write into their slices of the
 *    output (plan-memory places them). Concats sharing inputs must form a
 *    chain of prefixes (a dense block's), see concat_inplace.
 *  - An anchored node (a depthwise conv) reading the output of a group whose
 *    template set has a template for the pair (template.pair: an expand 1x1
 *    conv, its activation, then the depthwise: the wide activation never
 *    goes to memory) joins that group when every value the group produced
 *    is read only by it; the group then runs as that template and takes
 *    elementwise nodes after the second anchor as any anchored group does.
 *  - An anchored node (a conv) whose data input (input 0) is the output of
 *    an elementwise group that nothing else reads (no value of it read
 *    outside the group or a graph output; the output read by the node once,
 *    as its data input) joins that group when the node's template takes the
 *    group as its input prologue (template.prologue: a pre-activation
 *    BatchNorm's per-channel Mul/Add and Relu, applied as the conv reads its
 *    input, or a squeeze-and-excitation block's run-time scale, folded into
 *    the conv's weights, when its cost model says so). The group becomes anchored at the
 *    node (its prologue's nodes first in its node list), runs as that
 *    template, and takes elementwise nodes after the anchor as any anchored
 *    group does.
 *  - Everything else (conv, pooling, dense, softmax, movement, reference
 *    fallbacks, multi-output ops) opens a group. */
#include <stdlib.h>
#include <string.h>

#include "pass/pass.h"
#include "target/template.h"
#include "util/error.h"

typedef enum style { ST_NONE, ST_CONV, ST_GENERIC, ST_ELEMWISE } style;

typedef struct gstate {
    style st;
    int tip;        /* the group's current output value */
    int n_nodes, cap;
    int *nodes;
    int last;       /* last node index */
    bool has_add, has_relu, has_clip;
    const kiln_template *tpl; /* a template for two anchors took the group (pair_group),
                                 or the anchor with the group as its prologue */
    bool pro;       /* the group is the input prologue of `anchor` (prologue_group) */
    int anchor;     /* with pro: the anchor's node (else the anchor is nodes[0]) */
} gstate;

typedef struct fctx {
    const kiln_graph *g;
    const kiln_target *tg;
    int *cons_start, *cons; /* CSR: consumers of each value (node ids, one per edge) */
    int *group_of;          /* node -> group */
    gstate *gs;
    int n_groups;
} fctx;

static bool is_f32(const kiln_value *v)
{
    return v->dtype == KILN_DTYPE_FLOAT32;
}

/* The fusion style of what a template absorbs after its anchor. */
static style epi_style(kiln_epi_kind e)
{
    switch (e) {
    case KILN_EPI_KIND_HEADER:
        return ST_CONV; /* the kernel headers' epilogue */
    case KILN_EPI_KIND_ANY:
        return ST_GENERIC;
    case KILN_EPI_KIND_CHAIN:
        return ST_ELEMWISE;
    default:
        return ST_NONE;
    }
}

/* The fusion style of a group anchored at n: what its template absorbs. */
static style anchor_style(const kiln_target *tg, const kiln_graph *g, const kiln_node *n)
{
    if (n->n_outputs != 1 || !is_f32(g->values[n->outputs[0]]))
        return ST_NONE;
    kiln_epi_kind e;
    kiln_target_template(tg, g, n, &e);
    return epi_style(e);
}

/* How the epilogue can read operand `v` against output `y`. */
static bool operand_ok(const kiln_graph *g, style st, const kiln_value *v, const kiln_value *y)
{
    if (!is_f32(v))
        return false;
    if (kiln_shape_numel(&v->shape) == 1)
        return v->kind == KILN_VALUE_CONST || v->layout.kind == KILN_LAYOUT_ROW_MAJOR;
    if (kiln_shape_equal(&v->shape, &y->shape) && kiln_layout_equal(v->layout, y->layout))
        return true;
    if (st == ST_ELEMWISE) {
        /* blocked groups: per-channel constants too (densenet's
         * pre-activation BN, Mul then Add, then Relu: one kernel) */
        if (y->layout.kind == KILN_LAYOUT_NCHWC)
            return v->kind == KILN_VALUE_CONST && v->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
                   kiln_epilogue_bcast_kind(&v->shape, &y->shape, y->layout) == 2;
        return y->layout.kind == KILN_LAYOUT_ROW_MAJOR && v->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
               v->shape.rank <= y->shape.rank;
    }
    (void)g;
    if (v->kind != KILN_VALUE_CONST || v->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    return kiln_epilogue_bcast_kind(&v->shape, &y->shape, y->layout) != 0;
}

/* Whether node c, not visited yet, will join group gi right after n: an
 * epilogue op of n's output shape and layout that reads n's output and
 * otherwise only values of the group or operands the group may read. SiLU
 * and HardSwish (x * sigmoid(x), x * hardsigmoid(x)): the Sigmoid may join
 * while the Mul reading the group's x still waits its turn, which then
 * comes with the Sigmoid's output as the group's tip. */
static bool joins_next(const fctx *f, int gi, const kiln_node *n, int ci)
{
    const kiln_graph *g = f->g;
    const gstate *s = &f->gs[gi];
    const kiln_node *c = g->nodes[ci];
    if ((s->st != ST_GENERIC && s->st != ST_ELEMWISE) || f->group_of[ci] != -1 ||
        n->n_outputs != 1 || c->n_outputs != 1 || !kiln_target_epilogue_op(f->tg, g, c))
        return false;
    const kiln_value *y = g->values[n->outputs[0]], *cy = g->values[c->outputs[0]];
    if (!is_f32(cy) || !kiln_shape_equal(&cy->shape, &y->shape) ||
        !kiln_layout_equal(cy->layout, y->layout) || y->is_output)
        return false;
    /* c can join only if n's output, then the group's tip, is read by c
     * alone: with another reader c would be refused (closed_except) and the
     * group value c reads would be left internal with a reader outside */
    for (int e = f->cons_start[y->id]; e < f->cons_start[y->id + 1]; e++)
        if (f->cons[e] != ci)
            return false;
    bool reads_n = false;
    for (int k = 0; k < c->n_inputs; k++) {
        int v = c->inputs[k];
        if (v < 0)
            return false;
        const kiln_value *x = g->values[v];
        if (v == n->outputs[0])
            reads_n = true;
        else if (!(x->kind == KILN_VALUE_NODE && f->group_of[x->producer] == gi) &&
                 !operand_ok(g, s->st, x, cy))
            return false;
    }
    return reads_n;
}

/* True when every value produced by group gi is read only by the group and n
 * (and is not a graph output), or by one node that joins right after n
 * (joins_next). */
static bool closed_except(const fctx *f, int gi, const kiln_node *n)
{
    const gstate *s = &f->gs[gi];
    int pending = -1;
    for (int i = 0; i < s->n_nodes; i++) {
        const kiln_node *m = f->g->nodes[s->nodes[i]];
        for (int k = 0; k < m->n_outputs; k++) {
            int v = m->outputs[k];
            if (f->g->values[v]->is_output)
                return false;
            for (int e = f->cons_start[v]; e < f->cons_start[v + 1]; e++) {
                int c = f->cons[e];
                if (c == n->id || f->group_of[c] == gi || c == pending)
                    continue;
                if (pending >= 0 || !joins_next(f, gi, n, c))
                    return false;
                pending = c;
            }
        }
    }
    return true;
}

static bool accepts(const fctx *f, int gi, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    const gstate *s = &f->gs[gi];
    if (s->st == ST_NONE || !kiln_target_epilogue_op(f->tg, g, n))
        return false;
    const kiln_value *y = g->values[n->outputs[0]];
    const kiln_value *t = g->values[s->tip];
    if (!kiln_shape_equal(&y->shape, &t->shape) || !kiln_layout_equal(y->layout, t->layout) ||
        !is_f32(y))
        return false;
    int tip_uses = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v == s->tip) {
            tip_uses++;
            continue;
        }
        const kiln_value *x = g->values[v];
        bool internal = x->kind == KILN_VALUE_NODE && f->group_of[x->producer] == gi;
        if (internal) {
            /* an earlier value of the group (SiLU's x * sigmoid(x)): elementwise
             * chains and generated epilogues read it in registers */
            if (s->st != ST_ELEMWISE && s->st != ST_GENERIC)
                return false;
            continue;
        }
        if (!operand_ok(g, s->st, x, y))
            return false;
    }
    if (tip_uses == 0)
        return false;
    if (s->st == ST_CONV) {
        if (n->op == KILN_OP_ADD) {
            int other = n->inputs[0] == s->tip ? n->inputs[1] : n->inputs[0];
            const kiln_value *o = g->values[other];
            if (s->has_add || s->has_relu || s->has_clip || o->kind == KILN_VALUE_CONST ||
                other == s->tip || !kiln_shape_equal(&o->shape, &y->shape) ||
                !kiln_layout_equal(o->layout, y->layout))
                return false;
        } else if (n->op == KILN_OP_RELU) {
            if (s->has_relu || s->has_clip)
                return false;
        } else if (n->op == KILN_OP_CLIP) {
            if (s->has_clip)
                return false;
        } else {
            return false;
        }
    }
    return closed_except(f, gi, n);
}

/* The group whose tip (last value) is the data input (input 0) of n, a node
 * with one float output, or -1 (none, or a graph input or constant). */
static int data_input_group(const fctx *f, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1 ||
        !is_f32(g->values[n->outputs[0]]))
        return -1;
    const kiln_value *x = g->values[n->inputs[0]];
    if (x->kind != KILN_VALUE_NODE)
        return -1;
    int gi = f->group_of[x->producer];
    return gi >= 0 && f->gs[gi].tip == x->id ? gi : -1;
}

/* The group anchored node n joins as a second anchor (see the top), or -1. */
static int pair_group(const fctx *f, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    int gi = data_input_group(f, n);
    if (gi < 0)
        return -1;
    const gstate *s = &f->gs[gi];
    if (s->tpl || s->st == ST_NONE || s->st == ST_ELEMWISE)
        return -1;
    for (int k = 1; k < n->n_inputs; k++) /* its other inputs: no values of the group */
        if (n->inputs[k] >= 0 && g->values[n->inputs[k]]->kind == KILN_VALUE_NODE &&
            f->group_of[g->values[n->inputs[k]]->producer] == gi)
            return -1;
    kiln_epi_kind e;
    if (!kiln_target_pair_template(f->tg, g, s->nodes, s->n_nodes, n, &e) ||
        !closed_except(f, gi, n))
        return -1;
    return gi;
}

/* The elementwise group that anchored node n may take as its input
 * prologue (see the top), or -1. */
static int prologue_group(const fctx *f, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    int gi = data_input_group(f, n);
    if (gi < 0)
        return -1;
    const kiln_value *x = g->values[n->inputs[0]];
    const gstate *s = &f->gs[gi];
    if (s->tpl || s->pro || s->st != ST_ELEMWISE)
        return -1;
    for (int k = 1; k < n->n_inputs; k++)
        if (n->inputs[k] == x->id)
            return -1;
    /* every value of the group: no graph output, read by the group's nodes
     * only, but for its output, read by n alone (as its data input) */
    for (int i = 0; i < s->n_nodes; i++) {
        const kiln_node *m = g->nodes[s->nodes[i]];
        for (int k = 0; k < m->n_outputs; k++) {
            int v = m->outputs[k];
            if (g->values[v]->is_output)
                return -1;
            for (int e = f->cons_start[v]; e < f->cons_start[v + 1]; e++) {
                int c = f->cons[e];
                if (f->group_of[c] != gi && (c != n->id || v != x->id))
                    return -1;
            }
        }
    }
    if (!kiln_target_prologue_template(f->tg, g, s->nodes, s->n_nodes, n, NULL))
        return -1;
    return gi;
}

static bool push_node(gstate *s, int node)
{
    if (s->n_nodes == s->cap) {
        int nc = s->cap ? s->cap * 2 : 4;
        int *p = realloc(s->nodes, sizeof(int) * (size_t)nc);
        if (!p)
            return false;
        s->nodes = p;
        s->cap = nc;
    }
    s->nodes[s->n_nodes++] = node;
    s->last = node;
    return true;
}

/* The per-concat conditions of an in-place Concat: its output is laid out
 * with every input a contiguous slice (all dims before the axis are 1; in a
 * blocked layout the axis is the channel and every input but the last fills
 * whole blocks, so the slices start on block boundaries; every slice starts
 * 64-byte aligned, as the runtime requires of every tensor: 10 channels of
 * 7x7 floats are not), and every input is a kernel group's single output in
 * the same layout, no graph output, and read once by this concat. */
static bool concat_slices(const fctx *f, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    if (n->op != KILN_OP_CONCAT || n->n_outputs != 1)
        return false;
    const kiln_value *y = g->values[n->outputs[0]];
    int64_t axis = kiln_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += y->shape.rank;
    if (axis < 0 || axis >= y->shape.rank)
        return false;
    for (int d = 0; d < axis; d++)
        if (y->shape.dims[d] != 1)
            return false;
    bool blocked = y->layout.kind == KILN_LAYOUT_NCHWC;
    if (blocked && axis != 1)
        return false;
    int64_t off = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        const kiln_value *x = g->values[n->inputs[k]];
        if (x->kind != KILN_VALUE_NODE || x->is_output || !kiln_layout_equal(x->layout, y->layout))
            return false;
        if (off % 64 != 0)
            return false;
        off += kiln_layout_nbytes(x->dtype, &x->shape, x->layout);
        if (blocked && k + 1 < n->n_inputs &&
            (x->shape.rank < 2 || y->layout.block_a < 1 || x->shape.dims[1] % y->layout.block_a != 0))
            return false;
        const kiln_node *p = g->nodes[x->producer];
        if (p->n_outputs != 1 || p->op == KILN_OP_CONCAT || p->op == KILN_OP_RESHAPE ||
            p->op == KILN_OP_FLATTEN || p->op == KILN_OP_IDENTITY)
            return false;
        for (int j = 0; j < k; j++)
            if (n->inputs[j] == n->inputs[k])
                return false;
    }
    return true;
}

/* Whether a's inputs are the first inputs of b, in order. */
static bool concat_prefix(const kiln_node *a, const kiln_node *b)
{
    if (a->n_inputs > b->n_inputs)
        return false;
    for (int k = 0; k < a->n_inputs; k++)
        if (a->inputs[k] != b->inputs[k])
            return false;
    return true;
}

/* Whether Concat n can be in place. Its inputs may also be read by other
 * nodes (they read the slice), but every Concat reading one of them must
 * form, with n, a chain of prefixes: a dense block's concatenations
 * (x0,y1), (x0,y1,y2), .. (x0,y1,..,yk), where each is a prefix of the
 * longest one, the chain's head; plan-memory then makes every input a slice
 * of the head's buffer and every shorter concatenation's output the head's
 * leading bytes (see kiln_pass_concat_head), so the features are written
 * once, where they are read. The shorter ones' outputs must be no graph
 * outputs. */
static bool concat_inplace(const fctx *f, const kiln_node *n)
{
    const kiln_graph *g = f->g;
    if (!concat_slices(f, n))
        return false;
    const kiln_node *head = n;
    for (bool grew = true; grew;) {
        grew = false;
        for (int k = 0; k < head->n_inputs; k++) {
            int v = head->inputs[k];
            for (int e = f->cons_start[v]; e < f->cons_start[v + 1]; e++) {
                const kiln_node *c = g->nodes[f->cons[e]];
                if (c == head || c->op != KILN_OP_CONCAT)
                    continue;
                if (!concat_slices(f, c))
                    return false;
                if (concat_prefix(c, head))
                    continue;
                if (!concat_prefix(head, c))
                    return false;
                head = c;
                grew = true;
                break;
            }
            if (grew)
                break;
        }
    }
    /* every concat of the chain but the head: its output is a slice */
    for (int k = 0; k < head->n_inputs; k++) {
        int v = head->inputs[k];
        for (int e = f->cons_start[v]; e < f->cons_start[v + 1]; e++) {
            const kiln_node *c = g->nodes[f->cons[e]];
            if (c != head && c->op == KILN_OP_CONCAT && g->values[c->outputs[0]]->is_output)
                return false;
        }
    }
    return true;
}

static kiln_status build_groups(kiln_pass_ctx *ctx, fctx *f, kiln_error *err)
{
    const kiln_graph *g = f->g;
    kiln_group *groups = calloc((size_t)(f->n_groups ? f->n_groups : 1), sizeof *groups);
    if (!groups)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    /* order groups by their last node (topological, see the top comment) */
    int *order = malloc(sizeof(int) * (size_t)(f->n_groups ? f->n_groups : 1));
    int *rank = malloc(sizeof(int) * (size_t)(f->n_groups ? f->n_groups : 1));
    int *in_group = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(int));
    if (!order || !rank || !in_group) {
        free(groups);
        free(order);
        free(rank);
        free(in_group);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int no = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int gi = f->group_of[i];
        if (f->gs[gi].last == i)
            order[no++] = gi;
    }
    for (int r = 0; r < no; r++)
        rank[order[r]] = r;
    kiln_status st = KILN_OK;
    for (int r = 0; r < no && st == KILN_OK; r++) {
        gstate *s = &f->gs[order[r]];
        kiln_group *gr = &groups[r];
        gr->id = r;
        gr->n_nodes = s->n_nodes;
        gr->nodes = s->nodes;
        s->nodes = NULL;
        gr->anchor = s->pro ? s->anchor : gr->nodes[0];
        gr->tpl = s->tpl;
        const kiln_node *a = g->nodes[gr->anchor];
        if ((a->op == KILN_OP_RESHAPE || a->op == KILN_OP_FLATTEN) && gr->n_nodes == 1 &&
            g->values[a->inputs[0]]->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
            g->values[a->inputs[0]]->kind != KILN_VALUE_CONST)
            gr->kind = KILN_GROUP_VIEW;
        else if (a->op == KILN_OP_CONCAT && gr->n_nodes == 1 && concat_inplace(f, a))
            gr->kind = KILN_GROUP_CONCAT_INPLACE;
        /* inputs: values read by the group's nodes and produced outside it */
        int cap = 8;
        gr->inputs = malloc(sizeof(int) * (size_t)cap);
        gr->outputs = malloc(sizeof(int) * (size_t)(a->n_outputs > 1 ? a->n_outputs : 1));
        if (!gr->inputs || !gr->outputs) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        for (int i = 0; i < gr->n_nodes; i++) {
            const kiln_node *m = g->nodes[gr->nodes[i]];
            for (int k = 0; k < m->n_inputs; k++) {
                int v = m->inputs[k];
                if (v < 0)
                    continue;
                const kiln_value *x = g->values[v];
                if (x->kind == KILN_VALUE_NODE && f->group_of[x->producer] == order[r])
                    continue;
                if (in_group[v] == r + 1)
                    continue;
                in_group[v] = r + 1;
                if (gr->n_inputs == cap) {
                    cap *= 2;
                    int *p = realloc(gr->inputs, sizeof(int) * (size_t)cap);
                    if (!p) {
                        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                        break;
                    }
                    gr->inputs = p;
                }
                gr->inputs[gr->n_inputs++] = v;
            }
        }
        if (a->n_outputs > 1) {
            for (int k = 0; k < a->n_outputs; k++)
                gr->outputs[gr->n_outputs++] = a->outputs[k];
        } else {
            gr->outputs[gr->n_outputs++] = s->tip;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        f->group_of[i] = rank[f->group_of[i]];
    free(order);
    free(rank);
    free(in_group);
    ctx->groups = groups;
    ctx->n_groups = no;
    ctx->group_of_node = f->group_of;
    f->group_of = NULL;
    return st;
}

kiln_status kiln_pass_fuse(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    fctx f = {.g = g, .tg = &ctx->target};
    kiln_status st = KILN_OK;
    int nv = g->n_values, nn = g->n_nodes;
    f.cons_start = calloc((size_t)nv + 1, sizeof(int));
    f.group_of = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    f.gs = calloc((size_t)(nn ? nn : 1), sizeof(gstate));
    int64_t edges = 0;
    for (int i = 0; i < nn; i++)
        edges += g->nodes[i]->n_inputs;
    f.cons = malloc(sizeof(int) * (size_t)(edges ? edges : 1));
    int *fill = calloc((size_t)nv + 1, sizeof(int));
    if (!f.cons_start || !f.group_of || !f.gs || !f.cons || !fill) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < nn; i++)
        f.group_of[i] = -1; /* not visited yet: in no group (closed_except reads it) */
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++)
            if (g->nodes[i]->inputs[k] >= 0)
                f.cons_start[g->nodes[i]->inputs[k] + 1]++;
    for (int v = 0; v < nv; v++)
        f.cons_start[v + 1] += f.cons_start[v];
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++) {
            int v = g->nodes[i]->inputs[k];
            if (v >= 0)
                f.cons[f.cons_start[v] + fill[v]++] = i;
        }

    for (int i = 0; i < nn; i++) {
        const kiln_node *n = g->nodes[i];
        int joined = -1;
        if (n->n_outputs == 1 && kiln_target_epilogue_op(f.tg, g, n)) {
            for (int k = 0; k < n->n_inputs && joined < 0; k++) {
                const kiln_value *x = g->values[n->inputs[k]];
                if (x->kind != KILN_VALUE_NODE)
                    continue;
                int gi = f.group_of[x->producer];
                if (f.gs[gi].tip == x->id && accepts(&f, gi, n))
                    joined = gi;
            }
        }
        if (joined >= 0) {
            gstate *s = &f.gs[joined];
            f.group_of[i] = joined;
            if (!push_node(s, i)) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            s->tip = n->outputs[0];
            s->has_add |= n->op == KILN_OP_ADD;
            s->has_relu |= n->op == KILN_OP_RELU;
            s->has_clip |= n->op == KILN_OP_CLIP;
            continue;
        }
        int paired = pair_group(&f, n);
        if (paired >= 0) {
            gstate *s = &f.gs[paired];
            kiln_epi_kind e;
            s->tpl = kiln_target_pair_template(f.tg, g, s->nodes, s->n_nodes, n, &e);
            f.group_of[i] = paired;
            if (!push_node(s, i)) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            s->tip = n->outputs[0];
            s->st = epi_style(e) == ST_ELEMWISE ? ST_NONE : epi_style(e);
            s->has_add = s->has_relu = s->has_clip = false;
            continue;
        }
        int pro = prologue_group(&f, n);
        if (pro >= 0) {
            gstate *s = &f.gs[pro];
            kiln_epi_kind e = KILN_EPI_KIND_NONE;
            s->tpl = kiln_target_prologue_template(f.tg, g, s->nodes, s->n_nodes, n, &e);
            s->pro = true;
            s->anchor = i;
            f.group_of[i] = pro;
            if (!push_node(s, i)) {
                st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            s->tip = n->outputs[0];
            s->st = epi_style(e) == ST_ELEMWISE ? ST_NONE : epi_style(e);
            s->has_add = s->has_relu = s->has_clip = false;
            continue;
        }
        gstate *s = &f.gs[f.n_groups];
        f.group_of[i] = f.n_groups++;
        s->st = anchor_style(f.tg, g, n);
        s->tip = n->outputs[0];
        if (!push_node(s, i)) {
            st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
    }
    st = build_groups(ctx, &f, err);
done:
    if (f.gs)
        for (int i = 0; i < nn; i++)
            free(f.gs[i].nodes);
    free(f.gs);
    free(f.group_of);
    free(f.cons_start);
    free(f.cons);
    free(fill);
    return st;
}
