/* ir/graph.h: the graph IR (internal to the compiler).
 *
 * A graph is values and nodes, all allocated in one arena owned by the graph.
 * Values and nodes are referred to by integer id (their index). A value is a
 * graph input, a constant (weights, with data in the arena), or the output of
 * a node. Nodes are kept in topological order: a node may only use values that
 * exist when it is added, and kiln_graph_validate checks the order.
 */
#ifndef KILN_IR_GRAPH_H
#define KILN_IR_GRAPH_H

#include <stdbool.h>

#include "ir/op.h"
#include "kiln/kiln.h"
#include "util/arena.h"

/* Memory layout of a value. ROW_MAJOR is the plain layout every importer
 * produces (NCHW for images); blocked layouts are introduced by passes. */
typedef enum kiln_layout_kind {
    KILN_LAYOUT_ROW_MAJOR = 0,
    KILN_LAYOUT_NCHWC,  /* N, C/b, H, W, b   (block = block_a) */
    KILN_LAYOUT_OIHWIO, /* O/bo, I/bi, H, W, bi, bo (block_a = bi, block_b = bo) */
} kiln_layout_kind;

typedef struct kiln_layout {
    kiln_layout_kind kind;
    int32_t block_a, block_b;
} kiln_layout;

typedef enum kiln_attr_type {
    KILN_ATTR_INT,
    KILN_ATTR_FLOAT,
    KILN_ATTR_STRING,
    KILN_ATTR_INTS,
    KILN_ATTR_FLOATS,
} kiln_attr_type;

typedef struct kiln_attr {
    const char *name;
    kiln_attr_type type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints; /* INTS: n entries */
    const float *floats; /* FLOATS: n entries */
    int n;
} kiln_attr;

typedef enum kiln_value_kind {
    KILN_VALUE_INPUT,
    KILN_VALUE_CONST,
    KILN_VALUE_NODE,
} kiln_value_kind;

typedef struct kiln_value {
    int id;
    const char *name;
    kiln_value_kind kind;
    kiln_dtype dtype; /* UNDEFINED until inferred */
    kiln_shape shape;
    kiln_layout layout;
    void *data;       /* CONST: contents in the arena, or NULL (built without weights) */
    int producer;     /* NODE: producing node id; else -1 */
    int output_index; /* NODE: which output of the producer */
    bool is_output;   /* a graph output */
} kiln_value;

/* A symbol: a named (dim_param) or unknown dim of a graph input that the
 * import bound to one extent (kiln_onnx_binding.shape over a declared dim
 * that is not a fixed value: a VM specialization, or `kiln compile
 * --input-shape`). Inputs that name one dim_param share its symbol; each
 * unknown dim is a symbol of its own (name ""). The graph's shapes hold the
 * bound extents; the symbols say which extents those were, so that a
 * shapes_bound graph's templates can leave them out of a kernel's source
 * (kiln_graph_sym_extent). */
#define KILN_MAX_SYMS 8
typedef struct kiln_sym {
    char name[48];
    int64_t extent;
} kiln_sym;

typedef struct kiln_node {
    int id;
    kiln_op op;
    const char *name;
    int n_inputs;
    int *inputs; /* value ids; -1 = optional input absent */
    int n_outputs;
    int *outputs;
    int n_attrs, cap_attrs;
    kiln_attr *attrs;
} kiln_node;

struct kiln_graph {
    kiln_arena *arena;
    const char *name;
    kiln_value **values;
    int n_values, cap_values;
    kiln_node **nodes;
    int n_nodes, cap_nodes;
    int *inputs; /* value ids of graph inputs, in order */
    int n_inputs, cap_inputs;
    int *outputs; /* value ids of graph outputs, in order */
    int n_outputs, cap_outputs;
    /* The input shapes were bound from symbolic dims (a VM specialization
     * of one input-shape class): a kernel may take an extent that varies
     * with them at run time (kiln_abi_step.extent: the dense template's
     * rows), so that the next class finds it in the object cache. */
    bool shapes_bound;
    /* the symbols the import bound (at most KILN_MAX_SYMS; more are not
     * recorded, their dims then compile as fixed extents) */
    kiln_sym syms[KILN_MAX_SYMS];
    int n_syms;
    /* not owned: the memo of weights packed before by builds of the same
     * model (util/packmemo.h; a VM's shape classes), or NULL */
    struct kiln_pack_memo *pack_memo;
    /* owned: what constants lent in place live in (the ModelProto an ONNX
     * import decoded: its large initializers are the constants' bytes),
     * released by keep_free at destroy; NULL when none */
    void *keep;
    void (*keep_free)(void *);
};

/* ---- construction (all return -1 / an error status when out of memory) -- */
kiln_status kiln_graph_create(kiln_graph **out);
/* A graph input; returns its value id. */
int kiln_graph_add_input(kiln_graph *g, const char *name, kiln_dtype dtype,
                         const kiln_shape *shape);
/* A constant; `data` (may be NULL: no weights) is copied into the arena. */
int kiln_graph_add_const(kiln_graph *g, const char *name, kiln_dtype dtype,
                         const kiln_shape *shape, const void *data);
/* A constant whose data the caller fills in place: *data receives a pointer to
 * uninitialised arena memory of the right size (or NULL when alloc_data is
 * false). */
int kiln_graph_add_const_uninit(kiln_graph *g, const char *name, kiln_dtype dtype,
                                const kiln_shape *shape, bool alloc_data, void **data);
/* A node with `n_outputs` fresh output values named "<name>" (one output) or
 * "<name>:k"; returns the node id. Inputs may be -1 for absent optional ones. */
int kiln_graph_add_node(kiln_graph *g, kiln_op op, const char *name, const int *inputs,
                        int n_inputs, int n_outputs);
/* Output value id of node `node`, index k. */
int kiln_graph_node_output(const kiln_graph *g, int node, int k);
/* Records that a graph input's dim `name` ("" for an unknown dim: always a
 * new symbol) was bound to `extent`; a name seen before keeps its first
 * extent. Silently ignored past KILN_MAX_SYMS. */
void kiln_graph_add_sym(kiln_graph *g, const char *name, int64_t extent);
/* The extent that run-time kernels of a shapes_bound graph take for `shape`
 * (kiln_abi_step.extent): the largest symbol extent above 1 among its dims,
 * 0 when no dim has one (or the symbols list is empty). A dim whose fixed
 * extent equals a symbol's by chance is taken as that symbol's: the kernel
 * is still exact for this graph, only its source then differs from another
 * class's (no sharing), never its result. */
int64_t kiln_graph_sym_extent(const kiln_sym *syms, int n_syms, const kiln_shape *shape);
/* Marks value `value` as the next graph output. */
kiln_status kiln_graph_add_output(kiln_graph *g, int value);

/* Attributes (copied into the arena; setting a name twice replaces it). */
kiln_status kiln_node_set_int(kiln_graph *g, int node, const char *name, int64_t v);
kiln_status kiln_node_set_float(kiln_graph *g, int node, const char *name, float v);
kiln_status kiln_node_set_string(kiln_graph *g, int node, const char *name, const char *v);
kiln_status kiln_node_set_ints(kiln_graph *g, int node, const char *name, const int64_t *v,
                               int n);
kiln_status kiln_node_set_floats(kiln_graph *g, int node, const char *name, const float *v,
                                 int n);

/* ---- access ------------------------------------------------------------- */
static inline kiln_value *kiln_graph_value(const kiln_graph *g, int id)
{
    return (id >= 0 && id < g->n_values) ? g->values[id] : NULL;
}
static inline kiln_node *kiln_graph_node(const kiln_graph *g, int id)
{
    return (id >= 0 && id < g->n_nodes) ? g->nodes[id] : NULL;
}

/* Attribute lookup: the attribute, or NULL if absent. */
const kiln_attr *kiln_node_attr(const kiln_node *n, const char *name);
/* Typed getters: the value, or `def` if absent. A present attribute of another
 * type also yields `def`; kiln_node_attr_check reports it. */
int64_t kiln_attr_int(const kiln_node *n, const char *name, int64_t def);
float kiln_attr_float(const kiln_node *n, const char *name, float def);
const char *kiln_attr_string(const kiln_node *n, const char *name, const char *def);
/* INTS/FLOATS: number of entries (and *v), or -1 if absent. */
int kiln_attr_ints(const kiln_node *n, const char *name, const int64_t **v);
int kiln_attr_floats(const kiln_node *n, const char *name, const float **v);
/* KILN_ERR_TYPE_MISMATCH if attribute `name` is present with a type other than
 * `type`. */
kiln_status kiln_node_attr_check(const kiln_node *n, const char *name, kiln_attr_type type,
                                 kiln_error *err);

/* Checks the types of several attributes at once (kiln_node_attr_check on each). */
typedef struct kiln_attr_spec {
    const char *name;
    kiln_attr_type type;
} kiln_attr_spec;
kiln_status kiln_node_attrs_check(const kiln_node *n, const kiln_attr_spec *specs, int count,
                                  kiln_error *err);

/* Convenience for shape-inference functions: "Conv: input 0 (X): ..." style
 * formatting of a shape into a static-size buffer. */
typedef struct kiln_shape_buf {
    char s[160];
} kiln_shape_buf;
static inline const char *kiln_shape_fmt(const kiln_shape *s, kiln_shape_buf *b)
{
    return kiln_shape_str(s, b->s, sizeof b->s);
}

/* Topological order of node ids into `order` (n_nodes entries, caller-owned).
 * KILN_ERR_INVALID_GRAPH naming a node on a cycle if there is one. */
kiln_status kiln_graph_topo_order(const kiln_graph *g, int *order, kiln_error *err);

/* MACs of one node (Conv, ConvTranspose, Gemm, MatMul; 0 otherwise). Shapes must be inferred. */
int64_t kiln_node_macs(const kiln_graph *g, const kiln_node *n);

#endif
