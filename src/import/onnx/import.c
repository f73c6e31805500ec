/* import/onnx/import.c: the conversion driver and the converters' helpers.
 *
 * Nodes are converted in file order (ONNX requires a topological order). For
 * each node: every non-empty input must name a value already bound (graph
 * input, initializer or an earlier node's output); the registry picks the
 * converter for the model's opset and checks the attributes; the converter
 * emits kiln nodes or folds to constants and binds every output; then the
 * shapes of the kiln nodes it emitted are inferred at once, so that later
 * converters can fold Shape and compute Squeeze/Softmax rewrites on static
 * shapes. Finally graph outputs are bound (an output that is a graph input or
 * a constant, or repeats an earlier output, gets an Identity node so that every
 * output is a node's own value), unused constants are dropped and shapes are
 * inferred over the whole graph. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"
#include "util/file.h"

/* ---- name map: open addressing, seeded FNV-1a ---------------------------
 * The seed comes from the address of the key array (randomised by ASLR, and
 * new at every growth, when all keys are rehashed), so that a hostile file
 * cannot choose names that all land in one probe chain. */

static uint64_t hash_str(const char *s, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    /* finalise so that the low bits (the bucket) depend on every byte */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t map_seed(const void *keys)
{
    uint64_t x = (uint64_t)(uintptr_t)keys + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int onnx_map_get(const onnx_map *m, const char *name)
{
    if (!m->cap || !name)
        return -1;
    size_t mask = m->cap - 1;
    for (size_t i = hash_str(name, map_seed(m->keys)) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], name) == 0)
            return m->vals[i];
    }
}

static void map_insert(const char **keys, int *vals, size_t cap, const char *name, int id,
                       bool *added)
{
    size_t mask = cap - 1;
    for (size_t i = hash_str(name, map_seed(keys)) & mask;; i = (i + 1) & mask) {
        if (!keys[i]) {
            keys[i] = name;
            vals[i] = id;
            *added = true;
            return;
        }
        if (strcmp(keys[i], name) == 0) {
            vals[i] = id;
            *added = false;
            return;
        }
    }
}

bool onnx_map_put(onnx_map *m, const char *name, int id)
{
    if (!name)
        return false;
    if ((m->count + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        const char **nk = calloc(ncap, sizeof *nk);
        int *nv = calloc(ncap, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return false;
        }
        bool added;
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                map_insert(nk, nv, ncap, m->keys[i], m->vals[i], &added);
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    bool added = false;
    map_insert(m->keys, m->vals, m->cap, name, id, &added);
    if (added)
        m->count++;
    return true;
}

void onnx_map_free(onnx_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- helpers for converters ---------------------------------------------- */

kiln_status onnx_node_error(const onnx_ctx *c, kiln_status s, kiln_error *err, const char *fmt,
                            ...)
{
    if (!err)
        return s;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kiln_errorf(err, s, "node '%s' (%s, opset %lld): %s", c->node_name,
                       c->node->op_type ? c->node->op_type : "", (long long)c->opset, msg);
}

kiln_status onnx_node_prefix(const onnx_ctx *c, kiln_status s, kiln_error *err)
{
    return kiln_error_prefix(err, s, "node '%s' (%s, opset %lld): ", c->node_name,
                             c->node->op_type, (long long)c->opset);
}

int onnx_n_in(const onnx_ctx *c)
{
    int n = (int)c->node->n_input;
    while (n > 0 && (!c->node->input[n - 1] || !*c->node->input[n - 1]))
        n--;
    return n;
}

int onnx_n_out(const onnx_ctx *c)
{
    return (int)c->node->n_output;
}

int onnx_in(const onnx_ctx *c, int k)
{
    if (k < 0 || (size_t)k >= c->node->n_input)
        return -1;
    const char *name = c->node->input[k];
    if (!name || !*name)
        return -1;
    return onnx_map_get(&c->names, name);
}

const kiln_value *onnx_in_value(const onnx_ctx *c, int k)
{
    return kiln_graph_value(c->g, onnx_in(c, k));
}

bool onnx_in_const(const onnx_ctx *c, int k)
{
    const kiln_value *v = onnx_in_value(c, k);
    return v && v->kind == KILN_VALUE_CONST && v->data;
}

bool onnx_out_used(const onnx_ctx *c, int k)
{
    return k >= 0 && (size_t)k < c->node->n_output && c->node->output[k] && *c->node->output[k];
}

static const char *in_name(const onnx_ctx *c, int k)
{
    return (k >= 0 && (size_t)k < c->node->n_input && c->node->input[k]) ? c->node->input[k] : "";
}

/* Input k of a parameter kiln takes as an attribute: present, and a constant
 * with data (the onnx_in_* readers' first checks and messages). */
static kiln_status const_param(const onnx_ctx *c, int k, const char *what, const kiln_value **x,
                               kiln_error *err)
{
    *x = onnx_in_value(c, k);
    if (!*x)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input %d (%s) is missing", k,
                               what);
    if ((*x)->kind != KILN_VALUE_CONST || !(*x)->data) {
        ((onnx_ctx *)c)->data_param = true;
        ((onnx_ctx *)c)->data_input = k;
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "input %d (%s, '%s') must be a constant: kiln takes it as an "
                               "attribute and cannot compute it at run time",
                               k, what, in_name(c, k));
    }
    return KILN_OK;
}

/* onnx_in_ints (into *ints) and, when ints is NULL, onnx_in_floats (into
 * *floats): input k as a constant vector converted into scratch memory. */
static kiln_status const_vector(onnx_ctx *c, int k, const char *what, const int64_t **ints,
                                const float **floats, int *n, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = const_param(c, k, what, &x, err);
    if (s != KILN_OK)
        return s;
    int64_t cnt = kiln_shape_numel(&x->shape);
    if (!ints) {
        if (x->shape.rank > 1 || cnt < 0 || cnt > ONNX_MAX_PARAM_INTS ||
            x->dtype == KILN_DTYPE_BOOL)
            return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                                   "input %d (%s) must be a numeric vector of at most %d entries",
                                   k, what, ONNX_MAX_PARAM_INTS);
    } else if (x->dtype != KILN_DTYPE_INT64 && x->dtype != KILN_DTYPE_INT32) {
        return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err,
                               "input %d (%s) is %s, expected int64", k, what,
                               kiln_dtype_name(x->dtype));
    } else if (x->shape.rank > 1) {
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "input %d (%s) has rank %d, expected a vector", k, what,
                               (int)x->shape.rank);
    } else if (cnt < 0 || cnt > ONNX_MAX_PARAM_INTS) {
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "input %d (%s) has %lld entries", k,
                               what, (long long)cnt);
    }
    size_t size = ints ? sizeof(int64_t) : sizeof(float);
    void *out = kiln_arena_alloc(c->scratch, size * (size_t)(cnt ? cnt : 1));
    if (!out)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < cnt; i++) {
        if (ints)
            ((int64_t *)out)[i] = onnx_load_i64(x->dtype, x->data, i);
        else
            ((float *)out)[i] = (float)onnx_load_f64(x->dtype, x->data, i);
    }
    if (ints)
        *ints = out;
    else
        *floats = out;
    *n = (int)cnt;
    return KILN_OK;
}

kiln_status onnx_in_ints(onnx_ctx *c, int k, const char *what, const int64_t **v, int *n,
                         kiln_error *err)
{
    return const_vector(c, k, what, v, NULL, n, err);
}

kiln_status onnx_in_floats(onnx_ctx *c, int k, const char *what, const float **v, int *n,
                           kiln_error *err)
{
    return const_vector(c, k, what, NULL, v, n, err);
}

kiln_status onnx_in_scalar(onnx_ctx *c, int k, const char *what, double *v, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = const_param(c, k, what, &x, err);
    if (s != KILN_OK)
        return s;
    if (kiln_shape_numel(&x->shape) != 1)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "input %d (%s) must have exactly one element", k, what);
    *v = onnx_load_f64(x->dtype, x->data, 0);
    return KILN_OK;
}

kiln_status onnx_in_tensor(onnx_ctx *c, int k, const char *what, kiln_tensor *t,
                           kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = const_param(c, k, what, &x, err);
    if (s == KILN_OK)
        *t = onnx_value_tensor(x);
    return s;
}

const Onnx__AttributeProto *onnx_attr(const onnx_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        if (a->name && strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

int onnx_attr_type(const Onnx__AttributeProto *a)
{
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return (int)a->type;
    /* IR version 1 files leave `type` unset: go by the populated field */
    if (a->has_f)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings)
        return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

int64_t onnx_attr_int(const onnx_ctx *c, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return (a && onnx_attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) ? a->i : def;
}

float onnx_attr_float(const onnx_ctx *c, const char *name, float def)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return (a && onnx_attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) ? a->f : def;
}

const char *onnx_attr_string(onnx_ctx *c, const char *name, const char *def)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    if (!a || onnx_attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        return def;
    char *s = kiln_arena_alloc(c->scratch, a->s.len + 1);
    if (!s)
        return def;
    if (a->s.len)
        memcpy(s, a->s.data, a->s.len);
    s[a->s.len] = '\0';
    return s;
}

int onnx_attr_ints(const onnx_ctx *c, const char *name, const int64_t **v)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    if (!a || onnx_attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return -1;
    if (a->n_ints > ONNX_MAX_PARAM_INTS)
        return -1;
    *v = a->ints;
    return (int)a->n_ints;
}

int onnx_emit(onnx_ctx *c, kiln_op op, const char *suffix, const int *inputs, int n_inputs,
              int n_outputs, kiln_error *err)
{
    char name[512];
    if (suffix)
        snprintf(name, sizeof name, "%s/%s", c->node_name, suffix);
    else
        snprintf(name, sizeof name, "%s", c->node_name);
    int id = kiln_graph_add_node(c->g, op, name, inputs, n_inputs, n_outputs);
    if (id < 0)
        kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return id;
}

kiln_status onnx_copy_attrs(onnx_ctx *c, int node, const char *names, kiln_error *err)
{
    const char *p = names;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len)
            break;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        p += len;
        const Onnx__AttributeProto *a = onnx_attr(c, name);
        if (!a)
            continue;
        kiln_status s = KILN_OK;
        switch (onnx_attr_type(a)) {
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
            s = kiln_node_set_int(c->g, node, name, a->i);
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
            s = kiln_node_set_float(c->g, node, name, a->f);
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
            s = kiln_node_set_string(c->g, node, name, onnx_attr_string(c, name, ""));
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
            if (a->n_ints > ONNX_MAX_PARAM_INTS)
                return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                       "attribute '%s' has %zu entries", name, a->n_ints);
            s = kiln_node_set_ints(c->g, node, name, a->ints, (int)a->n_ints);
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
            if (a->n_floats > ONNX_MAX_PARAM_INTS)
                return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                       "attribute '%s' has %zu entries", name, a->n_floats);
            s = kiln_node_set_floats(c->g, node, name, a->floats, (int)a->n_floats);
            break;
        default:
            return onnx_node_error(c, KILN_ERR_INTERNAL, err,
                                   "attribute '%s' cannot be copied onto a kiln node", name);
        }
        if (s != KILN_OK)
            return kiln_errorf(err, s, "out of memory");
    }
    return KILN_OK;
}

kiln_status onnx_bind(onnx_ctx *c, int k, int id, kiln_error *err)
{
    if (!onnx_out_used(c, k))
        return KILN_OK;
    const char *name = c->node->output[k];
    if (onnx_map_get(&c->names, name) >= 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err,
                               "output '%s' is already defined (ONNX values are assigned once)",
                               name);
    kiln_value *v = kiln_graph_value(c->g, id);
    if (!v)
        return onnx_node_error(c, KILN_ERR_INTERNAL, err, "output %d bound to no value", k);
    /* a value the converter created for this output takes the ONNX name */
    if (v->kind == KILN_VALUE_NODE && v->producer >= c->first_node) {
        const char *nm = kiln_arena_strdup(c->g->arena, name);
        if (nm)
            v->name = nm;
    }
    if (!onnx_map_put(&c->names, name, id))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return KILN_OK;
}

static kiln_status set_attr(kiln_graph *g, int node, const kiln_attr *a)
{
    switch (a->type) {
    case KILN_ATTR_INT: return kiln_node_set_int(g, node, a->name, a->i);
    case KILN_ATTR_FLOAT: return kiln_node_set_float(g, node, a->name, a->f);
    case KILN_ATTR_STRING: return kiln_node_set_string(g, node, a->name, a->s);
    case KILN_ATTR_INTS: return kiln_node_set_ints(g, node, a->name, a->ints, a->n);
    case KILN_ATTR_FLOATS: return kiln_node_set_floats(g, node, a->name, a->floats, a->n);
    }
    return KILN_ERR_INTERNAL;
}

kiln_status onnx_emit_bind(onnx_ctx *c, kiln_op op, const int *ins, int n_in,
                           const kiln_attr *attrs, int n_attrs, const char *copy, int n_out,
                           kiln_error *err)
{
    int node = onnx_emit(c, op, NULL, ins, n_in, n_out, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s;
    for (int i = 0; i < n_attrs; i++) {
        s = set_attr(c->g, node, &attrs[i]);
        if (s != KILN_OK)
            return kiln_errorf(err, s, "out of memory");
    }
    if (copy && (s = onnx_copy_attrs(c, node, copy, err)) != KILN_OK)
        return s;
    for (int k = 0; k < n_out; k++) {
        s = onnx_bind(c, k, kiln_graph_node_output(c->g, node, k), err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

kiln_status onnx_emit_reshape(onnx_ctx *c, int in, const kiln_shape *to, kiln_error *err)
{
    kiln_attr a[2] = {onnx_attr_is("shape", to->dims, to->rank), onnx_attr_i("allowzero", 1)};
    bool has_zero = false;
    for (int d = 0; d < to->rank; d++)
        has_zero |= to->dims[d] == 0;
    return onnx_emit_bind(c, KILN_OP_RESHAPE, &in, 1, a, has_zero ? 2 : 1, NULL, 1, err);
}

int onnx_add_const(onnx_ctx *c, const char *name, const kiln_tensor *t, kiln_error *err)
{
    void *dst = NULL;
    int id = kiln_graph_add_const_uninit(c->g, name, t->dtype, &t->shape, true, &dst);
    if (id < 0) {
        kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "cannot allocate constant '%s'", name);
        return -1;
    }
    int64_t nb = kiln_tensor_nbytes(t);
    if (nb > 0)
        memcpy(dst, t->data, (size_t)nb);
    return id;
}

kiln_status onnx_bind_const(onnx_ctx *c, int k, const kiln_tensor *t, kiln_error *err)
{
    if (!onnx_out_used(c, k))
        return KILN_OK;
    int64_t nb = kiln_tensor_nbytes(t);
    size_t budget = ((size_t)256 << 20) + c->model_size;
    if (nb < 0 || (size_t)nb > budget - c->folded_bytes)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "constants computed at import time exceed %zu bytes", budget);
    c->folded_bytes += (size_t)nb;
    int id = onnx_add_const(c, c->node->output[k], t, err);
    if (id < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    return onnx_bind(c, k, id, err);
}

kiln_status onnx_bind_folded(onnx_ctx *c, kiln_status s, kiln_tensor *t, kiln_error *err)
{
    if (s != KILN_OK)
        return onnx_node_prefix(c, s, err);
    s = onnx_bind_const(c, 0, t, err);
    kiln_tensor_release(t);
    return s;
}

const kiln_value *onnx_need(const onnx_ctx *c, int k, const char *what, kiln_error *err)
{
    const kiln_value *v = onnx_in_value(c, k);
    if (!v)
        onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "required input %d (%s) is missing", k,
                        what);
    return v;
}

kiln_status onnx_need_in0(const onnx_ctx *c, const char *what, const kiln_value **x,
                          kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    *x = onnx_need(c, 0, what, err);
    return *x ? KILN_OK : err ? err->status : KILN_ERR_INVALID_GRAPH;
}

kiln_status onnx_no_outputs_from(const onnx_ctx *c, int first, kiln_error *err)
{
    for (int k = first; k < onnx_n_out(c); k++)
        if (onnx_out_used(c, k))
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "output %d ('%s') is not supported: kiln computes only the "
                                   "first %d output(s) of this op",
                                   k, c->node->output[k], first);
    return KILN_OK;
}

kiln_status onnx_convert_simple(onnx_ctx *c, kiln_op op, const char *attrs, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    int n = onnx_n_in(c);
    int *ins = kiln_arena_alloc(c->scratch, sizeof *ins * (size_t)(n + 1));
    if (!ins)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < n; k++)
        ins[k] = onnx_in(c, k);
    return onnx_emit_bind(c, op, ins, n, NULL, 0, attrs, 1, err);
}

/* ---- the driver ------------------------------------------------------------ */

static kiln_status infer_new_nodes(onnx_ctx *c, int first, kiln_error *err)
{
    kiln_graph *g = c->g;
    for (int i = first; i < g->n_nodes; i++) {
        kiln_node *n = g->nodes[i];
        const kiln_op_info *info = kiln_op_get(n->op);
        const kiln_value *in64[64], **ins = in64;
        kiln_value *out64[64], **outs = out64;
        if (n->n_inputs > 64)
            ins = kiln_arena_alloc(c->scratch, sizeof *ins * (size_t)n->n_inputs);
        if (n->n_outputs > 64)
            outs = kiln_arena_alloc(c->scratch, sizeof *outs * (size_t)n->n_outputs);
        if (!ins || !outs)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (n->n_inputs < info->min_inputs || n->n_inputs > info->max_inputs)
            return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                                   "%d inputs, kiln's %s takes %d to %d", n->n_inputs,
                                   info->name, info->min_inputs, info->max_inputs);
        for (int k = 0; k < n->n_inputs; k++) {
            ins[k] = kiln_graph_value(g, n->inputs[k]);
            if (!ins[k] && k < info->min_inputs)
                return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                                       "required input %d of %s is missing", k, info->name);
        }
        for (int k = 0; k < n->n_outputs; k++)
            outs[k] = g->values[n->outputs[k]];
        kiln_status s = info->infer(n, ins, outs, err);
        if (s != KILN_OK)
            return onnx_node_prefix(c, s, err);
    }
    return KILN_OK;
}

static kiln_status convert_node(onnx_ctx *c, size_t index, kiln_error *err)
{
    const Onnx__NodeProto *np = c->model->graph->node[index];
    char gen_name[96];
    c->node = np;
    c->node_index = (int)index;
    if (!np->op_type || !*np->op_type)
        return kiln_errorf(err, KILN_ERR_PARSE, "node %zu has no op_type", index);
    if (np->name && *np->name) {
        c->node_name = np->name;
    } else {
        snprintf(gen_name, sizeof gen_name, "%.60s_%zu", np->op_type, index);
        c->node_name = gen_name;
    }
    for (size_t k = 0; k < np->n_input; k++) {
        const char *in = np->input[k];
        if (in && *in && onnx_map_get(&c->names, in) < 0)
            return onnx_node_error(c, KILN_ERR_PARSE, err,
                                   "input '%s' is not a graph input, an initializer or the "
                                   "output of an earlier node",
                                   in);
    }
    if (np->n_output == 0)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "the node has no outputs");
    const onnx_converter *conv;
    kiln_status s = onnx_find_converter(c, &conv, err);
    if (s != KILN_OK)
        return s;
    int first = c->g->n_nodes;
    c->first_node = first;
    s = conv->fn(c, err);
    if (s != KILN_OK)
        return s;
    s = infer_new_nodes(c, first, err);
    if (s != KILN_OK)
        return s;
    for (size_t k = 0; k < np->n_output; k++)
        if (onnx_out_used(c, (int)k) && onnx_map_get(&c->names, np->output[k]) < 0)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "output %zu ('%s') is not produced by kiln's conversion", k,
                                   np->output[k]);
    c->node_name = NULL;
    c->node = NULL;
    return KILN_OK;
}

/* Graph outputs: every output must be its own node's value. */
static kiln_status bind_outputs(onnx_ctx *c, kiln_error *err)
{
    const Onnx__GraphProto *gp = c->model->graph;
    if (gp->n_output == 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        int id = name ? onnx_map_get(&c->names, name) : -1;
        if (id < 0)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "graph output '%s' is not produced by any node",
                               name ? name : "");
        kiln_value *v = kiln_graph_value(c->g, id);
        if (v->kind != KILN_VALUE_NODE || v->is_output) {
            int node = kiln_graph_add_node(c->g, KILN_OP_IDENTITY, name, &id, 1, 1);
            if (node < 0)
                return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            id = kiln_graph_node_output(c->g, node, 0);
            kiln_value *nv = kiln_graph_value(c->g, id);
            nv->dtype = v->dtype;
            nv->shape = v->shape;
            v = nv;
        }
        const char *nm = kiln_arena_strdup(c->g->arena, name);
        if (!nm || kiln_graph_add_output(c->g, id) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        v->name = nm;
    }
    return KILN_OK;
}

/* Drops constants nothing uses (folded intermediates, aliased duplicates),
 * renumbering value ids. */
static kiln_status prune_constants(kiln_graph *g, kiln_error *err)
{
    char *used = calloc((size_t)(g->n_values ? g->n_values : 1), 1);
    int *remap = malloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    if (!used || !remap) {
        free(used);
        free(remap);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++)
            if (g->nodes[i]->inputs[k] >= 0)
                used[g->nodes[i]->inputs[k]] = 1;
    for (int i = 0; i < g->n_outputs; i++)
        used[g->outputs[i]] = 1;
    int n = 0;
    for (int i = 0; i < g->n_values; i++) {
        kiln_value *v = g->values[i];
        if (v->kind == KILN_VALUE_CONST && !used[i]) {
            remap[i] = -1;
            continue;
        }
        remap[i] = n;
        v->id = n;
        g->values[n++] = v;
    }
    g->n_values = n;
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node *nd = g->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] >= 0)
                nd->inputs[k] = remap[nd->inputs[k]];
        for (int k = 0; k < nd->n_outputs; k++)
            nd->outputs[k] = remap[nd->outputs[k]];
    }
    for (int i = 0; i < g->n_inputs; i++)
        g->inputs[i] = remap[g->inputs[i]];
    for (int i = 0; i < g->n_outputs; i++)
        g->outputs[i] = remap[g->outputs[i]];
    free(used);
    free(remap);
    return KILN_OK;
}

static kiln_status read_opsets(onnx_ctx *c, kiln_error *err)
{
    const Onnx__ModelProto *m = c->model;
    c->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = m->opset_import[i];
        const char *d = op->domain ? op->domain : "";
        if (*d == '\0' || strcmp(d, "ai.onnx") == 0)
            c->opset = op->has_version ? op->version : 1;
    }
    if (c->opset < 0) {
        if (m->n_opset_import == 0 && m->has_ir_version && m->ir_version < 3) {
            c->opset = 1; /* before opset imports existed */
            return KILN_OK;
        }
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "the model imports no opset of the default ONNX domain");
    }
    if (c->opset < 1 || c->opset > 1000)
        return kiln_errorf(err, KILN_ERR_PARSE, "default-domain opset %lld is out of range",
                           (long long)c->opset);
    return KILN_OK;
}

/* Whether every input of np names a value converted so far (the split's
 * test for reading a skipped node's output). */
static bool inputs_defined(const onnx_ctx *c, const Onnx__NodeProto *np)
{
    for (size_t k = 0; k < np->n_input; k++)
        if (np->input[k] && *np->input[k] && onnx_map_get(&c->names, np->input[k]) < 0)
            return false;
    return true;
}

static kiln_status import_model(onnx_ctx *c, kiln_error *err)
{
    const Onnx__ModelProto *m = c->model;
    if (c->opts->failure)
        *c->opts->failure = (kiln_onnx_failure){.node = -1, .input = -1};
    if (!m->graph)
        return kiln_errorf(err, KILN_ERR_PARSE, "the model has no graph");
    kiln_status s = read_opsets(c, err);
    if (s != KILN_OK)
        return s;
    if (m->graph->name && *m->graph->name)
        c->g->name = kiln_arena_strdup(c->g->arena, m->graph->name);
    s = onnx_decode_graph_inputs(c, err);
    if (s != KILN_OK)
        return s;
    bool *split = c->opts->split;
    for (size_t i = 0; i < m->graph->n_node; i++) {
        c->data_param = false;
        c->data_input = -1;
        if (split && (split[i] || !inputs_defined(c, m->graph->node[i]))) {
            split[i] = true;
            continue;
        }
        s = convert_node(c, i, err);
        if (s != KILN_OK && split && c->data_param) {
            /* a run-time parameter: the node goes to the VM's dynamic part */
            const Onnx__NodeProto *np = m->graph->node[i];
            for (size_t k = 0; k < np->n_output; k++)
                if (np->output[k] && *np->output[k] && !onnx_map_put(&c->names, np->output[k], -1))
                    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            c->node = NULL;
            c->node_name = NULL;
            split[i] = true;
            kiln_error_clear(err);
            s = KILN_OK;
            continue;
        }
        if (s != KILN_OK) {
            if (c->opts->failure)
                *c->opts->failure = (kiln_onnx_failure){
                    .node = (int)i, .data_param = c->data_param, .input = c->data_input};
            return s;
        }
    }
    if (split)
        return KILN_OK; /* classification only: the caller destroys the graph */
    s = bind_outputs(c, err);
    if (s == KILN_OK)
        s = prune_constants(c->g, err);
    if (s == KILN_OK)
        s = kiln_graph_infer_shapes(c->g, err);
    if (s == KILN_OK)
        s = onnx_check_outputs(c, err);
    return s;
}

static const kiln_onnx_options default_opts = {0};

/* Imports model; `borrowed`: it stays the caller's, whole (else its
 * initializers' bytes are released as they are copied). */
static kiln_status import_proto(const Onnx__ModelProto *model, size_t size, bool borrowed,
                                const char *base_dir, const kiln_onnx_options *opts,
                                kiln_graph **out, kiln_error *err)
{
    onnx_ctx c = {.base_dir = base_dir, .opts = opts, .model = model, .model_size = size,
                  .borrowed = borrowed};
    kiln_status s = KILN_OK;
    c.scratch = kiln_arena_create();
    if (!c.scratch || kiln_graph_create(&c.g) != KILN_OK) {
        s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    s = import_model(&c, err);
done:
    if (s != KILN_OK) {
        kiln_graph_destroy(c.g);
        c.g = NULL;
    }
    onnx_map_free(&c.names);
    kiln_arena_destroy(c.scratch);
    if (s == KILN_OK)
        *out = c.g;
    return s;
}

static void free_model(void *model)
{
    onnx_free_model(model);
}

/* Converts an unpacked model, which the graph then owns: its large
 * initializers are lent to the graph's constants in place (decoded aligned),
 * not copied, so a model's weights take fresh memory once (the decode), not
 * twice (BERT-base: 440 MB). Freed here on failure. */
static kiln_status import_decoded(Onnx__ModelProto *model, size_t size, const char *base_dir,
                                  const kiln_onnx_options *opts, kiln_graph **out,
                                  kiln_error *err)
{
    kiln_status s = import_proto(model, size, true, base_dir, opts, out, err);
    if (s != KILN_OK) {
        onnx_free_model(model);
        return s;
    }
    (*out)->keep = model;
    (*out)->keep_free = free_model;
    return KILN_OK;
}

kiln_status kiln_onnx_load_proto(const Onnx__ModelProto *model, const char *base_dir,
                                 const kiln_onnx_options *opts, kiln_graph **out, kiln_error *err)
{
    if (!model || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no model or output graph pointer");
    if (!opts)
        opts = &default_opts;
    return import_proto(model, onnx__model_proto__get_packed_size(model), true, base_dir, opts,
                        out, err);
}

static size_t max_size(const kiln_onnx_options *opts)
{
    return opts->max_model_size ? opts->max_model_size : (size_t)INT32_MAX;
}

kiln_status kiln_onnx_load_buffer_ex(const void *buf, size_t size, const char *base_dir,
                                     const kiln_onnx_options *opts, kiln_graph **out,
                                     kiln_error *err)
{
    if (!out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no output graph pointer");
    if (!opts)
        opts = &default_opts;
    if (size > max_size(opts))
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "the model is %zu bytes, above the %zu-byte limit", size,
                           max_size(opts));
    Onnx__ModelProto *model = NULL;
    kiln_status s = onnx_check_inputs_early(buf, size, opts, err);
    if (s == KILN_OK)
        s = onnx_decode_model(buf, size, &model, err);
    if (s != KILN_OK)
        return s;
    return import_decoded(model, size, base_dir, opts, out, err);
}

kiln_status kiln_onnx_load_ex(const char *path, const kiln_onnx_options *opts, kiln_graph **out,
                              kiln_error *err)
{
    if (!path || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no model path or output pointer");
    if (!opts)
        opts = &default_opts;
    kiln_file_bytes fb;
    kiln_status s = kiln_file_map(path, max_size(opts), &fb, err);
    if (s != KILN_OK)
        return s;
    /* the file's bytes are not needed once unpacked: release them before
     * the conversion copies the weights into the graph */
    Onnx__ModelProto *model = NULL;
    size_t size = fb.size;
    s = onnx_check_inputs_early(fb.data, size, opts, err);
    if (s == KILN_OK)
        s = onnx_decode_model(fb.data, size, &model, err);
    kiln_file_release(&fb);
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "%s: ", path);
    /* the directory holding the model, for external data */
    char *dir = strdup(path);
    if (!dir) {
        onnx_free_model(model);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    s = import_decoded(model, size, dir, opts, out, err);
    free(dir);
    if (s != KILN_OK)
        kiln_error_prefix(err, s, "%s: ", path);
    return s;
}

kiln_status kiln_onnx_load(const char *path, kiln_graph **out, kiln_error *err)
{
    return kiln_onnx_load_ex(path, NULL, out, err);
}

kiln_status kiln_onnx_load_buffer(const void *buf, size_t size, const char *base_dir,
                                  kiln_graph **out, kiln_error *err)
{
    return kiln_onnx_load_buffer_ex(buf, size, base_dir, NULL, out, err);
}
