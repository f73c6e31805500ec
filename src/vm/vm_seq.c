/* vm/vm_seq.c: sequences in the VM (docs/VM.md): SequenceEmpty,
 * SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt,
 * SequenceLength, ConcatFromSequence and SplitToSequence.
 *
 * A sequence is a value of the VM only (kiln's graphs hold tensors): the
 * node that makes one keeps its items as tensors with data of its own,
 * reused across runs (grown when an item needs more); a node that reads one
 * finds it through the producing node. Positions follow ONNX: negative ones
 * count from the end, out of range is an error. */
#include <stdlib.h>
#include <string.h>

#include "ref/elemwise_common.h"
#include "util/error.h"
#include "vm/vm_internal.h"

static const char *const seq_ops[] = {"SequenceEmpty",  "SequenceConstruct",  "SequenceInsert",
                                      "SequenceErase",  "SequenceAt",         "SequenceLength",
                                      "ConcatFromSequence", "SplitToSequence"};

bool kiln_vm_seq_op(const char *op)
{
    for (size_t i = 0; op && i < sizeof seq_ops / sizeof seq_ops[0]; i++)
        if (!strcmp(op, seq_ops[i]))
            return true;
    return false;
}

void kiln_vm_seq_free(vm_node *n)
{
    if (!n->seq)
        return;
    for (int i = 0; i < n->seq->cap; i++)
        free(n->seq->items[i].data);
    free(n->seq->items);
    free(n->seq->bytes);
    free(n->seq);
    n->seq = NULL;
}

/* The sequence that source s names, or NULL. */
static const vm_seq *seq_of(const kiln_vm *vm, vm_src s)
{
    if (s.kind != SRC_DYN || s.sub != 0)
        return NULL;
    return vm->dyn[s.index].seq;
}

/* Makes item i of q hold t's dtype and shape with room for its bytes (q
 * grown as needed); copies t's data when it has any. */
static kiln_status put(vm_seq *q, int i, const kiln_tensor *t, kiln_error *err)
{
    if (!t)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "a sequence item that is an initializer (not passed to the VM)");
    if (i >= q->cap) {
        int cap = q->cap ? 2 * q->cap : 8;
        while (cap <= i)
            cap *= 2;
        kiln_tensor *it = realloc(q->items, sizeof *it * (size_t)cap);
        if (!it)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        q->items = it;
        size_t *b = realloc(q->bytes, sizeof *b * (size_t)cap);
        if (!b)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        q->bytes = b;
        memset(q->items + q->cap, 0, sizeof *it * (size_t)(cap - q->cap));
        memset(q->bytes + q->cap, 0, sizeof *b * (size_t)(cap - q->cap));
        q->cap = cap;
    }
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "bad sequence item");
    if ((size_t)nb > q->bytes[i] || !q->items[i].data) {
        void *p = realloc(q->items[i].data, nb ? (size_t)nb : 1);
        if (!p)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        q->items[i].data = p;
        q->bytes[i] = nb ? (size_t)nb : 1;
    }
    q->items[i].dtype = t->dtype;
    q->items[i].shape = t->shape;
    if (nb && t->data)
        memmove(q->items[i].data, t->data, (size_t)nb);
    return KILN_OK;
}

/* A position input (scalar int) against a length: [0, len] when `insert`,
 * [0, len) otherwise; absent: def. */
static kiln_status position(const vm_node *n, const kiln_tensor *t, int len, bool insert, int def,
                            int *out, kiln_error *err)
{
    if (!t) {
        *out = def;
        return KILN_OK;
    }
    int64_t p = kiln_ew_load_i64(t->dtype, t->data, 0);
    if (p < 0)
        p += len;
    if (p < 0 || p > len || (!insert && p == len))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s' (%s): position %lld is outside a sequence of %d", n->name,
                           n->np->op_type, (long long)kiln_ew_load_i64(t->dtype, t->data, 0), len);
    *out = (int)p;
    return KILN_OK;
}

static int64_t attr_int(const Onnx__NodeProto *np, const char *name, int64_t def)
{
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a]->name && !strcmp(np->attribute[a]->name, name))
            return np->attribute[a]->i;
    return def;
}

/* out = the items of q joined along `axis` (stacked on a new one when new_axis) */
static kiln_status concat(vm_node *n, const vm_seq *q, kiln_error *err)
{
    if (q->n < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s': empty sequence", n->name);
    bool stack = attr_int(n->np, "new_axis", 0) != 0;
    const kiln_tensor *t0 = &q->items[0];
    int rank = t0->shape.rank + (stack ? 1 : 0);
    int64_t axis = attr_int(n->np, "axis", 0);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank || rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s': axis out of range",
                           n->name);
    kiln_shape out = {.rank = rank};
    for (int d = 0, s = 0; d < rank; d++)
        out.dims[d] = stack && d == axis ? 0 : t0->shape.dims[s++];
    out.dims[axis] = 0; /* summed over the items below */
    for (int i = 0; i < q->n; i++) {
        const kiln_tensor *t = &q->items[i];
        if (t->dtype != t0->dtype || t->shape.rank != t0->shape.rank)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "node '%s': items differ", n->name);
        for (int d = 0, s = 0; d < rank; d++) {
            if (stack && d == axis)
                continue;
            if (d != axis && t->shape.dims[s] != t0->shape.dims[s])
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "node '%s': items differ",
                                   n->name);
            s++;
        }
        out.dims[axis] += stack ? 1 : t->shape.dims[axis];
    }
    kiln_tensor r = {.dtype = t0->dtype, .shape = out};
    int64_t nb = kiln_tensor_nbytes(&r);
    if (nb < 0 || !kiln_vm_reserve(n, 0, (size_t)nb))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    size_t es = kiln_dtype_size(r.dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= out.dims[d];
    for (int d = (int)axis + 1; d < rank; d++)
        inner *= out.dims[d];
    char *dst = n->own[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < q->n; i++) {
            int64_t ext = stack ? 1 : q->items[i].shape.dims[axis];
            size_t run = (size_t)(ext * inner) * es;
            memcpy(dst, (const char *)q->items[i].data + (size_t)o * run, run);
            dst += run;
        }
    n->own[0].dtype = r.dtype;
    n->own[0].shape = out;
    return KILN_OK;
}

/* q = x split along axis: by `split` (scalar chunk size or sizes), else in
 * pieces of 1 (squeezed unless keepdims) */
static kiln_status split(vm_node *n, vm_seq *q, const kiln_tensor *x, const kiln_tensor *sp,
                         kiln_error *err)
{
    int rank = x->shape.rank;
    int64_t axis = attr_int(n->np, "axis", 0);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s': axis out of range",
                           n->name);
    int64_t len = x->shape.dims[axis], outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= x->shape.dims[d];
    for (int d = (int)axis + 1; d < rank; d++)
        inner *= x->shape.dims[d];
    bool squeeze = !sp && attr_int(n->np, "keepdims", 1) == 0;
    int64_t nsp = sp ? kiln_shape_numel(&sp->shape) : 0;
    size_t es = kiln_dtype_size(x->dtype);
    q->n = 0;
    /* a list of sizes: one piece per entry (empty ones too), summing to the
     * axis; a scalar size or none: pieces until the axis is covered */
    bool listed = sp && sp->shape.rank > 0;
    int64_t start = 0;
    for (int64_t i = 0; listed ? i < nsp : start < len; i++) {
        int64_t size = !sp ? 1 : kiln_ew_load_i64(sp->dtype, sp->data, listed ? i : 0);
        if (listed ? size < 0 || start + size > len : size < 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "node '%s': split sizes do not cover the axis", n->name);
        if (start + size > len)
            size = len - start; /* a scalar split: the last piece is shorter */
        kiln_tensor piece = {.dtype = x->dtype, .shape = x->shape};
        piece.shape.dims[axis] = size;
        /* room for the piece (no data yet), then gathered contiguously */
        kiln_status s = put(q, q->n, &piece, err);
        if (s != KILN_OK)
            return s;
        kiln_tensor *it = &q->items[q->n];
        it->shape = piece.shape;
        size_t run = (size_t)(size * inner) * es, row = (size_t)(len * inner) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)it->data + (size_t)o * run,
                   (const char *)x->data + (size_t)o * row + (size_t)(start * inner) * es, run);
        if (squeeze) {
            memmove(it->shape.dims + axis, it->shape.dims + axis + 1,
                    sizeof(int64_t) * (size_t)(rank - axis - 1));
            it->shape.rank--;
        }
        q->n++;
        start += size;
    }
    if (listed && start != len)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "node '%s': split sizes sum to %lld, the axis has %lld", n->name,
                           (long long)start, (long long)len);
    return KILN_OK;
}

kiln_status kiln_vm_seq_run(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    const char *op = n->np->op_type;
    vm_seq *q = n->seq;
    const kiln_tensor *t[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n->n_in && k < 3; k++)
        t[k] = kiln_vm_value(vm, n->src[k]);
    const vm_seq *in = n->n_in > 0 ? seq_of(vm, n->src[0]) : NULL;
    bool reads_seq = strcmp(op, "SequenceEmpty") && strcmp(op, "SequenceConstruct") &&
                     strcmp(op, "SplitToSequence");
    if (reads_seq && !in)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s' (%s): input 0 is not a sequence",
                           n->name, op);
    kiln_status s = KILN_OK;
    int pos = 0;
    n->out[0] = NULL;
    if (!strcmp(op, "SequenceEmpty")) {
        q->n = 0;
    } else if (!strcmp(op, "SequenceConstruct")) {
        q->n = 0;
        for (int k = 0; k < n->n_in && s == KILN_OK; k++)
            if ((s = put(q, k, kiln_vm_value(vm, n->src[k]), err)) == KILN_OK)
                q->n = k + 1;
    } else if (!strcmp(op, "SequenceInsert") || !strcmp(op, "SequenceErase")) {
        bool ins = op[8] == 'I';
        s = position(n, ins ? t[2] : t[1], in->n, ins, ins ? in->n : in->n - 1, &pos, err);
        if (s == KILN_OK && !ins && in->n == 0)
            s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "node '%s': erase from an empty "
                            "sequence", n->name);
        int j = 0;
        q->n = 0;
        for (int i = 0; i <= in->n && s == KILN_OK; i++) {
            if (ins && i == pos)
                s = put(q, j++, t[1], err);
            if (i < in->n && (ins || i != pos) && s == KILN_OK)
                s = put(q, j++, &in->items[i], err);
        }
        q->n = j;
    } else if (!strcmp(op, "SequenceAt")) {
        s = position(n, t[1], in->n, false, 0, &pos, err);
        if (s == KILN_OK)
            s = kiln_vm_reserve(n, 0, (size_t)kiln_tensor_nbytes(&in->items[pos]))
                    ? KILN_OK
                    : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (s == KILN_OK) {
            int64_t nb = kiln_tensor_nbytes(&in->items[pos]);
            memcpy(n->own[0].data, in->items[pos].data, (size_t)nb);
            n->own[0].dtype = in->items[pos].dtype;
            n->own[0].shape = in->items[pos].shape;
            n->out[0] = &n->own[0];
        }
    } else if (!strcmp(op, "SequenceLength")) {
        if (!kiln_vm_reserve(n, 0, 8))
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        *(int64_t *)n->own[0].data = in->n;
        n->own[0].dtype = KILN_DTYPE_INT64;
        n->own[0].shape = (kiln_shape){.rank = 0};
        n->out[0] = &n->own[0];
    } else if (!strcmp(op, "ConcatFromSequence")) {
        s = concat(n, in, err);
        if (s == KILN_OK)
            n->out[0] = &n->own[0];
    } else { /* SplitToSequence */
        s = t[0] ? split(n, q, t[0], n->n_in > 1 ? t[1] : NULL, err)
                 : kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s': no input", n->name);
    }
    return s;
}
