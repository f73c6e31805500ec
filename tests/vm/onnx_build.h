/* tests/vm/onnx_build.h: building small ONNX models in C for the VM tests
 * (test_vm.c, test_vm_kernels.c, test_vm_symbolic.c): tensor ValueInfos,
 * nodes, int attributes, graphs, and a model packed into a file in a fresh
 * temporary directory. Header-only; the protos point into the caller's
 * storage (vi_store, the node and attribute structs) and strings. */
#ifndef KILN_TESTS_VM_ONNX_BUILD_H
#define KILN_TESTS_VM_ONNX_BUILD_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "test_support.h"

typedef struct vi_store {
    Onnx__ValueInfoProto vi;
    Onnx__TypeProto tp;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorShapeProto sp;
    Onnx__TensorShapeProto__Dimension d[KILN_MAX_RANK];
    Onnx__TensorShapeProto__Dimension *dp[KILN_MAX_RANK];
} vi_store;

/* A tensor ValueInfo; dims < 0 are symbolic ("n"); rank < 0: no shape. */
static inline Onnx__ValueInfoProto *kt_onnx_vi(vi_store *s, const char *name, kiln_dtype dt,
                                               int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto v0 = ONNX__VALUE_INFO_PROTO__INIT;
    Onnx__TypeProto t0 = ONNX__TYPE_PROTO__INIT;
    Onnx__TypeProto__Tensor tt0 = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TensorShapeProto sp0 = ONNX__TENSOR_SHAPE_PROTO__INIT;
    s->vi = v0, s->tp = t0, s->tt = tt0, s->sp = sp0;
    s->vi.name = (char *)name;
    s->vi.type = &s->tp;
    s->tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    s->tp.tensor_type = &s->tt;
    s->tt.has_elem_type = 1;
    s->tt.elem_type = kiln_dtype_to_onnx(dt);
    if (rank >= 0) {
        s->tt.shape = &s->sp;
        s->sp.n_dim = (size_t)rank;
        s->sp.dim = s->dp;
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            s->d[i] = d0;
            if (dims[i] >= 0) {
                s->d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                s->d[i].dim_value = dims[i];
            } else {
                s->d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                s->d[i].dim_param = "n";
            }
            s->dp[i] = &s->d[i];
        }
    }
    return &s->vi;
}

/* A tensor ValueInfo with named dims: dims[i] >= 0 is a number; < 0 is
 * symbolic, named params[i] (a dim_param), or unknown (no value) when
 * params[i] is NULL. */
static inline Onnx__ValueInfoProto *kt_onnx_vi_sym(vi_store *s, const char *name, kiln_dtype dt,
                                                   int rank, const int64_t *dims,
                                                   const char *const *params)
{
    kt_onnx_vi(s, name, dt, rank, dims);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) {
            Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            s->d[i] = d0;
            if (params[i]) {
                s->d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                s->d[i].dim_param = (char *)params[i];
            }
        }
    return &s->vi;
}

static inline void kt_onnx_node(Onnx__NodeProto *n, const char *op, char **ins, int n_in,
                                char **outs, int n_out)
{
    Onnx__NodeProto n0 = ONNX__NODE_PROTO__INIT;
    *n = n0;
    n->op_type = (char *)op;
    n->input = ins;
    n->n_input = (size_t)n_in;
    n->output = outs;
    n->n_output = (size_t)n_out;
}

/* An int attribute name = v. */
static inline Onnx__AttributeProto *kt_onnx_attr_int(Onnx__AttributeProto *a, const char *name,
                                                     int64_t v)
{
    Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
    *a = a0;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    return a;
}

/* An ints attribute name = v[n] (not copied). */
static inline Onnx__AttributeProto *kt_onnx_attr_ints(Onnx__AttributeProto *a, const char *name,
                                                      const int64_t *v, int n)
{
    Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
    *a = a0;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)n;
    a->ints = (int64_t *)v;
    return a;
}

/* A float32 initializer `name` of shape dims[rank] over data[n] (not copied). */
static inline Onnx__TensorProto *kt_onnx_init_f32(Onnx__TensorProto *tp, const char *name,
                                                  int rank, int64_t *dims, float *data,
                                                  int64_t n)
{
    Onnx__TensorProto t0 = ONNX__TENSOR_PROTO__INIT;
    *tp = t0;
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tp->n_dims = (size_t)rank;
    tp->dims = dims;
    tp->has_raw_data = 1;
    tp->raw_data.len = (size_t)n * sizeof(float);
    tp->raw_data.data = (uint8_t *)data;
    return tp;
}

/* A graph attribute name = g (a body of If, Loop or Scan). */
static inline Onnx__AttributeProto *kt_onnx_attr_graph(Onnx__AttributeProto *a, const char *name,
                                                       Onnx__GraphProto *g)
{
    Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
    *a = a0;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    a->g = g;
    return a;
}

/* A graph `name` of n_node nodes with n_in inputs and n_out outputs (the
 * graph of a model, or a body graph for an attribute). */
static inline void kt_onnx_graph(Onnx__GraphProto *g, const char *name, Onnx__NodeProto **nodes,
                                 int n_node, Onnx__ValueInfoProto **ins, int n_in,
                                 Onnx__ValueInfoProto **outs, int n_out)
{
    Onnx__GraphProto g0 = ONNX__GRAPH_PROTO__INIT;
    *g = g0;
    g->name = (char *)name;
    g->n_node = (size_t)n_node;
    g->node = nodes;
    g->n_input = (size_t)n_in;
    g->input = ins;
    g->n_output = (size_t)n_out;
    g->output = outs;
}

/* Writes path[cap]: a file in a fresh temporary directory (removed when the
 * test exits), its name printf(fmt, ...); returns path. */
static inline char *kt_onnx_temp_path(char *path, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline char *kt_onnx_temp_path(char *path, size_t cap, const char *fmt, ...)
{
    char file[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(file, sizeof file, fmt, ap);
    va_end(ap);
    const char *dir = kt_tempdir_until_exit();
    assert_non_null(dir);
    snprintf(path, cap, "%s/%s", dir, file);
    return path;
}

/* A model of graph g (default domain at `opset`, IR version 8), packed into
 * a malloc'ed buffer of *size bytes. */
static inline uint8_t *kt_onnx_pack(Onnx__GraphProto *g, int64_t opset, size_t *size)
{
    Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    op.domain = "";
    op.has_version = 1;
    op.version = opset;
    Onnx__OperatorSetIdProto *ops[1] = {&op};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = ops;
    m.graph = g;
    *size = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*size ? *size : 1);
    assert_non_null(buf);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

/* Packs a model of graph g (default domain at `opset`, IR version 8) into path. */
static inline void kt_onnx_write(const char *path, Onnx__GraphProto *g, int64_t opset)
{
    size_t n = 0;
    uint8_t *buf = kt_onnx_pack(g, opset, &n);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

/* kt_onnx_graph and kt_onnx_write in one: a model of that graph at `opset`. */
static inline void kt_onnx_write_graph(const char *path, const char *name, Onnx__NodeProto **nodes,
                                       int n_node, Onnx__ValueInfoProto **ins, int n_in,
                                       Onnx__ValueInfoProto **outs, int n_out, int64_t opset)
{
    Onnx__GraphProto g;
    kt_onnx_graph(&g, name, nodes, n_node, ins, n_in, outs, n_out);
    kt_onnx_write(path, &g, opset);
}

#endif
