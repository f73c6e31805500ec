/* ref/attention.c: reference Attention (ir/attention.h), float32: per
 * (b, h, i) the scores scale * q_i . k_j + m_ij, softmax in double (max
 * subtracted), then the weighted sum of the v_j; operands read through the
 * strides the perms give. */
#include <math.h>
#include <stdlib.h>

#include "ir/attention.h"
#include "ref/ref.h"
#include "ref/scratch.h"
#include "util/error.h"

/* The scores of one query row. */
static size_t row_bytes(const kiln_attn_geom *g)
{
    return sizeof(double) * (size_t)(g->Sk ? g->Sk : 1);
}

size_t kiln_ref_attention_scratch(const kiln_node *n, const kiln_tensor *const *in)
{
    const kiln_tensor *m = n->n_inputs > 3 ? in[3] : NULL;
    kiln_attn_geom g;
    kiln_error err = {0};
    if (kiln_attn_geom_of(n, &in[0]->shape, &in[1]->shape, &in[2]->shape, m ? &m->shape : NULL,
                          &g, &err) != KILN_OK)
        return 0;
    return kiln_ref_scratch_round(row_bytes(&g));
}

kiln_status kiln_ref_attention(const kiln_node *n, const kiln_tensor *const *in,
                               kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *m = n->n_inputs > 3 ? in[3] : NULL;
    kiln_attn_geom g;
    kiln_status s = kiln_attn_geom_of(n, &in[0]->shape, &in[1]->shape, &in[2]->shape,
                                      m ? &m->shape : NULL, &g, err);
    if (s != KILN_OK)
        return s;
    if (in[0]->dtype != KILN_DTYPE_FLOAT32)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "Attention: float32 only");
    const float *q = in[0]->data, *k = in[1]->data, *v = in[2]->data;
    const float *mk = m ? m->data : NULL;
    float *y = out[0]->data;
    double *p = kiln_ref_scratch_get(row_bytes(&g));
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "Attention: out of memory");
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t h = 0; h < g.H; h++)
            for (int64_t i = 0; i < g.Sq; i++) {
                const float *qi = q + b * g.qs[0] + h * g.qs[1] + i * g.qs[2];
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < g.Sk; j++) {
                    const float *kj = k + b * g.ks[0] + h * g.ks[1] + j * g.ks[2];
                    double d = 0.0;
                    for (int64_t c = 0; c < g.D; c++)
                        d += (double)qi[c * g.qs[3]] * kj[c * g.ks[3]];
                    d *= g.scale;
                    if (mk)
                        d += mk[b * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j * g.ms[3]];
                    p[j] = d;
                    mx = d > mx ? d : mx;
                }
                for (int64_t j = 0; j < g.Sk; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int64_t c = 0; c < g.Dv; c++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < g.Sk; j++)
                        acc += p[j] * v[b * g.vs[0] + h * g.vs[1] + j * g.vs[2] + c * g.vs[3]];
                    y[b * g.os[0] + h * g.os[1] + i * g.os[2] + c * g.os[3]] = (float)(acc / sum);
                }
            }
    kiln_ref_scratch_put(p);
    return KILN_OK;
}
