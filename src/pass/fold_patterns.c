/* pass/fold_patterns.c: exported decompositions back into one op.
 *
 * Exporters spell some layers as chains of primitive ops. Two are recognised
 * and replaced by the registry op with the same meaning, which the templates
 * then compile as one kernel or one fused epilogue step:
 *
 *  - GELU, exact form (torch.onnx, torchvision): x * (1 + erf(x / sqrt 2)) * 0.5
 *    with x / sqrt 2 also written x * (1 / sqrt 2), and the product in any
 *    association: ((x * t) * 0.5) or ((x * 0.5) * t), operands in any order
 *    -> Gelu(x). As a single expression op it joins the producing dense
 *    layer's epilogue (the five-op chain could not: it reads x twice).
 *  - LayerNorm as older exports write it (opset < 17):
 *      m = ReduceMean(x, last axis); d = x - m
 *      v = ReduceMean(Pow(d, 2), last axis); y = d / Sqrt(v + eps)
 *      y * gamma + beta
 *    -> LayerNormalization(x, gamma, beta, axis -1, epsilon eps).
 *
 *  - A zero Pad of the spatial axes before a Conv or an AveragePool
 *    (PyTorch exports avg_pool2d(padding=p) with its default
 *    count_include_pad=True as Pad + AveragePool; converters write "same"
 *    padding as a Pad before the Conv) -> the consumer with the Pad's pads
 *    added to its own (an AveragePool counting the pads), so no padded copy
 *    is made and the template's own border handling applies. The Pad must
 *    be constant mode with value 0, pad only axes 2.. by >= 0 and feed only
 *    that input; the consumer must have auto_pad NOTSET, and an AveragePool
 *    ceil_mode 0 and no pads of its own unless it already counts them.
 *
 * Matching walks back from the root of each pattern (the last Mul / the
 * final Add); every intermediate value must be float32, read only inside the
 * pattern and not a graph output. The replacement takes the root's place in
 * node order and its output value; the dead intermediates go in dce. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pass/pass.h"
#include "util/error.h"

typedef struct pctx {
    const kiln_graph *g;
    const int *uses;
} pctx;

/* The node producing v if it has op `op`, else NULL. */
static const kiln_node *prod(const pctx *p, int v, kiln_op op)
{
    if (v < 0)
        return NULL;
    const kiln_value *x = p->g->values[v];
    if (x->kind != KILN_VALUE_NODE || x->dtype != KILN_DTYPE_FLOAT32)
        return NULL;
    const kiln_node *n = p->g->nodes[x->producer];
    return n->op == op && n->n_outputs == 1 ? n : NULL;
}

/* An intermediate read `n` times, not a graph output. */
static bool inner(const pctx *p, int v, int n)
{
    return p->uses[v] == n && !p->g->values[v]->is_output;
}

static bool scalar(const pctx *p, int v, float *out)
{
    const kiln_value *x = p->g->values[v];
    if (x->kind != KILN_VALUE_CONST || x->dtype != KILN_DTYPE_FLOAT32 || !x->data ||
        kiln_shape_numel(&x->shape) != 1)
        return false;
    *out = *(const float *)x->data;
    return true;
}

static bool scalar_is(const pctx *p, int v, double want)
{
    float f;
    return scalar(p, v, &f) && fabs(f - want) <= 1e-5 * fabs(want);
}

/* t = 1 + erf(x / sqrt 2) with every step read once: returns x, or -1. */
static int erf_term(const pctx *p, int t)
{
    const kiln_node *add = prod(p, t, KILN_OP_ADD);
    if (!add || !inner(p, t, 1))
        return -1;
    int e = -1;
    for (int k = 0; k < 2 && e < 0; k++)
        if (scalar_is(p, add->inputs[1 - k], 1.0) && prod(p, add->inputs[k], KILN_OP_ERF))
            e = add->inputs[k];
    if (e < 0 || !inner(p, e, 1))
        return -1;
    int d = p->g->nodes[p->g->values[e]->producer]->inputs[0];
    if (!inner(p, d, 1))
        return -1;
    const kiln_node *dn = prod(p, d, KILN_OP_DIV);
    if (dn && scalar_is(p, dn->inputs[1], sqrt(2.0)))
        return dn->inputs[0];
    dn = prod(p, d, KILN_OP_MUL);
    if (dn)
        for (int k = 0; k < 2; k++)
            if (scalar_is(p, dn->inputs[1 - k], 1.0 / sqrt(2.0)))
                return dn->inputs[k];
    return -1;
}

/* Root Mul of a GELU: returns x, or -1. */
static int match_gelu(const pctx *p, const kiln_node *n)
{
    if (n->op != KILN_OP_MUL || n->n_inputs != 2 ||
        p->g->values[n->outputs[0]]->dtype != KILN_DTYPE_FLOAT32)
        return -1;
    for (int k = 0; k < 2; k++) {
        int a = n->inputs[k], b = n->inputs[1 - k];
        const kiln_node *m = prod(p, a, KILN_OP_MUL);
        if (!m || !inner(p, a, 1))
            continue;
        if (scalar_is(p, b, 0.5)) { /* (x * t) * 0.5 */
            for (int j = 0; j < 2; j++) {
                int x = m->inputs[j];
                if (erf_term(p, m->inputs[1 - j]) == x && x >= 0)
                    return x;
            }
        } else { /* (x * 0.5) * t */
            for (int j = 0; j < 2; j++) {
                int x = m->inputs[j];
                if (scalar_is(p, m->inputs[1 - j], 0.5) && erf_term(p, b) == x && x >= 0)
                    return x;
            }
        }
    }
    return -1;
}

static bool last_axis_mean(const pctx *p, const kiln_node *r, int rank)
{
    const int64_t *axes;
    int na = kiln_attr_ints(r, "axes", &axes);
    return na == 1 && (axes[0] == -1 || axes[0] == rank - 1) &&
           kiln_attr_int(r, "keepdims", 1) == 1 && r->n_inputs == 1 && (void *)p;
}

/* A 1-D float32 constant of c elements. */
static bool vec_const(const pctx *p, int v, int64_t c)
{
    const kiln_value *x = p->g->values[v];
    return x->kind == KILN_VALUE_CONST && x->dtype == KILN_DTYPE_FLOAT32 && x->shape.rank == 1 &&
           x->shape.dims[0] == c;
}

/* Root Add of an old-form LayerNorm: x, gamma, beta and eps, or false. */
static bool match_layernorm(const pctx *p, const kiln_node *n, int io[3], float *eps)
{
    if (n->op != KILN_OP_ADD || n->n_inputs != 2)
        return false;
    const kiln_value *y = p->g->values[n->outputs[0]];
    if (y->dtype != KILN_DTYPE_FLOAT32 || y->shape.rank < 1 ||
        y->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    int64_t c = y->shape.dims[y->shape.rank - 1];
    for (int k = 0; k < 2; k++) {
        int mv = n->inputs[k], beta = n->inputs[1 - k];
        const kiln_node *mul = prod(p, mv, KILN_OP_MUL);
        if (!mul || !vec_const(p, beta, c) || !inner(p, mv, 1))
            continue;
        for (int j = 0; j < 2; j++) {
            int dv = mul->inputs[j], gamma = mul->inputs[1 - j];
            const kiln_node *div = prod(p, dv, KILN_OP_DIV);
            if (!div || !vec_const(p, gamma, c) || !inner(p, dv, 1))
                continue;
            int s = div->inputs[0], r = div->inputs[1];
            const kiln_node *sub = prod(p, s, KILN_OP_SUB), *sq = prod(p, r, KILN_OP_SQRT);
            if (!sub || !sq || !inner(p, s, 2) || !inner(p, r, 1))
                continue;
            int x = sub->inputs[0], m1 = sub->inputs[1];
            const kiln_node *rm1 = prod(p, m1, KILN_OP_REDUCEMEAN);
            if (!rm1 || rm1->inputs[0] != x || !inner(p, m1, 1) ||
                !kiln_shape_equal(&p->g->values[x]->shape, &y->shape) ||
                !last_axis_mean(p, rm1, y->shape.rank))
                continue;
            int ve = sq->inputs[0];
            const kiln_node *adde = prod(p, ve, KILN_OP_ADD);
            if (!adde || !inner(p, ve, 1))
                continue;
            for (int e = 0; e < 2; e++) {
                int vv = adde->inputs[e];
                const kiln_node *rm2 = prod(p, vv, KILN_OP_REDUCEMEAN);
                if (!rm2 || !scalar(p, adde->inputs[1 - e], eps) || !inner(p, vv, 1) ||
                    !last_axis_mean(p, rm2, y->shape.rank))
                    continue;
                const kiln_node *pw = prod(p, rm2->inputs[0], KILN_OP_POW);
                if (!pw || pw->inputs[0] != s || !scalar_is(p, pw->inputs[1], 2.0) ||
                    !inner(p, rm2->inputs[0], 1))
                    continue;
                io[0] = x;
                io[1] = gamma;
                io[2] = beta;
                return true;
            }
        }
    }
    return false;
}

/* n: a Conv or AveragePool reading a zero spatial Pad (see the top); returns
 * the Pad's input and fills pads (2 x spatial rank, n's own plus the Pad's),
 * or -1. */
static int match_pad(const pctx *p, const kiln_node *n, int64_t *pads, int *np)
{
    if ((n->op != KILN_OP_CONV && n->op != KILN_OP_AVERAGEPOOL) || n->n_inputs < 1 ||
        n->n_inputs > 3) /* Conv: X, W, B */
        return -1;
    const kiln_node *pad = prod(p, n->inputs[0], KILN_OP_PAD);
    if (!pad || pad->n_inputs != 1 || !inner(p, n->inputs[0], 1))
        return -1;
    const kiln_value *x = p->g->values[pad->inputs[0]];
    const int64_t *pp = NULL, *own = NULL;
    int rank = x->shape.rank, nsp = rank - 2;
    if (rank < 3 || rank > KILN_MAX_RANK || kiln_attr_ints(pad, "pads", &pp) != 2 * rank ||
        strcmp(kiln_attr_string(pad, "mode", "constant"), "constant") != 0 ||
        kiln_attr_float(pad, "value", 0.0f) != 0.0f ||
        strcmp(kiln_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") != 0)
        return -1;
    for (int d = 0; d < rank; d++)
        if (pp[d] < 0 || pp[rank + d] < 0 || (d < 2 && (pp[d] || pp[rank + d])))
            return -1;
    int nown = kiln_attr_ints(n, "pads", &own);
    if (nown >= 0 && nown != 2 * nsp)
        return -1;
    bool own_zero = true;
    for (int k = 0; k < nown; k++)
        own_zero = own_zero && own[k] == 0;
    if (n->op == KILN_OP_AVERAGEPOOL &&
        (kiln_attr_int(n, "ceil_mode", 0) != 0 ||
         (!own_zero && kiln_attr_int(n, "count_include_pad", 0) != 1)))
        return -1;
    for (int k = 0; k < nsp; k++) {
        pads[k] = pp[2 + k] + (nown > 0 ? own[k] : 0);
        pads[nsp + k] = pp[rank + 2 + k] + (nown > 0 ? own[nsp + k] : 0);
    }
    *np = 2 * nsp;
    return pad->inputs[0];
}

kiln_status kiln_pass_fold_patterns(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    int *uses = kiln_pass_use_counts(g);
    if (!uses)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    pctx p = {.g = g, .uses = uses};
    kiln_rewrite rw;
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    if (st != KILN_OK) {
        free(uses);
        return st;
    }
    int folded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        int io[3];
        float eps = 0.0f;
        int x = match_gelu(&p, n);
        if (x >= 0) {
            kiln_node tmp = *n;
            tmp.op = KILN_OP_GELU;
            tmp.n_inputs = 1;
            tmp.n_attrs = 0;
            int in = kiln_rewrite_value(&rw, x);
            if (kiln_rewrite_node(&rw, &tmp, &in) < 0)
                goto oom;
            folded++;
            continue;
        }
        if (match_layernorm(&p, n, io, &eps)) {
            kiln_node tmp = *n;
            tmp.op = KILN_OP_LAYERNORM;
            tmp.n_inputs = 3;
            tmp.n_attrs = 0;
            for (int k = 0; k < 3; k++)
                io[k] = kiln_rewrite_value(&rw, io[k]);
            int id = kiln_rewrite_node(&rw, &tmp, io);
            if (id < 0 || kiln_node_set_int(rw.dst, id, "axis", -1) != KILN_OK ||
                kiln_node_set_float(rw.dst, id, "epsilon", eps) != KILN_OK)
                goto oom;
            folded++;
            continue;
        }
        int64_t pads[2 * KILN_MAX_RANK];
        int np = 0;
        x = match_pad(&p, n, pads, &np);
        if (x >= 0) {
            int in[3];
            for (int k = 0; k < n->n_inputs; k++)
                in[k] = kiln_rewrite_value(&rw, k == 0 ? x : n->inputs[k]);
            int id = kiln_rewrite_node(&rw, n, in);
            if (id < 0 || kiln_node_set_ints(rw.dst, id, "pads", pads, np) != KILN_OK ||
                (n->op == KILN_OP_AVERAGEPOOL &&
                 kiln_node_set_int(rw.dst, id, "count_include_pad", 1) != KILN_OK))
                goto oom;
            folded++;
            continue;
        }
        if (kiln_rewrite_node(&rw, n, NULL) < 0)
            goto oom;
    }
    free(uses);
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        return st;
    ctx->stat_removed += folded;
    return kiln_pass_ctx_replace(ctx, ng, err);
oom:
    free(uses);
    kiln_rewrite_abort(&rw);
    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
}
