/* ir/infer_attention.c: geometry and shape inference of Attention
 * (ir/attention.h). */
#include "ir/attention.h"
#include "ir/infer_util.h"
#include "util/error.h"

static kiln_status perm_of(const kiln_node *n, const char *name, int r, int p[4], kiln_error *err)
{
    const int64_t *v;
    int c = kiln_attr_ints(n, name, &v);
    if (c < 0 && !kiln_node_attr(n, name))
        c = 0; /* absent: identity */
    if (c != 0 && c != r) /* also an attribute of another type */
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s must have %d entries", name, r);
    bool seen[4] = {false};
    for (int i = 0; i < r; i++) {
        int64_t x = c == r ? v[i] : i;
        if (x < 0 || x >= r || seen[x])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "%s must be a permutation of 0..%d", name, r - 1);
        seen[x] = true;
        p[i] = (int)x;
    }
    return KILN_OK;
}

/* Logical extents and strides of operand s (rank r: 3 reads as [1, ...])
 * read through perm p. */
static void view(const kiln_shape *s, const int p[4], int r, int64_t ext[4], int64_t st[4])
{
    int64_t rs[4], acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        rs[i] = acc;
        acc *= s->dims[i];
    }
    int off = 4 - r;
    ext[0] = 1, st[0] = 0;
    for (int i = 0; i < r; i++) {
        ext[off + i] = s->dims[p[i]];
        st[off + i] = rs[p[i]];
    }
}

kiln_status kiln_attn_geom_of(const kiln_node *n, const kiln_shape *q, const kiln_shape *k,
                              const kiln_shape *v, const kiln_shape *m, kiln_attn_geom *g,
                              kiln_error *err)
{
    kiln_status s;
    int qp[4], kp[4], vp[4], op[4], rk = q->rank;
    if ((rk != 3 && rk != 4) || k->rank != rk || v->rank != rk)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "Q, K and V must have the same rank, 3 or 4 (%d, %d, %d)", q->rank,
                           k->rank, v->rank);
    if ((s = perm_of(n, "q_perm", rk, qp, err)) != KILN_OK ||
        (s = perm_of(n, "k_perm", rk, kp, err)) != KILN_OK ||
        (s = perm_of(n, "v_perm", rk, vp, err)) != KILN_OK ||
        (s = perm_of(n, "o_perm", rk, op, err)) != KILN_OK)
        return s;
    int64_t qe[4], ke[4], ve[4];
    kiln_attn_geom r = {0};
    view(q, qp, rk, qe, r.qs);
    view(k, kp, rk, ke, r.ks);
    view(v, vp, rk, ve, r.vs);
    if (qe[0] != ke[0] || qe[0] != ve[0] || qe[1] != ke[1] || qe[1] != ve[1] || qe[3] != ke[3] ||
        ke[2] != ve[2])
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "Q' [%lld %lld %lld %lld], K' [%lld %lld %lld %lld] and V' [%lld %lld "
                           "%lld %lld] do not fit",
                           (long long)qe[0], (long long)qe[1], (long long)qe[2], (long long)qe[3],
                           (long long)ke[0], (long long)ke[1], (long long)ke[2], (long long)ke[3],
                           (long long)ve[0], (long long)ve[1], (long long)ve[2], (long long)ve[3]);
    r.B = qe[0], r.H = qe[1], r.Sq = qe[2], r.D = qe[3], r.Sk = ke[2], r.Dv = ve[3];
    const int64_t logical[4] = {r.B, r.H, r.Sq, r.Dv}, sc[4] = {r.B, r.H, r.Sq, r.Sk};
    int off = 4 - rk;
    r.out.rank = rk;
    for (int i = 0; i < rk; i++)
        r.out.dims[i] = logical[off + op[i]];
    int64_t acc = 1;
    for (int i = rk - 1; i >= 0; i--) {
        r.os[off + op[i]] = acc;
        acc *= r.out.dims[i];
    }
    if (m) {
        if (m->rank > 4)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "the mask has rank %d > 4", m->rank);
        acc = 1;
        for (int i = 3; i >= 0; i--) {
            int j = i - (4 - m->rank);
            int64_t d = j >= 0 ? m->dims[j] : 1;
            if (d != 1 && d != sc[i])
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "the mask's dim %d (%lld) does not broadcast to %lld", j,
                                   (long long)d, (long long)sc[i]);
            r.ms[i] = d == 1 ? 0 : acc;
            acc *= d;
        }
        r.has_mask = true;
    }
    r.scale = kiln_attr_float(n, "scale", 1.0f);
    *g = r;
    return KILN_OK;
}

kiln_status kiln_infer_attention(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    kiln_status s;
    if (!in[0] || !in[1] || !in[2])
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "Q, K and V are required");
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k] && (s = kiln_infer_check_float(in[k], k, "input", err)) != KILN_OK)
            return s;
    const kiln_value *m = n->n_inputs > 3 ? in[3] : NULL;
    kiln_attn_geom g;
    if ((s = kiln_attn_geom_of(n, &in[0]->shape, &in[1]->shape, &in[2]->shape,
                               m ? &m->shape : NULL, &g, err)) != KILN_OK)
        return s;
    out[0]->dtype = in[0]->dtype;
    kiln_infer_set_output(out[0], &g.out);
    return KILN_OK;
}
