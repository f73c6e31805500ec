/* lower/lower.c: fused groups -> kernel tasks (see lower.h).
 *
 * Lowering is generic: for each KERNEL group it asks the target which
 * template takes the group's anchor (target/template.h), collects the
 * group's tensors (inputs, then outputs; constants become weights tensors),
 * and calls the template's hooks: space (the knobs with the analytic
 * defaults, the params, the flops), then, with the knob values final
 * (defaults, a random draw for tests, or a configuration set by the caller),
 * pack (weights in the layout the configuration wants). Finally tasks with
 * the same workload and knobs share a kernel (kiln_lowered_finalize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/sb.h"
#include "lower/hash.h"
#include "lower/knobs.h"
#include "lower/workload.h"
#include "util/error.h"
#include "util/rng.h"

int kiln_task_arg(const kiln_task *t, int v)
{
    for (int i = 0; i < t->n_args; i++)
        if (t->arg_values[i] == v)
            return i;
    return -1;
}

int kiln_task_knob(const kiln_task *t, const char *name, int def)
{
    for (int i = 0; i < t->n_knobs; i++)
        if (strcmp(t->knobs[i].name, name) == 0)
            return t->knobs[i].value;
    return def;
}

/* ---- tensors ------------------------------------------------------------------------ */

static int add_tensor(kiln_lowered *l, kiln_tensor_entry e)
{
    if (l->n_tensors == l->cap_tensors) {
        int nc = l->cap_tensors ? l->cap_tensors * 2 : 64;
        kiln_tensor_entry *p = realloc(l->tensors, sizeof *p * (size_t)nc);
        if (!p)
            return -1;
        l->tensors = p;
        l->cap_tensors = nc;
    }
    l->tensors[l->n_tensors] = e;
    return l->n_tensors++;
}

int kiln_lower_weights(kiln_lowered *l, int v, const char *layout, void *owned, int64_t nbytes)
{
    const kiln_value *x = l->ctx->g->values[v];
    char lb[32];
    if (!layout)
        layout = kiln_layout_str(&x->shape, x->layout, lb, sizeof lb);
    for (int i = 0; i < l->n_tensors; i++) {
        const kiln_tensor_entry *t = &l->tensors[i];
        if (!t->weights || t->value != v || strcmp(t->layout, layout) != 0 || !t->owned != !owned)
            continue;
        if (!owned)
            return i;
        /* the same weight packed the same way by another task (an unrolled
         * recurrence's steps share their weights): one copy in the model */
        if (t->nbytes == nbytes && memcmp(t->owned, owned, (size_t)nbytes) == 0) {
            free(owned);
            return i;
        }
    }
    kiln_tensor_entry e = {.value = v, .weights = true, .owned = owned};
    snprintf(e.layout, sizeof e.layout, "%s", layout);
    e.data = owned ? owned : x->data;
    e.nbytes = owned ? nbytes : (int64_t)kiln_dtype_size(x->dtype) * kiln_shape_numel(&x->shape);
    int id = add_tensor(l, e);
    if (id < 0)
        free(owned);
    return id;
}

int kiln_lower_weights_mapped(kiln_lowered *l, int v, const char *layout, void *map,
                              int64_t nbytes, const char *file)
{
    kiln_tensor_entry e = {.value = v, .weights = true, .data = map, .nbytes = nbytes,
                           .mapped = true};
    snprintf(e.layout, sizeof e.layout, "%s", layout);
    snprintf(e.file, sizeof e.file, "%s", file);
    int id = add_tensor(l, e);
    if (id < 0)
        munmap(map, (size_t)nbytes);
    return id;
}

void kiln_lowered_destroy(kiln_lowered *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n_tensors; i++) {
        free(l->tensors[i].owned);
        free(l->tensors[i].memo_key);
        if (l->tensors[i].mapped)
            munmap((void *)l->tensors[i].data, (size_t)l->tensors[i].nbytes);
    }
    free(l->tensors);
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        free(t->args);
        free(t->arg_values);
        free(t->workload);
        free(t->config);
        free(t->shapes);
        free(t->layouts);
        free(t->params);
    }
    free(l->tasks);
    free(l->value_tensor);
    free(l);
}

/* ---- one task ------------------------------------------------------------------ */

static void maybe_randomize(kiln_lowered *l, kiln_task *t);
static bool compact_weights(kiln_lowered *l);

/* Fills args with the group's tensors: inputs (constants as weights tensors in
 * their own layout), then outputs. */
static kiln_status task_args(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    const kiln_node *a = ctx->g->nodes[gr->anchor];
    int n_out = a->n_outputs > 1 ? a->n_outputs : gr->n_outputs;
    t->n_in = gr->n_inputs;
    t->n_args = gr->n_inputs + n_out;
    t->args = malloc(sizeof(int) * (size_t)(t->n_args + 1));
    t->arg_values = malloc(sizeof(int) * (size_t)(t->n_args + 1));
    if (!t->args || !t->arg_values)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < t->n_args; i++) {
        int v = i < t->n_in ? gr->inputs[i]
                            : (a->n_outputs > 1 ? a->outputs[i - t->n_in] : gr->outputs[i - t->n_in]);
        t->arg_values[i] = v;
        const kiln_value *x = ctx->g->values[v];
        int tid;
        if (x->kind == KILN_VALUE_CONST) {
            if (!x->data)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "constant '%s' has no data (graph built without weights)",
                                   x->name);
            tid = kiln_lower_weights(l, v, NULL, NULL, 0);
        } else {
            tid = l->value_tensor[v];
        }
        if (tid < 0)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "value '%s' has no storage", x->name);
        t->args[i] = tid;
    }
    return KILN_OK;
}

/* Copies the knob values into the params and packs the weights for them,
 * unless they are what the weights were last packed for. */
static kiln_status configure_task(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    int vals[KILN_MAX_KNOBS];
    for (int i = 0; i < t->n_knobs; i++)
        vals[i] = t->knobs[i].value;
    if (t->packed && !memcmp(vals, t->packed_knobs, sizeof(int) * (size_t)t->n_knobs))
        return KILN_OK;
    kiln_knobs_apply(t);
    if (t->tpl->pack) {
        kiln_status s = t->tpl->pack(l, t, err);
        if (s != KILN_OK)
            return s;
    }
    memcpy(t->packed_knobs, vals, sizeof(int) * (size_t)t->n_knobs);
    t->packed = true;
    return KILN_OK;
}

static kiln_status lower_task(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    kiln_status s = task_args(l, t, err);
    if (s != KILN_OK)
        return s;
    t->epi_from = 1;
    t->residual_arg = -1;
    const kiln_value *y = ctx->g->values[gr->outputs[0]];
    t->flops = (double)kiln_shape_numel(&y->shape) * gr->n_nodes;
    if (t->tpl->space && (s = t->tpl->space(l, t, err)) != KILN_OK)
        return s;
    maybe_randomize(l, t);
    return configure_task(l, t, err);
}

/* ---- workload keys (lower/workload.c) and dedupe -------------------------------- */

static kiln_status name_task(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_graph *g = ctx->g;
    kiln_sb b = {0}, c = {0}, shp = {0}, lay = {0};
    kiln_workload_write(&b, l, t);
    for (int i = 0; i < t->n_args; i++) {
        const kiln_value *v = g->values[t->arg_values[i]];
        char sbuf[160];
        kiln_sb_printf(&shp, "%s%s", i ? ", " : "", kiln_shape_str(&v->shape, sbuf, sizeof sbuf));
        kiln_sb_printf(&lay, "%s%s", i ? "/" : "", l->tensors[t->args[i]].layout);
    }
    kiln_sb_puts(&c, "{");
    for (int i = 0; i < t->n_knobs; i++)
        kiln_sb_printf(&c, "\"%s\": %d, ", t->knobs[i].name, t->knobs[i].value);
    /* The kernel's name hashes the knobs, not where they came from: a records
     * build whose knobs equal the defaults names (and caches) the same kernels. */
    size_t knobs_len = c.len;
    kiln_sb_printf(&c, "\"source\": \"%s\"}", t->source ? t->source : "default");
    free(t->workload);
    free(t->config);
    free(t->shapes);
    free(t->layouts);
    t->workload = kiln_sb_take(&b);
    t->config = kiln_sb_take(&c);
    t->shapes = kiln_sb_take(&shp);
    t->layouts = kiln_sb_take(&lay);
    if (!t->workload || !t->config || !t->shapes || !t->layouts)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->workload_hash = kiln_hash64(t->workload, strlen(t->workload));
    kiln_hash h;
    kiln_hash_init(&h, 7);
    kiln_hash_str(&h, t->workload);
    kiln_hash_update(&h, t->config, knobs_len);
    char hex[33];
    kiln_hash_hex(&h, hex);
    hex[12] = 0;
    snprintf(t->fn_name, sizeof t->fn_name, "kiln_k_%s_f32_%s", t->tpl->name, hex);
    return KILN_OK;
}

kiln_status kiln_lowered_finalize(kiln_lowered *l, kiln_error *err)
{
    bool repacked = false;
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        int n_tensors = l->n_tensors;
        kiln_status s = configure_task(l, t, err);
        if (s != KILN_OK)
            return s;
        repacked |= l->n_tensors != n_tensors;
    }
    if (repacked && !compact_weights(l))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_status s = name_task(l, &l->tasks[i], err);
        if (s != KILN_OK)
            return s;
    }
    kiln_lowered_share_kernels(l);
    l->workspace = 0;
    for (int i = 0; i < l->n_tasks; i++)
        if (l->tasks[i].workspace > l->workspace)
            l->workspace = l->tasks[i].workspace;
    return KILN_OK;
}

void kiln_lowered_share_kernels(kiln_lowered *l)
{
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        t->kernel = i;
        for (int j = 0; j < i; j++)
            if (strcmp(l->tasks[j].fn_name, t->fn_name) == 0) {
                t->kernel = l->tasks[j].kernel;
                break;
            }
    }
}

bool kiln_task_set_knob(kiln_task *t, const char *name, int value)
{
    for (int i = 0; i < t->n_knobs; i++) {
        kiln_knob *k = &t->knobs[i];
        if (strcmp(k->name, name) != 0)
            continue;
        for (int c = 0; c < k->n_choices; c++)
            if (k->choices[c] == value) {
                k->value = value;
                return true;
            }
        return false;
    }
    return false;
}

/* Draws every knob of t from its space when the lowering is randomized. */
static void maybe_randomize(kiln_lowered *l, kiln_task *t)
{
    if (!l->knob_seed)
        return;
    kiln_rng r;
    memcpy(r.s, l->rng, sizeof r.s);
    for (int k = 0; k < t->n_knobs; k++) {
        kiln_knob *kb = &t->knobs[k];
        if (kb->n_choices > 0)
            kb->value = kb->choices[kiln_rng_next(&r) % (uint64_t)kb->n_choices];
    }
    memcpy(l->rng, r.s, sizeof r.s);
}

/* Drops weights tensors no task reads any more (a constant whose packed copy
 * replaced it), renumbering the task args. */
static bool compact_weights(kiln_lowered *l)
{
    int *map = malloc(sizeof(int) * (size_t)(l->n_tensors ? l->n_tensors : 1));
    bool *used = calloc((size_t)(l->n_tensors ? l->n_tensors : 1), sizeof(bool));
    if (!map || !used) {
        free(map);
        free(used);
        return false;
    }
    for (int i = 0; i < l->n_tasks; i++)
        for (int k = 0; k < l->tasks[i].n_args; k++)
            used[l->tasks[i].args[k]] = true;
    int n = 0;
    for (int i = 0; i < l->n_tensors; i++) {
        if (l->tensors[i].weights && !used[i]) {
            free(l->tensors[i].owned);
            map[i] = -1;
            continue;
        }
        map[i] = n;
        l->tensors[n++] = l->tensors[i];
    }
    l->n_tensors = n;
    for (int i = 0; i < l->n_tasks; i++)
        for (int k = 0; k < l->tasks[i].n_args; k++)
            l->tasks[i].args[k] = map[l->tasks[i].args[k]];
    for (int v = 0; v < l->ctx->g->n_values; v++)
        if (l->value_tensor[v] >= 0)
            l->value_tensor[v] = map[l->value_tensor[v]];
    free(map);
    free(used);
    return true;
}

/* ---- driver -------------------------------------------------------------------------- */

kiln_status kiln_lower(kiln_pass_ctx *ctx, uint64_t knob_seed, kiln_lowered **out,
                       kiln_error *err)
{
    if (!ctx->storage)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "lowering needs plan-memory first");
    const kiln_graph *g = ctx->g;
    kiln_lowered *l = calloc(1, sizeof *l);
    if (!l)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    l->ctx = ctx;
    l->knob_seed = knob_seed;
    if (knob_seed) {
        kiln_rng r;
        kiln_rng_seed(&r, knob_seed);
        memcpy(l->rng, r.s, sizeof l->rng);
    }
    kiln_status s = KILN_OK;
    l->value_tensor = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    l->tasks = calloc((size_t)(ctx->n_groups ? ctx->n_groups : 1), sizeof *l->tasks);
    if (!l->value_tensor || !l->tasks) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    /* arena tensors: every planned value */
    for (int v = 0; v < g->n_values; v++) {
        l->value_tensor[v] = -1;
        const kiln_storage *st = &ctx->storage[v];
        if (st->root < 0 || g->values[v]->kind == KILN_VALUE_CONST)
            continue;
        kiln_tensor_entry e = {.value = v, .nbytes = st->nbytes, .offset = st->offset};
        kiln_layout_str(&g->values[v]->shape, g->values[v]->layout, e.layout, sizeof e.layout);
        int id = add_tensor(l, e);
        if (id < 0) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
        l->value_tensor[v] = id;
    }
    for (int r = 0; r < ctx->n_groups; r++) {
        const kiln_group *gr = &ctx->groups[r];
        if (gr->kind != KILN_GROUP_KERNEL)
            continue;
        kiln_task *t = &l->tasks[l->n_tasks++];
        t->group = r;
        t->anchor = gr->anchor;
        t->tpl = gr->tpl ? gr->tpl : kiln_target_template(&ctx->target, g, g->nodes[gr->anchor], NULL);
        if (t->tpl == kiln_target_templates(&ctx->target)->fallback) {
            const char *op = kiln_op_name(g->nodes[gr->anchor]->op);
            l->n_fallback++;
            if (!strstr(l->fallback_ops, op) &&
                strlen(l->fallback_ops) + strlen(op) + 3 < sizeof l->fallback_ops)
                snprintf(l->fallback_ops + strlen(l->fallback_ops),
                         sizeof l->fallback_ops - strlen(l->fallback_ops), "%s%s",
                         l->fallback_ops[0] ? ", " : "", op);
        }
        s = lower_task(l, t, err);
        if (s != KILN_OK) {
            kiln_error_prefix(err, s, "lowering '%s': ", g->nodes[gr->anchor]->name);
            goto fail;
        }
    }
    if (!compact_weights(l)) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    s = kiln_lowered_finalize(l, err);
    if (s != KILN_OK)
        goto fail;
    *out = l;
    return KILN_OK;
fail:
    kiln_lowered_destroy(l);
    return s;
}
