/* import/zoo/builder.h: a small network builder for the zoo.
 *
 * The builder wraps a graph, the weight generator and a *sticky* status: every
 * call returns a value id, or -1 once anything has failed (out of memory, or a
 * shape that does not fit, which is a bug in a network definition), and every
 * call given a -1 input does nothing and returns -1. Network code can
 * therefore read like its torchvision original,
 *
 *     x = zb_conv(b, "conv1", x, 64, 7, 2, 3, 1, false);
 *     x = zb_bn(b, "bn1", x, 1e-5f);
 *     x = zb_relu(b, "relu", x);
 *
 * and check the status once, in zb_finish.
 *
 * Every node's output shapes come from the op registry's shape inference, run
 * on the node as soon as it is complete (zb_infer) and recorded in the graph,
 * so layer constructors can size their weights from the input's shape and take
 * only what torchvision's take (out_channels, not in_channels). kiln_zoo_build
 * runs the whole-graph inference again at the end, which derives the same.
 *
 * Weights are drawn from the generator in creation order: a layer's weight,
 * then its bias; batch-norm scale, bias, running mean, running variance. With
 * weights off, constants get shapes but no data and nothing is drawn.
 *
 * Names follow torchvision's module paths: a layer "layer1.0.conv1" gets the
 * node name "layer1.0.conv1" and constants "layer1.0.conv1.weight"/".bias".
 */
#ifndef KILN_IMPORT_ZOO_BUILDER_H
#define KILN_IMPORT_ZOO_BUILDER_H

#include "import/zoo/zoo.h"

typedef struct zb {
    kiln_graph *g;
    kiln_rng *rng;
    bool weights;
    kiln_error *err;
    kiln_status status;
    char names[32][256]; /* ring of buffers for zb_name */
    int name_next;
} zb;

void zb_init(zb *b, kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
/* Marks `out` as the graph output and returns the sticky status (with its
 * message in the error record). */
kiln_status zb_finish(zb *b, int out);

/* A formatted name in one of 32 rotating buffers: valid until 32 more
 * zb_name calls. Node and constant names are copied into the graph. */
const char *zb_name(zb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The shape of value `v` as recorded in the graph (NULL for -1 or a node
 * output not inferred yet), and one extent (negative axis counts from the end;
 * -1 when unknown). */
const kiln_shape *zb_shape(const zb *b, int v);
int64_t zb_dim(const zb *b, int v, int axis);

/* ---- values --------------------------------------------------------------- */
int zb_input(zb *b, const char *name, kiln_shape shape);
/* A float parameter filled uniformly in [lo, hi). */
int zb_param(zb *b, const char *name, kiln_shape shape, float lo, float hi);
/* A float scalar (rank 0) holding `v`; always has data, draws nothing. */
int zb_scalar(zb *b, const char *name, float v);

/* ---- generic nodes -------------------------------------------------------- */
/* A one-output node; returns its output value id. Its shape is unknown until
 * zb_infer: set the attributes first. */
int zb_node(zb *b, kiln_op op, const char *name, const int *in, int n_in);
/* Runs the op registry's shape inference on the node producing value `v`,
 * recording its outputs' dtype and shape in the graph; returns v, or -1 (with
 * KILN_ERR_INTERNAL and the registry's message) when the op refuses its inputs
 * or attributes. Every layer below calls it on the node it adds. */
int zb_infer(zb *b, int v);
/* Attributes of the node producing value `v`. */
void zb_attr_int(zb *b, int v, const char *name, int64_t x);
void zb_attr_float(zb *b, int v, const char *name, float x);
void zb_attr_ints(zb *b, int v, const char *name, const int64_t *x, int n);

/* ---- layers --------------------------------------------------------------- */
/* Conv2d with a square kernel and symmetric padding; weight [out, in/groups,
 * k, k] with He-uniform init, optional bias. */
int zb_conv(zb *b, const char *name, int x, int64_t out_ch, int k, int stride, int pad,
            int groups, bool bias);
/* Conv2d with kernel kh x kw, strides sh/sw, padding ph (top/bottom) and pw
 * (left/right). */
int zb_conv_rect(zb *b, const char *name, int x, int64_t out_ch, int kh, int kw, int sh, int sw,
                 int ph, int pw, int groups, bool bias);
/* BatchNorm2d (inference) with gamma in [0.8, 1.2), beta and running mean in
 * [-0.1, 0.1), running variance in [0.8, 1.2). */
int zb_bn(zb *b, const char *name, int x, float eps);
/* The same with gamma drawn in [gamma_lo, gamma_hi): a small gamma on the last
 * batch-norm of a residual branch keeps deep residual stacks in range. */
int zb_bn_gamma(zb *b, const char *name, int x, float eps, float gamma_lo, float gamma_hi);
int zb_relu(zb *b, const char *name, int x);
/* ReLU6 as Clip(min 0, max 6). */
int zb_relu6(zb *b, const char *name, int x);
/* conv (no bias) -> batch-norm -> ReLU (relu_name NULL: no activation). */
int zb_conv_bn_relu(zb *b, const char *conv_name, const char *bn_name, const char *relu_name,
                    int x, int64_t out_ch, int k, int stride, int pad, int groups, float eps);
/* Gemm(x, w, bias, transB = 1): x [m, k], w [n, k] (torchvision's Linear
 * layout), bias [n] or -1. */
int zb_gemm(zb *b, const char *name, int x, int w, int bias);
/* Linear as Gemm(transB = 1) with weight [out, in] (He-uniform) and bias. */
int zb_linear(zb *b, const char *name, int x, int64_t out_features, bool bias);
/* The same with weights uniform in [-bound, bound). */
int zb_linear_bound(zb *b, const char *name, int x, int64_t out_features, bool bias,
                    float bound);
int zb_maxpool(zb *b, const char *name, int x, int k, int stride, int pad, bool ceil_mode);
int zb_avgpool(zb *b, const char *name, int x, int k, int stride, int pad,
               bool count_include_pad);
int zb_global_avgpool(zb *b, const char *name, int x);
int zb_flatten(zb *b, const char *name, int x, int axis);
/* LayerNormalization over the last axis with weight ~1 and bias ~0. */
int zb_layernorm(zb *b, const char *name, int x, float eps);

/* ---- tensor ops ----------------------------------------------------------- */
int zb_unary(zb *b, kiln_op op, const char *name, int x);
/* Add/Sub/Mul/Div with numpy broadcasting. */
int zb_binary(zb *b, kiln_op op, const char *name, int x, int y);
int zb_add(zb *b, const char *name, int x, int y);
int zb_mul(zb *b, const char *name, int x, int y);
int zb_matmul(zb *b, const char *name, int x, int y);
int zb_concat(zb *b, const char *name, const int *xs, int n, int axis);
int zb_reshape(zb *b, const char *name, int x, const int64_t *dims, int rank);
int zb_transpose(zb *b, const char *name, int x, const int64_t *perm, int rank);
int zb_slice(zb *b, const char *name, int x, const int64_t *starts, const int64_t *ends,
             const int64_t *axes, int n);
/* Split along `axis` into n parts of sizes `sizes`; output value ids go to
 * outs[0..n-1] (all -1 on failure). Returns 0, or -1 on failure. */
int zb_split(zb *b, const char *name, int x, int axis, const int64_t *sizes, int n, int *outs);
int zb_softmax(zb *b, const char *name, int x, int axis);

#endif
