/* ref/einsum.c: reference Einsum. The equation is parsed against the input
 * shapes (ir/einsum.h); every label gets, per operand, a stride: the sum of
 * the operand's strides over the dims carrying that label (a repeated label
 * walks the diagonal), 0 where the operand broadcasts an ellipsis dim of
 * extent 1. The kernel walks the output labels with one odometer and, for
 * each output cell, the contracted labels (used by some operand, absent from
 * the output) with another, accumulating the product of the operands (double
 * for float types, wrapping 64-bit integers otherwise). No scratch. */
#include <string.h>

#include "ir/einsum.h"
#include "ref/red_num.h"
#include "ref/ref.h"

kiln_status kiln_ref_einsum(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    int nops = n->n_inputs;
    if (nops < 1 || nops > KILN_EINSUM_MAX_OPS)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "Einsum: %d inputs", nops);
    const kiln_shape *shapes[KILN_EINSUM_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        if (!in[k] || in[k]->dtype != in[0]->dtype)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "Einsum: input %d absent or mistyped", k);
        shapes[k] = &in[k]->shape;
    }
    kiln_einsum e;
    kiln_status s = kiln_einsum_parse(kiln_attr_string(n, "equation", ""), nops, shapes, &e, err);
    if (s != KILN_OK)
        return s;
    kiln_dtype t = in[0]->dtype;
    if (out[0]->dtype != t || !kiln_shape_equal(&out[0]->shape, &e.out_shape))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "Einsum: output does not match the equation");
    /* per-operand stride of every label */
    int64_t lstr[KILN_EINSUM_MAX_OPS][KILN_EINSUM_MAX_LABELS];
    memset(lstr, 0, sizeof lstr);
    for (int k = 0; k < nops; k++) {
        int64_t st[KILN_MAX_RANK];
        kiln_ref_strides(shapes[k], st);
        for (int d = 0; d < e.op_rank[k]; d++) {
            int l = e.op_label[k][d];
            if (!(shapes[k]->dims[d] == 1 && e.size[l] != 1))
                lstr[k][l] += st[d];
        }
    }
    bool in_out[KILN_EINSUM_MAX_LABELS] = {false};
    for (int i = 0; i < e.out_rank; i++)
        in_out[e.out_label[i]] = true;
    int red[KILN_EINSUM_MAX_LABELS], nr = 0;
    int64_t n_red = 1;
    for (int l = 0; l < KILN_EINSUM_MAX_LABELS; l++)
        if (e.used[l] && !in_out[l]) {
            red[nr++] = l;
            n_red *= e.size[l];
        }
    int64_t n_out = kiln_shape_numel(&e.out_shape);
    bool fl = kiln_red_is_float(t);
    int64_t oidx[KILN_MAX_RANK] = {0}, obase[KILN_EINSUM_MAX_OPS] = {0};
    for (int64_t o = 0; o < n_out; o++) {
        int64_t ridx[KILN_EINSUM_MAX_LABELS] = {0}, off[KILN_EINSUM_MAX_OPS];
        memcpy(off, obase, sizeof off);
        double accf = 0.0;
        uint64_t acci = 0;
        for (int64_t r = 0; r < n_red; r++) {
            if (fl) {
                double p = 1.0;
                for (int k = 0; k < nops; k++)
                    p *= kiln_red_ldf(t, in[k]->data, off[k]);
                accf += p;
            } else {
                uint64_t p = 1;
                for (int k = 0; k < nops; k++)
                    p *= (uint64_t)kiln_red_ldi(t, in[k]->data, off[k]);
                acci += p;
            }
            for (int i = nr - 1; i >= 0; i--) {
                int l = red[i];
                for (int k = 0; k < nops; k++)
                    off[k] += lstr[k][l];
                if (++ridx[i] < e.size[l])
                    break;
                for (int k = 0; k < nops; k++)
                    off[k] -= lstr[k][l] * e.size[l];
                ridx[i] = 0;
            }
        }
        if (fl)
            kiln_red_stf(t, out[0]->data, o, accf);
        else
            kiln_red_sti(t, out[0]->data, o, (int64_t)acci);
        for (int i = e.out_rank - 1; i >= 0; i--) {
            int l = e.out_label[i];
            for (int k = 0; k < nops; k++)
                obase[k] += lstr[k][l];
            if (++oidx[i] < e.size[l])
                break;
            for (int k = 0; k < nops; k++)
                obase[k] -= lstr[k][l] * e.size[l];
            oidx[i] = 0;
        }
    }
    return KILN_OK;
}
