/* pass/lower_conv_transpose.c: a 1-D or 2-D ConvTranspose with constant weights
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
 * (k3s2: 16 taps per 9). 1-D runs as 2-D with one row. Left to the
 * reference kernel: dilation > 1, 3-D (kiln's conv templates are 1-D/2-D),
 * run-time weights or bias, a non-float32 X, more than 64 phases or a phase
 * weight over 4x the kernel's (a stride well above the kernel: k1 s3), and
 * geometries whose pad_begin would be negative (an output_shape that crops
 * before the first input). Weights are combined in float (a copy, no
 * arithmetic), so the lowered node computes the same sums in another order. */
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

/* The lowering of node n (one phase_dim per spatial dim), or false to
 * leave it to the reference kernel. */
static bool plan(const kiln_graph *g, const kiln_node *n, kiln_convt_geom *geo, phase_dim *pd)
{
    if (n->op != KILN_OP_CONVTRANSPOSE || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const kiln_value *b = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    if (x->dtype != KILN_DTYPE_FLOAT32 || (x->shape.rank != 3 && x->shape.rank != 4) ||
        w->kind != KILN_VALUE_CONST || !w->data || w->dtype != KILN_DTYPE_FLOAT32)
        return false;
    if (b && (b->kind != KILN_VALUE_CONST || !b->data || b->dtype != KILN_DTYPE_FLOAT32))
        return false;
    if (kiln_convt_resolve(n, &x->shape, &w->shape, geo, NULL) != KILN_OK)
        return false;
    int64_t phases = 1, taps = 1, kernel = 1;
    for (int d = 0; d < geo->nsp; d++) {
        if (geo->dilation[d] != 1 || !plan_dim(geo->in[d], geo->out[d], geo->stride[d],
                                               geo->pad_begin[d], geo->kernel[d], &pd[d]))
            return false;
        phases *= pd[d].s;
        taps *= pd[d].taps;
        kernel *= pd[d].k;
    }
    /* the Conv's weight holds phases x taps per (c, m) against the kernel's
     * taps: at most 4x (k1 s2; k3 s2: 16/9), and a bounded phase count, so
     * that a hostile stride cannot blow the weight up (the reference kernel
     * runs those) */
    return phases <= 64 && phases * taps <= 4 * kernel;
}

/* The Conv's weight [M*S, C/G, T...] from W [C, M/G, K...]: output channel
 * o = m*S + r (r the phase, row-major over the dims' phases), tap u of
 * phase r_d reading kernel tap (t_hi - u)*s + r_d + p, 0 outside the kernel;
 * and its bias, the ConvTranspose's per phase. 1-D is 2-D with one row. */
static void phase_weights(const kiln_convt_geom *geo, const phase_dim *pd, const float *ow,
                          const float *ob, float *nw, float *nb)
{
    phase_dim one = {.s = 1, .p = 0, .k = 1, .t_lo = 0, .t_hi = 0, .taps = 1};
    const phase_dim *dh = geo->nsp == 2 ? &pd[0] : &one, *dw = &pd[geo->nsp - 1];
    int64_t G = geo->group, cg = geo->c_in / G, mg = geo->m_out / G;
    int64_t Th = dh->taps, Tw = dw->taps, Kh = dh->k, Kw = dw->k;
    for (int64_t gi = 0; gi < G; gi++)
        for (int64_t mm = 0; mm < mg; mm++)
            for (int64_t rh = 0; rh < dh->s; rh++)
                for (int64_t rw = 0; rw < dw->s; rw++) {
                    int64_t m = gi * mg + mm, o = (m * dh->s + rh) * dw->s + rw;
                    nb[o] = ob ? ob[m] : 0.0f;
                    for (int64_t cc = 0; cc < cg; cc++) {
                        float *dst = nw + (o * cg + cc) * Th * Tw;
                        const float *src = ow + ((gi * cg + cc) * mg + mm) * Kh * Kw;
                        for (int64_t uh = 0; uh < Th; uh++) {
                            int64_t kh = (dh->t_hi - uh) * dh->s + rh + dh->p;
                            for (int64_t uw = 0; uw < Tw; uw++) {
                                int64_t kw = (dw->t_hi - uw) * dw->s + rw + dw->p;
                                bool in = kh >= 0 && kh < Kh && kw >= 0 && kw < Kw;
                                dst[uh * Tw + uw] = in ? src[kh * Kw + kw] : 0.0f;
                            }
                        }
                    }
                }
}

/* Writes the lowered node n into rw; false when out of memory. 1-D runs as
 * 2-D with one row (a Reshape to [N, C, 1, L] in front, one back after):
 * the blocked conv templates take rank-4 convs. */
static bool lower(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                  const kiln_convt_geom *geo, const phase_dim *pd1)
{
    kiln_graph *dst = rw->dst;
    const kiln_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]];
    const kiln_value *bv = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]] : NULL;
    bool oned = geo->nsp == 1;
    phase_dim pd[2];
    if (oned) {
        pd[0] = (phase_dim){.s = 1, .p = 0, .k = 1, .t_lo = 0, .t_hi = 0, .taps = 1, .q = 1};
        pd[1] = pd1[0];
    } else {
        pd[0] = pd1[0], pd[1] = pd1[1];
    }
    int64_t S = pd[0].s * pd[1].s, N = x->shape.dims[0], M = geo->m_out, oc = M * S;
    int64_t out[2] = {oned ? 1 : geo->out[0], geo->out[oned ? 0 : 1]};
    bool interleave = S > 1, crop = false;
    for (int d = 0; d < 2; d++)
        crop |= pd[d].q * pd[d].s != out[d];
    char name[512];

    kiln_shape ws = {.rank = 2 + geo->nsp, .dims = {oc, geo->c_in / geo->group}};
    for (int d = 0; d < geo->nsp; d++)
        ws.dims[2 + d] = pd1[d].taps;
    kiln_shape bs = {.rank = 1, .dims = {oc}};
    float *nw, *nb;
    snprintf(name, sizeof name, "%s.phase_weight", n->name);
    int wid = kiln_graph_add_const_uninit(dst, name, KILN_DTYPE_FLOAT32, &ws, true, (void **)&nw);
    snprintf(name, sizeof name, "%s.phase_bias", n->name);
    int bid = kiln_graph_add_const_uninit(dst, name, KILN_DTYPE_FLOAT32, &bs, true, (void **)&nb);
    if (wid < 0 || bid < 0)
        return false;
    phase_weights(geo, pd1, w->data, bv ? bv->data : NULL, nw, nb);
    if (oned) { /* [oc, C/G, T] -> [oc, C/G, 1, T]: the same floats */
        kiln_value *wv = dst->values[wid];
        wv->shape = (kiln_shape){.rank = 4, .dims = {oc, ws.dims[1], 1, ws.dims[2]}};
    }

    int cur = kiln_rewrite_value(rw, n->inputs[0]), id;
    if (oned) {
        kiln_shape x4 = {.rank = 4, .dims = {N, geo->c_in, 1, geo->in[0]}};
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_RESHAPE, ".as_2d", &cur, 1, &x4, false)) < 0 ||
            kiln_node_set_ints(dst, id, "shape", x4.dims, 4) != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
    }
    int in[3] = {cur, wid, bid};
    kiln_shape cs = {.rank = 4, .dims = {N, oc, pd[0].q, pd[1].q}};
    int64_t ks[2] = {pd[0].taps, pd[1].taps}, ones[2] = {1, 1};
    int64_t pads[4] = {pd[0].t_hi, pd[1].t_hi, pd[0].pad_end, pd[1].pad_end};
    bool conv_last = !interleave && !crop && !oned;
    if ((id = kiln_rewrite_emit(rw, n, KILN_OP_CONV, "", in, 3, &cs, conv_last)) < 0 ||
        kiln_node_set_ints(dst, id, "kernel_shape", ks, 2) != KILN_OK ||
        kiln_node_set_ints(dst, id, "pads", pads, 4) != KILN_OK ||
        kiln_node_set_ints(dst, id, "strides", ones, 2) != KILN_OK ||
        kiln_node_set_ints(dst, id, "dilations", ones, 2) != KILN_OK ||
        kiln_node_set_int(dst, id, "group", geo->group) != KILN_OK)
        return false;
    cur = kiln_rewrite_out(rw, id);
    kiln_shape o4 = {.rank = 4, .dims = {N, M, pd[0].q * pd[0].s, pd[1].q * pd[1].s}};
    if (interleave) {
        /* [N, M, sh, sw, Qh, Qw] -> [N, M, Qh, sh, Qw, sw] -> [N, M, Qh*sh, Qw*sw] */
        kiln_shape split = {.rank = 6, .dims = {N, M, pd[0].s, pd[1].s, pd[0].q, pd[1].q}};
        kiln_shape inter = {.rank = 6, .dims = {N, M, pd[0].q, pd[0].s, pd[1].q, pd[1].s}};
        static const int64_t perm[6] = {0, 1, 4, 2, 5, 3};
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_RESHAPE, ".phases", &cur, 1, &split, false)) < 0 ||
            kiln_node_set_ints(dst, id, "shape", split.dims, 6) != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_TRANSPOSE, ".interleave", &cur, 1, &inter, false)) < 0 ||
            kiln_node_set_ints(dst, id, "perm", perm, 6) != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_RESHAPE, ".merge", &cur, 1, &o4, !crop && !oned)) < 0 ||
            kiln_node_set_ints(dst, id, "shape", o4.dims, 4) != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
    }
    if (crop) {
        kiln_shape c4 = {.rank = 4, .dims = {N, M, out[0], out[1]}};
        int64_t starts[2] = {0, 0}, axes[2] = {2, 3};
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_SLICE, ".crop", &cur, 1, &c4, !oned)) < 0 ||
            kiln_node_set_ints(dst, id, "starts", starts, 2) != KILN_OK ||
            kiln_node_set_ints(dst, id, "ends", out, 2) != KILN_OK ||
            kiln_node_set_ints(dst, id, "axes", axes, 2) != KILN_OK)
            return false;
        cur = kiln_rewrite_out(rw, id);
    }
    if (oned) {
        kiln_shape y3 = {.rank = 3, .dims = {N, M, out[1]}};
        if ((id = kiln_rewrite_emit(rw, n, KILN_OP_RESHAPE, "", &cur, 1, &y3, true)) < 0 ||
            kiln_node_set_ints(dst, id, "shape", y3.dims, 3) != KILN_OK)
            return false;
    }
    return true;
}

static bool takes(const kiln_graph *g, const kiln_node *n)
{
    kiln_convt_geom geo;
    phase_dim pd[KILN_WINDOW_MAX_SPATIAL];
    return plan(g, n, &geo, pd);
}

static bool rewrite(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    kiln_convt_geom geo;
    phase_dim pd[KILN_WINDOW_MAX_SPATIAL];
    return plan(g, n, &geo, pd) && lower(rw, g, n, &geo, pd);
}

kiln_status kiln_pass_lower_conv_transpose(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, takes, rewrite, err);
}
