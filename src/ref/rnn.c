/* ref/rnn.c: reference RNN, GRU and LSTM (forward, reverse, bidirectional;
 * layout 0 and 1; sequence_lens; initial_h/initial_c; LSTM peepholes and
 * input_forget; GRU linear_before_reset; clip; any ONNX activation list).
 *
 * Each direction and batch element runs on its own: the steps t = 0 .. L-1
 * (L = sequence_lens[b], default the full length) are visited forwards, or
 * backwards for the reverse direction, and at each step the gate
 * pre-activations a = W x_t + Wb + R h + Rb (G*H values, gate order as in
 * ONNX: GRU z, r, h; LSTM i, o, f, c) are formed in double, clipped to
 * [-clip, clip] when clip is set, and combined:
 *   RNN   h = f(a)
 *   GRU   z = f(a_z), r = f(a_r),
 *         n = g(W_h x + Wb_h + R_h (r . h) + Rb_h)        (linear_before_reset 0)
 *         n = g(W_h x + Wb_h + r . (R_h h + Rb_h))        (linear_before_reset 1)
 *         h = (1 - z) . n + z . h
 *   LSTM  i = f(a_i + P_i . c), f = f(a_f + P_f . c) (1 - i with input_forget),
 *         c = f . c + i . g(a_c), o = f(a_o + P_o . c), h = o . h(c)
 * Y gets h after every step (zeros after L), Y_h / Y_c the final state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/infer_nn.h"
#include "ref/ref.h"
#include "ref/scratch.h"

static double activate(kiln_rnn_act a, float alpha, float beta, double x)
{
    switch (a) {
    case KILN_ACT_RELU:
        return x > 0 ? x : 0;
    case KILN_ACT_TANH:
        return tanh(x);
    case KILN_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case KILN_ACT_AFFINE:
        return alpha * x + beta;
    case KILN_ACT_LEAKYRELU:
        return x < 0 ? alpha * x : x;
    case KILN_ACT_THRESHOLDEDRELU:
        return x > alpha ? x : 0;
    case KILN_ACT_SCALEDTANH:
        return alpha * tanh(beta * x);
    case KILN_ACT_HARDSIGMOID: {
        double v = alpha * x + beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case KILN_ACT_ELU:
        return x < 0 ? alpha * (exp(x) - 1) : x;
    case KILN_ACT_SOFTSIGN:
        return x / (1 + fabs(x));
    case KILN_ACT_SOFTPLUS:
        return log1p(exp(x));
    }
    return x;
}

typedef struct rnn_io {
    const float *x, *w, *r, *b, *h0, *c0, *p;
    const void *lens;
    kiln_dtype lens_dtype;
    float *y, *yh, *yc;
} rnn_io;

/* out[j] = sum_k m[j, k] * v[k] for j < rows (m row-major, cols wide). */
static void matvec_add(const float *m, const double *v, int64_t rows, int64_t cols, double *out)
{
    for (int64_t j = 0; j < rows; j++) {
        const float *row = m + j * cols;
        double acc = 0.0;
        for (int64_t k = 0; k < cols; k++)
            acc += (double)row[k] * v[k];
        out[j] += acc;
    }
}

static double clipv(double v, float clip)
{
    if (clip > 0.0f)
        return v < -clip ? -clip : v > clip ? clip : v;
    return v;
}

/* Offset of a (dir, batch) state row in initial_h / Y_h. */
static int64_t state_off(const kiln_rnn_geom *g, int dir, int64_t b)
{
    return (g->layout ? b * g->dirs + dir : dir * g->batch + b) * g->hidden;
}

/* One direction's state while it runs, in doubles: the gate
 * pre-activations (2 x gates x hidden), h, c, two temporaries and x. */
static size_t state_bytes(const kiln_rnn_geom *g)
{
    int64_t GH = g->gates * g->hidden;
    return sizeof(double) * (size_t)(2 * GH + 4 * g->hidden + g->input);
}

static kiln_status run(const kiln_node *n, const kiln_rnn_geom *g, const rnn_io *io,
                       kiln_error *err)
{
    int64_t H = g->hidden, I = g->input, G = g->gates, GH = G * H, S = g->seq, B = g->batch;
    double *buf = kiln_ref_scratch_get(state_bytes(g));
    if (!buf)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", kiln_op_name(n->op));
    double *a = buf, *rh = a + GH, *h = rh + GH, *c = h + H, *tmp = c + H, *hn = tmp + H,
           *xv = hn + H;
    if (io->y) {
        int64_t ny = S * g->dirs * B * H;
        for (int64_t i = 0; i < ny; i++)
            io->y[i] = 0.0f;
    }
    for (int dir = 0; dir < g->dirs; dir++) {
        bool rev = g->dirs == 2 ? dir == 1 : g->reverse;
        const float *W = io->w + dir * GH * I, *R = io->r + dir * GH * H;
        const float *Wb = io->b ? io->b + dir * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
        const float *P = io->p ? io->p + dir * 3 * H : NULL;
        const kiln_rnn_act *act = g->act + dir * g->n_act;
        const float *al = g->alpha + dir * g->n_act, *be = g->beta + dir * g->n_act;
        for (int64_t b = 0; b < B; b++) {
            int64_t L = S;
            if (io->lens) {
                L = io->lens_dtype == KILN_DTYPE_INT32 ? ((const int32_t *)io->lens)[b]
                                                       : ((const int64_t *)io->lens)[b];
                if (L < 0 || L > S) {
                    kiln_ref_scratch_put(buf);
                    return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                       "%s: sequence_lens[%lld] = %lld is outside [0, %lld]",
                                       kiln_op_name(n->op), (long long)b, (long long)L,
                                       (long long)S);
                }
            }
            int64_t so = state_off(g, dir, b);
            for (int64_t j = 0; j < H; j++) {
                h[j] = io->h0 ? io->h0[so + j] : 0.0;
                c[j] = io->c0 ? io->c0[so + j] : 0.0;
            }
            for (int64_t s = 0; s < L; s++) {
                int64_t t = rev ? L - 1 - s : s;
                const float *xr = io->x + (g->layout ? b * S + t : t * B + b) * I;
                for (int64_t k = 0; k < I; k++)
                    xv[k] = xr[k];
                for (int64_t j = 0; j < GH; j++) {
                    a[j] = Wb ? (double)Wb[j] : 0.0;
                    rh[j] = Rb ? (double)Rb[j] : 0.0;
                }
                matvec_add(W, xv, GH, I, a);
                if (G == 3) { /* GRU: the h gate's recurrent term depends on r */
                    matvec_add(R, h, 2 * H, H, rh);
                    for (int64_t j = 0; j < 2 * H; j++)
                        a[j] = clipv(a[j] + rh[j], g->clip);
                    for (int64_t j = 0; j < H; j++) {
                        double z = activate(act[0], al[0], be[0], a[j]);
                        double r = activate(act[0], al[0], be[0], a[H + j]);
                        a[j] = z;
                        a[H + j] = r;
                        tmp[j] = r * h[j];
                    }
                    if (g->linear_before_reset) {
                        matvec_add(R + 2 * H * H, h, H, H, rh + 2 * H);
                        for (int64_t j = 0; j < H; j++)
                            a[2 * H + j] += a[H + j] * rh[2 * H + j];
                    } else {
                        matvec_add(R + 2 * H * H, tmp, H, H, rh + 2 * H);
                        for (int64_t j = 0; j < H; j++)
                            a[2 * H + j] += rh[2 * H + j];
                    }
                    for (int64_t j = 0; j < H; j++) {
                        double nv = activate(act[1], al[1], be[1], clipv(a[2 * H + j], g->clip));
                        hn[j] = (1.0 - a[j]) * nv + a[j] * h[j];
                    }
                } else {
                    matvec_add(R, h, GH, H, rh);
                    for (int64_t j = 0; j < GH; j++)
                        a[j] += rh[j];
                    if (G == 1) {
                        for (int64_t j = 0; j < H; j++)
                            hn[j] = activate(act[0], al[0], be[0], clipv(a[j], g->clip));
                    } else { /* LSTM: i o f c */
                        for (int64_t j = 0; j < H; j++) {
                            double pi = P ? P[j] : 0.0, po = P ? P[H + j] : 0.0,
                                   pf = P ? P[2 * H + j] : 0.0;
                            double ig = activate(act[0], al[0], be[0],
                                                 clipv(a[j] + pi * c[j], g->clip));
                            double fg = g->input_forget
                                            ? 1.0 - ig
                                            : activate(act[0], al[0], be[0],
                                                       clipv(a[2 * H + j] + pf * c[j], g->clip));
                            double cg = activate(act[1], al[1], be[1], clipv(a[3 * H + j], g->clip));
                            double cn = fg * c[j] + ig * cg;
                            double og = activate(act[0], al[0], be[0],
                                                 clipv(a[H + j] + po * cn, g->clip));
                            c[j] = cn;
                            hn[j] = og * activate(act[2], al[2], be[2], cn);
                        }
                    }
                }
                memcpy(h, hn, sizeof(double) * (size_t)H);
                if (io->y) {
                    int64_t yo = g->layout ? ((b * S + t) * g->dirs + dir) * H
                                           : ((t * g->dirs + dir) * B + b) * H;
                    for (int64_t j = 0; j < H; j++)
                        io->y[yo + j] = (float)h[j];
                }
            }
            for (int64_t j = 0; j < H; j++) {
                if (io->yh)
                    io->yh[so + j] = (float)h[j];
                if (io->yc)
                    io->yc[so + j] = (float)c[j];
            }
        }
    }
    kiln_ref_scratch_put(buf);
    return KILN_OK;
}

/* kiln_rnn_resolve on the kernel's tensors. */
static kiln_status resolve(const kiln_node *n, const kiln_tensor *const *in, int *n_in,
                           kiln_rnn_geom *g, kiln_error *err)
{
    const kiln_shape *shapes[8] = {0};
    kiln_dtype dtypes[8] = {0};
    *n_in = n->n_inputs > 8 ? 8 : n->n_inputs;
    for (int k = 0; k < *n_in; k++) {
        if (in[k]) {
            shapes[k] = &in[k]->shape;
            dtypes[k] = in[k]->dtype;
        }
    }
    return kiln_rnn_resolve(n, shapes, dtypes, *n_in, g, err);
}

size_t kiln_ref_rnn_scratch(const kiln_node *n, const kiln_tensor *const *in)
{
    kiln_rnn_geom g;
    kiln_error err = {0};
    int n_in;
    if (resolve(n, in, &n_in, &g, &err) != KILN_OK)
        return 0;
    return kiln_ref_scratch_round(state_bytes(&g));
}

static kiln_status recurrent(const kiln_node *n, const kiln_tensor *const *in,
                             kiln_tensor *const *out, kiln_error *err)
{
    kiln_rnn_geom g;
    int n_in;
    kiln_status s = resolve(n, in, &n_in, &g, err);
    if (s != KILN_OK)
        return s;
    int64_t ny = g.seq * g.dirs * g.batch * g.hidden, nh = g.dirs * g.batch * g.hidden;
    for (int k = 0; k < n->n_outputs; k++)
        if (out[k] && (out[k]->dtype != KILN_DTYPE_FLOAT32 ||
                       kiln_shape_numel(&out[k]->shape) != (k == 0 ? ny : nh)))
            return kiln_errorf(err, KILN_ERR_INTERNAL, "%s: output %d buffer is wrong",
                               kiln_op_name(n->op), k);
#define IN(k) (n_in > (k) && in[k] ? (const float *)in[k]->data : NULL)
    rnn_io io = {.x = IN(0),
                 .w = IN(1),
                 .r = IN(2),
                 .b = IN(3),
                 .lens = n_in > 4 && in[4] ? in[4]->data : NULL,
                 .lens_dtype = n_in > 4 && in[4] ? in[4]->dtype : KILN_DTYPE_INT32,
                 .h0 = IN(5),
                 .c0 = IN(6),
                 .p = IN(7),
                 .y = out[0] ? out[0]->data : NULL,
                 .yh = n->n_outputs > 1 && out[1] ? out[1]->data : NULL,
                 .yc = n->n_outputs > 2 && out[2] ? out[2]->data : NULL};
#undef IN
    return run(n, &g, &io, err);
}

kiln_status kiln_ref_rnn(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return recurrent(n, in, out, err);
}

kiln_status kiln_ref_gru(const kiln_node *n, const kiln_tensor *const *in,
                         kiln_tensor *const *out, kiln_error *err)
{
    return recurrent(n, in, out, err);
}

kiln_status kiln_ref_lstm(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    return recurrent(n, in, out, err);
}
