/* ir/infer_nn.h: geometry shared by the shape inference of the nn family
 * (ir/infer_nn.c) and its reference kernels (ref/conv_transpose.c,
 * ref/resize.c, ref/rnn.c), so that inference and kernels agree on output
 * extents, pads, scales and recurrent dimensions. Each resolver reads the
 * node's attributes, checks them against the input shapes and fills a plain
 * struct; it is run once by inference (which reports errors) and again by the
 * kernel (which then cannot disagree). */
#ifndef KILN_IR_INFER_NN_H
#define KILN_IR_INFER_NN_H

#include <stdbool.h>

#include "ir/graph.h"
#include "ir/infer_util.h"

/* ---- ConvTranspose ------------------------------------------------------ */
/* Per spatial dim i (X dims 2 + i): output o receives input i and tap k when
 *     o = i*stride + k*dilation - pad_begin,  0 <= o < out. */
typedef struct kiln_convt_geom {
    int nsp;
    int64_t group, c_in, m_out; /* X channels, Y channels (W.shape[1] * group) */
    int64_t in[KILN_WINDOW_MAX_SPATIAL];
    int64_t kernel[KILN_WINDOW_MAX_SPATIAL];
    int64_t stride[KILN_WINDOW_MAX_SPATIAL];
    int64_t dilation[KILN_WINDOW_MAX_SPATIAL];
    int64_t pad_begin[KILN_WINDOW_MAX_SPATIAL]; /* may be negative (output_shape) */
    int64_t out[KILN_WINDOW_MAX_SPATIAL];
} kiln_convt_geom;

kiln_status kiln_convt_resolve(const kiln_node *n, const kiln_shape *x, const kiln_shape *w,
                               kiln_convt_geom *g, kiln_error *err);

/* ---- Resize ------------------------------------------------------------- */
typedef enum kiln_resize_mode {
    KILN_RESIZE_NEAREST,
    KILN_RESIZE_LINEAR,
    KILN_RESIZE_CUBIC,
} kiln_resize_mode;

typedef enum kiln_resize_coord {
    KILN_COORD_HALF_PIXEL,
    KILN_COORD_PYTORCH_HALF_PIXEL,
    KILN_COORD_ALIGN_CORNERS,
    KILN_COORD_ASYMMETRIC,
    KILN_COORD_TF_HALF_PIXEL_FOR_NN,
    KILN_COORD_TF_CROP_AND_RESIZE,
} kiln_resize_coord;

typedef enum kiln_resize_nearest {
    KILN_NEAREST_ROUND_PREFER_FLOOR,
    KILN_NEAREST_ROUND_PREFER_CEIL,
    KILN_NEAREST_FLOOR,
    KILN_NEAREST_CEIL,
} kiln_resize_nearest;

typedef struct kiln_resize_params {
    kiln_resize_mode mode;
    kiln_resize_coord coord;
    kiln_resize_nearest nearest;
    double cubic_a;
    bool exclude_outside;
    double extrapolation;
    int rank;
    double scale[KILN_MAX_RANK];     /* the given scale, or out/in with sizes */
    double roi_start[KILN_MAX_RANK]; /* tf_crop_and_resize region, normalized */
    double roi_end[KILN_MAX_RANK];
    int64_t out[KILN_MAX_RANK];
} kiln_resize_params;

kiln_status kiln_resize_resolve(const kiln_node *n, const kiln_shape *x, kiln_resize_params *p,
                                kiln_error *err);

/* ---- GridSample --------------------------------------------------------- */
typedef enum kiln_grid_mode { KILN_GRID_BILINEAR, KILN_GRID_NEAREST, KILN_GRID_BICUBIC } kiln_grid_mode;
typedef enum kiln_grid_pad { KILN_GRID_ZEROS, KILN_GRID_BORDER, KILN_GRID_REFLECTION } kiln_grid_pad;

kiln_status kiln_grid_sample_resolve(const kiln_node *n, kiln_grid_mode *mode, kiln_grid_pad *pad,
                                     bool *align_corners, kiln_error *err);

/* ---- RNN / GRU / LSTM --------------------------------------------------- */
#define KILN_RNN_MAX_ACT 6 /* activations: up to 3 per direction, 2 directions */

typedef enum kiln_rnn_act {
    KILN_ACT_RELU,
    KILN_ACT_TANH,
    KILN_ACT_SIGMOID,
    KILN_ACT_AFFINE,
    KILN_ACT_LEAKYRELU,
    KILN_ACT_THRESHOLDEDRELU,
    KILN_ACT_SCALEDTANH,
    KILN_ACT_HARDSIGMOID,
    KILN_ACT_ELU,
    KILN_ACT_SOFTSIGN,
    KILN_ACT_SOFTPLUS,
} kiln_rnn_act;

typedef struct kiln_rnn_geom {
    int gates;      /* 1 (RNN), 3 (GRU), 4 (LSTM) */
    int dirs;       /* 1 or 2 */
    bool reverse;   /* direction == "reverse" (with dirs == 1) */
    int layout;     /* 0: X (seq, batch, in); 1: X (batch, seq, in) */
    int64_t seq, batch, input, hidden;
    int n_act;      /* activations per direction: 1, 2 or 3 */
    kiln_rnn_act act[KILN_RNN_MAX_ACT];
    float alpha[KILN_RNN_MAX_ACT], beta[KILN_RNN_MAX_ACT];
    float clip;     /* > 0: clip gate pre-activations to [-clip, clip] */
    bool input_forget, linear_before_reset;
} kiln_rnn_geom;

/* `shapes` are the shapes of the node's first n_in inputs (NULL for absent
 * ones), `dtypes` their element types. */
kiln_status kiln_rnn_resolve(const kiln_node *n, const kiln_shape *const *shapes,
                             const kiln_dtype *dtypes, int n_in, kiln_rnn_geom *g,
                             kiln_error *err);

#endif
