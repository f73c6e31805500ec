/* codegen/c/expr.c: elementwise ops as C float expressions, the building
 * blocks of fused epilogues and elementwise groups. Each op's expression
 * follows its reference kernel (src/ref/unary.c, elemwise.c) in float
 * arithmetic; attributes are printed as exact float literals (%a).
 * Transcendental ops call kiln_kernels_math.h (included by every kernel
 * file, kiln_emit_prologue): branch-free polynomials gcc vectorizes, where
 * libm's expf/tanhf/erff calls kept whole loops scalar; selects whose other
 * side computes use kiln_m_sel for the same reason. */
#include <math.h>
#include <string.h>

#include "codegen/c/codegen.h"

/* An exact float literal, e.g. "0x1.99999ap-3f"; infinities as HUGE_VALF. */
static const char *flit(char *buf, size_t n, float v)
{
    if (isinf(v))
        snprintf(buf, n, "%sHUGE_VALF", v < 0 ? "-" : "");
    else if (isnan(v))
        snprintf(buf, n, "NAN");
    else
        snprintf(buf, n, "%af", (double)v);
    return buf;
}

static bool all_f32(const kiln_graph *g, const kiln_node *n)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] < 0 || g->values[n->inputs[k]]->dtype != KILN_DTYPE_FLOAT32)
            return false;
    return n->n_outputs == 1 && g->values[n->outputs[0]]->dtype == KILN_DTYPE_FLOAT32;
}

bool kiln_expr_supported(const kiln_node *n)
{
    switch (n->op) {
    case KILN_OP_RELU: case KILN_OP_CLIP: case KILN_OP_SIGMOID: case KILN_OP_HARDSIGMOID:
    case KILN_OP_HARDSWISH: case KILN_OP_ERF: case KILN_OP_SQRT: case KILN_OP_ADD:
    case KILN_OP_SUB: case KILN_OP_MUL: case KILN_OP_DIV: case KILN_OP_ABS: case KILN_OP_NEG:
    case KILN_OP_EXP: case KILN_OP_LOG: case KILN_OP_TANH: case KILN_OP_SOFTPLUS:
    case KILN_OP_ELU: case KILN_OP_LEAKYRELU: case KILN_OP_RECIPROCAL: case KILN_OP_GELU:
    case KILN_OP_SIN: case KILN_OP_COS: case KILN_OP_FLOOR: case KILN_OP_CEIL:
    case KILN_OP_SELU: case KILN_OP_SOFTSIGN: case KILN_OP_MISH:
        return true;
    case KILN_OP_MIN: case KILN_OP_MAX: case KILN_OP_SUM:
        return n->n_inputs == 2;
    case KILN_OP_POW:
        return true;
    default:
        return false;
    }
}

bool kiln_expr_op(const kiln_graph *g, const kiln_node *n)
{
    if (!kiln_expr_supported(n) || !all_f32(g, n))
        return false;
    if (n->op == KILN_OP_GELU && strcmp(kiln_attr_string(n, "approximate", "none"), "none") != 0 &&
        strcmp(kiln_attr_string(n, "approximate", "none"), "tanh") != 0)
        return false;
    return true;
}

bool kiln_expr_emit(kiln_sb *b, const kiln_node *n, const char *const *x, int nx,
                    const char *out)
{
    char l1[64], l2[64];
    const char *a = nx > 0 ? x[0] : "0", *c = nx > 1 ? x[1] : "0";
    switch (n->op) {
    case KILN_OP_RELU:
        kiln_sb_printf(b, "%s = %s > 0.0f ? %s : 0.0f;", out, a, a);
        return true;
    case KILN_OP_CLIP: {
        float lo = kiln_attr_float(n, "min", -INFINITY), hi = kiln_attr_float(n, "max", INFINITY);
        kiln_sb_printf(b, "{ float t_ = %s; t_ = t_ < %s ? %s : t_; %s = t_ > %s ? %s : t_; }", a,
                       flit(l1, sizeof l1, lo), l1, out, flit(l2, sizeof l2, hi), l2);
        return true;
    }
    case KILN_OP_SIGMOID:
        kiln_sb_printf(b, "%s = kiln_m_sigmoidf(%s);", out, a);
        return true;
    case KILN_OP_HARDSIGMOID:
        kiln_sb_printf(b, "%s = kiln_m_hardsigmoidf(%s, %s, %s);", out, a,
                       flit(l1, sizeof l1, kiln_attr_float(n, "alpha", 0.2f)),
                       flit(l2, sizeof l2, kiln_attr_float(n, "beta", 0.5f)));
        return true;
    case KILN_OP_HARDSWISH:
        kiln_sb_printf(b, "{ float t_ = %s; %s = t_ * kiln_m_hardsigmoidf(t_, 1.0f / 6.0f, 0.5f); }",
                       a, out);
        return true;
    case KILN_OP_ERF:
        kiln_sb_printf(b, "%s = kiln_m_erff(%s);", out, a);
        return true;
    case KILN_OP_SQRT:
        kiln_sb_printf(b, "%s = sqrtf(%s);", out, a);
        return true;
    case KILN_OP_ADD:
    case KILN_OP_SUM:
        kiln_sb_printf(b, "%s = %s + %s;", out, a, c);
        return true;
    case KILN_OP_SUB:
        kiln_sb_printf(b, "%s = %s - %s;", out, a, c);
        return true;
    case KILN_OP_MUL:
        kiln_sb_printf(b, "%s = %s * %s;", out, a, c);
        return true;
    case KILN_OP_DIV:
        kiln_sb_printf(b, "%s = %s / %s;", out, a, c);
        return true;
    case KILN_OP_POW:
        kiln_sb_printf(b, "%s = powf(%s, %s);", out, a, c);
        return true;
    case KILN_OP_MIN:
        kiln_sb_printf(b, "{ float p_ = %s, q_ = %s; %s = (p_ != p_ || q_ != q_) ? NAN : (p_ < q_ ? p_ : q_); }", a, c, out);
        return true;
    case KILN_OP_MAX:
        kiln_sb_printf(b, "{ float p_ = %s, q_ = %s; %s = (p_ != p_ || q_ != q_) ? NAN : (p_ > q_ ? p_ : q_); }", a, c, out);
        return true;
    case KILN_OP_ABS:
        kiln_sb_printf(b, "%s = fabsf(%s);", out, a);
        return true;
    case KILN_OP_NEG:
        kiln_sb_printf(b, "%s = -(%s);", out, a);
        return true;
    case KILN_OP_EXP:
        kiln_sb_printf(b, "%s = kiln_m_expf(%s);", out, a);
        return true;
    case KILN_OP_LOG:
        kiln_sb_printf(b, "%s = kiln_m_logf(%s);", out, a);
        return true;
    case KILN_OP_TANH:
        kiln_sb_printf(b, "%s = kiln_m_tanhf(%s);", out, a);
        return true;
    case KILN_OP_SIN:
        kiln_sb_printf(b, "%s = sinf(%s);", out, a);
        return true;
    case KILN_OP_COS:
        kiln_sb_printf(b, "%s = cosf(%s);", out, a);
        return true;
    case KILN_OP_FLOOR:
        kiln_sb_printf(b, "%s = floorf(%s);", out, a);
        return true;
    case KILN_OP_CEIL:
        kiln_sb_printf(b, "%s = ceilf(%s);", out, a);
        return true;
    case KILN_OP_RECIPROCAL:
        kiln_sb_printf(b, "%s = 1.0f / (%s);", out, a);
        return true;
    case KILN_OP_SOFTPLUS:
        kiln_sb_printf(b, "%s = kiln_m_softplusf(%s);", out, a);
        return true;
    case KILN_OP_SOFTSIGN:
        kiln_sb_printf(b, "{ float t_ = %s; %s = t_ / (1.0f + fabsf(t_)); }", a, out);
        return true;
    case KILN_OP_MISH:
        kiln_sb_printf(b, "{ float t_ = %s; %s = t_ * kiln_m_tanhf(kiln_m_softplusf(t_)); }",
                       a, out);
        return true;
    case KILN_OP_ELU:
        kiln_sb_printf(b, "{ float t_ = %s; %s = kiln_m_sel(t_ >= 0.0f, t_, %s * kiln_m_expm1f(t_)); }", a,
                       out, flit(l1, sizeof l1, kiln_attr_float(n, "alpha", 1.0f)));
        return true;
    case KILN_OP_SELU:
        kiln_sb_printf(b,
                       "{ float t_ = %s; %s = %s * kiln_m_sel(t_ > 0.0f, t_, %s * kiln_m_expm1f(t_)); }",
                       a, out, flit(l1, sizeof l1, kiln_attr_float(n, "gamma", 1.05070102214813232421875f)),
                       flit(l2, sizeof l2, kiln_attr_float(n, "alpha", 1.67326319217681884765625f)));
        return true;
    case KILN_OP_LEAKYRELU:
        kiln_sb_printf(b, "{ float t_ = %s; %s = kiln_m_sel(t_ >= 0.0f, t_, %s * t_); }", a, out,
                       flit(l1, sizeof l1, kiln_attr_float(n, "alpha", 0.01f)));
        return true;
    case KILN_OP_GELU:
        if (strcmp(kiln_attr_string(n, "approximate", "none"), "tanh") == 0)
            kiln_sb_printf(b,
                           "{ float t_ = %s; %s = 0.5f * t_ * (1.0f + kiln_m_tanhf(0.7978845608028654f * "
                           "(t_ + 0.044715f * t_ * t_ * t_))); }",
                           a, out);
        else
            kiln_sb_printf(b, "%s = kiln_m_geluf(%s);", out, a);
        return true;
    default:
        return false;
    }
}
