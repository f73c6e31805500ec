/* vm/vm_scatter.c: the VM's ScatterElements and ConstantOfShape, on run-time
 * tensors, into the node's own buffers (docs/VM.md, "The VM's own kernels").
 *
 * PyTorch exports `y[idx] = v` (index_put_ with one index tensor on dim 0;
 * torchvision's MultiScaleRoIAlign merges its levels this way) as
 *
 *     y0 = ConstantOfShape(shape)                  (or any data)
 *     ix = Expand(Reshape(idx, [-1, 1, ..., 1]), shape of v)
 *     y  = ScatterElements(y0, ix, v, axis = 0)
 *
 * Run as written, that is a fill, an int64 index per element (Faster
 * R-CNN: 150 x 256 x 7 x 7, 15 MB of indices), a copy of the data and a
 * scatter element by element. Here:
 * - an Expand whose one reader is a ScatterElements' indices is *fused*
 *   (kiln_vm_scatter_plan): it does not run, and the scatter reads its
 *   input, broadcast;
 * - when those indices are constant off the axis and cover the data off the
 *   axis (the export above), each index moves one contiguous row of the
 *   updates (reduction none); otherwise the indices are expanded into
 *   scratch and the reference kernel scatters (ref/movement.c, every
 *   reduction);
 * - the data is updated in place when it is a VM kernel's output that only
 *   this node reads (its buffer is taken over: no copy). ConstantOfShape is
 *   such a kernel, so the fill above is the only pass over the data.
 * Results are the reference kernel's: indices in row-major order, the last
 * write wins, a negative index counts from the end, one out of range is an
 * error that names the node. */
#include <string.h>

#include "io/tensor_io.h"
#include "ir/broadcast.h"
#include "ref/ref.h"
#include "util/error.h"
#include "vm/vm_internal.h"

const char *kiln_vm_attr_str(const vm_node *n, const char *name, const char *def, char *buf,
                             size_t cap)
{
    const Onnx__AttributeProto *a = kiln_vm_attr(n->np, name);
    if (!a || !a->s.data || cap == 0)
        return def;
    size_t len = a->s.len < cap - 1 ? a->s.len : cap - 1;
    memcpy(buf, a->s.data, len);
    buf[len] = '\0';
    return buf;
}

static bool is_op(const vm_node *n, const char *op)
{
    return n->np->op_type && !strcmp(n->np->op_type, op);
}

void kiln_vm_scatter_plan(kiln_vm *vm)
{
    for (int e = 0; e < vm->n_dyn; e++) {
        const vm_node *sc = &vm->dyn[e];
        if (!is_op(sc, "ScatterElements") || sc->flow != VM_KERNEL || sc->n_in != 3 ||
            sc->src[1].kind != SRC_DYN)
            continue;
        vm_node *ex = &vm->dyn[sc->src[1].index];
        if (is_op(ex, "Expand") && ex->flow == VM_CONVERT && ex->n_in == 2 && ex->n_out == 1 &&
            sc->src[1].sub == 0 && ex->readers[0] == 1)
            ex->fused = true;
    }
}

/* ---- ConstantOfShape
 * --------------------------------------------------------------- */

kiln_status kiln_vm_fill_run(vm_node *n, const kiln_tensor *shape, kiln_error *err)
{
    /* the value (default float 0), decoded once into the node's scratch:
     * [dtype as int64][the element] */
    int64_t *val = n->scratch;
    if (!val) {
        const Onnx__AttributeProto *a = kiln_vm_attr(n->np, "value");
        kiln_tensor v = {0};
        if (a && a->t) {
            kiln_status s = kiln_tensor_from_onnx(a->t, &v, err);
            if (s != KILN_OK)
                return kiln_error_prefix(err, s, "node '%s' (ConstantOfShape): value: ", n->name);
        }
        if (a && a->t && (kiln_shape_numel(&v.shape) != 1 || kiln_dtype_size(v.dtype) > 8)) {
            kiln_tensor_release(&v);
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                               "node '%s' (ConstantOfShape): value must be one element", n->name);
        }
        if (!(val = kiln_vm_scratch(n, 16))) {
            kiln_tensor_release(&v);
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        }
        memset(val, 0, 16);
        val[0] = a && a->t ? (int64_t)v.dtype : (int64_t)KILN_DTYPE_FLOAT32;
        if (a && a->t)
            memcpy(&val[1], v.data, kiln_dtype_size(v.dtype));
        kiln_tensor_release(&v);
    }
    kiln_dtype dt = (kiln_dtype)val[0];
    if (shape->dtype != KILN_DTYPE_INT64 || shape->shape.rank != 1 ||
        shape->shape.dims[0] > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (ConstantOfShape): the shape must be int64 [rank <= %d]",
                           n->name, KILN_MAX_RANK);
    kiln_shape sh = {.rank = (int)shape->shape.dims[0]};
    const int64_t *dims = shape->data;
    int64_t numel = 1;
    for (int d = 0; d < sh.rank; d++) {
        if (dims[d] < 0 || (dims[d] && numel > INT64_MAX / 16 / dims[d]))
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "node '%s' (ConstantOfShape): dim %d is %lld", n->name, d,
                               (long long)dims[d]);
        sh.dims[d] = dims[d];
        numel *= dims[d];
    }
    kiln_status s = kiln_vm_set_out(n, 0, dt, &sh, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(dt);
    const unsigned char *v = (const unsigned char *)&val[1];
    bool zero = true;
    for (size_t b = 0; b < es; b++)
        zero = zero && v[b] == 0;
    if (zero) {
        memset(n->own[0].data, 0, (size_t)numel * es);
    } else {
        char *o = n->own[0].data;
        for (int64_t i = 0; i < numel; i++)
            memcpy(o + (size_t)i * es, v, es);
    }
    return KILN_OK;
}

/* ---- ScatterElements
 * --------------------------------------------------------------- */

/* Makes the data the node's output: the producer's buffer taken over when
 * that is a VM kernel's output no other slot reads, else a copy. */
static kiln_status take_data(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    const kiln_tensor *x = n->in[0];
    vm_src s = n->src[0];
    if (s.kind == SRC_DYN) {
        vm_node *p = &vm->dyn[s.index];
        if (p->flow == VM_KERNEL && p->own && p->readers[s.sub] == 1 && p->out[s.sub] == x &&
            x == &p->own[s.sub]) {
            kiln_tensor t = n->own[0];
            size_t cap = n->own_cap[0];
            n->own[0] = p->own[s.sub];
            n->own_cap[0] = p->own_cap[s.sub];
            p->own[s.sub] = t;
            p->own_cap[s.sub] = cap;
            /* the producer's output keeps describing what it computed (the
             * profile reads the shapes); its data is this node's old buffer */
            p->own[s.sub].dtype = n->own[0].dtype;
            p->own[s.sub].shape = n->own[0].shape;
            n->in[0] = &n->own[0];
            return KILN_OK;
        }
    }
    kiln_status st = kiln_vm_set_out(n, 0, x->dtype, &x->shape, err);
    int64_t nb = kiln_tensor_nbytes(x);
    if (st == KILN_OK && nb > 0)
        memcpy(n->own[0].data, x->data, (size_t)nb);
    return st;
}

/* Row by row when the indices (ix: r broadcast to `is`) are constant off
 * the axis, cover the data there, and nothing is reduced; false: not so. */
static bool row_shape(const kiln_tensor *x, const kiln_tensor *r, const kiln_shape *is,
                      const kiln_tensor *u, int axis)
{
    int rank = x->shape.rank;
    if (is->rank != rank || !kiln_shape_equal(is, &u->shape) || r->shape.rank > rank)
        return false;
    int lead = rank - r->shape.rank; /* r's dims, right-aligned */
    for (int d = 0; d < rank; d++) {
        if (d == axis)
            continue;
        if (is->dims[d] != x->shape.dims[d])
            return false;
        if (d >= lead && r->shape.dims[d - lead] != 1)
            return false;
    }
    return true;
}

static kiln_status scatter_rows(vm_node *n, const kiln_tensor *r, const kiln_shape *is,
                                const kiln_tensor *u, int axis, kiln_error *err)
{
    kiln_tensor *y = &n->own[0];
    int rank = y->shape.rank, lead = rank - r->shape.rank;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= is->dims[d];
    for (int d = axis + 1; d < rank; d++)
        inner *= is->dims[d];
    const int64_t na = is->dims[axis], nx = y->shape.dims[axis];
    const bool one = axis < lead || r->shape.dims[axis - lead] == 1; /* one index for all */
    const size_t es = kiln_dtype_size(y->dtype), row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < na; j++) {
            int64_t at = one ? 0 : j;
            int64_t v = r->dtype == KILN_DTYPE_INT64 ? ((const int64_t *)r->data)[at]
                                                     : ((const int32_t *)r->data)[at];
            int64_t w = v < 0 ? v + nx : v;
            if (w < 0 || w >= nx)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "node '%s' (ScatterElements): index %lld is out of range "
                                   "for axis %d of extent %lld",
                                   n->name, (long long)v, axis, (long long)nx);
            if (row)
                memcpy((char *)y->data + (size_t)(o * nx + w) * row,
                       (const char *)u->data + (size_t)(o * na + j) * row, row);
        }
    return KILN_OK;
}

kiln_status kiln_vm_scatter_run(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    const kiln_tensor *x = n->in[0], *u = n->n_in > 2 ? n->in[2] : NULL;
    const vm_node *ex = n->src[1].kind == SRC_DYN ? &vm->dyn[n->src[1].index] : NULL;
    const bool fused = ex && ex->fused;
    const kiln_tensor *r = fused ? kiln_vm_value(vm, ex->src[0]) : n->in[1];
    const kiln_tensor *sh = fused ? kiln_vm_value(vm, ex->src[1]) : NULL;
    if (!r || !u || (fused && !sh))
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "node '%s' (ScatterElements): needs data, indices and updates", n->name);
    if (x->dtype != u->dtype || (r->dtype != KILN_DTYPE_INT64 && r->dtype != KILN_DTYPE_INT32))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "node '%s' (ScatterElements): data %s, updates %s, indices %s", n->name,
                           kiln_dtype_name(x->dtype), kiln_dtype_name(u->dtype),
                           kiln_dtype_name(r->dtype));
    char rb[16];
    const char *red = kiln_vm_attr_str(n, "reduction", "none", rb, sizeof rb);
    int64_t ax = 0;
    const Onnx__AttributeProto *aa = kiln_vm_attr(n->np, "axis");
    if (aa)
        ax = aa->i;
    int rank = x->shape.rank;
    if (ax < -rank || ax >= rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s' (ScatterElements): axis %lld for rank %d", n->name,
                           (long long)ax, rank);
    int axis = (int)(ax < 0 ? ax + rank : ax);
    /* the indices' shape: the fused Expand's output shape */
    kiln_shape is = r->shape;
    if (fused) {
        if (sh->dtype != KILN_DTYPE_INT64 || sh->shape.rank != 1 ||
            sh->shape.dims[0] > KILN_MAX_RANK)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "node '%s' (Expand): the shape must be int64 [rank <= %d]", ex->name,
                               KILN_MAX_RANK);
        kiln_shape want = {.rank = (int)sh->shape.dims[0]};
        for (int d = 0; d < want.rank; d++)
            want.dims[d] = ((const int64_t *)sh->data)[d];
        kiln_status s = kiln_broadcast_shape(&r->shape, &want, &is, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (Expand): ", ex->name);
    }
    kiln_status s = take_data(vm, n, err);
    if (s != KILN_OK)
        return s;
    x = n->in[0] = &n->own[0];
    if (!strcmp(red, "none") && row_shape(x, r, &is, u, axis))
        return scatter_rows(n, r, &is, u, axis, err);
    /* the general walk: the reference kernel, on the indices expanded */
    kiln_tensor ix = *r;
    if (fused) {
        int64_t nb = kiln_shape_numel(&is) * (int64_t)kiln_dtype_size(r->dtype);
        ix.shape = is;
        ix.data = nb >= 0 ? kiln_vm_scratch(n, (size_t)nb) : NULL;
        if (!ix.data)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        const kiln_tensor *ein[1] = {r};
        kiln_tensor *eout[1] = {&ix};
        if ((s = kiln_ref_expand(NULL, ein, eout, err)) != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (Expand): ", ex->name);
    }
    kiln_attr attrs[2] = {{.name = "axis", .type = KILN_ATTR_INT, .i = axis},
                          {.name = "reduction", .type = KILN_ATTR_STRING, .s = red}};
    kiln_node nd = {.op = KILN_OP_SCATTERELEMENTS, .name = n->name, .n_attrs = 2, .attrs = attrs};
    const kiln_tensor *in[3] = {x, &ix, u};
    kiln_tensor *out[1] = {&n->own[0]};
    s = kiln_ref_scatter_elements(&nd, in, out, err);
    return s == KILN_OK ? KILN_OK
                        : kiln_error_prefix(err, s, "node '%s' (ScatterElements): ", n->name);
}
