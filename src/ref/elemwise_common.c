/* ref/elemwise_common.c: element access for any dtype, the float16 ->
 * float32 -> float16 detour and the output checks of the elementwise
 * kernels (see elemwise_common.h). */
#include "ref/elemwise_common.h"

#include <stdlib.h>

#include "ref/scratch.h"

double kiln_ew_load_f64(kiln_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return ((const float *)data)[i];
    case KILN_DTYPE_FLOAT64: return ((const double *)data)[i];
    case KILN_DTYPE_FLOAT16: return kiln_f16_to_f64(((const uint16_t *)data)[i]);
    case KILN_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
    default: return (double)kiln_ew_load_i64(t, data, i);
    }
}

int64_t kiln_ew_load_i64(kiln_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_INT8: return ((const int8_t *)data)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)data)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)data)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case KILN_DTYPE_INT64: return ((const int64_t *)data)[i];
    case KILN_DTYPE_UINT64: return (int64_t)((const uint64_t *)data)[i];
    case KILN_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return kiln_ew_sat_i64(kiln_ew_load_f64(t, data, i));
    }
}

/* v truncated toward zero and clamped to [lo, hi] (both exact in double);
 * NaN -> 0. */
static double clamp_trunc(double v, double lo, double hi)
{
    if (v != v)
        return 0.0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

void kiln_ew_store_f64(kiln_dtype t, void *data, int64_t i, double v)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: ((float *)data)[i] = (float)v; return;
    case KILN_DTYPE_FLOAT64: ((double *)data)[i] = v; return;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = kiln_f64_to_f16(v); return;
    case KILN_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0.0; return;
    case KILN_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)clamp_trunc(v, INT8_MIN, INT8_MAX); return;
    case KILN_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)clamp_trunc(v, 0, UINT8_MAX); return;
    case KILN_DTYPE_INT16:
        ((int16_t *)data)[i] = (int16_t)clamp_trunc(v, INT16_MIN, INT16_MAX);
        return;
    case KILN_DTYPE_UINT16:
        ((uint16_t *)data)[i] = (uint16_t)clamp_trunc(v, 0, UINT16_MAX);
        return;
    case KILN_DTYPE_INT32:
        ((int32_t *)data)[i] = (int32_t)clamp_trunc(v, INT32_MIN, INT32_MAX);
        return;
    case KILN_DTYPE_UINT32:
        ((uint32_t *)data)[i] = (uint32_t)clamp_trunc(v, 0, UINT32_MAX);
        return;
    case KILN_DTYPE_INT64: ((int64_t *)data)[i] = kiln_ew_sat_i64(v); return;
    case KILN_DTYPE_UINT64: ((uint64_t *)data)[i] = kiln_ew_sat_u64(v); return;
    default: return;
    }
}

void kiln_ew_store_i64(kiln_dtype t, void *data, int64_t i, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (t) {
    case KILN_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)u; return;
    case KILN_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)u; return;
    case KILN_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)u; return;
    case KILN_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)u; return;
    case KILN_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)u; return;
    case KILN_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)u; return;
    case KILN_DTYPE_INT64: ((int64_t *)data)[i] = v; return;
    case KILN_DTYPE_UINT64: ((uint64_t *)data)[i] = u; return;
    case KILN_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    default: kiln_ew_store_f64(t, data, i, (double)v); return;
    }
}

bool kiln_ew_has_f16(const kiln_node *n, const kiln_tensor *const *in, kiln_tensor *const *out)
{
    for (int i = 0; i < n->n_inputs; i++)
        if (in[i] && in[i]->dtype == KILN_DTYPE_FLOAT16)
            return true;
    for (int i = 0; i < n->n_outputs; i++)
        if (out[i] && out[i]->dtype == KILN_DTYPE_FLOAT16)
            return true;
    return false;
}

#define VIA_MAX 16

/* A float32 copy of a float16 tensor (the data converted when `convert`),
 * in the kernels' scratch (ref/scratch.h). */
static kiln_status widen(const kiln_tensor *h, kiln_tensor *f, bool convert, kiln_error *err)
{
    int64_t count = kiln_shape_numel(&h->shape);
    f->dtype = KILN_DTYPE_FLOAT32;
    f->shape = h->shape;
    f->data = kiln_ref_scratch_get(sizeof(float) * (size_t)count);
    if (!f->data)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory for a float32 copy");
    if (!convert)
        return KILN_OK;
    const uint16_t *src = h->data;
    float *dst = f->data;
    for (int64_t i = 0; i < count; i++)
        dst[i] = kiln_f16_to_f32(src[i]);
    return KILN_OK;
}

kiln_status kiln_ew_via_f32(kiln_ref_fn fn, const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    if (n->n_inputs > VIA_MAX || n->n_outputs > VIA_MAX)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "float16 with more than %d inputs or outputs is not supported",
                           VIA_MAX);
    kiln_tensor tin[VIA_MAX] = {{0}}, tout[VIA_MAX] = {{0}};
    const kiln_tensor *pin[VIA_MAX];
    kiln_tensor *pout[VIA_MAX];
    kiln_status s = KILN_OK;
    for (int i = 0; i < n->n_inputs; i++) {
        pin[i] = in[i];
        if (s == KILN_OK && in[i] && in[i]->dtype == KILN_DTYPE_FLOAT16) {
            s = widen(in[i], &tin[i], true, err);
            pin[i] = &tin[i];
        }
    }
    for (int i = 0; i < n->n_outputs; i++) {
        pout[i] = out[i];
        if (s == KILN_OK && out[i] && out[i]->dtype == KILN_DTYPE_FLOAT16) {
            s = widen(out[i], &tout[i], false, err);
            pout[i] = &tout[i];
        }
    }
    if (s == KILN_OK)
        s = fn(n, pin, pout, err);
    for (int i = 0; i < n->n_outputs; i++) {
        if (!tout[i].data)
            continue;
        if (s == KILN_OK) {
            int64_t count = kiln_shape_numel(&out[i]->shape);
            const float *src = tout[i].data;
            uint16_t *dst = out[i]->data;
            for (int64_t k = 0; k < count; k++)
                dst[k] = kiln_f32_to_f16(src[k]);
        }
        kiln_ref_scratch_put(tout[i].data);
    }
    for (int i = 0; i < n->n_inputs; i++)
        kiln_ref_scratch_put(tin[i].data);
    return s;
}

kiln_status kiln_ew_check_bcast(const kiln_tensor *const *in, int n_in, const kiln_tensor *o,
                                kiln_error *err)
{
    kiln_shape shape = in[0]->shape;
    for (int i = 1; i < n_in; i++) {
        kiln_status s = kiln_broadcast_shape(&shape, &in[i]->shape, &shape, err);
        if (s != KILN_OK)
            return s;
    }
    if (!kiln_shape_equal(&shape, &o->shape)) {
        kiln_shape_buf x, y;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output is %s, expected %s",
                           kiln_shape_fmt(&o->shape, &x), kiln_shape_fmt(&shape, &y));
    }
    return KILN_OK;
}

kiln_status kiln_ew_check_same_numel(const kiln_tensor *x, const kiln_tensor *y, int64_t *count,
                                     kiln_error *err)
{
    int64_t c = kiln_shape_numel(&x->shape);
    if (c < 0 || c != kiln_shape_numel(&y->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input and output sizes differ");
    *count = c;
    return KILN_OK;
}
