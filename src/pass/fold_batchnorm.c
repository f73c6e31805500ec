/* pass/fold_batchnorm.c: batch-norm folding.
 *
 * Inference batch-norm is a per-channel affine map y = x*s + t with
 *   s = scale / sqrt(var + eps),  t = B - mean*s.
 * When X comes from a Conv with constant weights whose output nobody else
 * reads, the map folds into the convolution: W'[m] = W[m]*s[m] and
 * b'[m] = b[m]*s[m] + t[m] (b = 0 without a bias), and the BatchNormalization
 * node disappears (its output is redirected to the conv's). Any other
 * batch-norm with constant parameters becomes Mul(X, s) then Add(., t) with
 * s, t of shape [1, C, 1, ..]: elementwise ops that fuse into their producer.
 * The statistics are combined in double precision. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass/pass.h"
#include "util/error.h"

static bool const_with_data(const kiln_graph *g, int v)
{
    const kiln_value *x = kiln_graph_value(g, v);
    return x && x->kind == KILN_VALUE_CONST && x->data && x->dtype == KILN_DTYPE_FLOAT32;
}

/* The BN's per-channel scale/shift, or false when its parameters are not all
 * float32 constants of length C. */
static bool bn_affine(const kiln_graph *g, const kiln_node *bn, int64_t c, double *s, double *t)
{
    for (int k = 1; k < 5; k++)
        if (!const_with_data(g, bn->inputs[k]) ||
            kiln_shape_numel(&g->values[bn->inputs[k]]->shape) != c)
            return false;
    const float *scale = g->values[bn->inputs[1]]->data, *b = g->values[bn->inputs[2]]->data;
    const float *mean = g->values[bn->inputs[3]]->data, *var = g->values[bn->inputs[4]]->data;
    double eps = kiln_attr_float(bn, "epsilon", 1e-5f);
    for (int64_t i = 0; i < c; i++) {
        s[i] = (double)scale[i] / sqrt((double)var[i] + eps);
        t[i] = (double)b[i] - (double)mean[i] * s[i];
    }
    return true;
}

kiln_status kiln_pass_fold_batchnorm(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    int *uses = kiln_pass_use_counts(g);
    int *bn_of_conv = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    double *s = NULL, *t = NULL;
    kiln_rewrite rw = {0};
    kiln_status st = KILN_OK;
    if (!uses || !bn_of_conv) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* which conv each BN folds into */
    int64_t max_c = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        bn_of_conv[i] = -1;
        const kiln_node *n = g->nodes[i];
        if (n->op == KILN_OP_BATCHNORM && g->values[n->inputs[0]]->shape.rank >= 2 &&
            g->values[n->inputs[0]]->shape.dims[1] > max_c)
            max_c = g->values[n->inputs[0]]->shape.dims[1];
    }
    s = malloc(sizeof(double) * (size_t)max_c);
    t = malloc(sizeof(double) * (size_t)max_c);
    if (!s || !t) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *bn = g->nodes[i];
        if (bn->op != KILN_OP_BATCHNORM)
            continue;
        const kiln_value *x = g->values[bn->inputs[0]];
        if (x->kind != KILN_VALUE_NODE || x->is_output || uses[x->id] != 1)
            continue;
        const kiln_node *conv = g->nodes[x->producer];
        if (conv->op != KILN_OP_CONV || !const_with_data(g, conv->inputs[1]))
            continue;
        if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !const_with_data(g, conv->inputs[2]))
            continue;
        if (!bn_affine(g, bn, x->shape.dims[1], s, t))
            continue;
        bn_of_conv[conv->id] = bn->id;
    }

    if ((st = kiln_rewrite_begin(&rw, g, err)) != KILN_OK)
        goto done;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (bn_of_conv[i] >= 0) {
            /* conv followed by its BN: fold */
            const kiln_node *bn = g->nodes[bn_of_conv[i]];
            const kiln_value *w = g->values[n->inputs[1]];
            int64_t m = w->shape.dims[0], per = kiln_shape_numel(&w->shape) / m;
            bn_affine(g, bn, m, s, t);
            float *nw, *nb;
            char name[512];
            snprintf(name, sizeof name, "%s.weight_bn", n->name);
            int wid = kiln_graph_add_const_uninit(rw.dst, name, KILN_DTYPE_FLOAT32, &w->shape,
                                                  true, (void **)&nw);
            kiln_shape bs = {.rank = 1, .dims = {m}};
            snprintf(name, sizeof name, "%s.bias_bn", n->name);
            int bid = kiln_graph_add_const_uninit(rw.dst, name, KILN_DTYPE_FLOAT32, &bs, true,
                                                  (void **)&nb);
            if (wid < 0 || bid < 0)
                goto oom;
            const float *ow = w->data;
            const float *ob = (n->n_inputs > 2 && n->inputs[2] >= 0)
                                  ? g->values[n->inputs[2]]->data
                                  : NULL;
            for (int64_t o = 0; o < m; o++) {
                for (int64_t j = 0; j < per; j++)
                    nw[o * per + j] = (float)((double)ow[o * per + j] * s[o]);
                nb[o] = (float)((ob ? (double)ob[o] : 0.0) * s[o] + t[o]);
            }
            int in[3] = {kiln_rewrite_value(&rw, n->inputs[0]), wid, bid};
            kiln_node tmp = *n;
            tmp.n_inputs = 3;
            if (kiln_rewrite_node(&rw, &tmp, in) < 0)
                goto oom;
            rw.map[bn->outputs[0]] = rw.map[n->outputs[0]];
            ctx->stat_bn_folded++;
            continue;
        }
        if (n->op == KILN_OP_BATCHNORM && rw.map[n->outputs[0]] >= 0)
            continue; /* folded above */
        const kiln_value *x = g->values[n->inputs[0]];
        if (n->op == KILN_OP_BATCHNORM && x->shape.rank >= 2 &&
            bn_affine(g, n, x->shape.dims[1], s, t)) {
            /* standalone: Mul + Add with [1, C, 1, ..] constants (X's rank:
             * alter-layout keeps a blocked X blocked against such an
             * operand, densenet's pre-activation BN after a Concat) */
            int64_t c = x->shape.dims[1];
            kiln_shape cs = {.rank = x->shape.rank};
            for (int d = 0; d < cs.rank; d++)
                cs.dims[d] = d == 1 ? c : 1;
            float *sd, *td;
            char name[512];
            snprintf(name, sizeof name, "%s.scale_bn", n->name);
            int sid = kiln_graph_add_const_uninit(rw.dst, name, KILN_DTYPE_FLOAT32, &cs, true,
                                                  (void **)&sd);
            snprintf(name, sizeof name, "%s.shift_bn", n->name);
            int tid = kiln_graph_add_const_uninit(rw.dst, name, KILN_DTYPE_FLOAT32, &cs, true,
                                                  (void **)&td);
            if (sid < 0 || tid < 0)
                goto oom;
            for (int64_t k = 0; k < c; k++) {
                sd[k] = (float)s[k];
                td[k] = (float)t[k];
            }
            snprintf(name, sizeof name, "%s.mul", n->name);
            int in[2] = {kiln_rewrite_value(&rw, n->inputs[0]), sid};
            int mul = kiln_graph_add_node(rw.dst, KILN_OP_MUL, name, in, 2, 1);
            if (mul < 0)
                goto oom;
            kiln_value *mv = rw.dst->values[rw.dst->nodes[mul]->outputs[0]];
            mv->dtype = x->dtype;
            mv->shape = x->shape;
            kiln_node tmp = *n;
            tmp.op = KILN_OP_ADD;
            tmp.n_inputs = 2;
            tmp.n_attrs = 0;
            int in2[2] = {mv->id, tid};
            if (kiln_rewrite_node(&rw, &tmp, in2) < 0)
                goto oom;
            ctx->stat_bn_folded++;
            continue;
        }
        if (kiln_rewrite_node(&rw, n, NULL) < 0)
            goto oom;
    }
    kiln_graph *ng;
    if ((st = kiln_rewrite_finish(&rw, &ng, err)) != KILN_OK)
        goto done;
    st = kiln_pass_ctx_replace(ctx, ng, err);
    goto done;
oom:
    kiln_rewrite_abort(&rw);
    st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
done:
    free(uses);
    free(bn_of_conv);
    free(s);
    free(t);
    return st;
}
