/* ir/graph.c: building graphs and reading attributes. */
#include "ir/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Growable id arrays live in malloc (they are resized); everything else in the
 * arena. */
static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

kiln_status kiln_graph_create(kiln_graph **out)
{
    kiln_graph *g = calloc(1, sizeof *g);
    if (!g)
        return KILN_ERR_OUT_OF_MEMORY;
    g->arena = kiln_arena_create();
    if (!g->arena) {
        free(g);
        return KILN_ERR_OUT_OF_MEMORY;
    }
    *out = g;
    return KILN_OK;
}

void kiln_graph_destroy(kiln_graph *g)
{
    if (!g)
        return;
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    kiln_arena_destroy(g->arena);
    if (g->keep && g->keep_free)
        g->keep_free(g->keep);
    free(g);
}

static int new_value(kiln_graph *g, const char *name, kiln_value_kind kind)
{
    if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(kiln_value *)))
        return -1;
    kiln_value *v = kiln_arena_calloc(g->arena, 1, sizeof *v);
    if (!v)
        return -1;
    v->id = g->n_values;
    v->name = kiln_arena_strdup(g->arena, name ? name : "");
    if (!v->name)
        return -1;
    v->kind = kind;
    v->producer = -1;
    g->values[g->n_values++] = v;
    return v->id;
}

int kiln_graph_add_input(kiln_graph *g, const char *name, kiln_dtype dtype,
                         const kiln_shape *shape)
{
    if (!grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(int)))
        return -1;
    int id = new_value(g, name, KILN_VALUE_INPUT);
    if (id < 0)
        return -1;
    g->values[id]->dtype = dtype;
    g->values[id]->shape = *shape;
    g->inputs[g->n_inputs++] = id;
    return id;
}

void kiln_graph_add_sym(kiln_graph *g, const char *name, int64_t extent)
{
    if (!name)
        name = "";
    for (int i = 0; *name && i < g->n_syms; i++)
        if (strcmp(g->syms[i].name, name) == 0)
            return;
    if (g->n_syms >= KILN_MAX_SYMS)
        return;
    kiln_sym *s = &g->syms[g->n_syms++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->extent = extent;
}

int64_t kiln_graph_sym_extent(const kiln_sym *syms, int n_syms, const kiln_shape *shape)
{
    int64_t best = 0;
    for (int i = 0; i < n_syms; i++) {
        int64_t e = syms[i].extent;
        if (e <= 1 || e <= best)
            continue;
        for (int d = 0; d < shape->rank; d++)
            if (shape->dims[d] == e) {
                best = e;
                break;
            }
    }
    return best;
}

int kiln_graph_add_const_uninit(kiln_graph *g, const char *name, kiln_dtype dtype,
                                const kiln_shape *shape, bool alloc_data, void **data)
{
    int id = new_value(g, name, KILN_VALUE_CONST);
    if (id < 0)
        return -1;
    kiln_value *v = g->values[id];
    v->dtype = dtype;
    v->shape = *shape;
    if (alloc_data) {
        kiln_tensor t = {.dtype = dtype, .shape = *shape};
        int64_t nb = kiln_tensor_nbytes(&t);
        if (nb < 0)
            return -1;
        v->data = kiln_arena_alloc(g->arena, (size_t)nb);
        if (!v->data)
            return -1;
    }
    if (data)
        *data = v->data;
    return id;
}

int kiln_graph_add_const(kiln_graph *g, const char *name, kiln_dtype dtype,
                         const kiln_shape *shape, const void *data)
{
    void *dst = NULL;
    int id = kiln_graph_add_const_uninit(g, name, dtype, shape, data != NULL, &dst);
    if (id >= 0 && data) {
        kiln_tensor t = {.dtype = dtype, .shape = *shape};
        memcpy(dst, data, (size_t)kiln_tensor_nbytes(&t));
    }
    return id;
}

int kiln_graph_add_node(kiln_graph *g, kiln_op op, const char *name, const int *inputs,
                        int n_inputs, int n_outputs)
{
    if ((unsigned)op >= KILN_OP_COUNT || n_inputs < 0 || n_outputs < 0)
        return -1;
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(kiln_node *)))
        return -1;
    kiln_node *n = kiln_arena_calloc(g->arena, 1, sizeof *n);
    if (!n)
        return -1;
    char auto_name[64];
    if (!name || !*name) {
        snprintf(auto_name, sizeof auto_name, "%s_%d", kiln_op_name(op), g->n_nodes);
        name = auto_name;
    }
    n->id = g->n_nodes;
    n->op = op;
    n->name = kiln_arena_strdup(g->arena, name);
    n->n_inputs = n_inputs;
    n->inputs = kiln_arena_memdup(g->arena, inputs, sizeof(int) * (size_t)n_inputs);
    n->n_outputs = n_outputs;
    n->outputs = kiln_arena_alloc(g->arena, sizeof(int) * (size_t)n_outputs);
    if (!n->name || !n->inputs || !n->outputs)
        return -1;
    for (int k = 0; k < n_outputs; k++) {
        char vname[512];
        if (n_outputs == 1)
            snprintf(vname, sizeof vname, "%s", name);
        else
            snprintf(vname, sizeof vname, "%s:%d", name, k);
        int vid = new_value(g, vname, KILN_VALUE_NODE);
        if (vid < 0)
            return -1;
        g->values[vid]->producer = n->id;
        g->values[vid]->output_index = k;
        n->outputs[k] = vid;
    }
    g->nodes[g->n_nodes++] = n;
    return n->id;
}

int kiln_graph_node_output(const kiln_graph *g, int node, int k)
{
    const kiln_node *n = kiln_graph_node(g, node);
    if (!n || k < 0 || k >= n->n_outputs)
        return -1;
    return n->outputs[k];
}

kiln_status kiln_graph_add_output(kiln_graph *g, int value)
{
    kiln_value *v = kiln_graph_value(g, value);
    if (!v)
        return KILN_ERR_INVALID_ARGUMENT;
    if (!grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(int)))
        return KILN_ERR_OUT_OF_MEMORY;
    v->is_output = true;
    g->outputs[g->n_outputs++] = value;
    return KILN_OK;
}

/* ---- attributes --------------------------------------------------------- */

static kiln_attr *attr_slot(kiln_graph *g, int node, const char *name)
{
    kiln_node *n = kiln_graph_node(g, node);
    if (!n || !name)
        return NULL;
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    if (n->n_attrs == n->cap_attrs) {
        int ncap = n->cap_attrs ? n->cap_attrs * 2 : 4;
        kiln_attr *na = kiln_arena_alloc(g->arena, sizeof(kiln_attr) * (size_t)ncap);
        if (!na)
            return NULL;
        if (n->n_attrs)
            memcpy(na, n->attrs, sizeof(kiln_attr) * (size_t)n->n_attrs);
        n->attrs = na;
        n->cap_attrs = ncap;
    }
    kiln_attr *a = &n->attrs[n->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = kiln_arena_strdup(g->arena, name);
    if (!a->name)
        return NULL;
    n->n_attrs++;
    return a;
}

kiln_status kiln_node_set_int(kiln_graph *g, int node, const char *name, int64_t v)
{
    kiln_attr *a = attr_slot(g, node, name);
    if (!a)
        return KILN_ERR_OUT_OF_MEMORY;
    a->type = KILN_ATTR_INT;
    a->i = v;
    return KILN_OK;
}

kiln_status kiln_node_set_float(kiln_graph *g, int node, const char *name, float v)
{
    kiln_attr *a = attr_slot(g, node, name);
    if (!a)
        return KILN_ERR_OUT_OF_MEMORY;
    a->type = KILN_ATTR_FLOAT;
    a->f = v;
    return KILN_OK;
}

kiln_status kiln_node_set_string(kiln_graph *g, int node, const char *name, const char *v)
{
    kiln_attr *a = attr_slot(g, node, name);
    if (!a)
        return KILN_ERR_OUT_OF_MEMORY;
    a->type = KILN_ATTR_STRING;
    a->s = kiln_arena_strdup(g->arena, v ? v : "");
    return a->s ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

kiln_status kiln_node_set_ints(kiln_graph *g, int node, const char *name, const int64_t *v,
                               int n)
{
    kiln_attr *a = attr_slot(g, node, name);
    if (!a || n < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    a->type = KILN_ATTR_INTS;
    a->n = n;
    a->ints = kiln_arena_memdup(g->arena, v, sizeof(int64_t) * (size_t)n);
    return a->ints ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

kiln_status kiln_node_set_floats(kiln_graph *g, int node, const char *name, const float *v,
                                 int n)
{
    kiln_attr *a = attr_slot(g, node, name);
    if (!a || n < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    a->type = KILN_ATTR_FLOATS;
    a->n = n;
    a->floats = kiln_arena_memdup(g->arena, v, sizeof(float) * (size_t)n);
    return a->floats ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

const kiln_attr *kiln_node_attr(const kiln_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t kiln_attr_int(const kiln_node *n, const char *name, int64_t def)
{
    const kiln_attr *a = kiln_node_attr(n, name);
    return (a && a->type == KILN_ATTR_INT) ? a->i : def;
}

float kiln_attr_float(const kiln_node *n, const char *name, float def)
{
    const kiln_attr *a = kiln_node_attr(n, name);
    return (a && a->type == KILN_ATTR_FLOAT) ? a->f : def;
}

const char *kiln_attr_string(const kiln_node *n, const char *name, const char *def)
{
    const kiln_attr *a = kiln_node_attr(n, name);
    return (a && a->type == KILN_ATTR_STRING) ? a->s : def;
}

int kiln_attr_ints(const kiln_node *n, const char *name, const int64_t **v)
{
    const kiln_attr *a = kiln_node_attr(n, name);
    if (!a || a->type != KILN_ATTR_INTS)
        return -1;
    if (v)
        *v = a->ints;
    return a->n;
}

int kiln_attr_floats(const kiln_node *n, const char *name, const float **v)
{
    const kiln_attr *a = kiln_node_attr(n, name);
    if (!a || a->type != KILN_ATTR_FLOATS)
        return -1;
    if (v)
        *v = a->floats;
    return a->n;
}

kiln_status kiln_node_attr_check(const kiln_node *n, const char *name, kiln_attr_type type,
                                 kiln_error *err)
{
    static const char *const tn[] = {"int", "float", "string", "ints", "floats"};
    const kiln_attr *a = kiln_node_attr(n, name);
    if (a && a->type != type)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "attribute '%s' is %s, expected %s", name,
                           tn[a->type], tn[type]);
    return KILN_OK;
}

kiln_status kiln_node_attrs_check(const kiln_node *n, const kiln_attr_spec *specs, int count,
                                  kiln_error *err)
{
    for (int i = 0; i < count; i++) {
        kiln_status s = kiln_node_attr_check(n, specs[i].name, specs[i].type, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

/* ---- public accessors --------------------------------------------------- */

int kiln_graph_num_inputs(const kiln_graph *g)
{
    return g ? g->n_inputs : 0;
}

int kiln_graph_num_outputs(const kiln_graph *g)
{
    return g ? g->n_outputs : 0;
}

static kiln_status io_info(const kiln_graph *g, const int *ids, int count, int i,
                           const char **name, kiln_dtype *dtype, kiln_shape *shape)
{
    if (!g || i < 0 || i >= count)
        return KILN_ERR_INVALID_ARGUMENT;
    const kiln_value *v = g->values[ids[i]];
    if (name)
        *name = v->name;
    if (dtype)
        *dtype = v->dtype;
    if (shape)
        *shape = v->shape;
    return KILN_OK;
}

kiln_status kiln_graph_input_info(const kiln_graph *g, int i, const char **name,
                                  kiln_dtype *dtype, kiln_shape *shape)
{
    return io_info(g, g ? g->inputs : NULL, g ? g->n_inputs : 0, i, name, dtype, shape);
}

kiln_status kiln_graph_output_info(const kiln_graph *g, int i, const char **name,
                                   kiln_dtype *dtype, kiln_shape *shape)
{
    return io_info(g, g ? g->outputs : NULL, g ? g->n_outputs : 0, i, name, dtype, shape);
}
