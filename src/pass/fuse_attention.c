/* pass/fuse_attention.c: exported scaled-dot-product attention into one
 * Attention node (ir/attention.h).
 *
 * Matched walking back from the second MatMul R = MatMul(P, V) (PyTorch's and
 * Hugging Face's exports, torchvision's nn.MultiheadAttention):
 *   P = Softmax(Z, last axis); Z = Y + M (either order, M any float32 value
 *   that broadcasts to the scores), Z = Where(B, f, Y) or Where(B, Y, f)
 *   (masked_fill: nanoGPT's causal mask, Hugging Face GPT-2's torch.where;
 *   B a bool mask, f a scalar constant of -inf or at most -1e9), or Z = Y;
 *   Y = S / c, S * c or S (c a
 *   scalar constant); S = MatMul(A, Kt) of rank 4, or 3 (torchvision's
 *   nn.MultiheadAttention export merges batch and heads); A = Q * c, Q / c or Q.
 * Every intermediate must be read only by the pattern (not a graph output).
 * Then the transposes around fold into the op's perms where they are read
 * only by the pattern: Q = Transpose(X, p) reads X with q_perm p; Kt =
 * Transpose(X, p) reads X with k_perm p o (0 1 3 2), else Kt itself with
 * k_perm (0 1 3 2); V likewise; a Transpose that is R's only reader becomes
 * o_perm, and the Attention takes its place. The dead nodes go in dce.
 *
 * A masked_fill becomes the additive mask M = Where(B, f, 0) (or
 * Where(B, 0, f)): a float32 constant when B is one (the causal mask, folded
 * at import), else a Where node before the Attention. Y + f is not f, but
 * both vanish in the softmax (exp(Y + f - max) underflows to 0 for f <=
 * -1e9 and any |Y| below ~1e9; Y + -inf is -inf), which is the only reader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/attention.h"
#include "pass/pass.h"
#include "util/error.h"

typedef struct amatch {
    int q, k, v, m;         /* source value ids (m -1: none) */
    int fill_cond;          /* masked_fill's bool mask B (-1: none; then m is -1) */
    bool fill_true;         /* f where B is true (else where B is false) */
    float fill;             /* f */
    int64_t qp[4], kp[4], vp[4], op[4]; /* rank entries each */
    int rank;
    float scale;
    int root;               /* node whose place and output the Attention takes */
} amatch;

typedef struct actx {
    const kiln_graph *g;
    const int *uses;
    const int *reader; /* a node reading each value (the only one when uses == 1) */
    int rank;          /* of the pattern being matched */
} actx;

static const kiln_node *prod(const actx *a, int v, kiln_op op)
{
    const kiln_value *x = a->g->values[v];
    if (x->kind != KILN_VALUE_NODE || x->dtype != KILN_DTYPE_FLOAT32 ||
        x->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return NULL;
    const kiln_node *n = a->g->nodes[x->producer];
    return n->op == op && n->n_outputs == 1 ? n : NULL;
}

static bool inner(const actx *a, int v)
{
    return a->uses[v] == 1 && !a->g->values[v]->is_output;
}

static bool scalar(const actx *a, int v, float *out)
{
    const kiln_value *x = a->g->values[v];
    if (x->kind != KILN_VALUE_CONST || x->dtype != KILN_DTYPE_FLOAT32 || !x->data ||
        kiln_shape_numel(&x->shape) != 1)
        return false;
    *out = *(const float *)x->data;
    return true;
}

/* float32, row-major, of rank a->rank (3 or 4: the root decides) */
static bool rank_f32(const actx *a, int v)
{
    const kiln_value *x = a->g->values[v];
    return x->dtype == KILN_DTYPE_FLOAT32 && x->shape.rank == a->rank &&
           x->layout.kind == KILN_LAYOUT_ROW_MAJOR;
}

/* A Transpose producing v, read only here: its input and perm. */
static bool transposed(const actx *a, int v, int *x, int64_t p[4])
{
    const kiln_node *t = prod(a, v, KILN_OP_TRANSPOSE);
    if (!t || !inner(a, v) || !rank_f32(a, t->inputs[0]))
        return false;
    const int64_t *pv;
    if (kiln_attr_ints(t, "perm", &pv) != a->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        p[i] = pv[i];
    *x = t->inputs[0];
    return true;
}

/* v is the scores (a MatMul) or the scores scaled by a Div/Mul. */
static bool scores_side(const actx *a, int v)
{
    if (prod(a, v, KILN_OP_MATMUL))
        return true;
    const kiln_node *n = prod(a, v, KILN_OP_DIV);
    if (!n)
        n = prod(a, v, KILN_OP_MUL);
    if (!n)
        return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (prod(a, n->inputs[k], KILN_OP_MATMUL))
            return true;
    return false;
}

static bool match(actx *a, const kiln_node *r, amatch *mt)
{
    if (r->op != KILN_OP_MATMUL)
        return false;
    a->rank = a->g->values[r->outputs[0]]->shape.rank;
    if ((a->rank != 3 && a->rank != 4) || !rank_f32(a, r->outputs[0]))
        return false;
    const int rk = a->rank;
    int pv = r->inputs[0];
    const kiln_node *sm = prod(a, pv, KILN_OP_SOFTMAX);
    if (!sm || !inner(a, pv) || !rank_f32(a, r->inputs[1]))
        return false;
    int64_t axis = kiln_attr_int(sm, "axis", -1);
    if (axis != -1 && axis != rk - 1)
        return false;
    int z = sm->inputs[0], y = z;
    mt->m = -1;
    mt->fill_cond = -1;
    const kiln_node *add = prod(a, z, KILN_OP_ADD);
    const kiln_node *wh = prod(a, z, KILN_OP_WHERE);
    if (wh && inner(a, z) && wh->n_inputs == 3) {
        const kiln_value *b = a->g->values[wh->inputs[0]];
        float f;
        for (int k = 1; k <= 2 && mt->fill_cond < 0; k++)
            if (scalar(a, wh->inputs[k], &f) && (isinf(f) ? f < 0 : f <= -1e9f) &&
                scores_side(a, wh->inputs[3 - k]) && b->dtype == KILN_DTYPE_BOOL &&
                b->layout.kind == KILN_LAYOUT_ROW_MAJOR && b->shape.rank <= 4) {
                y = wh->inputs[3 - k];
                mt->fill_cond = wh->inputs[0];
                mt->fill_true = k == 1;
                mt->fill = f;
            }
        if (mt->fill_cond < 0)
            return false;
    } else if (add && inner(a, z)) {
        for (int k = 0; k < 2 && mt->m < 0; k++) {
            int o = add->inputs[1 - k];
            const kiln_value *ov = a->g->values[o];
            if (scores_side(a, add->inputs[k]) && ov->dtype == KILN_DTYPE_FLOAT32 && ov->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
                ov->shape.rank <= 4) {
                y = add->inputs[k];
                mt->m = o;
            }
        }
        if (mt->m < 0)
            return false;
    }
    float scale = 1.0f, c;
    int s = y;
    const kiln_node *sc;
    if ((sc = prod(a, y, KILN_OP_DIV)) && inner(a, y) && scalar(a, sc->inputs[1], &c) && c != 0) {
        scale = 1.0f / c;
        s = sc->inputs[0];
    } else if ((sc = prod(a, y, KILN_OP_MUL)) && inner(a, y)) {
        for (int k = 0; k < 2 && s == y; k++)
            if (scalar(a, sc->inputs[1 - k], &c)) {
                scale = c;
                s = sc->inputs[k];
            }
        if (s == y)
            return false;
    }
    const kiln_node *qk = prod(a, s, KILN_OP_MATMUL);
    if (!qk || !inner(a, s) || !rank_f32(a, qk->inputs[0]) || !rank_f32(a, qk->inputs[1]))
        return false;
    int q = qk->inputs[0], kt = qk->inputs[1];
    const kiln_node *qs = prod(a, q, KILN_OP_MUL);
    if (qs && inner(a, q)) { /* q * c (vit) */
        for (int k = 0; k < 2; k++)
            if (scalar(a, qs->inputs[1 - k], &c) && rank_f32(a, qs->inputs[k])) {
                scale *= c;
                q = qs->inputs[k];
                break;
            }
    } else if ((qs = prod(a, q, KILN_OP_DIV)) && inner(a, q) && scalar(a, qs->inputs[1], &c) &&
               c != 0 && rank_f32(a, qs->inputs[0])) { /* q / c (nn.MultiheadAttention) */
        scale /= c;
        q = qs->inputs[0];
    }
    /* identity, and the last two axes swapped (K' from K^T) */
    int64_t id[4], swap[4];
    for (int i = 0; i < rk; i++)
        id[i] = swap[i] = i;
    swap[rk - 2] = rk - 1;
    swap[rk - 1] = rk - 2;
    int x;
    int64_t p[4];
    for (int i = 0; i < rk; i++)
        mt->qp[i] = mt->vp[i] = mt->op[i] = id[i], mt->kp[i] = swap[i];
    mt->q = q;
    if (transposed(a, q, &x, p)) {
        mt->q = x;
        for (int i = 0; i < rk; i++)
            mt->qp[i] = p[i];
    }
    mt->k = kt;
    if (transposed(a, kt, &x, p)) {
        mt->k = x;
        for (int i = 0; i < rk; i++)
            mt->kp[i] = p[swap[i]];
    }
    mt->v = r->inputs[1];
    if (transposed(a, mt->v, &x, p)) {
        mt->v = x;
        for (int i = 0; i < rk; i++)
            mt->vp[i] = p[i];
    }
    mt->root = r->id;
    int rv = r->outputs[0];
    if (inner(a, rv) && a->reader[rv] >= 0) {
        const kiln_node *t = a->g->nodes[a->reader[rv]];
        const int64_t *pv;
        if (t->op == KILN_OP_TRANSPOSE && kiln_attr_ints(t, "perm", &pv) == rk) {
            for (int i = 0; i < rk; i++)
                mt->op[i] = pv[i];
            mt->root = t->id;
        }
    }
    mt->scale = scale;
    mt->rank = rk;
    /* the geometry must resolve (shapes fit, the mask broadcasts): checked on
     * the operands as permuted, with a node carrying no perms */
    kiln_shape q4 = {.rank = rk}, k4 = {.rank = rk}, v4 = {.rank = rk};
    const kiln_shape *qsh = &a->g->values[mt->q]->shape, *ksh = &a->g->values[mt->k]->shape,
                     *vsh = &a->g->values[mt->v]->shape;
    for (int i = 0; i < rk; i++) {
        q4.dims[i] = qsh->dims[mt->qp[i]];
        k4.dims[i] = ksh->dims[mt->kp[i]];
        v4.dims[i] = vsh->dims[mt->vp[i]];
    }
    kiln_node plain = *r;
    plain.n_attrs = 0;
    kiln_attn_geom geo;
    kiln_error e = {0};
    const kiln_shape *ms = mt->m >= 0           ? &a->g->values[mt->m]->shape
                           : mt->fill_cond >= 0 ? &a->g->values[mt->fill_cond]->shape
                                                : NULL;
    if (kiln_attn_geom_of(&plain, &q4, &k4, &v4, ms, &geo, &e) != KILN_OK)
        return false;
    if (geo.Sk < 1 || geo.D < 1 || geo.Sk > KILN_ATTN_MAX_SK ||
        geo.D * ((geo.Sk + 63) / 64 * 64) > KILN_ATTN_MAX_KT)
        return false; /* no kernel would take it: keep matmul + softmax */
    return true;
}

/* masked_fill's additive mask (see the top) for the Attention replacing
 * node n: a float32 constant of B's shape when B is a constant, else a
 * Where(B, f, 0) / Where(B, 0, f) node. Its new value id, -1 when out of
 * memory. */
static int fill_mask(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n, const amatch *mt)
{
    const kiln_value *b = g->values[mt->fill_cond];
    const float zero = 0.0f;
    char name[512];
    if (b->kind == KILN_VALUE_CONST && b->data) {
        void *data = NULL;
        snprintf(name, sizeof name, "%s.mask", n->name ? n->name : "attention");
        int v = kiln_graph_add_const_uninit(rw->dst, name, KILN_DTYPE_FLOAT32, &b->shape, true,
                                            &data);
        if (v < 0 || !data)
            return -1;
        const uint8_t *bv = b->data;
        float *m = data;
        for (int64_t i = 0; i < kiln_shape_numel(&b->shape); i++)
            m[i] = (bv[i] != 0) == mt->fill_true ? mt->fill : zero;
        return v;
    }
    const kiln_shape one = {0};
    snprintf(name, sizeof name, "%s.fill", n->name ? n->name : "attention");
    int fv = kiln_graph_add_const(rw->dst, name, KILN_DTYPE_FLOAT32, &one, &mt->fill);
    snprintf(name, sizeof name, "%s.zero", n->name ? n->name : "attention");
    int zv = kiln_graph_add_const(rw->dst, name, KILN_DTYPE_FLOAT32, &one, &zero);
    if (fv < 0 || zv < 0)
        return -1;
    int in[3] = {kiln_rewrite_value(rw, mt->fill_cond), mt->fill_true ? fv : zv,
                 mt->fill_true ? zv : fv};
    int id = kiln_rewrite_emit(rw, n, KILN_OP_WHERE, ".mask", in, 3, &b->shape, false);
    return id < 0 ? -1 : kiln_rewrite_out(rw, id);
}

kiln_status kiln_pass_fuse_attention(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    int *uses = kiln_pass_use_counts(g);
    int *reader = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    amatch *at = malloc(sizeof(amatch) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    int *root_of = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    kiln_rewrite rw = {0};
    kiln_status st = KILN_OK;
    if (!uses || !reader || !at || !root_of) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++)
        reader[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        root_of[i] = -1;
        for (int k = 0; k < g->nodes[i]->n_inputs; k++)
            if (g->nodes[i]->inputs[k] >= 0)
                reader[g->nodes[i]->inputs[k]] = i;
    }
    actx a = {.g = g, .uses = uses, .reader = reader};
    int n_at = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (match(&a, g->nodes[i], &at[n_at]))
            root_of[at[n_at].root] = n_at, n_at++;
    if (n_at == 0)
        goto done;
    if ((st = kiln_rewrite_begin(&rw, g, err)) != KILN_OK)
        goto done;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (root_of[i] < 0) {
            if (kiln_rewrite_node(&rw, n, NULL) < 0)
                goto oom;
            continue;
        }
        const amatch *mt = &at[root_of[i]];
        int mask = mt->m >= 0 ? kiln_rewrite_value(&rw, mt->m) : -1;
        if (mt->fill_cond >= 0 && (mask = fill_mask(&rw, g, n, mt)) < 0)
            goto oom;
        int in[4] = {kiln_rewrite_value(&rw, mt->q), kiln_rewrite_value(&rw, mt->k),
                     kiln_rewrite_value(&rw, mt->v), mask};
        kiln_node tmp = *n;
        tmp.op = KILN_OP_ATTENTION;
        tmp.n_inputs = mask >= 0 ? 4 : 3;
        tmp.n_attrs = 0;
        int id = kiln_rewrite_node(&rw, &tmp, in);
        if (id < 0 || kiln_node_set_float(rw.dst, id, "scale", mt->scale) != KILN_OK ||
            kiln_node_set_ints(rw.dst, id, "q_perm", mt->qp, mt->rank) != KILN_OK ||
            kiln_node_set_ints(rw.dst, id, "k_perm", mt->kp, mt->rank) != KILN_OK ||
            kiln_node_set_ints(rw.dst, id, "v_perm", mt->vp, mt->rank) != KILN_OK ||
            kiln_node_set_ints(rw.dst, id, "o_perm", mt->op, mt->rank) != KILN_OK)
            goto oom;
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) == KILN_OK)
        st = kiln_pass_ctx_replace(ctx, ng, err);
    goto done;
oom:
    kiln_rewrite_abort(&rw);
    st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
done:
    free(uses);
    free(reader);
    free(at);
    free(root_of);
    return st;
}
