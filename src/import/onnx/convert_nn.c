/* import/onnx/convert_nn.c: converters for the neural-network ops:
 * convolution (and transposed), pooling (with MaxPool's Indices), dense
 * layers, Resize/Upsample, GridSample, the recurrent ops, Dropout and
 * Flatten. kiln's attributes carry ONNX's names, so most of these copy
 * attributes. Resize's roi/scales/sizes inputs become the kiln attributes
 * "roi", "scales" and "sizes" (they must be constants; an empty tensor counts
 * as absent; roi is read only for tf_crop_and_resize); Upsample and Resize-10
 * become a Resize with asymmetric coordinates and floor rounding. The
 * recurrent ops' "activations" list of strings becomes one comma-separated
 * string. Dropout is the identity at inference; its mask output becomes an
 * all-true constant; training_mode must be a constant false, or true with a
 * constant ratio of 0 (also the identity). */
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "import/onnx/onnx.h"
#include "util/error.h"

CONV_SIMPLE(conv_conv, KILN_OP_CONV, "auto_pad dilations group kernel_shape pads strides")

/* Emits kiln op `op` with the ONNX node's inputs (absent ones as -1) and
 * `n_out` outputs, copies `attrs` and binds every requested output. Returns
 * the node id through *node_out when not NULL. */
static kiln_status emit_multi(onnx_ctx *c, kiln_op op, int n_out, const char *attrs,
                              int *node_out, kiln_error *err)
{
    int n = onnx_n_in(c), ins[16];
    if (n > 16)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "%d inputs", n);
    for (int k = 0; k < n; k++)
        ins[k] = onnx_in(c, k);
    int node = onnx_emit(c, op, NULL, ins, n, n_out, err);
    if (node < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = attrs ? onnx_copy_attrs(c, node, attrs, err) : KILN_OK;
    for (int k = 0; s == KILN_OK && k < n_out; k++)
        if (onnx_out_used(c, k))
            s = onnx_bind(c, k, kiln_graph_node_output(c->g, node, k), err);
    if (node_out)
        *node_out = node;
    return s;
}

static kiln_status conv_maxpool(onnx_ctx *c, kiln_error *err)
{
    int n_out = onnx_out_used(c, 1) ? 2 : 1;
    kiln_status s = onnx_no_outputs_from(c, 2, err);
    if (s != KILN_OK)
        return s;
    return emit_multi(c, KILN_OP_MAXPOOL, n_out,
                      "auto_pad ceil_mode dilations kernel_shape pads strides storage_order", NULL,
                      err);
}

static kiln_status conv_lppool(onnx_ctx *c, kiln_error *err)
{
    int node;
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s == KILN_OK)
        s = emit_multi(c, KILN_OP_LPPOOL, 1, "auto_pad ceil_mode dilations kernel_shape pads strides",
                       &node, err);
    const Onnx__AttributeProto *p = onnx_attr(c, "p");
    if (s != KILN_OK || !p)
        return s;
    int64_t pv = p->i; /* opset 1 had a float p */
    if (onnx_attr_type(p) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        pv = (int64_t)p->f;
        if ((float)pv != p->f)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "p = %g is not an integer", (double)p->f);
    }
    if (kiln_node_set_int(c->g, node, "p", pv) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return KILN_OK;
}

CONV_SIMPLE(conv_global_maxpool, KILN_OP_GLOBALMAXPOOL, NULL)
CONV_SIMPLE(conv_conv_transpose, KILN_OP_CONVTRANSPOSE,
            "auto_pad dilations group kernel_shape output_padding output_shape pads strides")
CONV_SIMPLE(conv_grid_sample, KILN_OP_GRIDSAMPLE, "align_corners mode padding_mode")

/* Whether input k is present with at least one element. */
static bool in_nonempty(const onnx_ctx *c, int k)
{
    const kiln_value *v = onnx_in_value(c, k);
    return v && kiln_shape_numel(&v->shape) != 0;
}

/* Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample
 * (opset 7: scales attribute; 9: X, scales). */
static kiln_status resize_common(onnx_ctx *c, bool legacy, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = onnx_need_in0(c, "X", &x, err);
    if (s != KILN_OK)
        return s;
    bool upsample = strcmp(c->node->op_type, "Upsample") == 0;
    int k_roi = legacy ? -1 : 1, k_scales = legacy ? 1 : 2, k_sizes = legacy ? -1 : 3;
    const float *scales = NULL, *roi = NULL;
    const int64_t *sizes = NULL;
    int ns = -1, nr = -1, nz = -1;
    const Onnx__AttributeProto *sa = upsample ? onnx_attr(c, "scales") : NULL;
    if (sa) {
        scales = sa->floats;
        ns = (int)sa->n_floats;
    } else if (in_nonempty(c, k_scales)) {
        /* computed from constants or static shapes: folded first */
        onnx_in_const_eval(c, k_scales, "scales", err, &s);
        if (s != KILN_OK ||
            (s = onnx_in_floats(c, k_scales, "scales", &scales, &ns, err)) != KILN_OK)
            return s;
    }
    if (k_sizes >= 0 && in_nonempty(c, k_sizes)) {
        if ((s = onnx_in_ints_eval(c, k_sizes, "sizes", &sizes, &nz, err)) != KILN_OK)
            return s;
    }
    const char *ct = legacy ? "asymmetric"
                            : onnx_attr_string(c, "coordinate_transformation_mode", "half_pixel");
    if (k_roi >= 0 && strcmp(ct, "tf_crop_and_resize") == 0 && in_nonempty(c, k_roi)) {
        if ((s = onnx_in_floats(c, k_roi, "roi", &roi, &nr, err)) != KILN_OK)
            return s;
    }
    if (ns < 0 && nz < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                               "neither scales nor sizes is given");
    const char *mode = onnx_attr_string(c, "mode", "nearest");
    if (upsample && strcmp(mode, "bilinear") == 0) /* Upsample-7 spelling */
        mode = "linear";
    kiln_attr a[6] = {onnx_attr_s("mode", mode)};
    int na = 1;
    if (ns >= 0 && nz < 0)
        a[na++] = onnx_attr_fs("scales", scales, ns);
    if (nz >= 0)
        a[na++] = onnx_attr_is("sizes", sizes, nz);
    if (nr >= 0)
        a[na++] = onnx_attr_fs("roi", roi, nr);
    if (legacy) {
        a[na++] = onnx_attr_s("coordinate_transformation_mode", "asymmetric");
        a[na++] = onnx_attr_s("nearest_mode", "floor");
    }
    int in = x->id;
    return onnx_emit_bind(c, KILN_OP_RESIZE, &in, 1, a, na,
                          legacy ? NULL
                                 : "coordinate_transformation_mode cubic_coeff_a exclude_outside "
                                   "extrapolation_value nearest_mode",
                          1, err);
}

static kiln_status conv_resize10(onnx_ctx *c, kiln_error *err)
{
    return resize_common(c, true, err);
}

static kiln_status conv_resize(onnx_ctx *c, kiln_error *err)
{
    return resize_common(c, false, err);
}

/* RNN, GRU, LSTM: inputs in ONNX order; the activations list is joined. */
static kiln_status recurrent(onnx_ctx *c, kiln_op op, int max_out, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, max_out, err);
    if (s != KILN_OK)
        return s;
    int n_out = 1;
    for (int k = 0; k < max_out; k++)
        if (onnx_out_used(c, k))
            n_out = k + 1;
    int node;
    s = emit_multi(c, op, n_out,
                   "hidden_size direction clip layout input_forget linear_before_reset "
                   "activation_alpha activation_beta",
                   &node, err);
    const Onnx__AttributeProto *a = onnx_attr(c, "activations");
    if (s != KILN_OK || !a || a->n_strings == 0)
        return s;
    size_t len = 0;
    for (size_t i = 0; i < a->n_strings; i++)
        len += a->strings[i].len + 1;
    if (len > 4096)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "attribute 'activations' is too long");
    char *joined = kiln_arena_alloc(c->scratch, len + 1), *p = joined;
    if (!joined)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < a->n_strings; i++) {
        size_t l = a->strings[i].len;
        if (memchr(a->strings[i].data, ',', l) || memchr(a->strings[i].data, '\0', l))
            return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                                   "activation %zu is not a plain name", i);
        if (i)
            *p++ = ',';
        memcpy(p, a->strings[i].data, l);
        p += l;
    }
    *p = '\0';
    if (kiln_node_set_string(c->g, node, "activations", joined) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return KILN_OK;
}

static kiln_status conv_rnn(onnx_ctx *c, kiln_error *err)
{
    return recurrent(c, KILN_OP_RNN, 2, err);
}

static kiln_status conv_gru(onnx_ctx *c, kiln_error *err)
{
    return recurrent(c, KILN_OP_GRU, 2, err);
}

static kiln_status conv_lstm(onnx_ctx *c, kiln_error *err)
{
    return recurrent(c, KILN_OP_LSTM, 3, err);
}

CONV_SIMPLE(conv_averagepool, KILN_OP_AVERAGEPOOL,
            "auto_pad ceil_mode count_include_pad kernel_shape pads strides")
CONV_SIMPLE(conv_global_averagepool, KILN_OP_GLOBALAVERAGEPOOL, NULL)
/* opset < 7 "broadcast" only allowed C to broadcast, which kiln always does */
CONV_SIMPLE(conv_gemm, KILN_OP_GEMM, "alpha beta transA transB")
CONV_SIMPLE(conv_matmul, KILN_OP_MATMUL, NULL)
CONV_SIMPLE(conv_flatten, KILN_OP_FLATTEN, "axis")

/* Dropout: the identity at inference (training_mode a constant false, or
 * true with a constant ratio of 0); the mask output is an all-true constant. */
static kiln_status conv_dropout(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 2, err);
    if (s != KILN_OK)
        return s;
    if (onnx_in(c, 2) >= 0) { /* training_mode, opset 12 on */
        double mode = 0, ratio = 0.5;
        s = onnx_in_scalar(c, 2, "training_mode", &mode, err);
        if (s != KILN_OK)
            return s;
        if (mode != 0 && onnx_in(c, 1) >= 0 &&
            (s = onnx_in_scalar(c, 1, "ratio", &ratio, err)) != KILN_OK)
            return s;
        if (mode != 0 && ratio != 0)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "training_mode=true with ratio %g is not supported: kiln runs "
                                   "inference only",
                                   ratio);
    }
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    if (onnx_out_used(c, 1)) {
        kiln_tensor mask;
        if ((s = kiln_tensor_alloc(&mask, KILN_DTYPE_BOOL, &x->shape, err)) != KILN_OK)
            return s;
        int64_t nb = kiln_tensor_nbytes(&mask);
        if (nb > 0)
            memset(mask.data, 1, (size_t)nb);
        s = onnx_bind_const(c, 1, &mask, err);
        kiln_tensor_release(&mask);
        if (s != KILN_OK)
            return s;
    }
    return onnx_bind(c, 0, x->id, err);
}

#define POOL_ATTRS "auto_pad:string kernel_shape:ints pads:ints strides:ints"
#define CONVT_ATTRS                                                                                \
    "auto_pad:string dilations:ints group:int kernel_shape:ints output_padding:ints "              \
    "output_shape:ints pads:ints strides:ints"
#define RESIZE_ATTRS                                                                               \
    "coordinate_transformation_mode:string cubic_coeff_a:float exclude_outside:int "               \
    "extrapolation_value:float mode:string nearest_mode:string"
#define RNN_ATTRS                                                                                  \
    "activation_alpha:floats activation_beta:floats activations:strings clip:float "               \
    "direction:string hidden_size:int"

const onnx_converter onnx_nn_converters[] = {
    {"Conv", 1, conv_conv,
     "auto_pad:string dilations:ints group:int kernel_shape:ints pads:ints strides:ints"},
    {"MaxPool", 1, conv_maxpool, POOL_ATTRS},
    {"MaxPool", 8, conv_maxpool, POOL_ATTRS " storage_order:int"},
    {"MaxPool", 10, conv_maxpool, POOL_ATTRS " storage_order:int ceil_mode:int dilations:ints"},
    {"AveragePool", 1, conv_averagepool, POOL_ATTRS},
    {"AveragePool", 7, conv_averagepool, POOL_ATTRS " count_include_pad:int"},
    {"AveragePool", 10, conv_averagepool, POOL_ATTRS " count_include_pad:int ceil_mode:int"},
    {"GlobalAveragePool", 1, conv_global_averagepool, ""},
    {"Gemm", 1, conv_gemm, "alpha:float beta:float broadcast:int transA:int transB:int"},
    {"Gemm", 7, conv_gemm, "alpha:float beta:float transA:int transB:int"},
    {"MatMul", 1, conv_matmul, ""},
    {"Flatten", 1, conv_flatten, "axis:int"},
    {"Dropout", 1, conv_dropout, "consumed_inputs:ints is_test:int ratio:float"},
    {"Dropout", 7, conv_dropout, "ratio:float"},
    {"Dropout", 12, conv_dropout, "seed:int"},
    {"ConvTranspose", 1, conv_conv_transpose, CONVT_ATTRS},
    {"LpPool", 1, conv_lppool, "auto_pad:string kernel_shape:ints p:float pads:ints strides:ints"},
    {"LpPool", 2, conv_lppool, POOL_ATTRS " p:int"},
    {"LpPool", 18, conv_lppool, POOL_ATTRS " p:int ceil_mode:int dilations:ints"},
    {"GlobalMaxPool", 1, conv_global_maxpool, ""},
    {"GridSample", 16, conv_grid_sample, "align_corners:int mode:string padding_mode:string"},
    {"Upsample", 7, conv_resize10, "mode:string scales:floats"},
    {"Upsample", 9, conv_resize10, "mode:string"},
    {"Resize", 10, conv_resize10, "mode:string"},
    {"Resize", 11, conv_resize, RESIZE_ATTRS},
    {"RNN", 7, conv_rnn, RNN_ATTRS},
    {"RNN", 14, conv_rnn, RNN_ATTRS " layout:int"},
    {"GRU", 7, conv_gru, RNN_ATTRS " linear_before_reset:int"},
    {"GRU", 14, conv_gru, RNN_ATTRS " linear_before_reset:int layout:int"},
    {"LSTM", 7, conv_lstm, RNN_ATTRS " input_forget:int"},
    {"LSTM", 14, conv_lstm, RNN_ATTRS " input_forget:int layout:int"},
    {NULL, 0, NULL, NULL},
};
