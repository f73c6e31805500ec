/* ir/infer_resample.c: shape inference for Resize and GridSample.
 *
 * Resize: kiln takes ONNX's roi/scales/sizes inputs as the attributes "roi"
 * (floats, 2*rank: starts then ends), "scales" (floats, rank) and "sizes"
 * (ints, rank); exactly one of scales and sizes is given. With scales the
 * output extent is floor(in * scale) (computed in double, as ONNX's
 * reference does); with sizes the scale is out / in. kiln_resize_resolve
 * also decodes mode, coordinate_transformation_mode, nearest_mode,
 * cubic_coeff_a, exclude_outside and extrapolation_value for the kernel.
 *
 * GridSample: X (N, C, H, W), grid (N, H_out, W_out, 2) -> (N, C, H_out,
 * W_out); mode bilinear/nearest/bicubic (opset 20's linear/cubic accepted
 * too), padding_mode zeros/border/reflection, align_corners 0/1. */
#include <math.h>
#include <string.h>

#include "ir/infer_nn.h"
#include "util/error.h"

#define RESIZE_MAX_EXTENT ((int64_t)1 << 31)

kiln_status kiln_resize_resolve(const kiln_node *n, const kiln_shape *x, kiln_resize_params *out,
                                kiln_error *err)
{
    static const kiln_attr_spec specs[] = {
        {"mode", KILN_ATTR_STRING},
        {"coordinate_transformation_mode", KILN_ATTR_STRING},
        {"nearest_mode", KILN_ATTR_STRING},
        {"cubic_coeff_a", KILN_ATTR_FLOAT},
        {"exclude_outside", KILN_ATTR_INT},
        {"extrapolation_value", KILN_ATTR_FLOAT},
        {"roi", KILN_ATTR_FLOATS},
        {"scales", KILN_ATTR_FLOATS},
        {"sizes", KILN_ATTR_INTS}};
    kiln_shape_buf b;
    kiln_resize_params p;
    memset(&p, 0, sizeof p);
    kiln_status s = kiln_node_attrs_check(n, specs, 9, err);
    if (s != KILN_OK || (s = kiln_infer_check_flag(n, "exclude_outside", err)) != KILN_OK)
        return s;
    const char *mode = kiln_attr_string(n, "mode", "nearest");
    if (strcmp(mode, "nearest") == 0)
        p.mode = KILN_RESIZE_NEAREST;
    else if (strcmp(mode, "linear") == 0)
        p.mode = KILN_RESIZE_LINEAR;
    else if (strcmp(mode, "cubic") == 0)
        p.mode = KILN_RESIZE_CUBIC;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "mode '%s' is not nearest, linear or cubic", mode);
    static const struct {
        const char *name;
        kiln_resize_coord v;
    } coords[] = {{"half_pixel", KILN_COORD_HALF_PIXEL},
                  {"pytorch_half_pixel", KILN_COORD_PYTORCH_HALF_PIXEL},
                  {"align_corners", KILN_COORD_ALIGN_CORNERS},
                  {"asymmetric", KILN_COORD_ASYMMETRIC},
                  {"tf_half_pixel_for_nn", KILN_COORD_TF_HALF_PIXEL_FOR_NN},
                  {"tf_crop_and_resize", KILN_COORD_TF_CROP_AND_RESIZE}};
    const char *ct = kiln_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    size_t ci = 0, nc = sizeof coords / sizeof coords[0];
    while (ci < nc && strcmp(coords[ci].name, ct) != 0)
        ci++;
    if (ci == nc)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "coordinate_transformation_mode '%s' is not one of half_pixel, "
                           "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, "
                           "tf_crop_and_resize",
                           ct);
    p.coord = coords[ci].v;
    const char *nm = kiln_attr_string(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(nm, "round_prefer_floor") == 0)
        p.nearest = KILN_NEAREST_ROUND_PREFER_FLOOR;
    else if (strcmp(nm, "round_prefer_ceil") == 0)
        p.nearest = KILN_NEAREST_ROUND_PREFER_CEIL;
    else if (strcmp(nm, "floor") == 0)
        p.nearest = KILN_NEAREST_FLOOR;
    else if (strcmp(nm, "ceil") == 0)
        p.nearest = KILN_NEAREST_CEIL;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "nearest_mode '%s' is not round_prefer_floor, round_prefer_ceil, floor "
                           "or ceil",
                           nm);
    p.cubic_a = kiln_attr_float(n, "cubic_coeff_a", -0.75f);
    p.exclude_outside = kiln_attr_int(n, "exclude_outside", 0) == 1;
    p.extrapolation = kiln_attr_float(n, "extrapolation_value", 0.0f);
    p.rank = x->rank;
    if (x->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X is a scalar: nothing to resize");
    const float *scales = NULL, *roi = NULL;
    const int64_t *sizes = NULL;
    int ns = kiln_attr_floats(n, "scales", &scales), nz = kiln_attr_ints(n, "sizes", &sizes);
    int nr = kiln_attr_floats(n, "roi", &roi);
    if ((ns >= 0) == (nz >= 0))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "exactly one of the attributes 'scales' and 'sizes' must be given");
    if ((ns >= 0 && ns != x->rank) || (nz >= 0 && nz != x->rank))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "attribute '%s' has %d entries, expected one per dim of X %s",
                           ns >= 0 ? "scales" : "sizes", ns >= 0 ? ns : nz, kiln_shape_fmt(x, &b));
    if (p.coord == KILN_COORD_TF_CROP_AND_RESIZE && nr != 2 * x->rank)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "tf_crop_and_resize needs attribute 'roi' with %d entries (starts, "
                           "ends), got %d",
                           2 * x->rank, nr < 0 ? 0 : nr);
    for (int d = 0; d < x->rank; d++) {
        int64_t in = x->dims[d];
        if (in < 1)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: empty dim %d",
                               kiln_shape_fmt(x, &b), d);
        if (ns >= 0) {
            double sc = scales[d];
            if (!(sc > 0) || !isfinite(sc) || sc * (double)in >= (double)RESIZE_MAX_EXTENT)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "scales[%d] = %g is not a positive scale for extent %lld", d,
                                   sc, (long long)in);
            p.scale[d] = sc;
            p.out[d] = (int64_t)floor(sc * (double)in);
        } else {
            if (sizes[d] < 0 || sizes[d] >= RESIZE_MAX_EXTENT)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "sizes[%d] = %lld is out of range", d, (long long)sizes[d]);
            p.out[d] = sizes[d];
            p.scale[d] = (double)sizes[d] / (double)in;
        }
        p.roi_start[d] = nr == 2 * x->rank ? roi[d] : 0.0;
        p.roi_end[d] = nr == 2 * x->rank ? roi[x->rank + d] : 1.0;
    }
    *out = p;
    return KILN_OK;
}

kiln_status kiln_infer_resize(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    kiln_shape_buf b;
    kiln_status s = kiln_infer_check_float(in[0], 0, "X", err);
    if (s != KILN_OK)
        return s;
    kiln_resize_params p;
    if ((s = kiln_resize_resolve(n, &in[0]->shape, &p, err)) != KILN_OK)
        return s;
    kiln_shape o = {.rank = p.rank};
    for (int d = 0; d < p.rank; d++)
        o.dims[d] = p.out[d];
    if (kiln_shape_numel(&o) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output shape %s is too large",
                           kiln_shape_fmt(&o, &b));
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}

kiln_status kiln_grid_sample_resolve(const kiln_node *n, kiln_grid_mode *mode, kiln_grid_pad *pad,
                                     bool *align_corners, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"align_corners", KILN_ATTR_INT},
                                           {"mode", KILN_ATTR_STRING},
                                           {"padding_mode", KILN_ATTR_STRING}};
    kiln_status s = kiln_node_attrs_check(n, specs, 3, err);
    if (s != KILN_OK || (s = kiln_infer_check_flag(n, "align_corners", err)) != KILN_OK)
        return s;
    const char *m = kiln_attr_string(n, "mode", "bilinear");
    if (strcmp(m, "bilinear") == 0 || strcmp(m, "linear") == 0)
        *mode = KILN_GRID_BILINEAR;
    else if (strcmp(m, "nearest") == 0)
        *mode = KILN_GRID_NEAREST;
    else if (strcmp(m, "bicubic") == 0 || strcmp(m, "cubic") == 0)
        *mode = KILN_GRID_BICUBIC;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "mode '%s' is not bilinear, nearest or bicubic", m);
    const char *pm = kiln_attr_string(n, "padding_mode", "zeros");
    if (strcmp(pm, "zeros") == 0)
        *pad = KILN_GRID_ZEROS;
    else if (strcmp(pm, "border") == 0)
        *pad = KILN_GRID_BORDER;
    else if (strcmp(pm, "reflection") == 0)
        *pad = KILN_GRID_REFLECTION;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "padding_mode '%s' is not zeros, border or reflection", pm);
    *align_corners = kiln_attr_int(n, "align_corners", 0) == 1;
    return KILN_OK;
}

kiln_status kiln_infer_grid_sample(const kiln_node *n, const kiln_value *const *in,
                                   kiln_value *const *out, kiln_error *err)
{
    kiln_shape_buf b1, b2;
    kiln_status s;
    if ((s = kiln_infer_check_float(in[0], 0, "X", err)) != KILN_OK ||
        (s = kiln_infer_check_float(in[1], 1, "grid", err)) != KILN_OK)
        return s;
    kiln_grid_mode mode;
    kiln_grid_pad pad;
    bool ac;
    if ((s = kiln_grid_sample_resolve(n, &mode, &pad, &ac, err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape, *gs = &in[1]->shape;
    if (xs->rank != 4)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "X has shape %s: expected rank 4 (N, C, H, W)",
                           kiln_shape_fmt(xs, &b1));
    if (gs->rank != 4 || gs->dims[0] != xs->dims[0] || gs->dims[3] != 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "grid has shape %s, expected (N, H_out, W_out, 2) with N from X %s",
                           kiln_shape_fmt(gs, &b1), kiln_shape_fmt(xs, &b2));
    if (xs->dims[2] < 1 || xs->dims[3] < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "X has shape %s: empty spatial dim",
                           kiln_shape_fmt(xs, &b1));
    kiln_shape o = {.rank = 4, .dims = {xs->dims[0], xs->dims[1], gs->dims[1], gs->dims[2]}};
    kiln_infer_set_output(out[0], &o);
    return KILN_OK;
}
