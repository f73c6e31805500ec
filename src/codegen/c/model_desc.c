/* codegen/c/model_desc.c: the model descriptor in memory (codegen.h).
 *
 * What model.c holds (emit_model.c), built as the runtime's structs in an
 * arena instead of C text: the tensor table, the steps with their kernels
 * resolved from a loaded .so, the weights blob copied in. A VM's next shape
 * class whose kernels an earlier class's .so already holds runs from it
 * (driver.c, kiln_build_load_reusing) with no C compiled and nothing linked. */
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/ref_node.h"
#include "util/error.h"

#define WALIGN 64

/* The fused group's name as model.c writes it (at most 6 nodes). */
static char *group_name(kiln_arena *a, const kiln_lowered *l, const kiln_task *t)
{
    char *s = kiln_codegen_group_name(l, t);
    char *c = s ? kiln_arena_strdup(a, s) : NULL;
    free(s);
    return c;
}

static kiln_status desc_tensors(kiln_abi_model *d, const kiln_lowered *l, kiln_arena *a)
{
    const kiln_graph *g = l->ctx->g;
    kiln_abi_tensor *ts = kiln_arena_calloc(a, (size_t)(l->n_tensors ? l->n_tensors : 1), sizeof *ts);
    if (!ts)
        return KILN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < l->n_tensors; i++) {
        const kiln_tensor_entry *e = &l->tensors[i];
        const kiln_value *v = g->values[e->value];
        kiln_abi_tensor *t = &ts[i];
        t->name = kiln_arena_strdup(a, v->name ? v->name : "");
        t->layout = kiln_arena_strdup(a, e->layout);
        if (!t->name || !t->layout)
            return KILN_ERR_OUT_OF_MEMORY;
        t->dtype = (int32_t)v->dtype;
        t->rank = v->shape.rank;
        for (int k = 0; k < v->shape.rank && k < 8; k++)
            t->dims[k] = v->shape.dims[k];
        t->nbytes = e->nbytes;
        if (e->weights && e->file[0]) { /* a file of its own */
            t->storage = KILN_STORAGE_FILE;
            if (!(t->file = kiln_arena_strdup(a, e->file)))
                return KILN_ERR_OUT_OF_MEMORY;
        } else {
            t->storage = e->weights ? KILN_STORAGE_WEIGHTS : KILN_STORAGE_ARENA;
            t->offset = e->offset;
        }
    }
    d->tensors = ts;
    d->n_tensors = l->n_tensors;
    return KILN_OK;
}

static kiln_status desc_steps(kiln_abi_model *d, const kiln_lowered *l,
                              kiln_kernel_fn (*resolve)(void *, const char *), void *rctx,
                              kiln_arena *a, bool *missing, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    kiln_abi_step *ss = kiln_arena_calloc(a, (size_t)(l->n_tasks ? l->n_tasks : 1), sizeof *ss);
    if (!ss)
        return KILN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < l->n_tasks; i++) {
        const kiln_task *t = &l->tasks[i];
        kiln_abi_step *st = &ss[i];
        bool ref = kiln_task_is_fallback(l, t);
        char op[96];
        snprintf(op, sizeof op, "ref:%s", ref ? kiln_op_name(g->nodes[t->anchor]->op) : "");
        st->name = group_name(a, l, t);
        st->op = kiln_arena_strdup(a, ref ? op : t->tpl->name);
        int32_t *args = kiln_arena_alloc(a, sizeof(int32_t) * (size_t)(t->n_args ? t->n_args : 1));
        if (!st->name || !st->op || !args)
            return KILN_ERR_OUT_OF_MEMORY;
        for (int k = 0; k < t->n_args; k++)
            args[k] = t->args[k];
        st->args = args;
        st->n_args = t->n_args;
        st->extent = ref ? 0 : (int32_t)t->extent;
        st->workload = kiln_arena_strdup(a, t->workload);
        st->workload_hash = t->workload_hash;
        st->flops = t->flops;
        st->shapes = kiln_arena_strdup(a, t->shapes);
        st->layouts = kiln_arena_strdup(a, t->layouts);
        st->config = kiln_arena_strdup(a, t->config);
        if (!st->workload || !st->shapes || !st->layouts || !st->config)
            return KILN_ERR_OUT_OF_MEMORY;
        if (ref) {
            char *text = NULL;
            kiln_status s = kiln_ref_node_text(l, t, &text, err);
            if (s != KILN_OK)
                return s;
            st->ref_node = kiln_arena_strdup(a, text);
            free(text);
            if (!st->ref_node)
                return KILN_ERR_OUT_OF_MEMORY;
        } else if (!(st->fn = resolve(rctx, l->tasks[t->kernel].fn_name))) {
            *missing = true; /* the .so lacks this kernel */
            return KILN_OK;
        }
    }
    d->steps = ss;
    d->n_steps = l->n_tasks;
    return KILN_OK;
}

kiln_status kiln_codegen_model_desc(kiln_lowered *l, const char *name, const char *target,
                                    const char *build_id, const char *metadata_json,
                                    kiln_kernel_fn (*resolve)(void *, const char *), void *rctx,
                                    kiln_arena *a, kiln_abi_model **out, kiln_error *err)
{
    *out = NULL;
    const kiln_graph *g = l->ctx->g;
    int64_t wbytes = 0;
    kiln_status s = kiln_codegen_weights(l, NULL, &wbytes, err); /* the blob's layout */
    if (s != KILN_OK)
        return s;
    kiln_abi_model *d = kiln_arena_calloc(a, 1, sizeof *d);
    unsigned char *blob = kiln_arena_calloc(a, 1, (size_t)(wbytes > 0 ? wbytes : WALIGN));
    int32_t *in = kiln_arena_alloc(a, sizeof(int32_t) * (size_t)(g->n_inputs + 1));
    int32_t *outs = kiln_arena_alloc(a, sizeof(int32_t) * (size_t)(g->n_outputs + 1));
    if (!d || !blob || !in || !outs)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < l->n_tensors; i++) {
        const kiln_tensor_entry *e = &l->tensors[i];
        if (e->weights && !e->file[0] && e->nbytes > 0)
            memcpy(blob + e->offset, e->data, (size_t)e->nbytes);
    }
    for (int i = 0; i < g->n_inputs; i++)
        in[i] = l->value_tensor[g->inputs[i]];
    for (int i = 0; i < g->n_outputs; i++)
        if ((outs[i] = l->value_tensor[g->outputs[i]]) < 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "graph output '%s' has no storage",
                               g->values[g->outputs[i]]->name);
    bool missing = false;
    if ((s = desc_tensors(d, l, a)) == KILN_OK)
        s = desc_steps(d, l, resolve, rctx, a, &missing, err);
    if (s == KILN_ERR_OUT_OF_MEMORY)
        return kiln_errorf(err, s, "out of memory");
    if (s != KILN_OK || missing)
        return s;
    d->abi_version = KILN_ABI_VERSION;
    d->name = kiln_arena_strdup(a, name);
    d->target = kiln_arena_strdup(a, target);
    d->build_id = kiln_arena_strdup(a, build_id);
    d->metadata_json = kiln_arena_strdup(a, metadata_json);
    if (!d->name || !d->target || !d->build_id || !d->metadata_json)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    d->n_inputs = g->n_inputs;
    d->n_outputs = g->n_outputs;
    d->inputs = in;
    d->outputs = outs;
    d->arena_bytes = l->ctx->arena_bytes;
    d->workspace_bytes = l->workspace;
    d->weights = blob;
    d->weights_bytes = wbytes;
    *out = d;
    return KILN_OK;
}
