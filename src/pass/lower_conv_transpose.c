/* pass/lower_conv_transpose.c: a 2-D ConvTranspose with constant weights
 * becomes a Conv (compiled by the conv templates) plus a phase interleave.
 *
 * ConvTranspose scatters: y[o] += x[i] * w[k] where o = i*s + k - p (one
 * spatial dim; stride s, pad_begin p, dilation 1). Split the output by
 * phase, o = q*s + r with 0 <= r < s. Then i*s + k = q*s + r + p, so with
 * c = r + p the taps of phase r are k = t*s + c and i = q - t: every phase
 * is an ordinary correlation of x,
 *     y_r[q] = sum_t x[q - t] * w[t*s + c],
 * over the t with 0 <= t*s + c < K. Taking one t range [t_lo, t_hi] for all
 * phases (a tap outside a phase's range has weight 0), the phases are the
 * output channels of one Conv: kernel T = t_hi - t_lo + 1 with its taps
 * reversed (u = t_hi - t), pad_begin t_hi, enough pad_end for ceil(O / s)
 * rows, output channel (m, r_h, r_w) = m * s_h*s_w + r_h*s_w + r_w, bias
 * repeated per phase. Groups carry over (each group's phases stay in the
 * group's channel range). A Reshape to [N, M, s_h, s_w, Q_h, Q_w], a
 * Transpose to [N, M, Q_h, s_h, Q_w, s_w] and a Reshape to [N, M, Q_h*s_h,
 * Q_w*s_w] interleave the phases; a Slice crops to the output when the
 * phases overshoot it. Stride 1 is the Conv alone (flipped kernel).
 *
 * The Conv does the ConvTranspose's multiply-adds exactly when s divides K
 * (a k2s2 or k4s2 upsampler); otherwise zero taps pad the shorter phases
 * (k3s2: 16 taps per 9). Left to the reference kernel: dilation > 1, 1-D and
 * 3-D, run-time weights or bias, a non-float32 X, and geometries whose
 * pad_begin would be negative (an output_shape that crops before the first
 * input). Weights are combined in float (a copy, no arithmetic), so the
 * lowered node computes the same sums in another order. */
#include <stdio.h>
#include <string.h>

#include "ir/infer_nn.h"
#include "pass/pass.h"
#include "util/error.h"

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return -floor_div(-a, b);
}

/* One spatial dim of the lowering. */
typedef struct phase_dim {
    int64_t s, p, k;   /* stride, pad_begin, kernel */
    int64_t t_lo, t_hi; /* tap range over all phases */
    int64_t taps;       /* t_hi - t_lo + 1 */
    int64_t q;          /* phase rows the Conv writes: >= ceil(out / s) */
    int64_t pad_end;
} phase_dim;

static bool plan_dim(int64_t in, int64_t out, int64_t s, int64_t p, int64_t k, phase_dim *d)
{
    d->s = s, d->p = p, d->k = k;
    d->t_lo = INT64_MAX, d->t_hi = INT64_MIN;
    for (int64_t r = 0; r < s; r++) {
        int64_t c = r + p, lo = ceil_div(-c, s), hi = floor_div(k - 1 - c, s);
        if (lo > hi)
            continue; /* s > k: this phase sees no tap, only the bias */
        d->t_lo = lo < d->t_lo ? lo : d->t_lo;
        d->t_hi = hi > d->t_hi ? hi : d->t_hi;
    }
    if (d->t_lo > d->t_hi || d->t_hi < 0)
        return false;
    d->taps = d->t_hi - d->t_lo + 1;
    int64_t need = ceil_div(out, s);
    /* Conv rows: in + t_hi + pad_end - taps + 1 */
    d->pad_end = need - in + d->taps - 1 - d->t_hi;
    if (d->pad_end < 0)
        d->pad_end = 0;
    d->q = in + d->t_hi + d->pad_end - d->taps + 1;
    return d->q >= need && d->taps <= 64;
}

/* The lowering of node n, or false to leave it to the reference kernel. */
static bool plan(const kiln_graph *g, const kiln_node *n, kiln_convt_geom *geo, phase_dim *dh,
                 phase_dim *dw)
{
    if (n->op != KILN_OP_CONVTRANSPOSE || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const kiln_value *b = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    const kiln_value *y = g->values[n->outputs[0]];
    if (x->dtype != KILN_DTYPE_FLOAT32 || x->shape.rank != 4 || w->kind != KILN_VALUE_CONST ||
        !w->data || w->dtype != KILN_DTYPE_FLOAT32 || y->shape.rank != 4)
        return false;
    if (b && (b->kind != KILN_VALUE_CONST || !b->data || b->dtype != KILN_DTYPE_FLOAT32))
        return false;
    if (kiln_convt_resolve(n, &x->shape, &w->shape, geo, NULL) != KILN_OK || geo->nsp != 2 ||
        geo->dilation[0] != 1 || geo->dilation[1] != 1)
        return false;
    return plan_dim(geo->in[0], geo->out[0], geo->stride[0], geo->pad_begin[0], geo->kernel[0],
                    dh) &&
           plan_dim(geo->in[1], geo->out[1], geo->stride[1], geo->pad_begin[1], geo->kernel[1],
                    dw);
}

/* A node of dst with its attributes set by the caller afterwards; its
 * output's dtype and shape are given. Returns the node id or -1. */
static int add_node(kiln_graph *dst, kiln_op op, const char *name, const int *in, int n_in,
                    const kiln_shape *shape)
{
    int id = kiln_graph_add_node(dst, op, name, in, n_in, 1);
    if (id < 0)
        return -1;
    kiln_value *v = dst->values[dst->nodes[id]->outputs[0]];
    v->dtype = KILN_DTYPE_FLOAT32;
    v->shape = *shape;
    return id;
}

/* Writes the lowered node n into rw; false when out of memory. */
static bool lower(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                  const kiln_convt_geom *geo, const phase_dim *dh, const phase_dim *dw)
{
    kiln_graph *dst = rw->dst;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const kiln_value *bv = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    int64_t G = geo->group, cg = geo->c_in / G, mg = geo->m_out / G;
    int64_t S = dh->s * dw->s, oc = geo->m_out * S, Th = dh->taps, Tw = dw->taps;
    int64_t Kh = dh->k, Kw = dw->k;
    char name[512];

    /* the Conv's weight [M*S, C/G, Th, Tw] and bias [M*S] */
    kiln_shape ws = {.rank = 4, .dims = {oc, cg, Th, Tw}};
    float *nw, *nb;
    snprintf(name, sizeof name, "%s.phase_weight", n->name);
    int wid = kiln_graph_add_const_uninit(dst, name, KILN_DTYPE_FLOAT32, &ws, true, (void **)&nw);
    kiln_shape bs = {.rank = 1, .dims = {oc}};
    snprintf(name, sizeof name, "%s.phase_bias", n->name);
    int bid = kiln_graph_add_const_uninit(dst, name, KILN_DTYPE_FLOAT32, &bs, true, (void **)&nb);
    if (wid < 0 || bid < 0)
        return false;
    const float *ow = w->data, *ob = bv ? bv->data : NULL;
    for (int64_t gi = 0; gi < G; gi++)
        for (int64_t mm = 0; mm < mg; mm++)
            for (int64_t rh = 0; rh < dh->s; rh++)
                for (int64_t rw_ = 0; rw_ < dw->s; rw_++) {
                    int64_t m = gi * mg + mm, o = (m * dh->s + rh) * dw->s + rw_;
                    nb[o] = ob ? ob[m] : 0.0f;
                    for (int64_t cc = 0; cc < cg; cc++) {
                        float *dstw = nw + (o * cg + cc) * Th * Tw;
                        const float *src = ow + ((gi * cg + cc) * mg + mm) * Kh * Kw;
                        for (int64_t uh = 0; uh < Th; uh++) {
                            int64_t kh = (dh->t_hi - uh) * dh->s + rh + dh->p;
                            for (int64_t uw = 0; uw < Tw; uw++) {
                                int64_t kw = (dw->t_hi - uw) * dw->s + rw_ + dw->p;
                                bool in = kh >= 0 && kh < Kh && kw >= 0 && kw < Kw;
                                dstw[uh * Tw + uw] = in ? src[kh * Kw + kw] : 0.0f;
                            }
                        }
                    }
                }

    int64_t N = x->shape.dims[0], M = geo->m_out, Qh = dh->q, Qw = dw->q;
    int64_t Oh = geo->out[0], Ow = geo->out[1];
    bool interleave = S > 1, crop = Qh * dh->s != Oh || Qw * dw->s != Ow;
    int in[3] = {kiln_rewrite_value(rw, n->inputs[0]), wid, bid};
    kiln_shape cs = {.rank = 4, .dims = {N, oc, Qh, Qw}};
    int conv;
    if (!interleave && !crop) {
        /* stride 1, exact: the Conv is the node */
        kiln_node tmp = *n;
        tmp.op = KILN_OP_CONV;
        tmp.n_inputs = 3;
        tmp.n_attrs = 0;
        conv = kiln_rewrite_node(rw, &tmp, in);
    } else {
        conv = add_node(dst, KILN_OP_CONV, n->name, in, 3, &cs);
    }
    int64_t ks[2] = {Th, Tw}, pads[4] = {dh->t_hi, dw->t_hi, dh->pad_end, dw->pad_end};
    int64_t ones[2] = {1, 1};
    if (conv < 0 || kiln_node_set_ints(dst, conv, "kernel_shape", ks, 2) != KILN_OK ||
        kiln_node_set_ints(dst, conv, "pads", pads, 4) != KILN_OK ||
        kiln_node_set_ints(dst, conv, "strides", ones, 2) != KILN_OK ||
        kiln_node_set_ints(dst, conv, "dilations", ones, 2) != KILN_OK ||
        kiln_node_set_int(dst, conv, "group", G) != KILN_OK)
        return false;
    if (!interleave && !crop)
        return true;
    int cur = dst->nodes[conv]->outputs[0];
    if (interleave) {
        kiln_shape s6 = {.rank = 6, .dims = {N, M, dh->s, dw->s, Qh, Qw}};
        kiln_shape t6 = {.rank = 6, .dims = {N, M, Qh, dh->s, Qw, dw->s}};
        kiln_shape r4 = {.rank = 4, .dims = {N, M, Qh * dh->s, Qw * dw->s}};
        static const int64_t perm[6] = {0, 1, 4, 2, 5, 3};
        snprintf(name, sizeof name, "%s.phases", n->name);
        int a = add_node(dst, KILN_OP_RESHAPE, name, &cur, 1, &s6);
        if (a < 0 || kiln_node_set_ints(dst, a, "shape", s6.dims, 6) != KILN_OK)
            return false;
        cur = dst->nodes[a]->outputs[0];
        snprintf(name, sizeof name, "%s.interleave", n->name);
        int t = add_node(dst, KILN_OP_TRANSPOSE, name, &cur, 1, &t6);
        if (t < 0 || kiln_node_set_ints(dst, t, "perm", perm, 6) != KILN_OK)
            return false;
        cur = dst->nodes[t]->outputs[0];
        kiln_node tmp = *n;
        tmp.op = KILN_OP_RESHAPE;
        tmp.n_inputs = 1;
        tmp.n_attrs = 0;
        snprintf(name, sizeof name, "%s.merge", n->name);
        int r = crop ? add_node(dst, KILN_OP_RESHAPE, name, &cur, 1, &r4)
                     : kiln_rewrite_node(rw, &tmp, &cur);
        if (r < 0 || kiln_node_set_ints(dst, r, "shape", r4.dims, 4) != KILN_OK)
            return false;
        cur = dst->nodes[r]->outputs[0];
    }
    if (crop) {
        kiln_node tmp = *n;
        tmp.op = KILN_OP_SLICE;
        tmp.n_inputs = 1;
        tmp.n_attrs = 0;
        int sl = kiln_rewrite_node(rw, &tmp, &cur);
        int64_t starts[2] = {0, 0}, ends[2] = {Oh, Ow}, axes[2] = {2, 3};
        if (sl < 0 || kiln_node_set_ints(dst, sl, "starts", starts, 2) != KILN_OK ||
            kiln_node_set_ints(dst, sl, "ends", ends, 2) != KILN_OK ||
            kiln_node_set_ints(dst, sl, "axes", axes, 2) != KILN_OK)
            return false;
    }
    return true;
}

kiln_status kiln_pass_lower_conv_transpose(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    kiln_convt_geom geo;
    phase_dim dh, dw;
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++)
        any = plan(g, g->nodes[i], &geo, &dh, &dw);
    if (!any)
        return KILN_OK;
    kiln_rewrite rw = {0};
    kiln_status st = kiln_rewrite_begin(&rw, g, err);
    if (st != KILN_OK)
        return st;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        bool ok = plan(g, n, &geo, &dh, &dw) ? lower(&rw, g, n, &geo, &dh, &dw)
                                             : kiln_rewrite_node(&rw, n, NULL) >= 0;
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
