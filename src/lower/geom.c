/* lower/geom.c: op geometry for the templates (see geom.h). Window ops go
 * through kiln_window_resolve, the resolver shape inference and the
 * reference kernels use, so all three agree on pads and output extents. */
#include <string.h>

#include "ir/infer_util.h"
#include "lower/geom.h"

static int block_of(kiln_layout l)
{
    return l.kind == KILN_LAYOUT_NCHWC ? l.block_a : 1;
}

bool kiln_geom_win2d(const kiln_graph *g, const kiln_node *n, kiln_win2d *w)
{
    const kiln_value *x = g->values[n->inputs[0]];
    const kiln_value *y = g->values[n->outputs[0]];
    if (x->shape.rank != 3 && x->shape.rank != 4)
        return false;
    int64_t kernel[2];
    int nsp = x->shape.rank - 2;
    if (n->op == KILN_OP_CONV) {
        const kiln_value *wv = g->values[n->inputs[1]];
        for (int i = 0; i < nsp; i++)
            kernel[i] = wv->shape.dims[2 + i];
    } else {
        const int64_t *ks = NULL;
        if (kiln_attr_ints(n, "kernel_shape", &ks) != nsp)
            return false;
        for (int i = 0; i < nsp; i++)
            kernel[i] = ks[i];
    }
    kiln_window win;
    kiln_error err;
    if (kiln_window_resolve(n, kiln_op_name(n->op), &x->shape, kernel, n->op != KILN_OP_CONV,
                            &win, &err) != KILN_OK)
        return false;
    memset(w, 0, sizeof *w);
    w->n = x->shape.dims[0];
    w->c = x->shape.dims[1];
    w->m = y->shape.dims[1];
    int o = nsp == 1 ? 1 : 0; /* 1-D: h = 1 */
    w->h = nsp == 1 ? 1 : x->shape.dims[2];
    w->w = x->shape.dims[1 + nsp];
    w->oh = nsp == 1 ? 1 : win.out[0];
    w->ow = win.out[nsp - 1];
    w->kh = o ? 1 : win.kernel[0];
    w->kw = win.kernel[nsp - 1];
    w->sh = o ? 1 : win.stride[0];
    w->sw = win.stride[nsp - 1];
    w->dh = o ? 1 : win.dilation[0];
    w->dw = win.dilation[nsp - 1];
    w->pt = o ? 0 : win.pad_begin[0];
    w->pb = o ? 0 : win.pad_end[0];
    w->pl = win.pad_begin[nsp - 1];
    w->pr = win.pad_end[nsp - 1];
    w->groups = n->op == KILN_OP_CONV ? kiln_attr_int(n, "group", 1) : 1;
    w->bin = block_of(x->layout);
    w->bout = block_of(y->layout);
    return true;
}

bool kiln_geom_dense(const kiln_graph *g, const kiln_node *n, kiln_dense *d)
{
    memset(d, 0, sizeof *d);
    const kiln_value *a = g->values[n->inputs[0]], *b = g->values[n->inputs[1]];
    const kiln_value *y = g->values[n->outputs[0]];
    if (b->kind != KILN_VALUE_CONST || !b->data || b->dtype != KILN_DTYPE_FLOAT32 ||
        a->dtype != KILN_DTYPE_FLOAT32 || b->shape.rank != 2 ||
        a->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    if (n->op == KILN_OP_GEMM) {
        d->trans_a = kiln_attr_int(n, "transA", 0) != 0;
        d->trans_b = kiln_attr_int(n, "transB", 0) != 0;
        d->alpha = kiln_attr_float(n, "alpha", 1.0f);
        d->beta = kiln_attr_float(n, "beta", 1.0f);
        if (d->trans_a || a->shape.rank != 2)
            return false;
        d->M = y->shape.dims[0];
        d->N = y->shape.dims[1];
        d->K = a->shape.dims[1];
        if (n->n_inputs > 2 && n->inputs[2] >= 0) {
            const kiln_value *c = g->values[n->inputs[2]];
            int64_t cn = kiln_shape_numel(&c->shape);
            if (c->dtype != KILN_DTYPE_FLOAT32 || c->shape.rank > 2)
                return false;
            if (cn == 1)
                d->bias_kind = 1;
            else if (c->shape.dims[c->shape.rank - 1] == d->N &&
                     (c->shape.rank == 1 || c->shape.dims[0] == 1))
                d->bias_kind = 2;
            else if (c->shape.rank == 2 && c->shape.dims[0] == d->M && c->shape.dims[1] == d->N)
                d->bias_kind = 3;
            else if (c->shape.rank == 2 && c->shape.dims[0] == d->M && c->shape.dims[1] == 1)
                d->bias_kind = 4;
            else
                return false;
        }
        return true;
    }
    if (n->op != KILN_OP_MATMUL || a->shape.rank < 2)
        return false;
    d->alpha = d->beta = 1.0f;
    d->K = a->shape.dims[a->shape.rank - 1];
    d->N = b->shape.dims[1];
    d->M = kiln_shape_numel(&a->shape) / d->K;
    return true;
}

bool kiln_geom_bmm(const kiln_graph *g, const kiln_node *n, kiln_bmm *bm)
{
    memset(bm, 0, sizeof *bm);
    const kiln_shape *as = &g->values[n->inputs[0]]->shape;
    const kiln_shape *bs = &g->values[n->inputs[1]]->shape;
    const kiln_shape *ys = &g->values[n->outputs[0]]->shape;
    if (as->rank < 2 || bs->rank < 2 || g->values[n->inputs[0]]->dtype != KILN_DTYPE_FLOAT32)
        return false;
    bm->M = as->dims[as->rank - 2];
    bm->K = as->dims[as->rank - 1];
    bm->N = bs->dims[bs->rank - 1];
    bm->rank = ys->rank;
    for (int i = 0; i < ys->rank; i++)
        bm->out_dims[i] = ys->dims[i];
    bm->n_bdims = ys->rank - 2;
    bm->batch = 1;
    int64_t sa = 1, sb = 1;
    for (int i = bm->n_bdims - 1; i >= 0; i--) {
        int ia = i - (ys->rank - as->rank), ib = i - (ys->rank - bs->rank);
        int64_t da = ia >= 0 ? as->dims[ia] : 1, db = ib >= 0 ? bs->dims[ib] : 1;
        bm->a_bstride[i] = da == 1 ? 0 : sa;
        bm->b_bstride[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
        bm->batch *= ys->dims[i];
    }
    return true;
}

void kiln_geom_split(const kiln_shape *s, int a0, int a1, int64_t *outer, int64_t *mid,
                     int64_t *inner)
{
    int64_t o = 1, m = 1, in = 1;
    for (int i = 0; i < s->rank; i++) {
        if (i < a0)
            o *= s->dims[i];
        else if (i < a1)
            m *= s->dims[i];
        else
            in *= s->dims[i];
    }
    *outer = o;
    *mid = m;
    *inner = in;
}

bool kiln_geom_bcast_rows(const kiln_graph *g, const kiln_node *n, int n_ops, kiln_bcast_rows *w)
{
    if (n_ops < 1 || n_ops > KILN_GEOM_MAX_BCAST || n->n_inputs < n_ops || n->n_outputs < 1)
        return false;
    const kiln_value *y = g->values[n->outputs[0]];
    memset(w, 0, sizeof *w);
    w->n_ops = n_ops;
    w->rank = y->shape.rank > 0 ? y->shape.rank : 1;
    for (int d = 0; d < w->rank; d++)
        w->dims[d] = y->shape.rank > 0 ? y->shape.dims[d] : 1;
    for (int k = 0; k < n_ops; k++) {
        if (n->inputs[k] < 0)
            return false;
        const kiln_shape *s = &g->values[n->inputs[k]]->shape;
        int diff = w->rank - s->rank;
        if (diff < 0)
            return false;
        int64_t v = 1;
        for (int d = w->rank - 1; d >= 0; d--) {
            int64_t e = d >= diff ? s->dims[d - diff] : 1;
            if (e != 1 && e != w->dims[d])
                return false;
            w->st[k][d] = e == 1 ? 0 : v;
            v *= e;
        }
    }
    w->last = w->dims[w->rank - 1];
    w->rows = 1;
    for (int d = 0; d < w->rank - 1; d++)
        w->rows *= w->dims[d];
    return true;
}
