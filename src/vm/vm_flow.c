/* vm/vm_flow.c: control flow in the VM: If, Loop and Scan (docs/VM.md).
 *
 * Each body graph is a VM of its own (kiln_vm_create_body): every body node
 * dynamic, converted per shape class and cached like any other, its inputs
 * the body's formal inputs followed by the values it reads from enclosing
 * scopes (captured; resolved in the parent when the node is set up). A run
 * of the node sets the body's inputs, runs it as many times as the op says
 * and copies what it returns into the node's own outputs:
 *
 * - If: the then or else body, by the condition;
 * - Loop: while (no M or i < M) and (no cond or cond): body(i, cond,
 *   carried...) -> (cond, carried..., scan outputs...); scan outputs are
 *   stacked along a new first axis;
 * - Scan: opset 9+ with the default axes and directions (0, forward), and
 *   opset 8 (batch axis 0, sequence axis 1, no sequence_lens): body(states...,
 *   slices...) -> (states..., output slices...).
 *
 * The node's outputs are buffers of its own, grown when a run needs more and
 * reused across runs.
 *
 * A Loop's carried value that its body only extends, `acc_out =
 * Concat(acc_in, y, axis 0)` with acc_in read by nothing else and acc_out by
 * nothing but the body's output (TorchScript's list append, exported:
 * torchvision's mask paste), is an *accumulator*: the Concat is fused (not
 * run) and the Loop appends y to its own buffer, grown geometrically. Run
 * as written, every iteration copies the whole accumulator three times
 * (into the body, through the Concat, back out): quadratic in the trip
 * count. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vm/vm_internal.h"

bool kiln_vm_flow_op(const char *op)
{
    return op && (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan") ||
                  kiln_vm_seq_op(op));
}

static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a]->name && !strcmp(np->attribute[a]->name, name))
            return np->attribute[a]->g;
    return NULL;
}


/* How many input slots of g's nodes read `name`; a nested body reading it
 * counts as 2 (never one reader). */
static int slot_readers(const Onnx__GraphProto *g, const char *name)
{
    const char *cap[VM_MAX_CAPTURED]; /* on the stack: bodies are built on any thread */
    int r = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        r += kiln_vm_node_reads(np, name);
        for (size_t a = 0; a < np->n_attribute; a++) {
            if (!np->attribute[a]->g)
                continue;
            int nc = kiln_vm_free_names(np->attribute[a]->g, cap, VM_MAX_CAPTURED);
            for (int j = 0; j < nc; j++)
                r += 2 * !strcmp(cap[j], name);
            r += nc >= VM_MAX_CAPTURED ? 2 : 0; /* not all known */
        }
    }
    return r;
}

static int output_count(const Onnx__GraphProto *g, const char *name)
{
    int r = 0;
    for (size_t o = 0; o < g->n_output; o++)
        r += g->output[o]->name && !strcmp(g->output[o]->name, name);
    return r;
}

/* Finds the Loop's accumulators (above): n->accum[j] = 1 + the body's
 * Concat, which is marked fused. */
static kiln_status plan_accumulators(vm_node *n, kiln_error *err)
{
    kiln_vm *body = n->body[0];
    const Onnx__GraphProto *g = body->graph;
    int nc = n->n_in - 2;
    n->accum = calloc((size_t)(nc > 0 ? nc : 0) + 1, sizeof *n->accum);
    if (!n->accum)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int j = 0; j < nc && (size_t)(2 + j) < g->n_input && (size_t)(1 + j) < g->n_output; j++) {
        const char *acc_in = g->input[2 + j]->name, *acc_out = g->output[1 + j]->name;
        if (!acc_in || !acc_out || slot_readers(g, acc_in) != 1 || output_count(g, acc_in) ||
            slot_readers(g, acc_out) || output_count(g, acc_out) != 1)
            continue;
        for (int d = 0; d < body->n_dyn; d++) {
            vm_node *c = &body->dyn[d];
            const Onnx__AttributeProto *ax = kiln_vm_attr(c->np, "axis");
            if (c->flow == VM_CONVERT && !c->fused && !strcmp(c->np->op_type, "Concat") &&
                c->n_in == 2 && c->n_out == 1 && !strcmp(c->np->output[0], acc_out) &&
                c->np->input[0] && !strcmp(c->np->input[0], acc_in) && ax && ax->i == 0) {
                c->fused = true;
                n->accum[j] = d + 1;
                break;
            }
        }
    }
    return KILN_OK;
}

/* own[k] (a Loop's accumulator) extended by y along axis 0 (the fused
 * Concat's rules: same dtype and rank, equal extents off the axis); the
 * buffer grows geometrically. */
static kiln_status append_rows(vm_node *n, int k, const kiln_tensor *y, const vm_node *c,
                               kiln_error *err)
{
    kiln_tensor *a = &n->own[k];
    bool ok = y && y->dtype == a->dtype && y->shape.rank == a->shape.rank && a->shape.rank >= 1;
    for (int d = 1; ok && d < a->shape.rank; d++)
        ok = y->shape.dims[d] == a->shape.dims[d];
    if (!ok) {
        kiln_shape_buf b1, b2;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s' (Concat): cannot append %s %s to %s %s along axis 0",
                           c->name, y ? kiln_dtype_name(y->dtype) : "nothing",
                           y ? kiln_shape_fmt(&y->shape, &b1) : "", kiln_dtype_name(a->dtype),
                           kiln_shape_fmt(&a->shape, &b2));
    }
    size_t have = (size_t)kiln_tensor_nbytes(a), add = (size_t)kiln_tensor_nbytes(y);
    if (have + add > n->own_cap[k]) {
        size_t cap = 2 * n->own_cap[k] > have + add ? 2 * n->own_cap[k] : have + add;
        void *p = realloc(a->data, cap);
        if (!p)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        a->data = p;
        n->own_cap[k] = cap;
    }
    if (add)
        memcpy((char *)a->data + have, y->data, add);
    a->shape.dims[0] += y->shape.dims[0];
    return KILN_OK;
}

kiln_status kiln_vm_flow_prepare(kiln_vm *vm, int d, kiln_error *err)
{
    vm_node *n = &vm->dyn[d];
    const char *op = n->np->op_type;
    if (kiln_vm_seq_op(op)) {
        n->flow = VM_SEQ;
        n->own = calloc((size_t)n->n_out + 1, sizeof *n->own);
        n->own_cap = calloc((size_t)n->n_out + 1, sizeof *n->own_cap);
        n->seq = calloc(1, sizeof *n->seq);
        return n->own && n->own_cap && n->seq
                   ? KILN_OK
                   : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    n->flow = !strcmp(op, "If") ? VM_IF : !strcmp(op, "Loop") ? VM_LOOP : VM_SCAN;
    const char *names[2] = {n->flow == VM_IF ? "then_branch" : "body",
                            n->flow == VM_IF ? "else_branch" : NULL};
    n->own = calloc((size_t)n->n_out + 1, sizeof *n->own);
    n->own_cap = calloc((size_t)n->n_out + 1, sizeof *n->own_cap);
    if (!n->own || !n->own_cap)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (n->flow == VM_SCAN) {
        const Onnx__AttributeProto *a;
        const char *keys[] = {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                              "scan_output_directions"};
        for (int k = 0; k < 4; k++)
            if ((a = kiln_vm_attr(n->np, keys[k])))
                for (size_t i = 0; i < a->n_ints; i++)
                    if (a->ints[i] != 0)
                        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                                           "node '%s' (Scan): %s other than 0", n->name, keys[k]);
        if (kiln_vm_opset(vm) < 9 && n->n_in > 0 && n->np->input[0] && *n->np->input[0])
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s' (Scan): sequence_lens",
                               n->name);
    }
    for (int b = 0; b < 2 && names[b]; b++) {
        const Onnx__GraphProto *g = graph_attr(n->np, names[b]);
        if (!g)
            return kiln_errorf(err, KILN_ERR_PARSE, "node '%s' (%s) has no %s", n->name, op,
                               names[b]);
        kiln_status s = kiln_vm_create_body(vm, g, &n->body[b], err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (%s), %s: ", n->name, op, names[b]);
        int nc = kiln_vm_num_captured(n->body[b]);
        n->cap[b] = calloc((size_t)nc + 1, sizeof *n->cap[b]);
        if (!n->cap[b])
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (n->flow == VM_LOOP && (s = plan_accumulators(n, err)) != KILN_OK)
            return s;
        for (int j = 0; j < nc; j++) {
            const char *nm = n->body[b]->in_vi[n->body[b]->n_formal + j]->name;
            n->cap[b][j] = kiln_vm_resolve(vm, nm, d);
            if (n->cap[b][j].kind <= SRC_NONE)
                return kiln_errorf(err, KILN_ERR_PARSE, "node '%s' (%s): its %s reads '%s', "
                                   "which is not defined", n->name, op, names[b], nm);
            if (n->cap[b][j].kind == SRC_INIT) {
                kiln_status s = kiln_vm_load_init(vm, n->cap[b][j].index, err);
                if (s != KILN_OK)
                    return s;
            }
        }
    }
    return KILN_OK;
}

void kiln_vm_flow_free(vm_node *n)
{
    for (int b = 0; b < 2; b++) {
        kiln_vm_destroy(n->body[b]);
        free(n->cap[b]);
    }
    free(n->accum);
    for (int k = 0; n->own && k < n->n_out; k++)
        free(n->own[k].data);
    free(n->scratch);
    free(n->own);
    free(n->own_cap);
    kiln_vm_seq_free(n);
}

/* Makes own[k] hold `bytes` (grown, never shrunk). */
bool kiln_vm_reserve(vm_node *n, int k, size_t bytes);
static bool reserve(vm_node *n, int k, size_t bytes)
{
    return kiln_vm_reserve(n, k, bytes);
}

bool kiln_vm_reserve(vm_node *n, int k, size_t bytes)
{
    if (bytes <= n->own_cap[k] && n->own[k].data)
        return true;
    void *p = realloc(n->own[k].data, bytes ? bytes : 1);
    if (!p)
        return false;
    n->own[k].data = p;
    n->own_cap[k] = bytes ? bytes : 1;
    return true;
}

/* own[k] = a copy of t */
static kiln_status copy_out(vm_node *n, int k, const kiln_tensor *t, kiln_error *err)
{
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb < 0 || !reserve(n, k, (size_t)nb))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    n->own[k].dtype = t->dtype;
    n->own[k].shape = t->shape;
    if (nb)
        memcpy(n->own[k].data, t->data, (size_t)nb);
    return KILN_OK;
}

/* Appends t as item `count` of own[k] (stacked along a new first axis; every
 * item must have t's dtype and shape). */
static kiln_status append_out(vm_node *n, int k, const kiln_tensor *t, int64_t count,
                              kiln_error *err)
{
    kiln_tensor *o = &n->own[k];
    if (count > 0 && (o->dtype != t->dtype || o->shape.rank != t->shape.rank + 1 ||
                      memcmp(o->shape.dims + 1, t->shape.dims,
                             sizeof(int64_t) * (size_t)t->shape.rank) != 0))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "node '%s': iterations return scan outputs of different shapes",
                           n->name);
    if (t->shape.rank + 1 > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s': scan output rank", n->name);
    int64_t nb = kiln_tensor_nbytes(t);
    size_t need = (size_t)nb * (size_t)(count + 1);
    if (need > n->own_cap[k] && !reserve(n, k, need > 2 * n->own_cap[k] ? need : 2 * n->own_cap[k]))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy((char *)o->data + (size_t)nb * (size_t)count, t->data, (size_t)nb);
    o->dtype = t->dtype;
    o->shape.rank = t->shape.rank + 1;
    o->shape.dims[0] = count + 1;
    memcpy(o->shape.dims + 1, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.rank);
    return KILN_OK;
}

static kiln_status set_captured(kiln_vm *vm, vm_node *n, int b, kiln_error *err)
{
    kiln_vm *body = n->body[b];
    for (int j = 0; j < kiln_vm_num_captured(body); j++) {
        kiln_status s =
            kiln_vm_set_input(body, body->n_formal + j, kiln_vm_value(vm, n->cap[b][j]), err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

static bool truth(const kiln_tensor *t)
{
    if (!t || kiln_shape_numel(&t->shape) < 1)
        return false;
    size_t es = kiln_dtype_size(t->dtype);
    for (size_t i = 0; i < es; i++)
        if (((const unsigned char *)t->data)[i])
            return true;
    return false;
}

static kiln_status run_if(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    int b = truth(kiln_vm_value(vm, n->src[0])) ? 0 : 1;
    kiln_vm *body = n->body[b];
    if (kiln_vm_num_outputs(body) != n->n_out)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "node '%s' (If): a branch returns %d "
                           "values for %d outputs", n->name, kiln_vm_num_outputs(body), n->n_out);
    kiln_status s = set_captured(vm, n, b, err);
    if (s == KILN_OK)
        s = kiln_vm_run(body, err);
    for (int k = 0; k < n->n_out && s == KILN_OK; k++)
        s = copy_out(n, k, kiln_vm_output(body, k), err);
    return s;
}

static kiln_status run_loop(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    kiln_vm *body = n->body[0];
    const kiln_tensor *mt = n->n_in > 0 ? kiln_vm_value(vm, n->src[0]) : NULL;
    const kiln_tensor *ct = n->n_in > 1 ? kiln_vm_value(vm, n->src[1]) : NULL;
    int64_t max = mt ? *(const int64_t *)mt->data : INT64_MAX;
    bool cond = ct ? truth(ct) : true;
    int nc = n->n_in - 2, nscan = n->n_out - nc;
    if (nc < 0 || nscan < 0 || kiln_vm_num_outputs(body) != 1 + nc + nscan ||
        body->n_formal != 2 + nc)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "node '%s' (Loop): the body's inputs and outputs do not match the node",
                           n->name);
    kiln_status s = KILN_OK;
    for (int j = 0; j < nc && s == KILN_OK; j++) {
        s = copy_out(n, j, kiln_vm_value(vm, n->src[2 + j]), err);
        /* an accumulator's body input: set once, read by nothing */
        if (s == KILN_OK && n->accum && n->accum[j])
            s = kiln_vm_set_input(body, 2 + j, &n->own[j], err);
    }
    int64_t i = 0;
    for (; s == KILN_OK && i < max && cond; i++) {
        int64_t it = i;
        bool c = cond;
        kiln_tensor ti = {.dtype = KILN_DTYPE_INT64, .shape = {.rank = 0}, .data = &it};
        kiln_tensor tc = {.dtype = KILN_DTYPE_BOOL, .shape = {.rank = 0}, .data = &c};
        s = kiln_vm_set_input(body, 0, &ti, err);
        if (s == KILN_OK)
            s = kiln_vm_set_input(body, 1, &tc, err);
        for (int j = 0; j < nc && s == KILN_OK; j++)
            if (!n->accum || !n->accum[j])
                s = kiln_vm_set_input(body, 2 + j, &n->own[j], err);
        if (s == KILN_OK)
            s = set_captured(vm, n, 0, err);
        if (s == KILN_OK)
            s = kiln_vm_run(body, err);
        if (s != KILN_OK)
            break;
        cond = truth(kiln_vm_output(body, 0));
        for (int j = 0; j < nc && s == KILN_OK; j++) {
            const vm_node *c = n->accum && n->accum[j] ? &body->dyn[n->accum[j] - 1] : NULL;
            s = c ? append_rows(n, j, kiln_vm_value(body, c->src[1]), c, err)
                  : copy_out(n, j, kiln_vm_output(body, 1 + j), err);
        }
        for (int k = 0; k < nscan && s == KILN_OK; k++)
            s = append_out(n, nc + k, kiln_vm_output(body, 1 + nc + k), i, err);
    }
    for (int k = 0; k < nscan && s == KILN_OK && i == 0; k++)
        n->own[nc + k].shape = (kiln_shape){.rank = 1, .dims = {0}}; /* no iteration */
    return s;
}

/* slice `i` of t along axis 0 (batch < 0) or, for batch entry b, along axis 1 */
static kiln_tensor slice(const kiln_tensor *t, int64_t b, int64_t i)
{
    kiln_tensor v = {.dtype = t->dtype};
    int skip = b < 0 ? 1 : 2;
    v.shape.rank = t->shape.rank - skip;
    memcpy(v.shape.dims, t->shape.dims + skip, sizeof(int64_t) * (size_t)v.shape.rank);
    int64_t item = kiln_tensor_nbytes(&v);
    int64_t at = b < 0 ? i : b * t->shape.dims[1] + i;
    v.data = (char *)t->data + item * at;
    return v;
}

static kiln_status run_scan(kiln_vm *vm, vm_node *n, kiln_error *err)
{
    kiln_vm *body = n->body[0];
    bool v8 = kiln_vm_opset(vm) < 9;
    int first = v8 ? 1 : 0; /* opset 8: input 0 is sequence_lens */
    const Onnx__AttributeProto *na = kiln_vm_attr(n->np, "num_scan_inputs");
    int nscan_in = na ? (int)na->i : 0;
    int nstate = n->n_in - first - nscan_in, nscan_out = n->n_out - nstate;
    if (nscan_in < 1 || nstate < 0 || nscan_out < 0 || body->n_formal != nstate + nscan_in ||
        kiln_vm_num_outputs(body) != n->n_out)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "node '%s' (Scan): the body's inputs and outputs do not match the node",
                           n->name);
    const kiln_tensor *x0 = kiln_vm_value(vm, n->src[first + nstate]);
    int64_t batches = v8 ? x0->shape.dims[0] : 1, len = x0->shape.dims[v8 ? 1 : 0];
    kiln_status s = KILN_OK;
    int64_t items = 0;
    for (int64_t b = 0; b < batches && s == KILN_OK; b++) {
        /* the states of this batch entry, as the body's first inputs */
        for (int j = 0; j < nstate && s == KILN_OK; j++) {
            const kiln_tensor *st = kiln_vm_value(vm, n->src[first + j]);
            kiln_tensor v = v8 ? slice(st, -1, b) : *st;
            s = kiln_vm_set_input(body, j, &v, err);
        }
        for (int64_t i = 0; i < len && s == KILN_OK; i++) {
            for (int j = 0; j < nscan_in && s == KILN_OK; j++) {
                const kiln_tensor *xt = kiln_vm_value(vm, n->src[first + nstate + j]);
                kiln_tensor v = slice(xt, v8 ? b : -1, i);
                s = kiln_vm_set_input(body, nstate + j, &v, err);
            }
            if (s == KILN_OK)
                s = set_captured(vm, n, 0, err);
            if (s == KILN_OK)
                s = kiln_vm_run(body, err);
            for (int j = 0; j < nstate && s == KILN_OK; j++)
                s = kiln_vm_set_input(body, j, kiln_vm_output(body, j), err);
            for (int k = 0; k < nscan_out && s == KILN_OK; k++)
                s = append_out(n, nstate + k, kiln_vm_output(body, nstate + k), items, err);
            items++;
        }
        for (int j = 0; j < nstate && s == KILN_OK; j++)
            s = v8 ? append_out(n, j, kiln_vm_output(body, j), b, err)
                   : copy_out(n, j, kiln_vm_output(body, j), err);
    }
    /* opset 8: scan outputs are [batch, len, ...]: split the stacked axis */
    for (int k = 0; k < nscan_out && s == KILN_OK && v8 && items > 0; k++) {
        kiln_shape *sh = &n->own[nstate + k].shape;
        if (sh->rank + 1 > KILN_MAX_RANK)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s': scan output rank", n->name);
        memmove(sh->dims + 2, sh->dims + 1, sizeof(int64_t) * (size_t)(sh->rank - 1));
        sh->dims[0] = batches;
        sh->dims[1] = len;
        sh->rank++;
    }
    return s;
}

kiln_status kiln_vm_flow_run(kiln_vm *vm, int d, kiln_error *err)
{
    vm_node *n = &vm->dyn[d];
    if (n->flow == VM_SEQ)
        return kiln_vm_seq_run(vm, n, err);
    kiln_status s = n->flow == VM_IF     ? run_if(vm, n, err)
                    : n->flow == VM_LOOP ? run_loop(vm, n, err)
                                         : run_scan(vm, n, err);
    if (s != KILN_OK)
        return s;
    for (int k = 0; k < n->n_out; k++)
        n->out[k] = &n->own[k];
    return KILN_OK;
}
