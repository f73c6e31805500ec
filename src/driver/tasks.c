/* driver/tasks.c: the tasks of a model, and one task built and timed alone
 * (kiln.h, "Tasks").
 *
 * Listing: the passes and lowering of a normal build; steps with equal
 * workload keys are one task.
 *
 * One task from its key (what tuning measures). The key parses
 * (lower/workload.c) into arguments and nodes; a small graph holds them as
 * lowering saw them in the model:
 *   - an activation argument is a row-major graph input, followed, when the
 *     key's layout is blocked, by a layout transform (an Identity whose
 *     output is in that layout: the layout_transform template, as
 *     alter-layout makes them);
 *   - a weight argument is a constant in the key's layout with seeded random
 *     data (uniform in [-1, 1) for floats), integer weights with the values
 *     the key records (zeros when it records only their hash);
 *   - the key's nodes, wired as the key says, internal values in the key's
 *     layouts;
 *   - each output argument is a graph output, through a transform back to
 *     row-major when blocked; each blocked input is also transformed back to
 *     a graph output after the task, so that its buffer outlives the task
 *     and the task cannot write in place over it (every timed call computes
 *     on the same data).
 * The graph is already laid out, so of the pass pipeline it gets only
 * infer-shapes, fuse and plan-memory: alter-layout would decide the layouts
 * again from a graph whose inputs arrive row-major (a conv's input block is
 * chosen from its producer), remove-identity would drop the transforms, and
 * there is nothing to fold. Lowering then gives the task; its key must equal
 * the one parsed, else the key does not describe what this build of kiln
 * makes, and that is an error.
 *
 * Measuring: the small graph through lower, kiln_build_set_config on the
 * task, configure, codegen and link (into the model cache: a configuration
 * built before costs nothing), loaded by the runtime; one run on seeded
 * inputs, every output compared with the reference executor's on the same
 * graph and inputs; then the time evaluator over the task's step alone
 * (kiln_bench_function over kiln_module_run_step): the transforms around it
 * are separate steps and are not timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "lower/workload.h"
#include "util/error.h"
#include "util/half.h"
#include "util/rng.h"
#include "util/sb.h"

/* ---- one task's description, owned ------------------------------------------- */

typedef struct knob_rec {
    char *name;
    const char *kind;
    int value, n_choices;
    int choices[KILN_KNOB_MAX_CHOICES];
} knob_rec;

typedef struct task_rec {
    char *workload, *tpl, *shapes, *layouts, *config;
    double flops;
    int steps, n_knobs, n_picks;
    knob_rec knobs[KILN_MAX_KNOBS];
    int picks[KILN_MAX_PICKS * KILN_MAX_KNOBS]; /* n_picks x n_knobs */
} task_rec;

static const char *knob_kind_name(kiln_knob_kind k)
{
    switch (k) {
    case KILN_KNOB_TILE:
        return "tile";
    case KILN_KNOB_ORDER:
        return "order";
    case KILN_KNOB_BLOCK:
        return "block";
    }
    return "tile";
}

static void rec_free(task_rec *r)
{
    free(r->workload);
    free(r->tpl);
    free(r->shapes);
    free(r->layouts);
    free(r->config);
    for (int k = 0; k < r->n_knobs; k++)
        free(r->knobs[k].name);
    memset(r, 0, sizeof *r);
}

static char *dup(const char *s)
{
    return strdup(s ? s : "");
}

/* Copies what a caller needs of task t; the default configuration as a
 * configuration object (no "source"). */
static kiln_status rec_fill(task_rec *r, const kiln_task *t, kiln_error *err)
{
    kiln_sb cfg = {0};
    kiln_sb_puts(&cfg, "{");
    for (int k = 0; k < t->n_knobs; k++)
        kiln_sb_printf(&cfg, "%s\"%s\": %d", k ? ", " : "", t->knobs[k].name, t->knobs[k].value);
    kiln_sb_puts(&cfg, "}");
    r->config = kiln_sb_take(&cfg);
    r->workload = dup(t->workload);
    r->tpl = dup(t->tpl->name);
    r->shapes = dup(t->shapes);
    r->layouts = dup(t->layouts);
    r->flops = t->flops;
    r->steps = 1;
    bool ok = r->config && r->workload && r->tpl && r->shapes && r->layouts;
    for (int k = 0; k < t->n_knobs && ok; k++) {
        knob_rec *kr = &r->knobs[r->n_knobs++];
        kr->name = dup(t->knobs[k].name);
        kr->kind = knob_kind_name(t->knobs[k].kind);
        kr->value = t->knobs[k].value;
        kr->n_choices = t->knobs[k].n_choices;
        memcpy(kr->choices, t->knobs[k].choices, sizeof kr->choices);
        ok = kr->name != NULL;
    }
    r->n_picks = t->n_picks;
    for (int j = 0; j < t->n_picks; j++)
        memcpy(&r->picks[j * t->n_knobs], t->picks[j], sizeof(int) * (size_t)t->n_knobs);
    if (!ok) {
        rec_free(r);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return KILN_OK;
}

static void rec_info(const task_rec *r, const char *target, kiln_task_info *info)
{
    int64_t space = 1;
    for (int k = 0; k < r->n_knobs; k++)
        space *= r->knobs[k].n_choices > 0 ? r->knobs[k].n_choices : 1;
    *info = (kiln_task_info){.workload = r->workload,
                             .template_name = r->tpl,
                             .target = target,
                             .shapes = r->shapes,
                             .layouts = r->layouts,
                             .default_config = r->config,
                             .flops = r->flops,
                             .steps = r->steps,
                             .n_knobs = r->n_knobs,
                             .space_size = space,
                             .n_picks = r->n_picks,
                             .picks = r->picks};
}

static kiln_status rec_knob(const task_rec *r, int k, kiln_knob_info *info, kiln_error *err)
{
    if (k < 0 || k >= r->n_knobs)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "template %s: no knob %d (it has %d)",
                           r->tpl, k, r->n_knobs);
    const knob_rec *kr = &r->knobs[k];
    *info = (kiln_knob_info){.name = kr->name,
                             .kind = kr->kind,
                             .value = kr->value,
                             .n_choices = kr->n_choices,
                             .choices = kr->choices};
    return KILN_OK;
}

/* ---- the tasks of a model -------------------------------------------------------- */

struct kiln_tasks {
    char target[32];
    int n, n_steps;
    task_rec *t;
};

void kiln_tasks_destroy(kiln_tasks *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        rec_free(&t->t[i]);
    free(t->t);
    free(t);
}

kiln_status kiln_tasks_extract(const kiln_graph *g, const kiln_compile_options *opts,
                               kiln_tasks **out, kiln_error *err)
{
    if (!g || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_tasks_extract: no graph");
    kiln_compile_options o = {0};
    if (opts) {
        o.target = opts->target;
        o.verbose = opts->verbose;
        o.print_ir_after = opts->print_ir_after;
        o.records = opts->records; /* its block lines decide the convs' blocks: the tasks
                                      `kiln compile --records` builds */
    }
    kiln_build *b = NULL;
    kiln_tasks *ts = NULL;
    kiln_status s = kiln_build_create(g, &o, &b, err);
    if (s == KILN_OK)
        s = kiln_build_lower(b, err);
    if (s != KILN_OK)
        goto fail;
    const kiln_lowered *low = b->low;
    ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->t = calloc((size_t)low->n_tasks + 1, sizeof *ts->t))) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    snprintf(ts->target, sizeof ts->target, "%s", b->target.name);
    ts->n_steps = low->n_tasks;
    for (int i = 0; i < low->n_tasks; i++) {
        const kiln_task *t = &low->tasks[i];
        int j = 0;
        while (j < ts->n && strcmp(ts->t[j].workload, t->workload) != 0)
            j++;
        if (j < ts->n) {
            ts->t[j].steps++;
            continue;
        }
        if ((s = rec_fill(&ts->t[ts->n], t, err)) != KILN_OK)
            goto fail;
        ts->n++;
    }
    kiln_build_destroy(b);
    *out = ts;
    return KILN_OK;
fail:
    kiln_build_destroy(b);
    kiln_tasks_destroy(ts);
    return s;
}

int kiln_tasks_count(const kiln_tasks *t)
{
    return t ? t->n : 0;
}

int kiln_tasks_num_steps(const kiln_tasks *t)
{
    return t ? t->n_steps : 0;
}

const char *kiln_tasks_target(const kiln_tasks *t)
{
    return t ? t->target : "";
}

kiln_status kiln_tasks_info(const kiln_tasks *t, int i, kiln_task_info *info, kiln_error *err)
{
    if (!t || !info || i < 0 || i >= t->n)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no task %d (the model has %d)", i,
                           t ? t->n : 0);
    rec_info(&t->t[i], t->target, info);
    return KILN_OK;
}

kiln_status kiln_tasks_knob(const kiln_tasks *t, int i, int k, kiln_knob_info *info,
                            kiln_error *err)
{
    if (!t || !info || i < 0 || i >= t->n)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no task %d (the model has %d)", i,
                           t ? t->n : 0);
    return rec_knob(&t->t[i], k, info, err);
}

/* ---- the small graph of one key ------------------------------------------------- */

struct kiln_workload {
    char *key;
    kiln_wl *wl;
    kiln_graph *g;       /* the small graph (see the top), weights seeded */
    task_rec rec;        /* the task as lowering made it, default knobs */
    uint64_t seed;
    kiln_tensor *ref;    /* the reference executor's outputs (after the first measure) */
    int n_ref;
    /* the template's cost model (kiln_workload_cost), when it has one */
    const kiln_template *tpl;
    void *params;        /* the task's params with the default knobs */
    size_t params_size;
    kiln_target target;
    int offsets[KILN_MAX_KNOBS];
};

static bool is_float(kiln_dtype dt)
{
    return dt == KILN_DTYPE_FLOAT32 || dt == KILN_DTYPE_FLOAT64 || dt == KILN_DTYPE_FLOAT16;
}

/* Seeded random floats in [-1, 1) (zeros for other dtypes) into data. */
static void fill_random(kiln_rng *r, kiln_dtype dt, int64_t n, void *data)
{
    for (int64_t i = 0; i < n; i++) {
        float v = kiln_rng_uniformf(r, -1.0f, 1.0f);
        if (dt == KILN_DTYPE_FLOAT32)
            ((float *)data)[i] = v;
        else if (dt == KILN_DTYPE_FLOAT64)
            ((double *)data)[i] = v;
        else if (dt == KILN_DTYPE_FLOAT16)
            ((uint16_t *)data)[i] = kiln_f32_to_f16(v);
    }
    if (!is_float(dt))
        memset(data, 0, (size_t)n * kiln_dtype_size(dt));
}

static void store_int(kiln_dtype dt, void *data, int64_t i, int64_t v)
{
    switch (kiln_dtype_size(dt)) {
    case 1:
        ((uint8_t *)data)[i] = (uint8_t)v;
        break;
    case 2:
        ((uint16_t *)data)[i] = (uint16_t)v;
        break;
    case 4:
        ((uint32_t *)data)[i] = (uint32_t)v;
        break;
    default:
        ((int64_t *)data)[i] = v;
        break;
    }
}

static bool blocked(kiln_layout l)
{
    return l.kind != KILN_LAYOUT_ROW_MAJOR;
}

/* A layout transform of value v into layout l (an Identity, as alter-layout
 * makes them); the new value's id, or -1. */
static int transform(kiln_graph *g, int v, kiln_layout l, const char *name)
{
    int node = kiln_graph_add_node(g, KILN_OP_IDENTITY, name, &v, 1, 1);
    if (node < 0)
        return -1;
    int y = g->nodes[node]->outputs[0];
    g->values[y]->dtype = g->values[v]->dtype;
    g->values[y]->shape = g->values[v]->shape;
    g->values[y]->layout = l;
    return y;
}

static kiln_status set_attr(kiln_graph *g, int node, const kiln_attr *a)
{
    switch (a->type) {
    case KILN_ATTR_INT:
        return kiln_node_set_int(g, node, a->name, a->i);
    case KILN_ATTR_FLOAT:
        return kiln_node_set_float(g, node, a->name, a->f);
    case KILN_ATTR_STRING:
        return kiln_node_set_string(g, node, a->name, a->s);
    case KILN_ATTR_INTS:
        return kiln_node_set_ints(g, node, a->name, a->ints, a->n);
    case KILN_ATTR_FLOATS:
        return kiln_node_set_floats(g, node, a->name, a->floats, a->n);
    }
    return KILN_ERR_INTERNAL;
}

/* The small graph of parsed key w (see the top of the file). */
static kiln_status task_graph(const kiln_wl *w, uint64_t seed, kiln_graph **out,
                              kiln_error *err)
{
    kiln_graph *g = NULL;
    int *val = calloc((size_t)w->n_args, sizeof(int));
    int **nval = calloc((size_t)w->n_nodes, sizeof(int *));
    kiln_status s = KILN_OK;
    if (!val || !nval || kiln_graph_create(&g) != KILN_OK) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    char name[96];
    snprintf(name, sizeof name, "task_%s", w->tpl);
    g->name = kiln_arena_strdup(g->arena, name);
    kiln_rng rng;
    kiln_rng_seed(&rng, seed);
    /* inputs and weights */
    for (int i = 0; i < w->n_args; i++) {
        const kiln_wl_arg *a = &w->args[i];
        val[i] = -1;
        if (a->output)
            continue;
        snprintf(name, sizeof name, "a%d", i);
        if (a->weight) {
            void *data = NULL;
            int id = kiln_graph_add_const_uninit(g, name, a->dtype, &a->shape, true, &data);
            if (id < 0 || !data) {
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            int64_t n = kiln_shape_numel(&a->shape);
            fill_random(&rng, a->dtype, n, data);
            for (int64_t k = 0; k < a->n_data && k < n; k++)
                store_int(a->dtype, data, k, a->data[k]);
            g->values[id]->layout = a->layout;
            val[i] = id;
            continue;
        }
        int id = kiln_graph_add_input(g, name, a->dtype, &a->shape);
        if (id >= 0 && blocked(a->layout)) {
            snprintf(name, sizeof name, "a%d.in", i);
            id = transform(g, id, a->layout, name);
        }
        if (id < 0) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        val[i] = id;
    }
    /* the key's nodes */
    for (int j = 0; j < w->n_nodes; j++) {
        const kiln_wl_node *nd = &w->nodes[j];
        int in[64];
        if (nd->n_inputs > 64) {
            s = kiln_errorf(err, KILN_ERR_UNSUPPORTED, "node %d: more than 64 inputs", j);
            goto done;
        }
        for (int k = 0; k < nd->n_inputs; k++) {
            const kiln_wl_ref *r = &nd->inputs[k];
            in[k] = r->kind == 'a' ? val[r->index] : r->kind == 't' ? nval[r->index][r->output] : -1;
            if (r->kind != '-' && in[k] < 0) {
                s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                "workload key: node %d (%s) reads argument a%d before a node "
                                "writes it",
                                j, kiln_op_name(nd->op), r->index);
                goto done;
            }
        }
        snprintf(name, sizeof name, "n%d.%s", j, kiln_op_name(nd->op));
        int node = kiln_graph_add_node(g, nd->op, name, in, nd->n_inputs, nd->n_outputs);
        nval[j] = malloc(sizeof(int) * (size_t)nd->n_outputs);
        if (node < 0 || !nval[j]) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        for (int k = 0; k < nd->n_attrs && s == KILN_OK; k++)
            s = set_attr(g, node, &nd->attrs[k]);
        if (s != KILN_OK) {
            s = kiln_errorf(err, s, "out of memory");
            goto done;
        }
        for (int k = 0; k < nd->n_outputs; k++) {
            int y = g->nodes[node]->outputs[k];
            nval[j][k] = y;
            int a = nd->out_arg[k];
            g->values[y]->layout = a >= 0 ? w->args[a].layout : nd->out_layout[k];
            if (a >= 0)
                val[a] = y;
        }
    }
    if ((s = kiln_graph_infer_shapes(g, err)) != KILN_OK) {
        kiln_error_prefix(err, s, "workload key: ");
        goto done;
    }
    /* the outputs the key declares are what its nodes compute */
    for (int i = 0; i < w->n_args; i++) {
        const kiln_wl_arg *a = &w->args[i];
        const kiln_value *y = g->values[val[i]];
        if (a->output && (y->dtype != a->dtype || !kiln_shape_equal(&y->shape, &a->shape))) {
            char s1[160], s2[160];
            s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                            "workload key: argument a%d is %s%s but its node computes %s%s", i,
                            kiln_dtype_name(a->dtype), kiln_shape_str(&a->shape, s1, sizeof s1),
                            kiln_dtype_name(y->dtype), kiln_shape_str(&y->shape, s2, sizeof s2));
            goto done;
        }
    }
    /* graph outputs: the task's outputs, then its blocked inputs kept alive */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < w->n_args; i++) {
            const kiln_wl_arg *a = &w->args[i];
            if ((pass == 0) != a->output || a->weight || (pass == 1 && !blocked(a->layout)))
                continue;
            int y = val[i];
            if (blocked(a->layout)) {
                snprintf(name, sizeof name, "a%d.%s", i, pass ? "kept" : "out");
                y = transform(g, y, (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0}, name);
            }
            if (y < 0 || kiln_graph_add_output(g, y) != KILN_OK) {
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        }
    if ((s = kiln_graph_infer_shapes(g, err)) != KILN_OK ||
        (s = kiln_graph_validate(g, err)) != KILN_OK) {
        kiln_error_prefix(err, s, "workload key: ");
        goto done;
    }
done:
    if (nval)
        for (int j = 0; j < w->n_nodes; j++)
            free(nval[j]);
    free(nval);
    free(val);
    if (s != KILN_OK) {
        kiln_graph_destroy(g);
        return s;
    }
    *out = g;
    return KILN_OK;
}

/* A build of w's graph, lowered, with the index of the key's task. The graph
 * is already laid out: of the passes it gets infer-shapes, fuse and
 * plan-memory only (see the top). */
static kiln_status task_build(const kiln_workload *w, const kiln_compile_options *base,
                              kiln_build **out, int *task, kiln_error *err)
{
    kiln_compile_options o = base ? *base : (kiln_compile_options){0};
    o.target = w->wl->target;
    o.records = NULL;
    o.print_ir_after = NULL;
    o.verbose = 0;
    kiln_build *b = NULL;
    kiln_status s = kiln_build_create(w->g, &o, &b, err);
    if (s != KILN_OK)
        return s;
    if ((s = kiln_pass_ctx_create(b->g, &b->target, &b->ctx, err)) != KILN_OK ||
        (s = kiln_pass_infer_shapes(b->ctx, err)) != KILN_OK ||
        (s = kiln_pass_fuse(b->ctx, err)) != KILN_OK ||
        (s = kiln_pass_plan_memory(b->ctx, err)) != KILN_OK)
        goto fail;
    b->t_passes = kiln_driver_now();
    b->stage = BUILD_PASSES;
    if ((s = kiln_build_lower(b, err)) != KILN_OK)
        goto fail;
    /* the key's task; else the rebuilt key closest to it, for the message */
    const kiln_lowered *low = b->low;
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < low->n_tasks; i++) {
        const char *k = low->tasks[i].workload;
        if (!strcmp(k, w->key)) {
            *task = i;
            *out = b;
            return KILN_OK;
        }
        size_t n = 0;
        while (k[n] && k[n] == w->key[n])
            n++;
        if (best < 0 || n > best_len) {
            best = i;
            best_len = n;
        }
    }
    s = kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                    "workload key does not build back into itself: at offset %zu the key has "
                    "'%.40s' where the rebuilt task has '%.40s' (a key of another kiln version, "
                    "or edited?)",
                    best_len, w->key + best_len,
                    best >= 0 ? low->tasks[best].workload + best_len : "");
fail:
    kiln_build_destroy(b);
    return s;
}

void kiln_workload_destroy(kiln_workload *w)
{
    if (!w)
        return;
    free(w->key);
    kiln_wl_destroy(w->wl);
    kiln_graph_destroy(w->g);
    rec_free(&w->rec);
    for (int i = 0; i < w->n_ref; i++)
        kiln_tensor_release(&w->ref[i]);
    free(w->ref);
    free(w->params);
    free(w);
}

/* What kiln_workload_cost needs of task t: its template, a copy of its
 * params, the target and the knobs' offsets. Nothing without a model. */
static kiln_status keep_model(kiln_workload *w, const kiln_build *b, const kiln_task *t,
                              kiln_error *err)
{
    if (!t->tpl->cost || !t->params || t->params_size == 0)
        return KILN_OK;
    if (!(w->params = malloc(t->params_size)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(w->params, t->params, t->params_size);
    w->params_size = t->params_size;
    w->tpl = t->tpl;
    w->target = b->low->ctx->target;
    for (int k = 0; k < t->n_knobs; k++)
        w->offsets[k] = t->knobs[k].offset;
    return KILN_OK;
}

bool kiln_workload_cost(const kiln_workload *w, const int *values, double *cost)
{
    if (!w || !w->tpl || !w->params)
        return false;
    unsigned char buf[1024];
    void *p = w->params_size <= sizeof buf ? buf : malloc(w->params_size);
    if (!p)
        return false;
    memcpy(p, w->params, w->params_size);
    for (int k = 0; k < w->rec.n_knobs; k++)
        if (w->offsets[k] >= 0 && (size_t)w->offsets[k] + sizeof(int) <= w->params_size)
            memcpy((char *)p + w->offsets[k], &values[k], sizeof(int));
    *cost = w->tpl->cost(p, &w->target);
    if (p != buf)
        free(p);
    return *cost > 0;
}

kiln_status kiln_workload_create(const char *key, uint64_t seed, kiln_workload **out,
                                 kiln_error *err)
{
    if (!key || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_workload_create: no key");
    kiln_workload *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key))) {
        free(w);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    w->seed = seed;
    kiln_build *b = NULL;
    int task = -1;
    kiln_status s = kiln_wl_parse(key, &w->wl, err);
    if (s == KILN_OK)
        s = task_graph(w->wl, seed, &w->g, err);
    if (s == KILN_OK)
        s = task_build(w, NULL, &b, &task, err);
    if (s == KILN_OK)
        s = rec_fill(&w->rec, &b->low->tasks[task], err);
    if (s == KILN_OK)
        s = keep_model(w, b, &b->low->tasks[task], err);
    kiln_build_destroy(b);
    if (s != KILN_OK) {
        kiln_workload_destroy(w);
        return s;
    }
    *out = w;
    return KILN_OK;
}

kiln_status kiln_workload_info(const kiln_workload *w, kiln_task_info *info, kiln_error *err)
{
    if (!w || !info)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_workload_info: no workload");
    rec_info(&w->rec, w->wl->target, info);
    return KILN_OK;
}

kiln_status kiln_workload_knob(const kiln_workload *w, int k, kiln_knob_info *info,
                               kiln_error *err)
{
    if (!w || !info)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_workload_knob: no workload");
    return rec_knob(&w->rec, k, info, err);
}

/* ---- measuring ------------------------------------------------------------------------ */

/* The seeded inputs of w's graph: floats uniform in [-1, 1), others zero. */
static kiln_status make_inputs(const kiln_workload *w, kiln_tensor *in, kiln_error *err)
{
    kiln_rng rng;
    kiln_rng_seed(&rng, w->seed ^ 0x696e70757473ULL); /* "inputs" */
    for (int i = 0; i < w->g->n_inputs; i++) {
        const kiln_value *v = w->g->values[w->g->inputs[i]];
        kiln_status s = kiln_tensor_alloc(&in[i], v->dtype, &v->shape, err);
        if (s != KILN_OK) {
            for (int k = 0; k < i; k++)
                kiln_tensor_release(&in[k]);
            return s;
        }
        fill_random(&rng, v->dtype, kiln_shape_numel(&v->shape), in[i].data);
    }
    return KILN_OK;
}

/* The reference executor's outputs on the seeded inputs, once per workload. */
static kiln_status reference(kiln_workload *w, const kiln_tensor *in, kiln_error *err)
{
    if (w->ref)
        return KILN_OK;
    kiln_ref_executor *ex = NULL;
    kiln_status s = kiln_ref_executor_create(w->g, &ex, err);
    for (int i = 0; s == KILN_OK && i < w->g->n_inputs; i++)
        s = kiln_ref_executor_set_input(ex, i, &in[i], err);
    if (s == KILN_OK && (s = kiln_ref_executor_run(ex, err)) != KILN_OK)
        kiln_error_prefix(err, s, "reference executor: ");
    kiln_tensor *ref = s == KILN_OK ? calloc((size_t)w->g->n_outputs + 1, sizeof *ref) : NULL;
    if (s == KILN_OK && !ref)
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    for (; s == KILN_OK && n < w->g->n_outputs; n++) {
        const kiln_tensor *o = kiln_ref_executor_output(ex, n);
        if ((s = kiln_tensor_alloc(&ref[n], o->dtype, &o->shape, err)) == KILN_OK)
            memcpy(ref[n].data, o->data, (size_t)kiln_tensor_nbytes(o));
    }
    kiln_ref_executor_destroy(ex);
    if (s != KILN_OK) {
        for (int i = 0; ref && i < n; i++)
            kiln_tensor_release(&ref[i]);
        free(ref);
        return s;
    }
    w->ref = ref;
    w->n_ref = n;
    return KILN_OK;
}

static double elem(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_DTYPE_FLOAT32:
        return ((const float *)t->data)[i];
    case KILN_DTYPE_FLOAT64:
        return ((const double *)t->data)[i];
    default:
        return kiln_f16_to_f64(((const uint16_t *)t->data)[i]);
    }
}

/* Compares output i with the reference; *max_abs grows to the largest
 * difference. KILN_ERR_MISMATCH names the first element outside tolerance. */
static kiln_status compare(const kiln_tensor *got, const kiln_tensor *want, int i, double rtol,
                           double atol, double *max_abs, kiln_error *err)
{
    if (got->dtype != want->dtype || !kiln_shape_equal(&got->shape, &want->shape))
        return kiln_errorf(err, KILN_ERR_MISMATCH, "output %d: dtype or shape differs", i);
    int64_t n = kiln_shape_numel(&want->shape);
    if (!is_float(want->dtype)) {
        size_t es = kiln_dtype_size(want->dtype);
        for (int64_t k = 0; k < n; k++)
            if (memcmp((const char *)got->data + k * es, (const char *)want->data + k * es, es))
                return kiln_errorf(err, KILN_ERR_MISMATCH,
                                   "output %d differs from the reference at element %lld", i,
                                   (long long)k);
        return KILN_OK;
    }
    double scale = 1.0;
    for (int64_t k = 0; k < n; k++) {
        double b = fabs(elem(want, k));
        if (isfinite(b) && b > scale)
            scale = b;
    }
    int64_t bad = 0, first = -1;
    for (int64_t k = 0; k < n; k++) {
        double a = elem(got, k), b = elem(want, k);
        if ((isnan(a) && isnan(b)) || a == b)
            continue;
        double d = fabs(a - b);
        if (isfinite(d) && d > *max_abs)
            *max_abs = d;
        if (!(d <= atol * scale + rtol * fabs(b))) {
            if (first < 0)
                first = k;
            bad++;
        }
    }
    if (bad)
        return kiln_errorf(err, KILN_ERR_MISMATCH,
                           "output %d: %lld of %lld elements differ from the reference (first at "
                           "%lld: got %g, want %g)",
                           i, (long long)bad, (long long)n, (long long)first, elem(got, first),
                           elem(want, first));
    return KILN_OK;
}

typedef struct step_ctx {
    kiln_module *m;
    int step;
} step_ctx;

static kiln_status run_step(void *p, kiln_error *err)
{
    step_ctx *c = p;
    kiln_status s = kiln_module_run_step(c->m, c->step);
    return s == KILN_OK ? s : kiln_errorf(err, s, "step %d failed", c->step);
}

kiln_status kiln_workload_measure(kiln_workload *w, const kiln_measure_options *opts,
                                  kiln_measure_result *out, kiln_error *err)
{
    if (!w || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_workload_measure: no workload");
    kiln_measure_options o = opts ? *opts : (kiln_measure_options){0};
    double rtol = o.rtol > 0 ? o.rtol : 1e-4, atol = o.atol > 0 ? o.atol : 1e-4;
    kiln_compile_options co = {.cache_dir = o.cache_dir, .jobs = o.jobs};
    kiln_build *b = NULL;
    kiln_module *m = NULL;
    kiln_measure_result *r = calloc(1, sizeof *r);
    kiln_tensor *in = calloc((size_t)w->g->n_inputs + 1, sizeof *in);
    bool have_in = false;
    int task = -1;
    double t0 = kiln_driver_now();
    kiln_status s = r && in ? KILN_OK : kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == KILN_OK)
        s = task_build(w, &co, &b, &task, err);
    kiln_target host;
    if (s == KILN_OK && kiln_target_resolve(NULL, &host, NULL) == KILN_OK &&
        b->target.isa > host.isa)
        s = kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                        "the task's target is %s; this machine runs %s code at most", b->target.name,
                        host.name);
    if (s == KILN_OK && o.config && (s = kiln_build_set_config(b, task, o.config, err)) != KILN_OK)
        kiln_error_prefix(err, s, "configuration %s: ", o.config);
    if (s == KILN_OK && (s = kiln_build_link(b, NULL, err)) == KILN_OK) {
        r->build_s = kiln_driver_now() - t0;
        snprintf(r->config, sizeof r->config, "%s", b->low->tasks[task].config);
        snprintf(r->so_path, sizeof r->so_path, "%s", kiln_build_output(b));
        if (o.build_only) {
            memcpy(out, r, sizeof *r);
            goto done;
        }
    }
    kiln_module_options mo = {.num_threads = o.num_threads, .bind_threads = -1};
    if (s == KILN_OK)
        s = kiln_module_load(r->so_path, &mo, &m, err);
    if (s == KILN_OK && (s = make_inputs(w, in, err)) == KILN_OK)
        have_in = true;
    for (int i = 0; s == KILN_OK && i < w->g->n_inputs; i++)
        s = kiln_module_set_input(m, i, &in[i], err);
    if (s == KILN_OK && (s = kiln_module_run(m, err)) != KILN_OK)
        kiln_error_prefix(err, s, "running the task: ");
    if (s == KILN_OK)
        s = reference(w, in, err);
    for (int i = 0; s == KILN_OK && i < w->n_ref; i++)
        s = compare(kiln_module_output(m, i), &w->ref[i], i, rtol, atol, &r->max_abs_diff, err);
    if (s == KILN_ERR_MISMATCH && o.config)
        kiln_error_prefix(err, s, "configuration %s: ", o.config);
    /* the task's step, timed alone */
    r->step = -1;
    r->num_steps = m ? kiln_module_num_steps(m) : 0;
    for (int i = 0; s == KILN_OK && i < r->num_steps && r->step < 0; i++) {
        kiln_step_info si;
        if (kiln_module_step_info(m, i, &si) == KILN_OK && !strcmp(si.workload, w->key))
            r->step = i;
    }
    if (s == KILN_OK && r->step < 0)
        s = kiln_errorf(err, KILN_ERR_INTERNAL, "the built model has no step of the task");
    step_ctx sc = {m, r->step};
    if (o.cold_weights) {
        o.bench.preproc =
            o.cold_weights == 2 ? kiln_module_evict_weights_to_llc : kiln_module_evict_weights;
        o.bench.preproc_ctx = m;
    }
    if (s == KILN_OK)
        s = kiln_bench_function(run_step, &sc, kiln_module_num_threads(m), &o.bench, &r->time,
                                err);
    if (s == KILN_OK) {
        r->gflops = r->time.median > 0 ? w->rec.flops / r->time.median * 1e-9 : 0;
        int others = r->num_steps - 1;
        snprintf(r->measured, sizeof r->measured,
                 "step %d of %d (%s) alone: %d measurement%s of %d call%s, %d thread%s; the "
                 "other %d step%s (layout transforms around the task) not timed; inputs and "
                 "weights %s%s",
                 r->step + 1, r->num_steps, w->rec.tpl, r->time.repeat,
                 r->time.repeat == 1 ? "" : "s", r->time.number, r->time.number == 1 ? "" : "s",
                 r->time.threads, r->time.threads == 1 ? "" : "s", others,
                 others == 1 ? "" : "s",
                 o.bench.flush_cache ? "flushed from cache before each measurement"
                                     : "warm in cache",
                 o.cold_weights == 2 ? " (the weights evicted to the last-level cache before "
                                       "every call, as in a network whose weights fit it)"
                 : o.cold_weights    ? " (the weights evicted before every call, as in a network)"
                                     : "");
        memcpy(out, r, sizeof *r);
    }
done:
    kiln_module_destroy(m);
    kiln_build_destroy(b);
    if (have_in)
        for (int i = 0; i < w->g->n_inputs; i++)
            kiln_tensor_release(&in[i]);
    free(in);
    free(r);
    return s;
}
