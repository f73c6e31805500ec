/* import/onnx/onnx.h: the ONNX importer's internal interface.
 *
 * The importer runs in four steps:
 *   decode.c   unpacks the ModelProto (with a size budget and a nesting limit),
 *              reads opset imports, turns initializers into constants and the
 *              remaining graph inputs into kiln graph inputs;
 *   import.c   walks the nodes in file order, and for each one picks the
 *              converter (registry.c), checks its attributes, runs it, and
 *              infers the shapes of the kiln nodes it emitted, so that later
 *              converters (Shape, Squeeze, Softmax coercion) see static shapes;
 *   convert_*.c  one function per ONNX op (family per file), which either
 *              emits kiln nodes or, when every input is constant, computes the
 *              result at import time with fold.c and binds a new constant;
 *   import.c   finally binds the graph outputs, prunes unused constants and
 *              infers shapes over the whole graph.
 *
 * Converters see ONNX names only through the context: onnx_in() resolves input
 * k to a kiln value id, onnx_bind() maps output k to one.
 */
#ifndef KILN_IMPORT_ONNX_ONNX_H
#define KILN_IMPORT_ONNX_ONNX_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/graph.h"
#include "kiln/kiln.h"
#include "onnx.pb-c.h"
#include "util/arena.h"

/* ---- options ------------------------------------------------------------ */

/* Binds a graph input by name: either a static shape for an input whose
 * declared shape is symbolic or missing (dtype still comes from the model), or
 * a constant value, which turns the input into a constant (for inputs that feed
 * shape parameters, e.g. a Reshape's target shape in a conformance test). */
typedef struct kiln_onnx_binding {
    const char *name;
    const kiln_shape *shape;  /* may be NULL */
    const kiln_tensor *value; /* may be NULL; copied */
} kiln_onnx_binding;

/* Where a failed import stopped (kiln_onnx_options.failure). */
typedef struct kiln_onnx_failure {
    int node;        /* index of the ONNX node whose conversion failed, -1: none */
    bool data_param; /* it failed on a parameter input that is run-time data
                        ("must be a constant"): the VM runs such nodes (src/vm) */
    int input;       /* that input's index in the node, -1: none */
} kiln_onnx_failure;

typedef struct kiln_onnx_options {
    const kiln_onnx_binding *bindings;
    int n_bindings;
    /* Largest model accepted (bytes); 0 means the protobuf limit, 2 GiB. */
    size_t max_model_size;
    /* When not NULL, set on every import: where a failure stopped it. */
    kiln_onnx_failure *failure;
    /* The VM's split (src/vm): when not NULL, one flag per ONNX node of the
     * main graph, in and out. A node flagged on entry is skipped; so is a
     * node that reads a value no converted node produced (an output of a
     * skipped node), and one whose conversion fails on a parameter input
     * that is run-time data (what it emitted stays unused): both get
     * flagged. The import then stops after the nodes, with KILN_OK and a
     * graph that is only a by-product (its outputs are not bound): the
     * caller destroys it. One import classifies the whole graph. */
    bool *split;
} kiln_onnx_options;

kiln_status kiln_onnx_load_ex(const char *path, const kiln_onnx_options *opts, kiln_graph **out,
                              kiln_error *err);
kiln_status kiln_onnx_load_buffer_ex(const void *buf, size_t size, const char *base_dir,
                                     const kiln_onnx_options *opts, kiln_graph **out,
                                     kiln_error *err);
/* kiln_onnx_load_buffer_ex of a model already decoded (by onnx_decode_model;
 * the VM's pieces of one), which stays the caller's: no pack and decode
 * round trip (a BERT-base specialization: two of 435 MB each). The graph's
 * large constants are the model's raw_data, lent in place, so the model
 * must outlive the graph and whatever borrows its constants. */
kiln_status kiln_onnx_load_proto(const Onnx__ModelProto *model, const char *base_dir,
                                 const kiln_onnx_options *opts, kiln_graph **out, kiln_error *err);

/* ---- name -> value id map (import.c) ------------------------------------ */

typedef struct onnx_map {
    const char **keys; /* borrowed: strings live as long as the ModelProto */
    int *vals;
    size_t cap, count;
} onnx_map;

/* The value id bound to `name`, or -1. */
int onnx_map_get(const onnx_map *m, const char *name);
/* Binds name -> id (replacing an existing binding); false when out of memory. */
bool onnx_map_put(onnx_map *m, const char *name, int id);
void onnx_map_free(onnx_map *m);

/* ---- the converter context ---------------------------------------------- */

typedef struct onnx_ctx {
    kiln_graph *g;
    const Onnx__ModelProto *model;
    const char *base_dir;          /* external data directory, or NULL */
    const kiln_onnx_options *opts; /* never NULL */
    onnx_map names;                /* ONNX value name -> kiln value id */
    int64_t opset;                 /* default-domain opset of the model */
    kiln_arena *scratch;           /* per-import temporaries */
    size_t model_size;
    size_t folded_bytes; /* constants created by folding so far */
    bool borrowed;       /* the model is the caller's (kiln_onnx_load_proto): its
                            initializers' bytes are kept, not released once copied */

    /* the node being converted */
    const Onnx__NodeProto *node;
    const char *node_name; /* node->name, or "<op_type>_<index>" */
    int node_index;
    int first_node;  /* kiln nodes from this id on were emitted for it */
    bool data_param; /* a "must be a constant" error was raised */
    int data_input;  /* ... for that input of the node */
} onnx_ctx;

/* Converter: reads c->node, emits kiln nodes / constants, binds every output.
 * Attributes have been checked against the registry entry's list (names and
 * types) before the call. */
typedef kiln_status (*onnx_convert_fn)(onnx_ctx *c, kiln_error *err);

typedef struct onnx_converter {
    const char *op_type;
    int since_version;
    onnx_convert_fn fn;
    /* Accepted attributes, "name:type" separated by spaces, type one of
     * int, float, string, ints, floats, tensor ("axis:int perm:ints"). */
    const char *attrs;
} onnx_converter;

/* registry.c: the entry for (domain, op_type) with the highest since_version
 * <= opset. NULL and an UNSUPPORTED error naming the op, node and opset if
 * there is none. Also checks the node's attributes against the entry. */
kiln_status onnx_find_converter(const onnx_ctx *c, const onnx_converter **out, kiln_error *err);

/* Converter tables, one per family file, terminated by an entry with
 * op_type == NULL. */
extern const onnx_converter onnx_nn_converters[];
extern const onnx_converter onnx_elemwise_converters[];
extern const onnx_converter onnx_shape_converters[];
extern const onnx_converter onnx_norm_converters[];
extern const onnx_converter onnx_reduce_converters[];
extern const onnx_converter onnx_data_converters[];
extern const onnx_converter onnx_composite_converters[];
extern const onnx_converter onnx_misc_converters[];

/* ---- helpers for converters (import.c) ---------------------------------- */

/* Error with the standard prefix "node 'n' (Op, opset N): ". */
kiln_status onnx_node_error(const onnx_ctx *c, kiln_status s, kiln_error *err, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
/* Adds that prefix to an error set by code that names no node (folding,
 * tensor loading, shape inference); returns the error's status. */
kiln_status onnx_node_prefix(const onnx_ctx *c, kiln_status s, kiln_error *err);

/* Number of inputs present (trailing empty names dropped). */
int onnx_n_in(const onnx_ctx *c);
int onnx_n_out(const onnx_ctx *c);
/* Value id of input k, or -1 if absent (k out of range or empty name). */
int onnx_in(const onnx_ctx *c, int k);
const kiln_value *onnx_in_value(const onnx_ctx *c, int k);
/* Whether input k is present and a constant with data. */
bool onnx_in_const(const onnx_ctx *c, int k);
/* Whether output k is requested (present, non-empty name). */
bool onnx_out_used(const onnx_ctx *c, int k);

/* Input k as a constant vector of integers (int64 or int32, rank <= 1), copied
 * into scratch memory: *n entries at *v. A non-constant input is UNSUPPORTED
 * ("input k (what) must be a constant: kiln takes it as an attribute"). */
kiln_status onnx_in_ints(onnx_ctx *c, int k, const char *what, const int64_t **v, int *n,
                         kiln_error *err);
/* Input k as a constant vector of floats (any numeric dtype but bool, rank
 * <= 1), converted into scratch memory; the same "must be a constant" error. */
kiln_status onnx_in_floats(onnx_ctx *c, int k, const char *what, const float **v, int *n,
                           kiln_error *err);
/* Input k as one constant float (any numeric dtype, one element). */
kiln_status onnx_in_scalar(onnx_ctx *c, int k, const char *what, double *v, kiln_error *err);
/* Input k, a constant, as a tensor view (data borrowed from the graph); the
 * same "must be a constant" error. For ops whose result kiln computes at
 * conversion (convert_data.c). */
kiln_status onnx_in_tensor(onnx_ctx *c, int k, const char *what, kiln_tensor *t,
                           kiln_error *err);

/* Input k, which the op requires: NULL with an error naming it if absent. */
const kiln_value *onnx_need(const onnx_ctx *c, int k, const char *what, kiln_error *err);
/* Input 0 of an op of which kiln computes output 0 only: fails first like
 * onnx_no_outputs_from(c, 1), then like onnx_need(c, 0, what). */
kiln_status onnx_need_in0(const onnx_ctx *c, const char *what, const kiln_value **x,
                          kiln_error *err);
/* Fails with UNSUPPORTED if any output from `first` on is requested. */
kiln_status onnx_no_outputs_from(const onnx_ctx *c, int first, kiln_error *err);
/* The common case: one kiln node `op` taking the ONNX node's inputs in order
 * (absent ones as -1), with the attributes `attrs` copied, output 0 bound. */
kiln_status onnx_convert_simple(onnx_ctx *c, kiln_op op, const char *attrs, kiln_error *err);
/* Defines the converter NAME that is just onnx_convert_simple(OP, ATTRS). */
#define CONV_SIMPLE(NAME, OP, ATTRS)                                                              \
    static kiln_status NAME(onnx_ctx *c, kiln_error *err)                                         \
    {                                                                                             \
        return onnx_convert_simple(c, OP, ATTRS, err);                                            \
    }

/* Attributes of the current node (types were checked by the registry). */
const Onnx__AttributeProto *onnx_attr(const onnx_ctx *c, const char *name);
int64_t onnx_attr_int(const onnx_ctx *c, const char *name, int64_t def);
float onnx_attr_float(const onnx_ctx *c, const char *name, float def);
/* NUL-terminated copy (scratch memory), or def. */
const char *onnx_attr_string(onnx_ctx *c, const char *name, const char *def);
/* INTS: entry count and *v, or -1 if absent. */
int onnx_attr_ints(const onnx_ctx *c, const char *name, const int64_t **v);
/* The attribute's effective type (ONNX AttributeType; inferred from the
 * populated field for old files that leave `type` unset). */
int onnx_attr_type(const Onnx__AttributeProto *a);

/* Emits a kiln node named after the ONNX node (plus `suffix` when the
 * converter emits several), returns its id or -1 (error set). */
int onnx_emit(onnx_ctx *c, kiln_op op, const char *suffix, const int *inputs, int n_inputs,
              int n_outputs, kiln_error *err);
/* Copies the named ONNX attributes (those present) onto kiln node `node`,
 * names separated by spaces. */
kiln_status onnx_copy_attrs(onnx_ctx *c, int node, const char *names, kiln_error *err);
/* Maps ONNX output k to value `id`. */
kiln_status onnx_bind(onnx_ctx *c, int k, int id, kiln_error *err);
/* Emits one kiln node `op` on the value ids ins[0..n_in) (-1: absent) with
 * n_out outputs, sets the kiln attributes attrs[0..n_attrs), then copies the
 * ONNX attributes named in `copy` (onnx_copy_attrs; NULL: none) and binds
 * ONNX outputs 0..n_out-1 to the node's. */
kiln_status onnx_emit_bind(onnx_ctx *c, kiln_op op, const int *ins, int n_in,
                           const kiln_attr *attrs, int n_attrs, const char *copy, int n_out,
                           kiln_error *err);
/* Constructors for such attribute arrays (onnx_emit_or_fold takes them too). */
static inline kiln_attr onnx_attr_i(const char *name, int64_t v)
{
    kiln_attr a = {.name = name, .type = KILN_ATTR_INT, .i = v};
    return a;
}
static inline kiln_attr onnx_attr_is(const char *name, const int64_t *v, int n)
{
    kiln_attr a = {.name = name, .type = KILN_ATTR_INTS, .ints = v, .n = n};
    return a;
}
static inline kiln_attr onnx_attr_fs(const char *name, const float *v, int n)
{
    kiln_attr a = {.name = name, .type = KILN_ATTR_FLOATS, .floats = v, .n = n};
    return a;
}
static inline kiln_attr onnx_attr_f(const char *name, float v)
{
    kiln_attr a = {.name = name, .type = KILN_ATTR_FLOAT, .f = v};
    return a;
}
static inline kiln_attr onnx_attr_s(const char *name, const char *v)
{
    kiln_attr a = {.name = name, .type = KILN_ATTR_STRING, .s = v};
    return a;
}
/* Emits a kiln Reshape of value `in` to the static shape `to` (allowzero set
 * when `to` has a 0 extent, which is then meant literally) and binds output 0
 * to it. */
kiln_status onnx_emit_reshape(onnx_ctx *c, int in, const kiln_shape *to, kiln_error *err);

/* Adds `t` (data copied) as a constant named after output k and binds it.
 * Counts against the folding budget. */
kiln_status onnx_bind_const(onnx_ctx *c, int k, const kiln_tensor *t, kiln_error *err);
/* The end of a computation at import time that returned `s` and, when OK, *t
 * (owned): binds output 0 to *t and releases it, or prefixes the error
 * (onnx_node_prefix). */
kiln_status onnx_bind_folded(onnx_ctx *c, kiln_status s, kiln_tensor *t, kiln_error *err);
/* Adds a constant owned by the caller's tensor (data copied); returns the
 * value id or -1 (error set). */
int onnx_add_const(onnx_ctx *c, const char *name, const kiln_tensor *t, kiln_error *err);

/* A constant value as a tensor view (borrowed data). */
static inline kiln_tensor onnx_value_tensor(const kiln_value *v)
{
    kiln_tensor t = {.dtype = v->dtype, .shape = v->shape, .data = v->data};
    return t;
}

/* decode.c: a TensorProto (initializer, Constant attribute) into *out,
 * resolving external data relative to c->base_dir. */
kiln_status onnx_tensor_load(const onnx_ctx *c, const Onnx__TensorProto *tp, kiln_tensor *out,
                             kiln_error *err);
/* decode.c: unpacks `buf` into *model with an allocation budget and a
 * nesting-depth check. */
kiln_status onnx_decode_model(const void *buf, size_t size, Onnx__ModelProto **model,
                              kiln_error *err);
void onnx_free_model(Onnx__ModelProto *model);
/* decode.c: the graph inputs' types and shapes (what the import checks
 * first), read from the wire form without decoding the initializers: a
 * model with a symbolic input dim fails before its weights are copied.
 * KILN_OK when they pass or the bytes are malformed (the decode reports
 * that). */
kiln_status onnx_check_inputs_early(const void *buf, size_t size, const kiln_onnx_options *opts,
                                    kiln_error *err);
/* decode.c: initializers -> constants, graph inputs -> kiln inputs. */
kiln_status onnx_decode_graph_inputs(onnx_ctx *c, kiln_error *err);
/* decode.c: checks the declared type of graph outputs against the inferred. */
kiln_status onnx_check_outputs(onnx_ctx *c, kiln_error *err);

/* ---- constant folding (fold.c) ------------------------------------------
 * Every function computes into *out (malloc'ed data: kiln_tensor_release) and
 * refuses results larger than ONNX_FOLD_MAX_BYTES. Messages name no node: the
 * caller prefixes it. */
#define ONNX_FOLD_MAX_BYTES ((int64_t)64 << 20)
#define ONNX_MAX_PARAM_INTS 4096

kiln_status onnx_fold_expand(const kiln_tensor *x, const int64_t *shape, int n, kiln_tensor *out,
                             kiln_error *err);
kiln_status onnx_fold_gather(const kiln_tensor *data, const kiln_tensor *indices, int64_t axis,
                             kiln_tensor *out, kiln_error *err);
kiln_status onnx_fold_concat(const kiln_tensor *const *ins, int n, int64_t axis, kiln_tensor *out,
                             kiln_error *err);
/* starts/ends/axes/steps of n entries; axes and steps may be NULL. */
kiln_status onnx_fold_slice(const kiln_tensor *x, const int64_t *starts, const int64_t *ends,
                            const int64_t *axes, const int64_t *steps, int n, kiln_tensor *out,
                            kiln_error *err);
/* A copy of x with a new shape of the same element count. */
kiln_status onnx_fold_reshape(const kiln_tensor *x, const kiln_shape *shape, kiln_tensor *out,
                              kiln_error *err);
/* A tensor of `shape` filled with the single element of `value`. */
kiln_status onnx_fold_fill(const kiln_shape *shape, const kiln_tensor *value, kiln_tensor *out,
                           kiln_error *err);

/* Element access as double / int64 for any numeric dtype (fold.c). */
double onnx_load_f64(kiln_dtype t, const void *data, int64_t i);
int64_t onnx_load_i64(kiln_dtype t, const void *data, int64_t i);
bool onnx_dtype_is_int(kiln_dtype t);

#endif
