/* pass/rewrite.c: the pass context and the graph-rewriting helpers every
 * rewriting pass uses.
 *
 * A rewriting pass walks the old graph in node order and copies what it keeps
 * into a new graph (kiln_rewrite_node), redirecting uses through `map`:
 * removing a node is mapping its output to its replacement before the
 * consumers are copied. Constants are copied lazily on first use, so a
 * constant nobody reads any more disappears; their data is borrowed from the
 * old graph, which the context keeps alive until it is destroyed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass/layout_dp.h"
#include "pass/pass.h"
#include "util/error.h"

/* ---- layouts ---------------------------------------------------------------- */

bool kiln_layout_equal(kiln_layout a, kiln_layout b)
{
    if (a.kind != b.kind)
        return false;
    if (a.kind == KILN_LAYOUT_ROW_MAJOR)
        return true;
    if (a.kind == KILN_LAYOUT_NCHWC)
        return a.block_a == b.block_a;
    return a.block_a == b.block_a && a.block_b == b.block_b;
}

static int64_t round_up(int64_t x, int64_t b)
{
    return b > 0 ? (x + b - 1) / b * b : x;
}

int64_t kiln_layout_nbytes(kiln_dtype dt, const kiln_shape *s, kiln_layout l)
{
    kiln_shape p = *s;
    if (l.kind == KILN_LAYOUT_NCHWC && p.rank >= 2)
        p.dims[1] = round_up(p.dims[1], l.block_a);
    else if (l.kind == KILN_LAYOUT_OIHWIO && p.rank >= 2) {
        p.dims[0] = round_up(p.dims[0], l.block_b);
        p.dims[1] = round_up(p.dims[1], l.block_a);
    }
    int64_t n = kiln_shape_numel(&p);
    return n < 0 ? -1 : n * (int64_t)kiln_dtype_size(dt);
}

const char *kiln_layout_str(const kiln_shape *s, kiln_layout l, char *buf, size_t size)
{
    switch (l.kind) {
    case KILN_LAYOUT_NCHWC:
        snprintf(buf, size, "NCHW%dc", l.block_a);
        break;
    case KILN_LAYOUT_OIHWIO:
        snprintf(buf, size, "OIHW%di%do", l.block_a, l.block_b);
        break;
    default:
        snprintf(buf, size, "%s", s && s->rank == 4 ? "NCHW" : "row-major");
        break;
    }
    return buf;
}

/* ---- the context -------------------------------------------------------------- */

static void drop_derived(kiln_pass_ctx *ctx)
{
    for (int i = 0; i < ctx->n_groups; i++) {
        free(ctx->groups[i].nodes);
        free(ctx->groups[i].inputs);
        free(ctx->groups[i].outputs);
    }
    free(ctx->groups);
    free(ctx->group_of_node);
    free(ctx->storage);
    ctx->groups = NULL;
    ctx->group_of_node = NULL;
    ctx->storage = NULL;
    ctx->n_groups = 0;
    ctx->arena_bytes = 0;
}

void kiln_pass_ctx_destroy(kiln_pass_ctx *ctx)
{
    if (!ctx)
        return;
    drop_derived(ctx);
    kiln_layout_decisions_free(ctx->layout_decisions, ctx->n_layout_decisions);
    kiln_graph_destroy(ctx->g);
    for (int i = 0; i < ctx->n_old; i++)
        kiln_graph_destroy(ctx->old[i]);
    free(ctx->old);
    free(ctx);
}

kiln_status kiln_pass_ctx_replace(kiln_pass_ctx *ctx, kiln_graph *ng, kiln_error *err)
{
    if (ctx->n_old == ctx->cap_old) {
        int nc = ctx->cap_old ? ctx->cap_old * 2 : 8;
        kiln_graph **p = realloc(ctx->old, sizeof *p * (size_t)nc);
        if (!p) {
            kiln_graph_destroy(ng);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        ctx->old = p;
        ctx->cap_old = nc;
    }
    drop_derived(ctx);
    if (ctx->g)
        ctx->old[ctx->n_old++] = ctx->g;
    ctx->g = ng;
    return KILN_OK;
}

kiln_status kiln_pass_ctx_create(const kiln_graph *g, const kiln_target *t,
                                 kiln_pass_ctx **out, kiln_error *err)
{
    if (!g)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no graph");
    kiln_pass_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    ctx->target = *t;
    ctx->dump = stderr;
    ctx->shapes_bound = g->shapes_bound;
    memcpy(ctx->syms, g->syms, sizeof ctx->syms);
    ctx->n_syms = g->n_syms;
    ctx->pack_memo = g->pack_memo;
    kiln_rewrite rw;
    kiln_status s = kiln_rewrite_begin(&rw, g, err);
    if (s != KILN_OK) {
        free(ctx);
        return s;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (kiln_rewrite_node(&rw, g->nodes[i], NULL) < 0) {
            kiln_rewrite_abort(&rw);
            free(ctx);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory copying the graph");
        }
    s = kiln_rewrite_finish(&rw, &ctx->g, err);
    if (s != KILN_OK) {
        free(ctx);
        return s;
    }
    *out = ctx;
    return KILN_OK;
}

/* ---- rewriting ------------------------------------------------------------------ */

kiln_status kiln_rewrite_begin(kiln_rewrite *rw, const kiln_graph *src, kiln_error *err)
{
    memset(rw, 0, sizeof *rw);
    rw->src = src;
    rw->map = malloc(sizeof(int) * (size_t)(src->n_values ? src->n_values : 1));
    if (!rw->map || kiln_graph_create(&rw->dst) != KILN_OK) {
        free(rw->map);
        rw->map = NULL;
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < src->n_values; i++)
        rw->map[i] = -1;
    rw->dst->name = kiln_arena_strdup(rw->dst->arena, src->name ? src->name : "model");
    for (int i = 0; i < src->n_inputs; i++) {
        const kiln_value *v = src->values[src->inputs[i]];
        int id = kiln_graph_add_input(rw->dst, v->name, v->dtype, &v->shape);
        if (id < 0) {
            kiln_rewrite_abort(rw);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        rw->dst->values[id]->layout = v->layout;
        rw->map[v->id] = id;
    }
    return KILN_OK;
}

void kiln_rewrite_abort(kiln_rewrite *rw)
{
    kiln_graph_destroy(rw->dst);
    free(rw->map);
    memset(rw, 0, sizeof *rw);
}

int kiln_rewrite_const(kiln_rewrite *rw, const char *name, kiln_dtype dt, const kiln_shape *s,
                       void *data, kiln_layout layout)
{
    int id = kiln_graph_add_const_uninit(rw->dst, name, dt, s, false, NULL);
    if (id < 0)
        return -1;
    rw->dst->values[id]->data = data;
    rw->dst->values[id]->layout = layout;
    return id;
}

int kiln_rewrite_emit(kiln_rewrite *rw, const kiln_node *n, kiln_op op, const char *suffix,
                      const int *in, int n_in, const kiln_shape *shape, bool last)
{
    if (last) {
        kiln_node as = *n;
        as.op = op;
        as.n_inputs = n_in;
        as.n_attrs = 0;
        return kiln_rewrite_node(rw, &as, in);
    }
    char name[512];
    snprintf(name, sizeof name, "%s%s", n->name, suffix);
    int id = kiln_graph_add_node(rw->dst, op, name, in, n_in, 1);
    if (id < 0)
        return -1;
    kiln_value *v = rw->dst->values[rw->dst->nodes[id]->outputs[0]];
    v->dtype = KILN_DTYPE_FLOAT32;
    v->shape = *shape;
    return id;
}

int kiln_rewrite_out(const kiln_rewrite *rw, int node)
{
    return rw->dst->nodes[node]->outputs[0];
}

int kiln_rewrite_move(kiln_rewrite *rw, const kiln_node *n, kiln_op op, const char *suffix, int cur,
                      const kiln_shape *shape, const int64_t *ints, bool last)
{
    kiln_dtype dt = cur >= 0 ? rw->dst->values[cur]->dtype : KILN_DTYPE_FLOAT32;
    int id = cur < 0 ? -1 : kiln_rewrite_emit(rw, n, op, suffix, &cur, 1, shape, last);
    if (id < 0 || kiln_node_set_ints(rw->dst, id, op == KILN_OP_RESHAPE ? "shape" : "perm", ints,
                                     shape->rank) != KILN_OK)
        return -1;
    int v = kiln_rewrite_out(rw, id);
    rw->dst->values[v]->dtype = dt;
    return v;
}

int kiln_rewrite_value(kiln_rewrite *rw, int v)
{
    if (v < 0 || v >= rw->src->n_values)
        return -1;
    if (rw->map[v] >= 0)
        return rw->map[v];
    const kiln_value *sv = rw->src->values[v];
    if (sv->kind != KILN_VALUE_CONST)
        return -1; /* a node output used before its producer: a pass bug */
    int id = kiln_rewrite_const(rw, sv->name, sv->dtype, &sv->shape, sv->data, sv->layout);
    rw->map[v] = id;
    return id;
}

static kiln_status copy_attrs(kiln_graph *g, int node, const kiln_node *n)
{
    kiln_status s = KILN_OK;
    for (int i = 0; i < n->n_attrs && s == KILN_OK; i++) {
        const kiln_attr *a = &n->attrs[i];
        switch (a->type) {
        case KILN_ATTR_INT:
            s = kiln_node_set_int(g, node, a->name, a->i);
            break;
        case KILN_ATTR_FLOAT:
            s = kiln_node_set_float(g, node, a->name, a->f);
            break;
        case KILN_ATTR_STRING:
            s = kiln_node_set_string(g, node, a->name, a->s);
            break;
        case KILN_ATTR_INTS:
            s = kiln_node_set_ints(g, node, a->name, a->ints, a->n);
            break;
        case KILN_ATTR_FLOATS:
            s = kiln_node_set_floats(g, node, a->name, a->floats, a->n);
            break;
        }
    }
    return s;
}

int kiln_rewrite_node(kiln_rewrite *rw, const kiln_node *n, const int *inputs)
{
    int stack[16] = {0};
    int *in = stack;
    if (!inputs) {
        if (n->n_inputs > 16) {
            in = malloc(sizeof(int) * (size_t)n->n_inputs);
            if (!in)
                return -1;
        }
        for (int k = 0; k < n->n_inputs; k++)
            in[k] = n->inputs[k] < 0 ? -1 : kiln_rewrite_value(rw, n->inputs[k]);
        inputs = in;
    }
    int id = kiln_graph_add_node(rw->dst, n->op, n->name, inputs, n->n_inputs, n->n_outputs);
    if (in != stack)
        free(in);
    if (id < 0 || copy_attrs(rw->dst, id, n) != KILN_OK)
        return -1;
    const kiln_node *nn = rw->dst->nodes[id];
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_value *sv = rw->src->values[n->outputs[k]];
        kiln_value *dv = rw->dst->values[nn->outputs[k]];
        dv->name = kiln_arena_strdup(rw->dst->arena, sv->name);
        if (!dv->name)
            return -1;
        dv->dtype = sv->dtype;
        dv->shape = sv->shape;
        dv->layout = sv->layout;
        rw->map[sv->id] = dv->id;
    }
    return id;
}

kiln_status kiln_rewrite_nodes(kiln_pass_ctx *ctx, kiln_rewrite_takes takes,
                               kiln_rewrite_lower lower, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++)
        any = takes(g, g->nodes[i]);
    if (!any)
        return KILN_OK;
    kiln_rewrite rw = {0};
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    if (st != KILN_OK)
        return st;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        bool ok = takes(g, n) ? lower(&rw, g, n) : kiln_rewrite_node(&rw, n, NULL) >= 0;
        if (!ok) {
            kiln_rewrite_abort(&rw);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    return kiln_pass_ctx_replace(ctx, ng, err);
}

kiln_status kiln_rewrite_finish(kiln_rewrite *rw, kiln_graph **out, kiln_error *err)
{
    const kiln_graph *src = rw->src;
    for (int i = 0; i < src->n_outputs; i++) {
        const kiln_value *sv = src->values[src->outputs[i]];
        int id = kiln_rewrite_value(rw, sv->id);
        if (id < 0) {
            kiln_rewrite_abort(rw);
            return kiln_errorf(err, KILN_ERR_INTERNAL, "rewrite: graph output '%s' was dropped",
                               sv->name);
        }
        kiln_value *dv = rw->dst->values[id];
        if (strcmp(dv->name, sv->name) != 0) {
            /* the output was redirected (a folded node): keep its name, on the
             * value itself when it is an ordinary intermediate, else on a copy */
            if (dv->kind == KILN_VALUE_NODE && !dv->is_output) {
                dv->name = kiln_arena_strdup(rw->dst->arena, sv->name);
            } else {
                int node = kiln_graph_add_node(rw->dst, KILN_OP_IDENTITY, sv->name, &id, 1, 1);
                if (node < 0) {
                    kiln_rewrite_abort(rw);
                    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                }
                id = rw->dst->nodes[node]->outputs[0];
                rw->dst->values[id]->dtype = dv->dtype;
                rw->dst->values[id]->shape = dv->shape;
            }
        } else if (dv->is_output || dv->kind != KILN_VALUE_NODE) {
            /* an input or constant (or a value listed twice) as an output: copy */
            int node = kiln_graph_add_node(rw->dst, KILN_OP_IDENTITY, sv->name, &id, 1, 1);
            if (node < 0) {
                kiln_rewrite_abort(rw);
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            }
            id = rw->dst->nodes[node]->outputs[0];
            rw->dst->values[id]->dtype = dv->dtype;
            rw->dst->values[id]->shape = dv->shape;
        }
        if (kiln_graph_add_output(rw->dst, id) != KILN_OK) {
            kiln_rewrite_abort(rw);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    *out = rw->dst;
    free(rw->map);
    memset(rw, 0, sizeof *rw);
    return KILN_OK;
}

int *kiln_pass_use_counts(const kiln_graph *g)
{
    int *uses = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(int));
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                uses[n->inputs[k]]++;
    }
    return uses;
}
