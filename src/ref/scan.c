/* ref/scan.c: reference CumSum. For every (outer, inner) lane along the axis
 * a running sum is carried (double for float types, wrapping 64-bit integers
 * for integer types) forward, or backward with `reverse`; with `exclusive`
 * each output is the running sum before its own element is added. */
#include "ref/red_num.h"
#include "ref/ref.h"

kiln_status kiln_ref_cumsum(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    int rank = xs->rank;
    int64_t a = kiln_attr_int(n, "axis", 0);
    if (a < -rank || a >= rank || out[0]->dtype != xt->dtype ||
        !kiln_shape_equal(&out[0]->shape, xs))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "CumSum: bad axis or output");
    int axis = (int)(a < 0 ? a + rank : a);
    bool excl = kiln_attr_int(n, "exclusive", 0) == 1, rev = kiln_attr_int(n, "reverse", 0) == 1;
    int64_t outer = kiln_ref_prod(xs, 0, axis), len = xs->dims[axis];
    int64_t inner = kiln_ref_prod(xs, axis + 1, rank);
    kiln_dtype t = xt->dtype;
    bool fl = kiln_red_is_float(t);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double accf = 0.0;
            uint64_t acci = 0;
            for (int64_t s = 0; s < len; s++) {
                int64_t j = rev ? len - 1 - s : s, off = base + j * inner;
                if (fl) {
                    double v = kiln_red_ldf(t, xt->data, off);
                    if (!excl)
                        accf += v;
                    kiln_red_stf(t, out[0]->data, off, accf);
                    if (excl)
                        accf += v;
                } else {
                    uint64_t v = (uint64_t)kiln_red_ldi(t, xt->data, off);
                    if (!excl)
                        acci += v;
                    kiln_red_sti(t, out[0]->data, off, (int64_t)acci);
                    if (excl)
                        acci += v;
                }
            }
        }
    return KILN_OK;
}
