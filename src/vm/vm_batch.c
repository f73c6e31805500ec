/* vm/vm_batch.c: a symbolic batch run in chunks (docs/VM.md, "Symbolic
 * batch: chunks").
 *
 * A model whose inputs' only symbolic dim is axis 0 (PyTorch's dynamic_axes
 * {0: "batch"}) compiles, like any symbolic model, one specialization per
 * input-shape class: every new batch extent imported and compiled again,
 * tens of seconds for a CNN. When its graph keeps the items apart
 * (ir/batch_axis.c: item i of every output depends on item i of the
 * inputs alone) a batch of any extent is the same computation as its
 * chunks run one after another. Such a model runs every batch as chunks of
 * 8, then 4, 2 and 1 items (13 = 8 + 4 + 1), each extent one
 * specialization compiled once, so at most four compiles whatever the
 * extents, and none for a new one after those.
 *
 * The decision is made once, at the first run: the declaration must allow
 * it (every symbolic dim is an axis 0), then the model imported with a
 * batch of 3 (a probe, not compiled) and each chunk's own import must pass
 * the analysis; otherwise the model keeps one specialization per class and
 * batch_why says why. A chunk reads its slice of the inputs in place; its
 * outputs are copied into the VM's own, joined, whose buffers grow and
 * never shrink, so a run allocates nothing once its extent was seen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/batch_axis.h"
#include "util/error.h"
#include "vm/vm.h"
#include "vm/vm_internal.h"

#define VM_BATCH_PROBE 3 /* the probe's extent: no chunk's, so a constant cannot pass for both */

typedef struct vm_chunk {
    kiln_vm *vm;    /* the specialization of this chunk's extent */
    int64_t off, n; /* items [off, off + n) */
} vm_chunk;

#define VM_BATCH_CHUNK 8 /* the largest chunk; then 4, 2 and 1 */

/* The extent of the next chunk of rem items: the largest power of two up
 * to VM_BATCH_CHUNK. */
static int64_t chunk_of(int64_t rem)
{
    int64_t c = VM_BATCH_CHUNK;
    while (c > rem)
        c /= 2;
    return c;
}

/* Whether input i declares a shape whose one symbolic dim is axis 0. */
static bool batch_dim_only(const kiln_vm *vm, int i)
{
    if (kiln_vm_input_dim_param(vm, i, -1) || vm->in_shape[i].rank < 1 ||
        !kiln_vm_input_dim_param(vm, i, 0))
        return false;
    for (int k = 1; k < vm->in_shape[i].rank; k++)
        if (kiln_vm_input_dim_param(vm, i, k))
            return false;
    return true;
}

static bool any_symbolic(const kiln_vm *vm, int i)
{
    if (kiln_vm_input_dim_param(vm, i, -1))
        return true;
    for (int k = 0; k < vm->in_shape[i].rank; k++)
        if (kiln_vm_input_dim_param(vm, i, k))
            return true;
    return false;
}

/* The state, once per generic VM; the mode from the declaration. */
static kiln_status batch_init(kiln_vm *vm, kiln_error *err)
{
    if (vm->want)
        return KILN_OK;
    vm->want = calloc((size_t)vm->n_in + 1, sizeof *vm->want);
    vm->batch_in = calloc((size_t)vm->n_in + 1, sizeof *vm->batch_in);
    if (!vm->want || !vm->batch_in)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    bool any = false;
    for (int i = 0; i < vm->n_in && vm->batch_mode == 0; i++) {
        if ((vm->batch_in[i] = batch_dim_only(vm, i)))
            any = true;
        else if (any_symbolic(vm, i)) {
            snprintf(vm->batch_why, sizeof vm->batch_why,
                     "input '%s' has a symbolic dim other than axis 0", vm->in_vi[i]->name);
            vm->batch_mode = -1;
        }
    }
    if (vm->batch_mode == 0 && !any) {
        snprintf(vm->batch_why, sizeof vm->batch_why, "no input's axis 0 is symbolic");
        vm->batch_mode = -1;
    }
    return KILN_OK;
}

/* vm->want: the inputs' shapes with each batch axis c. */
static void want_shapes(kiln_vm *vm, int64_t c)
{
    for (int k = 0; k < vm->n_in; k++) {
        vm->want[k] = vm->in_t[k].shape;
        if (vm->batch_in[k])
            vm->want[k].dims[0] = c;
    }
}

/* Gives up chunks for good: the model runs one specialization per class. */
static void refuse(kiln_vm *vm, const char *why)
{
    vm->batch_mode = -1;
    vm->n_chunk = 0;
    size_t len = strlen(why);
    if (len >= sizeof vm->batch_why)
        len = sizeof vm->batch_why - 1;
    memcpy(vm->batch_why, why, len);
    vm->batch_why[len] = '\0';
}

kiln_status kiln_vm_batch_plan(kiln_vm *vm, kiln_error *err)
{
    vm->n_chunk = 0;
    kiln_status s = batch_init(vm, err);
    if (s != KILN_OK || vm->batch_mode < 0)
        return s;
    int64_t b = -1;
    for (int k = 0; k < vm->n_in; k++) {
        if (!vm->batch_in[k])
            continue;
        if (b >= 0 && vm->in_t[k].shape.dims[0] != b)
            return KILN_OK; /* two batch dims that differ: this run, one class */
        b = vm->in_t[k].shape.dims[0];
    }
    if (b < 1)
        return KILN_OK;
    kiln_error e = {0};
    if (vm->batch_mode == 0) {
        want_shapes(vm, VM_BATCH_PROBE);
        if (kiln_vm_spec_get(vm, vm->want, VM_BATCH_PROBE, true, NULL, &e) != KILN_OK) {
            refuse(vm, e.msg);
            return KILN_OK;
        }
        vm->batch_mode = 1;
    }
    int n = 0;
    for (int64_t rem = b; rem > 0; n++)
        rem -= chunk_of(rem);
    if (n > vm->cap_chunk) {
        vm_chunk *p = realloc(vm->chunk, (size_t)n * sizeof *p);
        if (!p)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        vm->chunk = p;
        vm->cap_chunk = n;
    }
    int j = 0;
    for (int64_t off = 0; off < b; j++) {
        int64_t c = chunk_of(b - off);
        want_shapes(vm, c);
        kiln_vm *sv = NULL;
        if (kiln_vm_spec_get(vm, vm->want, c, false, &sv, &e) != KILN_OK) {
            if (e.status == KILN_ERR_OUT_OF_MEMORY)
                return kiln_errorf(err, e.status, "%s", e.msg);
            refuse(vm, e.msg); /* the class's own specialization reports a real error */
            return KILN_OK;
        }
        vm->chunk[j] = (vm_chunk){.vm = sv, .off = off, .n = c};
        off += c;
    }
    vm->n_chunk = j;
    vm->active = vm->chunk[j - 1].vm;
    return KILN_OK;
}

kiln_status kiln_vm_batch_check(kiln_vm *vm, const bool *dyn, kiln_error *err)
{
    const Onnx__GraphProto *og = vm->graph;
    for (size_t i = 0; i < og->n_node; i++)
        if (dyn[i])
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node '%s' (%s) is data-dependent",
                               og->node[i]->name ? og->node[i]->name : "", og->node[i]->op_type);
    const kiln_graph *g = vm->sg;
    if (!g)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "no static part");
    for (int i = 0; i < vm->n_out; i++) {
        bool found = false;
        for (int k = 0; k < kiln_graph_num_outputs(g) && !found; k++) {
            const char *nm = "";
            kiln_graph_output_info(g, k, &nm, NULL, NULL);
            found = strcmp(nm, vm->out_vi[i]->name) == 0;
        }
        if (!found)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output '%s' is no computed value",
                               vm->out_vi[i]->name);
    }
    int ni = kiln_graph_num_inputs(g);
    bool *bat = calloc((size_t)ni + 1, sizeof *bat);
    if (!bat)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < ni; k++) {
        const char *nm = "";
        kiln_graph_input_info(g, k, &nm, NULL, NULL);
        for (int i = 0; i < vm->n_in; i++)
            if (strcmp(nm, vm->in_vi[i]->name) == 0)
                bat[k] = vm->batch_of[i];
    }
    char why[256];
    bool ok = kiln_graph_batch_separable(g, bat, vm->batch_c, why, sizeof why);
    free(bat);
    return ok ? KILN_OK
              : kiln_errorf(err, KILN_ERR_UNSUPPORTED, "the items of a batch meet: %s", why);
}

int kiln_vm_batch_num_steps(const kiln_vm *vm)
{
    int n = 0;
    for (int j = 0; j < vm->n_chunk; j++)
        n += kiln_vm_num_steps(vm->chunk[j].vm) + 1;
    return n;
}

/* Step i of a chunked run: chunk *j's step *l (its last, one past its VM's
 * steps, joins its outputs); false when out of range. */
static bool locate(const kiln_vm *vm, int i, int *j, int *l)
{
    for (int k = 0; k < vm->n_chunk && i >= 0; k++) {
        int ns = kiln_vm_num_steps(vm->chunk[k].vm) + 1;
        if (i < ns) {
            *j = k, *l = i;
            return true;
        }
        i -= ns;
    }
    return false;
}

kiln_status kiln_vm_batch_step_info(const kiln_vm *vm, int i, kiln_vm_step_desc *info, char *shapes,
                                    size_t size)
{
    int j, l;
    if (!info || !locate(vm, i, &j, &l))
        return KILN_ERR_INVALID_ARGUMENT;
    const kiln_vm *cv = vm->chunk[j].vm;
    if (l < kiln_vm_num_steps(cv))
        return kiln_vm_step_info(cv, l, info, shapes, size);
    memset(info, 0, sizeof *info);
    info->name = "vm: a chunk's outputs joined";
    info->op = "vm";
    info->kind = "vm";
    if (shapes && size)
        snprintf(shapes, size, "items %lld..%lld", (long long)vm->chunk[j].off,
                 (long long)(vm->chunk[j].off + vm->chunk[j].n - 1));
    return KILN_OK;
}

/* Copies chunk j's outputs into the joined ones at its items. */
static kiln_status join(kiln_vm *vm, const vm_chunk *ch, kiln_error *err)
{
    if (!vm->bout) {
        vm->bout = calloc((size_t)vm->n_out + 1, sizeof *vm->bout);
        vm->bout_cap = calloc((size_t)vm->n_out + 1, sizeof *vm->bout_cap);
        if (!vm->bout || !vm->bout_cap)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int64_t b = vm->chunk[vm->n_chunk - 1].off + vm->chunk[vm->n_chunk - 1].n;
    for (int i = 0; i < vm->n_out; i++) {
        const kiln_tensor *t = kiln_vm_output(ch->vm, i);
        if (!t || t->shape.rank < 1 || t->shape.dims[0] != ch->n)
            return kiln_errorf(err, KILN_ERR_INTERNAL,
                               "output '%s': a chunk of %lld items "
                               "without them at axis 0",
                               vm->out_vi[i]->name, (long long)ch->n);
        size_t item = (size_t)kiln_tensor_nbytes(t) / (size_t)ch->n;
        kiln_tensor *o = &vm->bout[i];
        if (ch->off == 0) {
            if (item * (size_t)b > vm->bout_cap[i]) {
                void *p = realloc(o->data, item * (size_t)b);
                if (!p)
                    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "output '%s': %zu bytes",
                                       vm->out_vi[i]->name, item * (size_t)b);
                o->data = p;
                vm->bout_cap[i] = item * (size_t)b;
            }
            o->dtype = t->dtype;
            o->shape = t->shape;
            o->shape.dims[0] = b;
        }
        if (item)
            memcpy((char *)o->data + item * (size_t)ch->off, t->data, item * (size_t)ch->n);
    }
    return KILN_OK;
}

kiln_status kiln_vm_batch_run_step(kiln_vm *vm, int i, kiln_error *err)
{
    int j, l;
    if (!locate(vm, i, &j, &l))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_vm_run_step: no step %d", i);
    const vm_chunk *ch = &vm->chunk[j];
    if (l == kiln_vm_num_steps(ch->vm))
        return join(vm, ch, err);
    if (l == 0) /* the chunk's items of each batched input, in place */
        for (int k = 0; k < vm->n_in; k++) {
            kiln_tensor t = vm->in_t[k];
            if (vm->batch_in[k]) {
                size_t item = (size_t)kiln_tensor_nbytes(&t) / (size_t)t.shape.dims[0];
                t.data = (char *)t.data + item * (size_t)ch->off;
                t.shape.dims[0] = ch->n;
            }
            ch->vm->in_t[k] = t;
            ch->vm->in_set[k] = true;
        }
    return kiln_vm_run_step(ch->vm, l, err);
}

void kiln_vm_batch_free(kiln_vm *vm)
{
    for (int i = 0; vm->bout && i < vm->n_out; i++)
        free(vm->bout[i].data);
    free(vm->bout);
    free(vm->bout_cap);
    free(vm->chunk);
    free(vm->batch_in);
    free(vm->want);
}

int kiln_vm_batch_chunks(const kiln_vm *vm, const char **why)
{
    if (why)
        *why = vm && vm->batch_mode < 0 ? vm->batch_why : "";
    return vm ? vm->n_chunk : 0;
}
