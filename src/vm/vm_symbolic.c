/* vm/vm_symbolic.c: models whose graph inputs have symbolic or unknown dims
 * (docs/VM.md, "Symbolic input dims"): the checks of an input against its
 * declared type, and one specialized VM per input-shape class. Split from
 * vm.c, which builds and runs each VM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"
#include "vm/vm.h"
#include "vm/vm_internal.h"

/* ---- symbolic input dims: one VM per input-shape class -----------------------
 * A model whose inputs have symbolic or unknown dims imports nothing at
 * create (the generic VM). kiln_vm_set_input checks each input against its
 * declared rank and fixed dims and keeps a copy (its buffer grown, never
 * shrunk); the first run (or step 0) of an input-shape class creates a
 * specialization: a VM built as above from the same ModelProto with every
 * input's shape bound (kiln_onnx_binding.shape), so its static part imports
 * and compiles (through the object cache) exactly as a static model's. The
 * VM_SPECS most recently used specializations are kept; a run of a class
 * seen before only copies the inputs into its VM and runs it. */

const char *kiln_vm_input_dim_param(const kiln_vm *vm, int i, int d)
{
    if (!vm || i < 0 || i >= vm->n_in)
        return NULL;
    const Onnx__TypeProto *tp = vm->in_vi[i]->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return NULL;
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (!sp)
        return ""; /* no declared shape: the rank and every dim are unknown */
    if (d < 0 || (size_t)d >= sp->n_dim)
        return NULL;
    const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        return NULL;
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param)
        return dim->dim_param;
    return "";
}

bool kiln_vm_symbolic(const kiln_vm *vm)
{
    return vm && vm->generic;
}

int64_t kiln_vm_num_specializations(const kiln_vm *vm)
{
    return vm ? vm->n_specialized : 0;
}

/* "[batch, 3, ?]": input i's declared shape, names for symbolic dims. */
static const char *decl_fmt(const kiln_vm *vm, int i, char *buf, size_t size)
{
    if (kiln_vm_input_dim_param(vm, i, -1)) {
        snprintf(buf, size, "no declared shape");
        return buf;
    }
    const kiln_shape *d = &vm->in_shape[i];
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < d->rank && len + 1 < size; k++) {
        const char *p = kiln_vm_input_dim_param(vm, i, k);
        if (p)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? ", " : "", *p ? p : "?");
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%lld", k ? ", " : "",
                                    (long long)d->dims[k]);
    }
    if (len + 1 < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

/* Whether t fits input i's declared type: dtype, rank and every fixed dim;
 * the error names the input and the dim. */
kiln_status kiln_vm_check_input(const kiln_vm *vm, int i, const kiln_tensor *t, kiln_error *err)
{
    const char *nm = vm->in_vi[i]->name;
    char decl[512];
    kiln_shape_buf b;
    if (t->dtype != vm->in_dt[i])
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input '%s' is %s, got %s", nm,
                           kiln_dtype_name(vm->in_dt[i]), kiln_dtype_name(t->dtype));
    if (t->shape.rank < 0 || t->shape.rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input '%s': rank %d", nm,
                           (int)t->shape.rank);
    for (int k = 0; k < t->shape.rank; k++)
        if (t->shape.dims[k] < 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input '%s' dim %d: extent %lld",
                               nm, k, (long long)t->shape.dims[k]);
    const Onnx__TypeProto *tp = vm->in_vi[i]->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->shape)
        return KILN_OK; /* no declared shape: any */
    const kiln_shape *d = &vm->in_shape[i];
    if (t->shape.rank != d->rank)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input '%s' has rank %d (%s), got rank %d (%s)", nm, (int)d->rank,
                           decl_fmt(vm, i, decl, sizeof decl), (int)t->shape.rank,
                           kiln_shape_fmt(&t->shape, &b));
    for (int k = 0; k < d->rank; k++)
        if (d->dims[k] >= 0 && d->dims[k] != t->shape.dims[k])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input '%s' dim %d is %lld (shape %s), got %lld (shape %s)", nm, k,
                               (long long)d->dims[k], decl_fmt(vm, i, decl, sizeof decl),
                               (long long)t->shape.dims[k], kiln_shape_fmt(&t->shape, &b));
    return KILN_OK;
}

/* A dim_param names one extent across the inputs (ONNX): two inputs that
 * disagree on it are refused, both named. */
static kiln_status check_dim_params(const kiln_vm *vm, kiln_error *err)
{
    for (int i = 0; i < vm->n_in; i++)
        for (int k = 0; k < vm->in_t[i].shape.rank; k++) {
            const char *p = kiln_vm_input_dim_param(vm, i, k);
            if (!p || !*p)
                continue;
            for (int j = 0; j <= i; j++)
                for (int e = 0; e < (j < i ? vm->in_t[j].shape.rank : k); e++) {
                    const char *q = kiln_vm_input_dim_param(vm, j, e);
                    if (q && strcmp(p, q) == 0 &&
                        vm->in_t[j].shape.dims[e] != vm->in_t[i].shape.dims[k])
                        return kiln_errorf(
                            err, KILN_ERR_SHAPE_MISMATCH,
                            "input '%s' dim %d ('%s') is %lld but input '%s' dim %d ('%s') is "
                            "%lld",
                            vm->in_vi[i]->name, k, p, (long long)vm->in_t[i].shape.dims[k],
                            vm->in_vi[j]->name, e, q, (long long)vm->in_t[j].shape.dims[e]);
                }
        }
    return KILN_OK;
}

/* A VM for the generic VM g and input shapes `shapes`; batch_c > 0: a
 * chunk of that extent (kiln_vm_build checks its graph), probe: only
 * imported and checked (*out stays NULL). */
static kiln_status spec_create(kiln_vm *g, const kiln_shape *shapes, int64_t batch_c, bool probe,
                               kiln_vm **out, kiln_error *err)
{
    kiln_vm *vm = calloc(1, sizeof *vm);
    kiln_onnx_binding *b = calloc((size_t)g->n_in + 1, sizeof *b);
    kiln_status s = KILN_OK;
    if (!vm || !b) {
        free(vm);
        free(b);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    vm->m = g->m;
    vm->borrowed_m = true;
    vm->memo = kiln_vm_memo(g); /* classes map the weights earlier ones packed */
    vm->graph = g->graph;
    vm->batch_c = batch_c;
    vm->batch_probe = probe;
    vm->batch_of = g->batch_in;
    kiln_vm_options o = {.reference = g->reference, .num_threads = g->num_threads,
                         .cache_dir = g->cache_dir, .target = g->target, .records = g->records,
                         .compile = g->compile};
    vm->base_dir = strdup(g->base_dir);
    if (!vm->base_dir || kiln_vm_copy_options(vm, &o) != KILN_OK)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = kiln_vm_init_io(vm, err);
    if (s == KILN_OK) {
        vm->generic = false;
        for (int i = 0; i < g->n_in; i++) {
            b[i] = (kiln_onnx_binding){.name = g->in_vi[i]->name, .shape = &shapes[i]};
            vm->in_shape[i] = shapes[i];
        }
        vm->bind = b;
        vm->n_bind = g->n_in;
        s = kiln_vm_build(vm, &o, err);
        vm->bind = NULL;
        vm->n_bind = 0;
    }
    free(b);
    if (s != KILN_OK || probe) {
        kiln_vm_destroy(vm);
        return s;
    }
    *out = vm;
    return KILN_OK;
}

kiln_status kiln_vm_spec_get(kiln_vm *g, const kiln_shape *shapes, int64_t batch_c, bool probe,
                             kiln_vm **out, kiln_error *err)
{
    vm_spec *sp = NULL;
    if (out)
        *out = NULL;
    if (probe)
        return spec_create(g, shapes, batch_c, true, NULL, err);
    for (int i = 0; i < g->n_spec && !sp; i++) {
        bool same = true;
        for (int k = 0; k < g->n_in && same; k++)
            same = kiln_shape_equal(&g->spec[i].shapes[k], &shapes[k]);
        if (same)
            sp = &g->spec[i];
    }
    if (!sp) {
        kiln_vm *nv = NULL;
        kiln_shape *own = calloc((size_t)g->n_in + 1, sizeof *own);
        kiln_status s = own ? spec_create(g, shapes, batch_c, false, &nv, err)
                            : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (s != KILN_OK) {
            free(own);
            return s;
        }
        memcpy(own, shapes, (size_t)g->n_in * sizeof *own);
        if (g->n_spec < VM_SPECS) {
            sp = &g->spec[g->n_spec++];
        } else {
            sp = &g->spec[0];
            for (int i = 1; i < g->n_spec; i++)
                if (g->spec[i].used < sp->used)
                    sp = &g->spec[i];
            kiln_vm_destroy(sp->vm);
            free(sp->shapes);
        }
        sp->vm = nv;
        sp->shapes = own;
        g->n_specialized++;
    }
    sp->used = ++g->stamp;
    *out = sp->vm;
    return KILN_OK;
}

/* Makes vm->active the specialization of the inputs' shapes (created on a
 * new class, the least recently used one replaced when VM_SPECS are kept)
 * and hands it the inputs; or, for a symbolic batch that runs in chunks,
 * plans the chunks (vm_batch.c). */
kiln_status kiln_vm_spec_select(kiln_vm *vm, kiln_error *err)
{
    for (int k = 0; k < vm->n_in; k++)
        if (!vm->in_set[k])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input %d ('%s') is not set", k,
                               vm->in_vi[k]->name);
    kiln_status s = check_dim_params(vm, err);
    if (s == KILN_OK)
        s = kiln_vm_batch_plan(vm, err);
    if (s != KILN_OK || vm->n_chunk)
        return s;
    kiln_shape *shapes = vm->want; /* allocated with the batch plan's state */
    for (int k = 0; k < vm->n_in; k++)
        shapes[k] = vm->in_t[k].shape;
    kiln_vm *sv = NULL;
    s = kiln_vm_spec_get(vm, shapes, 0, false, &sv, err);
    if (s != KILN_OK) {
        char cls[1024];
        size_t len = 0;
        for (int k = 0; k < vm->n_in && len + 1 < sizeof cls; k++) {
            kiln_shape_buf b;
            len += (size_t)snprintf(cls + len, sizeof cls - len, "%s'%s' %s", k ? ", " : "",
                                    vm->in_vi[k]->name, kiln_shape_fmt(&vm->in_t[k].shape, &b));
        }
        return kiln_error_prefix(err, s, "inputs %s: ", vm->n_in ? cls : "(none)");
    }
    vm->active = sv;
    /* its inputs are ours (the class's shapes by construction): aliased,
     * not copied; a later realloc of ours is aliased again at the next run */
    for (int k = 0; k < vm->n_in; k++) {
        sv->in_t[k] = vm->in_t[k];
        sv->in_set[k] = true;
    }
    return KILN_OK;
}
