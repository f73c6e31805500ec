/* ref/topk.c: reference TopK. Each (outer, inner) lane along the axis is
 * scanned once; the k best elements seen so far are kept sorted in the output
 * lanes themselves (values and int64 indices), a new element being inserted
 * after every element it does not strictly beat, so ties keep the lower index
 * first and no scratch is needed (O(len * k) per lane). "Best" is largest (or
 * smallest with largest=0); NaN counts as larger than every number. The
 * output is always sorted, which also satisfies sorted=0. A contiguous
 * float32 lane takes a faster loop with the same result (topk_lane_f32). */
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

/* precedes() for float32 */
static inline bool precedes_f32(bool largest, float a, float b)
{
    bool an = isnan(a), bn = isnan(b);
    if (an || bn)
        return largest ? (an && !bn) : (bn && !an);
    return largest ? a > b : a < b;
}

/* One contiguous float32 lane, with the same result as the general loop
 * below: an element that does not beat the k-th kept one is rejected by one
 * compare, and the insertion point (the first kept element the new one
 * strictly precedes: the kept lane is sorted, so those form a suffix) is
 * found by binary search and opened by memmove. RetinaNet/FCOS-style
 * pre-NMS TopKs (k = 1000 of 10^5 to 10^6 scores) spent most of their time
 * scanning for that point element by element. */
static void topk_lane_f32(const float *x, int64_t len, int64_t k, bool largest, float *vals,
                          int64_t *idx)
{
    int64_t c = 0;
    for (int64_t j = 0; j < len; j++) {
        float v = x[j];
        if (c == k && !precedes_f32(largest, v, vals[k - 1]))
            continue;
        int64_t lo = 0, hi = c; /* first p in [lo, hi) with v preceding vals[p] */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (precedes_f32(largest, v, vals[mid]))
                hi = mid;
            else
                lo = mid + 1;
        }
        int64_t last = c < k ? c : k - 1; /* shift [lo, last) one to the right */
        memmove(vals + lo + 1, vals + lo, sizeof(float) * (size_t)(last - lo));
        memmove(idx + lo + 1, idx + lo, sizeof(int64_t) * (size_t)(last - lo));
        vals[lo] = v;
        idx[lo] = j;
        if (c < k)
            c++;
    }
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
    if (t == KILN_DTYPE_FLOAT32 && inner == 1) {
        for (int64_t o = 0; o < outer; o++)
            topk_lane_f32((const float *)x + o * len, len, k, largest, (float *)vals + o * k,
                          idx + o * k);
        return KILN_OK;
    }
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
