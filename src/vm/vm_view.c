/* vm/vm_view.c: data-dependent nodes that only rename their input's data
 * (docs/VM.md, "Views"): Identity, Flatten, Reshape, Squeeze, Unsqueeze,
 * and a Cast to the input's own dtype. Run as written they are a copy each
 * (a detection head flattens and casts its [rois, 256, 7, 7] features: 50
 * MB per copy on Mask R-CNN's 1,000 proposals); here the output is the
 * input's data under the new shape, no copy and no conversion.
 *
 * A view is valid as long as its input's data is: every value of the VM is
 * computed once per run (once per iteration in a body) and read after that
 * by later nodes of the same run, and a buffer is only taken over
 * (vm_scatter.c) by its producer's one reader, never by a view's reader. So
 * a view is made only for values that later nodes of this VM read; a graph
 * output, or a value a body captures, is a copy (it must outlive the run, or
 * a Loop copies its carried values into buffers the view could point to).
 * When the node is not a view on these inputs (a Cast to another dtype, a
 * shape the rules refuse), it is converted per shape class as any other
 * node, and the conversion states the error. */
#include <string.h>

#include "io/tensor_io.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "util/error.h"
#include "vm/vm_internal.h"

bool kiln_vm_view_op(const char *op)
{
    return op && (!strcmp(op, "Identity") || !strcmp(op, "Flatten") || !strcmp(op, "Reshape") ||
                  !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Cast"));
}

/* The axes of Squeeze / Unsqueeze: input 1 from opset 13, else the
 * attribute; *n = -1 when absent. false: not a 1-D int64 tensor. */
static bool read_axes(const kiln_vm *vm, const vm_node *n, const kiln_tensor *const *in,
                      const int64_t **axes, int *na)
{
    *axes = NULL;
    *na = -1;
    if (kiln_vm_opset(vm) >= 13) {
        const kiln_tensor *a = n->n_in > 1 ? in[1] : NULL;
        if (!a)
            return n->n_in < 2 || !n->np->input[1] || !*n->np->input[1];
        if (a->dtype != KILN_DTYPE_INT64 || a->shape.rank != 1 || a->shape.dims[0] > KILN_MAX_RANK)
            return false;
        *axes = a->data;
        *na = (int)a->shape.dims[0];
        return true;
    }
    const Onnx__AttributeProto *at = kiln_vm_attr(n->np, "axes");
    if (at) {
        if (at->n_ints > KILN_MAX_RANK)
            return false;
        *axes = at->ints;
        *na = (int)at->n_ints;
    }
    return true;
}

/* The output shape of view node n on inputs `in`; false: not a view here. */
static bool view_shape(const kiln_vm *vm, const vm_node *n, const kiln_tensor *const *in,
                       kiln_shape *out)
{
    const kiln_tensor *x = in[0];
    const char *op = n->np->op_type;
    const int r = x->shape.rank;
    *out = x->shape;
    if (!strcmp(op, "Identity"))
        return true;
    if (!strcmp(op, "Cast")) {
        const Onnx__AttributeProto *to = kiln_vm_attr(n->np, "to");
        return to && kiln_dtype_from_onnx((int32_t)to->i) == x->dtype;
    }
    if (!strcmp(op, "Flatten")) {
        const Onnx__AttributeProto *a = kiln_vm_attr(n->np, "axis");
        int64_t axis = a ? a->i : 1;
        axis += axis < 0 ? r : 0;
        if (axis < 0 || axis > r)
            return false;
        int64_t lo = 1, hi = 1;
        for (int d = 0; d < r; d++)
            *(d < axis ? &lo : &hi) *= x->shape.dims[d];
        *out = (kiln_shape){.rank = 2, .dims = {lo, hi}};
        return true;
    }
    if (!strcmp(op, "Reshape")) { /* the op table's shape function (ir/infer_transform.c) */
        const kiln_tensor *s = n->n_in > 1 ? in[1] : NULL;
        if (!s || s->dtype != KILN_DTYPE_INT64 || s->shape.rank != 1 ||
            s->shape.dims[0] > KILN_MAX_RANK)
            return false;
        const Onnx__AttributeProto *az = kiln_vm_attr(n->np, "allowzero");
        kiln_attr attrs[2] = {
            {.name = "shape", .type = KILN_ATTR_INTS, .ints = s->data, .n = (int)s->shape.dims[0]},
            {.name = "allowzero", .type = KILN_ATTR_INT, .i = az ? az->i : 0}};
        kiln_node nd = {.op = KILN_OP_RESHAPE,
                        .name = n->name,
                        .n_inputs = 1,
                        .n_outputs = 1,
                        .n_attrs = 2,
                        .attrs = attrs};
        kiln_value vi = {.kind = KILN_VALUE_INPUT, .dtype = x->dtype, .shape = x->shape};
        kiln_value vo = {.kind = KILN_VALUE_NODE};
        const kiln_value *vin[1] = {&vi};
        kiln_value *vout[1] = {&vo};
        kiln_error e = {0};
        if (kiln_op_get(KILN_OP_RESHAPE)->infer(&nd, vin, vout, &e) != KILN_OK)
            return false;
        *out = vo.shape;
        return true;
    }
    const int64_t *axes;
    int na;
    if (!read_axes(vm, n, in, &axes, &na) || na == 0)
        return false; /* empty axes: the conversion's rules */
    bool pick[KILN_MAX_RANK] = {false};
    if (!strcmp(op, "Squeeze")) {
        for (int i = 0; i < na; i++) {
            int64_t a = axes[i] + (axes[i] < 0 ? r : 0);
            if (a < 0 || a >= r || pick[a] || x->shape.dims[a] != 1)
                return false;
            pick[a] = true;
        }
        out->rank = 0;
        for (int d = 0; d < r; d++)
            if (na < 0 ? x->shape.dims[d] != 1 : !pick[d])
                out->dims[out->rank++] = x->shape.dims[d];
        return true;
    }
    /* Unsqueeze */
    int orank = r + na;
    if (na < 0 || orank > KILN_MAX_RANK)
        return false;
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] + (axes[i] < 0 ? orank : 0);
        if (a < 0 || a >= orank || pick[a])
            return false;
        pick[a] = true;
    }
    out->rank = orank;
    for (int d = 0, k = 0; d < orank; d++)
        out->dims[d] = pick[d] ? 1 : x->shape.dims[k++];
    return true;
}

kiln_status kiln_vm_view_run(kiln_vm *vm, vm_node *n, bool *done, kiln_error *err)
{
    *done = false;
    n->as_view = false;
    for (int k = 0; k < n->n_in; k++)
        n->in[k] = kiln_vm_value(vm, n->src[k]);
    kiln_shape sh;
    if (n->n_in < 1 || n->n_out != 1 || !n->in[0] || !view_shape(vm, n, n->in, &sh))
        return KILN_OK;
    const kiln_tensor *x = n->in[0];
    if (kiln_shape_numel(&sh) != kiln_shape_numel(&x->shape))
        return KILN_OK; /* not a renaming: the conversion says why */
    if (n->readers[0] < VM_READERS_MANY) {
        n->view = (kiln_tensor){.dtype = x->dtype, .shape = sh, .data = x->data};
        n->out[0] = &n->view;
    } else { /* a graph output, or captured: a copy of its own */
        kiln_status s = kiln_vm_set_out(n, 0, x->dtype, &sh, err);
        if (s != KILN_OK)
            return s;
        int64_t nb = kiln_tensor_nbytes(x);
        if (nb > 0)
            memcpy(n->own[0].data, x->data, (size_t)nb);
        n->out[0] = &n->own[0];
    }
    *done = n->as_view = true;
    return KILN_OK;
}
