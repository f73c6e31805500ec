/* import/onnx/convert_misc.c: Det, RoiAlign, DFT (opset 17: dft_length an input, which
 * becomes the attribute), STFT (frame_step, frame_length), MaxUnpool (output_shape an input, the attribute)
 * and TfIdfVectorizer (int64 pools only: kiln has no strings). A parameter
 * input that is run-time data is the usual "must be a constant": the VM
 * converts such a node per shape class (docs/VM.md). */
#include "import/onnx/convert_movement.h"
#include "import/onnx/onnx.h"
#include "ir/graph.h"
#include "util/error.h"

CONV_SIMPLE(conv_det, KILN_OP_DET, "")

#define ROI_ATTRS                                                                                 \
    "mode:string output_height:int output_width:int sampling_ratio:int spatial_scale:float"

/* RoiAlign: opset 10 has no coordinate_transformation_mode and behaves as
 * output_half_pixel; 16's default is half_pixel. */
static kiln_status conv_roialign(onnx_ctx *c, kiln_error *err)
{
    int ins[3] = {onnx_in(c, 0), onnx_in(c, 1), onnx_in(c, 2)};
    if (ins[0] < 0 || ins[1] < 0 || ins[2] < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err,
                               "X, rois and batch_indices are required");
    kiln_attr a = onnx_attr_s("coordinate_transformation_mode",
                              c->opset < 16 ? "output_half_pixel"
                                            : onnx_attr_string(c, "coordinate_transformation_mode",
                                                               "half_pixel"));
    return onnx_emit_bind(c, KILN_OP_ROIALIGN, ins, 3, &a, 1,
                          "mode output_height output_width sampling_ratio spatial_scale", 1, err);
}

static kiln_status conv_dft(onnx_ctx *c, kiln_error *err)
{
    kiln_attr a[4];
    int na = 0;
    kiln_status s;
    if (onnx_in(c, 1) >= 0) {
        double len = 0;
        if ((s = onnx_in_scalar_eval(c, 1, "dft_length", &len, err)) != KILN_OK)
            return s;
        a[na++] = onnx_attr_i("dft_length", (int64_t)len);
    }
    int in = onnx_in(c, 0);
    if (in < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "input 0 is missing");
    return onnx_emit_bind(c, KILN_OP_DFT, &in, 1, a, na, "axis inverse onesided", 1, err);
}

/* STFT: frame_step (required) and frame_length (optional) become attributes */
static kiln_status conv_stft(onnx_ctx *c, kiln_error *err)
{
    kiln_attr a[2];
    int na = 0;
    double v = 0;
    kiln_status s = onnx_in_scalar_eval(c, 1, "frame_step", &v, err);
    if (s != KILN_OK)
        return s;
    a[na++] = onnx_attr_i("frame_step", (int64_t)v);
    if (onnx_in(c, 3) >= 0) {
        if ((s = onnx_in_scalar_eval(c, 3, "frame_length", &v, err)) != KILN_OK)
            return s;
        a[na++] = onnx_attr_i("frame_length", (int64_t)v);
    }
    int ins[2] = {onnx_in(c, 0), onnx_in(c, 2)};
    if (ins[0] < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "signal is required");
    return onnx_emit_bind(c, KILN_OP_STFT, ins, ins[1] >= 0 ? 2 : 1, a, na, "onesided", 1, err);
}

static kiln_status conv_maxunpool(onnx_ctx *c, kiln_error *err)
{
    kiln_attr a[1];
    int na = 0;
    kiln_status s;
    if (onnx_in(c, 2) >= 0) {
        const int64_t *v;
        int n = 0;
        if ((s = onnx_in_ints_eval(c, 2, "output_shape", &v, &n, err)) != KILN_OK)
            return s;
        a[na++] = onnx_attr_is("output_shape", v, n);
    }
    int ins[2] = {onnx_in(c, 0), onnx_in(c, 1)};
    if (ins[0] < 0 || ins[1] < 0)
        return onnx_node_error(c, KILN_ERR_INVALID_GRAPH, err, "X and I are required");
    return onnx_emit_bind(c, KILN_OP_MAXUNPOOL, ins, 2, a, na, "kernel_shape pads strides", 1,
                          err);
}

static kiln_status conv_tfidf(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr(c, "pool_strings"))
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "pool_strings: kiln has no string tensors (pool_int64s only)");
    return onnx_convert_simple(c, KILN_OP_TFIDFVECTORIZER,
                               "mode min_gram_length max_gram_length max_skip_count ngram_counts "
                               "ngram_indexes pool_int64s weights",
                               err);
}

const onnx_converter onnx_misc_converters[] = {
    {"Det", 11, conv_det, ""},
    {"RoiAlign", 10, conv_roialign, ROI_ATTRS},
    {"RoiAlign", 16, conv_roialign, ROI_ATTRS " coordinate_transformation_mode:string"},
    {"DFT", 17, conv_dft, "axis:int inverse:int onesided:int"},
    {"STFT", 17, conv_stft, "onesided:int"},
    {"MaxUnpool", 9, conv_maxunpool, "kernel_shape:ints pads:ints strides:ints"},
    {"MaxUnpool", 11, conv_maxunpool, "kernel_shape:ints pads:ints strides:ints"},
    {"TfIdfVectorizer", 9, conv_tfidf,
     "mode:string min_gram_length:int max_gram_length:int max_skip_count:int ngram_counts:ints "
     "ngram_indexes:ints pool_int64s:ints pool_strings:strings weights:floats"},
    {NULL, 0, NULL, NULL},
};
