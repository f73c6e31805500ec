/* tests/kernels/test_math_kernels.c: the functions of kiln_kernels_math.h
 * (what generated Sigmoid, Tanh, Exp, Log, Erf, Gelu, Softplus, Mish, Elu,
 * Selu, Softmax and Attention kernels run) against double libm, in units of
 * the last place of the correctly rounded float result (2^-149 for denormal
 * results; gelu, whose contract is absolute, in units of 2^-24 |x| + 1 ulp),
 * within the bounds the header states:
 *  - every 4093rd float bit pattern (~1M floats: every exponent, both signs,
 *    denormals, infinities, NaNs);
 *  - 2^20 evenly spaced points over each function's busy range;
 *  - the special values (+-0, +-inf, NaN, denormals, FLT_MAX, the clamp and
 *    region boundaries) exactly where the result is exact.
 * Each sweep runs through a loop over arrays (gcc vectorizes it at -O3) and
 * again in a function compiled for AVX2+FMA when the CPU has it, where gcc
 * contracts a * b + c into fma, as it does in generated avx2/avx512 code. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "codegen/c/kernels/kiln_kernels_math.h"

enum { F_EXP, F_EXPM1, F_LOG, F_LOG1P, F_TANH, F_SIGMOID, F_SOFTPLUS, F_ERF, F_GELU, F_COUNT };
static const char *const fname[F_COUNT] = {"exp",     "expm1",    "log", "log1p", "tanh",
                                           "sigmoid", "softplus", "erf", "gelu"};
/* ulps, but for gelu: units of 2^-24 |x| + 1 ulp (see gelu_err) */
static const double bound[F_COUNT] = {2, 2, 2, 2, 3, 3, 3, 3, 1.5};

/* One loop per function (a switch inside would keep gcc from vectorizing). */
#define DEFINE_EVAL(suffix, attr)                                                                  \
    attr static void eval_##suffix(int f, const float *restrict in, float *restrict out, int64_t n) \
    {                                                                                              \
        switch (f) {                                                                               \
        case F_EXP: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_expf(in[i]); break;            \
        case F_EXPM1: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_expm1f(in[i]); break;        \
        case F_LOG: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_logf(in[i]); break;            \
        case F_LOG1P: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_log1pf(in[i]); break;        \
        case F_TANH: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_tanhf(in[i]); break;          \
        case F_SIGMOID: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_sigmoidf(in[i]); break;    \
        case F_SOFTPLUS: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_softplusf(in[i]); break;  \
        case F_ERF: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_erff(in[i]); break;            \
        default: for (int64_t i = 0; i < n; i++) out[i] = kiln_m_geluf(in[i]); break;              \
        }                                                                                          \
    }

DEFINE_EVAL(plain, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
DEFINE_EVAL(fma, __attribute__((target("avx2,fma"))))
static bool have_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static void eval_fma(int f, const float *in, float *out, int64_t n) { eval_plain(f, in, out, n); }
static bool have_fma(void) { return false; }
#endif

static double ref(int f, double x)
{
    switch (f) {
    case F_EXP: return exp(x);
    case F_EXPM1: return x > 0 ? 0.0 : expm1(x); /* the function's domain is x <= 0 */
    case F_LOG: return log(x);
    case F_LOG1P: return log1p(x);
    case F_TANH: return tanh(x);
    case F_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case F_SOFTPLUS: return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case F_ERF: return erf(x);
    default: return x == -INFINITY ? -0.0 : 0.5 * x * erfc(-x * M_SQRT1_2); /* gelu; its limit at -inf */
    }
}

/* |got - want| in ulps of want rounded to float; NaN and infinities must
 * match exactly (returns a huge error otherwise). */
static double ulp_of(double want)
{
    float wf = (float)want;
    int e;
    frexp(wf == 0.0f ? 0x1p-149 : (double)wf, &e);
    double u = ldexp(1.0, e - 24);
    return u < 0x1p-149 ? 0x1p-149 : u;
}

static double ulp_err(float got, double want)
{
    if (isnan(want))
        return isnan(got) ? 0.0 : 1e30;
    float wf = (float)want;
    if (isinf(wf) || isinf(got))
        return wf == got ? 0.0 : 1e30;
    return fabs((double)got - want) / ulp_of(want);
}

/* gelu's error, in units of 2^-24 |x| + 1 ulp of the result: the absolute
 * error its Phi(x) is fitted for (kiln_m_geluf), which the textbook
 * 0.5 x (1 + erf(x / sqrt 2)) has too; -inf must give a result within 2^-24
 * of 0. */
static double gelu_err(float got, float x)
{
    double want = ref(F_GELU, (double)x);
    if (x == -INFINITY)
        return fabs((double)got) <= 0x1p-24 ? 0.0 : 1e30;
    if (isnan(want) || isinf(want) || isnan(got) || isinf(got))
        return ulp_err(got, want);
    return fabs((double)got - want) / (0x1p-24 * fabs((double)x) + ulp_of(want));
}

static void check(const float *in, int64_t n, const char *what)
{
    float *out = malloc((size_t)n * sizeof *out);
    assert_non_null(out);
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 1 && !have_fma())
            break;
        for (int f = 0; f < F_COUNT; f++) {
            (variant ? eval_fma : eval_plain)(f, in, out, n);
            double worst = 0.0;
            int64_t wi = 0;
            for (int64_t i = 0; i < n; i++) {
                double e = f == F_GELU ? gelu_err(out[i], in[i]) : ulp_err(out[i], ref(f, (double)in[i]));
                if (e > worst) {
                    worst = e;
                    wi = i;
                }
            }
            if (worst > bound[f])
                fail_msg("%s%s (%s): %.3g ulp at x = %a (got %a, want %a), bound %g", fname[f],
                         variant ? " with fma" : "", what, worst, (double)in[wi], (double)out[wi],
                         ref(f, (double)in[wi]), bound[f]);
        }
    }
    free(out);
}

static void test_bit_patterns(void **state)
{
    (void)state;
    int64_t n = (int64_t)((1ull << 32) / 4093) + 1;
    float *in = malloc((size_t)n * sizeof *in);
    assert_non_null(in);
    for (int64_t i = 0; i < n; i++) {
        uint32_t b = (uint32_t)((uint64_t)i * 4093u);
        memcpy(&in[i], &b, sizeof b);
    }
    check(in, n, "every 4093rd bit pattern");
    free(in);
}

static void test_busy_ranges(void **state)
{
    (void)state;
    static const float range[][2] = {{-12.0f, 12.0f}, {-1.0f, 1.0f}, {-0.01f, 0.01f},
                                     {-110.0f, 95.0f}, {0.0f, 4.0f}};
    int64_t n = 1 << 20;
    float *in = malloc((size_t)n * sizeof *in);
    assert_non_null(in);
    for (size_t r = 0; r < sizeof range / sizeof range[0]; r++) {
        for (int64_t i = 0; i < n; i++)
            in[i] = range[r][0] + (range[r][1] - range[r][0]) * (float)((double)i / (double)(n - 1));
        check(in, n, "dense range");
    }
    free(in);
}

static void test_special_values(void **state)
{
    (void)state;
    const float inf = INFINITY, qnan = NAN;
    /* the error sweep of the special and boundary values */
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f,
                               0x1.fffffcp-127f, 0x1p-126f, FLT_MAX, -FLT_MAX, 88.72283f, 88.7229f,
                               -87.33654f, -103.97208f, -103.9721f, -104.0f, 104.0f, -87.0f, 9.1f,
                               -9.1f, 4.0f, 0.875f, -0.875f, 0x1.fffffep-1f, 1.0f, -1.0f,
                               -0x1.fffffep-1f, 20.0f, -20.0f, 0x1p-24f, 0x1p-25f, 2.0f, -2.0f, 5.65625f,
                               -5.65625f, 0x1.fffffep+0f, -0x1.fffffep+0f};
    check(sp, (int64_t)(sizeof sp / sizeof sp[0]), "special values");
    /* exact results */
    assert_true(kiln_m_expf(inf) == inf);
    assert_true(kiln_m_expf(-inf) == 0.0f);
    assert_true(isnan(kiln_m_expf(qnan)));
    assert_true(kiln_m_expf(0.0f) == 1.0f);
    assert_true(kiln_m_expf(89.0f) == inf);
    assert_true(kiln_m_expm1f(-inf) == -1.0f);
    assert_true(kiln_m_expm1f(0.0f) == 0.0f);
    assert_true(kiln_m_expm1f(-0x1p-149f) == -0x1p-149f);
    assert_true(isnan(kiln_m_expm1f(qnan)));
    assert_true(kiln_m_logf(0.0f) == -inf);
    assert_true(kiln_m_logf(-0.0f) == -inf);
    assert_true(isnan(kiln_m_logf(-1.0f)));
    assert_true(isnan(kiln_m_logf(-inf)));
    assert_true(kiln_m_logf(inf) == inf);
    assert_true(isnan(kiln_m_logf(qnan)));
    assert_true(kiln_m_logf(1.0f) == 0.0f);
    assert_true(kiln_m_log1pf(-1.0f) == -inf);
    assert_true(kiln_m_log1pf(inf) == inf);
    assert_true(kiln_m_log1pf(0x1p-149f) == 0x1p-149f);
    assert_true(kiln_m_tanhf(inf) == 1.0f && kiln_m_tanhf(-inf) == -1.0f);
    assert_true(kiln_m_tanhf(0.0f) == 0.0f && signbit(kiln_m_tanhf(-0.0f)));
    assert_true(kiln_m_tanhf(0x1p-149f) == 0x1p-149f);
    assert_true(isnan(kiln_m_tanhf(qnan)));
    assert_true(kiln_m_sigmoidf(inf) == 1.0f && kiln_m_sigmoidf(-inf) == 0.0f);
    assert_true(kiln_m_sigmoidf(0.0f) == 0.5f);
    assert_true(isnan(kiln_m_sigmoidf(qnan)));
    assert_true(kiln_m_softplusf(inf) == inf && kiln_m_softplusf(-inf) == 0.0f);
    assert_true(isnan(kiln_m_softplusf(qnan)));
    assert_true(kiln_m_erff(inf) == 1.0f && kiln_m_erff(-inf) == -1.0f);
    assert_true(kiln_m_erff(0.0f) == 0.0f && signbit(kiln_m_erff(-0.0f)));
    assert_true(isnan(kiln_m_erff(qnan)));
    assert_true(kiln_m_geluf(inf) == inf && kiln_m_geluf(0.0f) == 0.0f);
    assert_true(signbit(kiln_m_geluf(-0.0f)) && isnan(kiln_m_geluf(qnan)));
    assert_true(kiln_m_geluf(FLT_MAX) == FLT_MAX && kiln_m_geluf(20.0f) == 20.0f);
    assert_true(fabsf(kiln_m_geluf(-20.0f)) <= 0x1p-24f && fabsf(kiln_m_geluf(-inf)) <= 0x1p-24f);
}

/* HardSigmoid: exactly the float formula with fmin/fmax, NaN -> 1 as the
 * reference's fmin(1, NaN). */
static void test_hardsigmoid(void **state)
{
    (void)state;
    static const float xs[] = {-INFINITY, -4.0f, -3.0f, -2.5f, -0.0f, 0.0f, 0.3f, 2.5f, 3.0f, 7.0f,
                               INFINITY};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float a = 1.0f / 6.0f, b = 0.5f;
        float want = fmaxf(0.0f, fminf(1.0f, a * xs[i] + b));
        assert_true(kiln_m_hardsigmoidf(xs[i], a, b) == want);
    }
    assert_true(kiln_m_hardsigmoidf(NAN, 0.2f, 0.5f) == 1.0f);
}

/* kiln_m_expf_nonpos (sigmoid's, softplus's, erf's, softmax's and
 * attention's exp) is kiln_m_expf bit for bit on its domain x <= 0: every
 * 61st pattern with the sign bit set (-0, negative denormals and normals,
 * -inf, negative NaNs), then +0 and a positive NaN. */
static void test_exp_nonpos(void **state)
{
    (void)state;
    int64_t n = (int64_t)((1ull << 31) / 61) + 3;
    float *in = malloc((size_t)n * sizeof *in), *a = malloc((size_t)n * sizeof *a),
          *b = malloc((size_t)n * sizeof *b);
    assert_true(in && a && b);
    for (int64_t i = 0; i < n - 2; i++) {
        uint32_t u = 0x80000000u | (uint32_t)((uint64_t)i * 61u);
        memcpy(&in[i], &u, sizeof u);
    }
    in[n - 2] = 0.0f;
    in[n - 1] = NAN;
    for (int64_t i = 0; i < n; i++)
        a[i] = kiln_m_expf_nonpos(in[i]);
    for (int64_t i = 0; i < n; i++)
        b[i] = kiln_m_expf(in[i]);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(in[i]) ? !(isnan(a[i]) && isnan(b[i])) : memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            fail_msg("kiln_m_expf_nonpos(%a) = %a, kiln_m_expf gives %a", (double)in[i],
                     (double)a[i], (double)b[i]);
    }
    assert_true(kiln_m_expf_nonpos(-INFINITY) == 0.0f && kiln_m_expf_nonpos(0.0f) == 1.0f);
    free(in);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_nonpos),
        cmocka_unit_test(test_bit_patterns),
        cmocka_unit_test(test_busy_ranges),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_hardsigmoid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
