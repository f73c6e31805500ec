/* ref/topk.c: reference TopK. Each (outer, inner) lane along the axis is
 * scanned once; the k best elements seen so far are kept sorted in the output
 * lanes themselves (values and int64 indices), a new element being inserted
 * after every element it does not strictly beat, so ties keep the lower index
 * first and no scratch is needed (O(len * k) per lane). "Best" is largest (or
 * smallest with largest=0); NaN counts as larger than every number. The
 * output is always sorted, which also satisfies sorted=0. */
#include <math.h>
#include <string.h>

#include "ref/red_num.h"
#include "ref/ref.h"

/* Whether element a (at pa) strictly precedes element b (at pb). */
static bool precedes(kiln_dtype t, bool fl, bool largest, const void *pa, int64_t ia,
                     const void *pb, int64_t ib)
{
    if (fl) {
        double a = kiln_red_ldf(t, pa, ia), b = kiln_red_ldf(t, pb, ib);
        bool an = isnan(a), bn = isnan(b);
        if (an || bn) /* NaN is the greatest */
            return largest ? (an && !bn) : (bn && !an);
        return largest ? a > b : a < b;
    }
    int64_t a = kiln_red_ldi(t, pa, ia), b = kiln_red_ldi(t, pb, ib);
    return largest ? kiln_red_int_less(t, b, a) : kiln_red_int_less(t, a, b);
}

kiln_status kiln_ref_topk(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    const kiln_shape *xs = &xt->shape;
    int rank = xs->rank;
    int64_t a = kiln_attr_int(n, "axis", -1), k = kiln_attr_int(n, "k", 0);
    if (a < -rank || a >= rank)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "TopK: bad axis");
    int axis = (int)(a < 0 ? a + rank : a);
    int64_t outer = kiln_ref_prod(xs, 0, axis), len = xs->dims[axis];
    int64_t inner = kiln_ref_prod(xs, axis + 1, rank);
    if (k < 0 || k > len || n->n_outputs < 2 || !out[1] || out[0]->dtype != xt->dtype ||
        out[1]->dtype != KILN_DTYPE_INT64 || kiln_shape_numel(&out[0]->shape) != outer * k * inner)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "TopK: bad k or outputs");
    bool largest = kiln_attr_int(n, "largest", 1) == 1;
    kiln_dtype t = xt->dtype;
    bool fl = kiln_red_is_float(t);
    size_t esz = kiln_dtype_size(t);
    char *vals = out[0]->data;
    int64_t *idx = out[1]->data;
    const char *x = xt->data;
    if (k == 0)
        return KILN_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t xbase = o * len * inner + i, ybase = o * k * inner + i, c = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t xo = xbase + j * inner, pos = c;
                while (pos > 0 && precedes(t, fl, largest, x, xo, vals, ybase + (pos - 1) * inner))
                    pos--;
                if (pos >= k)
                    continue;
                int64_t last = c < k ? c : k - 1; /* shift [pos, last) one to the right */
                for (int64_t q = last; q > pos; q--) {
                    int64_t dst = ybase + q * inner, src = ybase + (q - 1) * inner;
                    memcpy(vals + (size_t)dst * esz, vals + (size_t)src * esz, esz);
                    idx[dst] = idx[src];
                }
                memcpy(vals + (size_t)(ybase + pos * inner) * esz, x + (size_t)xo * esz, esz);
                idx[ybase + pos * inner] = j;
                if (c < k)
                    c++;
            }
        }
    return KILN_OK;
}
