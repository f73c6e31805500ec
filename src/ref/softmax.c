/* ref/softmax.c: reference Softmax, LogSoftmax and Hardmax (float32/float64).
 *
 * All three work on the lines of X along one axis: with outer = product of
 * the dims before the axis and inner = product of the dims after it, line
 * (o, i) is the `len` elements at o * len * inner + i + j * inner. Per line:
 * - Softmax: m = max, e_j = exp(x_j - m), y_j = e_j / sum(e) (in double);
 * - LogSoftmax: y_j = x_j - m - log(sum(exp(x_j - m))), which stays finite
 *   for large inputs where log(softmax) would underflow;
 * - Hardmax: 1 at the first maximum, 0 elsewhere.
 */
#include <math.h>

#include "ref/real.h"
#include "ref/ref.h"

typedef enum { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX } sm_kind;

static kiln_status softmax_lines(const kiln_node *n, const kiln_tensor *const *in,
                                 kiln_tensor *const *out, sm_kind kind, kiln_error *err)
{
    const kiln_tensor *xt = in[0];
    kiln_tensor *yt = out[0];
    const kiln_shape *xs = &xt->shape;
    int r = xs->rank;
    int64_t axis = kiln_attr_int(n, "axis", -1);
    if (r < 1 || axis < -r || axis >= r)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "%s: axis %lld out of range for rank %d",
                           kiln_op_name(n->op), (long long)axis, r);
    int ax = (int)(axis < 0 ? axis + r : axis);
    int64_t outer = kiln_ref_prod(xs, 0, ax), len = xs->dims[ax];
    int64_t inner = kiln_ref_prod(xs, ax + 1, r);
    if (len == 0)
        return KILN_OK;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double mx = kiln_real_ld(xt, base);
            int64_t arg = 0;
            for (int64_t j = 1; j < len; j++) {
                double v = kiln_real_ld(xt, base + j * inner);
                if (v > mx) {
                    mx = v;
                    arg = j;
                }
            }
            if (kind == SM_HARDMAX) {
                for (int64_t j = 0; j < len; j++)
                    kiln_real_st(yt, base + j * inner, j == arg ? 1.0 : 0.0);
                continue;
            }
            double sum = 0.0;
            for (int64_t j = 0; j < len; j++)
                sum += exp(kiln_real_ld(xt, base + j * inner) - mx);
            double lse = log(sum);
            for (int64_t j = 0; j < len; j++) {
                double z = kiln_real_ld(xt, base + j * inner) - mx;
                kiln_real_st(yt, base + j * inner, kind == SM_SOFTMAX ? exp(z) / sum : z - lse);
            }
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_softmax(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    return softmax_lines(n, in, out, SM_SOFTMAX, err);
}

kiln_status kiln_ref_logsoftmax(const kiln_node *n, const kiln_tensor *const *in,
                                kiln_tensor *const *out, kiln_error *err)
{
    return softmax_lines(n, in, out, SM_LOGSOFTMAX, err);
}

kiln_status kiln_ref_hardmax(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    return softmax_lines(n, in, out, SM_HARDMAX, err);
}
