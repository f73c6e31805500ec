/* pass/lower_rnn.c: LSTM and GRU with constant weights, unrolled over their
 * (static) steps into Gemms and elementwise ops, which the dense and
 * elementwise templates compile. The reference kernels ran them one scalar
 * matrix-vector product per gate and step, single-threaded: a 2-layer
 * LSTM language model took 8x ONNX Runtime's time.
 *
 * Per direction d and gate g (LSTM i, o, f, c; GRU z, r, h, ONNX's order),
 * W[d] and R[d]'s rows of the gate are constants of their own (views of
 * the weights' floats). The input's contribution to every step is one Gemm
 * over all steps, XW_g = X [S*B, I] x W_g^T + bias, split into S [B, H]
 * blocks (one Split kernel). Each step then runs, with h and c the state
 * (initial_h/initial_c, else zeros):
 *   LSTM: g_x = act(h x R_g^T + XW_g[t])  (Sigmoid; Tanh for c)
 *         c' = f * c + i * g_c;  h' = o * Tanh(c')
 *   GRU:  z, r = Sigmoid(h x R^T + XW[t])
 *         n = Tanh(XW_h[t] + r * (h x R_h^T + Rb_h))     linear_before_reset
 *         n = Tanh(XW_h[t] + (r * h) x R_h^T + Rb_h)     otherwise
 *         h' = n + z * (h - n)
 * A reverse direction walks the steps backwards. Y stacks each step's h
 * (in time order) with Reshapes and one Concat per direction; Y_h and Y_c
 * the last state of each direction. The biases are the only new floats:
 * Wb_g + Rb_g in the input Gemm (GRU's h gate keeps Rb_h on its own Gemm
 * with linear_before_reset).
 *
 * Left to the reference kernel: run-time W, R or B, sequence_lens, LSTM
 * peepholes (P), activations other than the defaults (LSTM Sigmoid, Tanh,
 * Tanh; GRU Sigmoid, Tanh), clip, input_forget, layout 1 (batch first),
 * and more than MAX_STEPS steps over all directions (the graph grows by
 * about ten nodes per step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/infer_nn.h"
#include "pass/pass.h"
#include "util/error.h"

#define MAX_STEPS 1024

static const kiln_value *input_at(const kiln_graph *g, const kiln_node *n, int k)
{
    return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]] : NULL;
}

static bool const_f32(const kiln_value *v)
{
    return v && v->kind == KILN_VALUE_CONST && v->data && v->dtype == KILN_DTYPE_FLOAT32;
}

static bool plan(const kiln_graph *g, const kiln_node *n, kiln_rnn_geom *geo)
{
    if ((n->op != KILN_OP_LSTM && n->op != KILN_OP_GRU) || n->n_inputs < 3)
        return false;
    const kiln_shape *shapes[8] = {0};
    kiln_dtype dtypes[8] = {0};
    int n_in = n->n_inputs < 8 ? n->n_inputs : 8;
    for (int k = 0; k < n_in; k++) {
        const kiln_value *v = input_at(g, n, k);
        shapes[k] = v ? &v->shape : NULL;
        dtypes[k] = v ? v->dtype : KILN_DTYPE_FLOAT32;
    }
    const kiln_value *x = input_at(g, n, 0), *b = input_at(g, n, 3);
    if (!x || x->dtype != KILN_DTYPE_FLOAT32 || !const_f32(input_at(g, n, 1)) ||
        !const_f32(input_at(g, n, 2)) || (b && !const_f32(b)) || input_at(g, n, 4) ||
        (n->op == KILN_OP_LSTM && input_at(g, n, 7)))
        return false;
    kiln_error err;
    if (kiln_rnn_resolve(n, shapes, dtypes, n_in, geo, &err) != KILN_OK)
        return false;
    if (geo->layout != 0 || geo->clip > 0.0f || geo->input_forget ||
        geo->seq * geo->dirs > MAX_STEPS)
        return false;
    /* the default activations, per direction */
    int per = n->op == KILN_OP_LSTM ? 3 : 2;
    for (int k = 0; k < geo->n_act * geo->dirs; k++)
        if (geo->act[k] != (k % per == 0 ? KILN_ACT_SIGMOID : KILN_ACT_TANH))
            return false;
    return geo->n_act == per;
}

/* Lowering state of one node. */
typedef struct rnn {
    kiln_rewrite *rw;
    const kiln_graph *g;
    const kiln_node *n;
    const kiln_rnn_geom *geo;
    kiln_shape bh; /* [B, H] */
} rnn;

static int node1(rnn *r, kiln_op op, const char *suffix, const int *in, int n_in,
                 const kiln_shape *shape)
{
    int id = kiln_rewrite_emit(r->rw, r->n, op, suffix, in, n_in, shape, false);
    return id < 0 ? -1 : kiln_rewrite_out(r->rw, id);
}

static int binary(rnn *r, kiln_op op, const char *suffix, int a, int b)
{
    int in[2] = {a, b};
    return node1(r, op, suffix, in, 2, &r->bh);
}

static int unary(rnn *r, kiln_op op, const char *suffix, int a)
{
    return node1(r, op, suffix, &a, 1, &r->bh);
}

/* A Reshape of v to `shape`. */
static int reshape(rnn *r, const char *suffix, int v, const kiln_shape *shape)
{
    return kiln_rewrite_move(r->rw, r->n, KILN_OP_RESHAPE, suffix, v, shape, shape->dims, false);
}

/* h x w^T (+ bias): a Gemm with transB. */
static int gemm(rnn *r, const char *suffix, int h, int w, int bias, const kiln_shape *shape)
{
    int in[3] = {h, w, bias};
    int id = kiln_rewrite_emit(r->rw, r->n, KILN_OP_GEMM, suffix, in, bias >= 0 ? 3 : 2, shape,
                               false);
    if (id < 0 || kiln_node_set_int(r->rw->dst, id, "transB", 1) != KILN_OK)
        return -1;
    return kiln_rewrite_out(r->rw, id);
}

/* Rows [row0, row0 + rows) of the float constant v ([D, G*H, cols]) as a
 * constant [rows, cols] borrowing its floats. */
static int rows_of(rnn *r, const kiln_value *v, const char *what, int64_t row0, int64_t rows,
                   int64_t cols)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s_%lld", r->n->name, what, (long long)row0);
    kiln_shape s = {.rank = 2, .dims = {rows, cols}};
    return kiln_rewrite_const(r->rw, name, KILN_DTYPE_FLOAT32, &s,
                              (float *)v->data + row0 * cols, v->layout);
}

/* A new float constant [len] (zeros), its data in *data. */
static int new_const(rnn *r, const char *what, int64_t len, float **data)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", r->n->name, what);
    kiln_shape s = {.rank = 1, .dims = {len}};
    int id = kiln_graph_add_const_uninit(r->rw->dst, name, KILN_DTYPE_FLOAT32, &s, true,
                                         (void **)data);
    if (id >= 0)
        memset(*data, 0, sizeof(float) * (size_t)len);
    return id;
}

/* The state input k (initial_h, initial_c: [D, B, H]) of direction d as
 * [B, H] (zeros when absent); -1 on failure. */
static int initial_state(rnn *r, int k, int d, const char *what)
{
    const kiln_rnn_geom *geo = r->geo;
    const kiln_value *v = input_at(r->g, r->n, k);
    char sfx[64];
    if (!v) {
        float *z;
        snprintf(sfx, sizeof sfx, "%s_zero%d", what, d);
        int id = new_const(r, sfx, geo->batch * geo->hidden, &z);
        if (id < 0)
            return -1;
        r->rw->dst->values[id]->shape = r->bh;
        return id;
    }
    int cur = kiln_rewrite_value(r->rw, r->n->inputs[k]);
    if (geo->dirs == 1) {
        snprintf(sfx, sizeof sfx, ".%s0", what);
        return reshape(r, sfx, cur, &r->bh);
    }
    kiln_shape one = {.rank = 3, .dims = {1, geo->batch, geo->hidden}};
    snprintf(sfx, sizeof sfx, ".%s%d", what, d);
    int in[1] = {cur};
    int id = kiln_rewrite_emit(r->rw, r->n, KILN_OP_SLICE, sfx, in, 1, &one, false);
    int64_t st[1] = {d}, en[1] = {d + 1}, ax[1] = {0};
    if (id < 0 || kiln_node_set_ints(r->rw->dst, id, "starts", st, 1) != KILN_OK ||
        kiln_node_set_ints(r->rw->dst, id, "ends", en, 1) != KILN_OK ||
        kiln_node_set_ints(r->rw->dst, id, "axes", ax, 1) != KILN_OK)
        return -1;
    snprintf(sfx, sizeof sfx, ".%s%d_2d", what, d);
    return reshape(r, sfx, kiln_rewrite_out(r->rw, id), &r->bh);
}

/* Splits v along `axis` into n_out parts (sizes: NULL for equal ones), each
 * of shape parts[k]; their values in out[]. One part: v itself. */
static bool split(rnn *r, const char *suffix, int v, int axis, int n_out, const int64_t *sizes,
                  const kiln_shape *parts, int *out)
{
    if (n_out == 1) {
        out[0] = v;
        return true;
    }
    char name[512];
    snprintf(name, sizeof name, "%s%s", r->n->name, suffix);
    int id = kiln_graph_add_node(r->rw->dst, KILN_OP_SPLIT, name, &v, 1, n_out);
    if (id < 0 || kiln_node_set_int(r->rw->dst, id, "axis", axis) != KILN_OK ||
        (sizes && kiln_node_set_ints(r->rw->dst, id, "split", sizes, n_out) != KILN_OK))
        return false;
    for (int k = 0; k < n_out; k++) {
        out[k] = r->rw->dst->nodes[id]->outputs[k];
        kiln_value *o = r->rw->dst->values[out[k]];
        o->dtype = KILN_DTYPE_FLOAT32;
        o->shape = parts[sizes ? k : 0];
    }
    return true;
}

/* A bias constant [len]: gate rows [row0, row0 + len) of B[d]'s input half,
 * plus its recurrence half where `with_rb` says so for the row's gate. */
static int bias_of(rnn *r, int d, int64_t row0, int64_t len, const bool *with_rb)
{
    const kiln_value *b = input_at(r->g, r->n, 3);
    int64_t GH = r->geo->gates * r->geo->hidden, H = r->geo->hidden;
    float *bd;
    char what[32];
    snprintf(what, sizeof what, "bias%d_%lld", d, (long long)row0);
    int id = new_const(r, what, len, &bd);
    if (id < 0 || !b)
        return id;
    const float *wb = (const float *)b->data + d * 2 * GH + row0;
    for (int64_t j = 0; j < len; j++)
        bd[j] = wb[j] + (with_rb[(row0 + j) / H] ? wb[GH + j] : 0.0f);
    return id;
}

/* X x W[d]'s rows [row0, row0 + rows)^T + bias over all steps, split into
 * the steps' [B, rows] blocks xw[0..S). */
static bool input_gemm(rnn *r, int x2, int d, int64_t row0, int64_t rows, const bool *with_rb,
                       int *xw)
{
    const kiln_rnn_geom *geo = r->geo;
    int64_t S = geo->seq, B = geo->batch;
    int w = rows_of(r, input_at(r->g, r->n, 1), "W", d * geo->gates * geo->hidden + row0, rows,
                    geo->input);
    int bias = w < 0 ? -1 : bias_of(r, d, row0, rows, with_rb);
    char sfx[48];
    snprintf(sfx, sizeof sfx, ".xw%d_%lld", d, (long long)row0);
    kiln_shape all = {.rank = 2, .dims = {S * B, rows}}, step = {.rank = 2, .dims = {B, rows}};
    int v = bias < 0 ? -1 : gemm(r, sfx, x2, w, bias, &all);
    snprintf(sfx, sizeof sfx, ".xw%d_%lld_steps", d, (long long)row0);
    return v >= 0 && split(r, sfx, v, 0, (int)S, NULL, &step, xw);
}

/* One direction: writes its per-step h (time order) to ys[0..S), and its
 * last h and c. xw, xw2: scratch of S entries each. */
static bool direction(rnn *r, int x2, int d, int *xw, int *xw2, int *ys, int *h_last, int *c_last)
{
    const kiln_rnn_geom *geo = r->geo;
    bool lstm = r->n->op == KILN_OP_LSTM, lbr = geo->linear_before_reset;
    const kiln_value *rv = input_at(r->g, r->n, 2);
    int64_t G = geo->gates, H = geo->hidden, S = geo->seq, B = geo->batch;
    bool rev = geo->reverse || d == 1;
    static const bool all_rb[4] = {true, true, true, true};
    static const bool gru_lbr_rb[3] = {true, true, false}; /* Rb_h inside r * (...) */
    kiln_shape gh = {.rank = 2, .dims = {B, G * H}}, one = r->bh;
    /* the recurrence weights: all gates' rows of R[d] in one Gemm, except
     * GRU without linear_before_reset, whose h gate multiplies r * h first */
    int64_t rec_rows = !lstm && !lbr ? 2 * H : G * H;
    int rw_all = rows_of(r, rv, "R", d * G * H, rec_rows, H), rw_h = -1, rb_rec = -1;
    if (rw_all < 0)
        return false;
    if (lstm) {
        if (!input_gemm(r, x2, d, 0, G * H, all_rb, xw))
            return false;
    } else if (lbr) {
        /* Rb_h stays on the recurrence Gemm: [0, 0, Rb_h] */
        float *rb;
        const kiln_value *b = input_at(r->g, r->n, 3);
        char what[16];
        snprintf(what, sizeof what, "rb%d", d);
        if (!input_gemm(r, x2, d, 0, G * H, gru_lbr_rb, xw) ||
            (rb_rec = new_const(r, what, G * H, &rb)) < 0)
            return false;
        if (b)
            memcpy(rb + 2 * H, (const float *)b->data + d * 2 * G * H + G * H + 2 * H,
                   sizeof(float) * (size_t)H);
    } else {
        if (!input_gemm(r, x2, d, 0, 2 * H, all_rb, xw) ||
            !input_gemm(r, x2, d, 2 * H, H, all_rb, xw2) ||
            (rw_h = rows_of(r, rv, "R", d * G * H + 2 * H, H, H)) < 0)
            return false;
    }
    int h = initial_state(r, 5, d, "h"), c = -1;
    if (h < 0 || (lstm && (c = initial_state(r, 6, d, "c")) < 0))
        return false;
    for (int64_t k = 0; k < S; k++) {
        int64_t t = rev ? S - 1 - k : k;
        char sfx[64];
        int gate[4];
#define SFX(what) (snprintf(sfx, sizeof sfx, ".%s%d_t%lld", what, d, (long long)t), sfx)
        if (lstm) {
            /* i, o, f, c pre-activations: h R^T + xw[t] in one Gemm */
            int pre = gemm(r, SFX("gates"), h, rw_all, -1, &gh);
            pre = pre < 0 ? -1 : node1(r, KILN_OP_ADD, SFX("pre"), (int[]){pre, xw[t]}, 2, &gh);
            if (pre < 0 || !split(r, SFX("split"), pre, 1, 4, NULL, &one, gate))
                return false;
            static const char *names[4] = {"i", "o", "f", "g"};
            for (int q = 0; q < 4; q++)
                if ((gate[q] = unary(r, q == 3 ? KILN_OP_TANH : KILN_OP_SIGMOID, SFX(names[q]),
                                     gate[q])) < 0)
                    return false;
            int fc = binary(r, KILN_OP_MUL, SFX("fc"), gate[2], c);
            int ig = binary(r, KILN_OP_MUL, SFX("ig"), gate[0], gate[3]);
            c = fc < 0 || ig < 0 ? -1 : binary(r, KILN_OP_ADD, SFX("c"), fc, ig);
            int tc = c < 0 ? -1 : unary(r, KILN_OP_TANH, SFX("tc"), c);
            h = tc < 0 ? -1 : binary(r, KILN_OP_MUL, SFX("h"), gate[1], tc);
        } else {
            int nn;
            if (lbr) {
                /* h R^T + [0, 0, Rb_h] for z, r, h; xw[t] for z, r, h */
                int hp[3], xp[3];
                int rec = gemm(r, SFX("rec"), h, rw_all, rb_rec, &gh);
                if (rec < 0 || !split(r, SFX("rsplit"), rec, 1, 3, NULL, &one, hp) ||
                    !split(r, SFX("xsplit"), xw[t], 1, 3, NULL, &one, xp))
                    return false;
                int zp = binary(r, KILN_OP_ADD, SFX("zpre"), hp[0], xp[0]);
                int rp = binary(r, KILN_OP_ADD, SFX("rpre"), hp[1], xp[1]);
                gate[0] = zp < 0 ? -1 : unary(r, KILN_OP_SIGMOID, SFX("z"), zp);
                gate[1] = rp < 0 ? -1 : unary(r, KILN_OP_SIGMOID, SFX("r"), rp);
                int rh = gate[1] < 0 ? -1 : binary(r, KILN_OP_MUL, SFX("rhr"), gate[1], hp[2]);
                int np = rh < 0 ? -1 : binary(r, KILN_OP_ADD, SFX("npre"), rh, xp[2]);
                nn = np < 0 ? -1 : unary(r, KILN_OP_TANH, SFX("n"), np);
            } else {
                kiln_shape g2 = {.rank = 2, .dims = {B, 2 * H}};
                int zr[2];
                int rec = gemm(r, SFX("rec"), h, rw_all, -1, &g2);
                rec = rec < 0 ? -1 : node1(r, KILN_OP_ADD, SFX("zrpre"), (int[]){rec, xw[t]}, 2, &g2);
                if (rec < 0 || !split(r, SFX("split"), rec, 1, 2, NULL, &one, zr))
                    return false;
                gate[0] = unary(r, KILN_OP_SIGMOID, SFX("z"), zr[0]);
                gate[1] = unary(r, KILN_OP_SIGMOID, SFX("r"), zr[1]);
                int rh = gate[1] < 0 ? -1 : binary(r, KILN_OP_MUL, SFX("rh"), gate[1], h);
                int q = rh < 0 ? -1 : gemm(r, SFX("hr"), rh, rw_h, -1, &one);
                int np = q < 0 ? -1 : binary(r, KILN_OP_ADD, SFX("npre"), q, xw2[t]);
                nn = np < 0 ? -1 : unary(r, KILN_OP_TANH, SFX("n"), np);
            }
            int dh = nn < 0 || gate[0] < 0 ? -1 : binary(r, KILN_OP_SUB, SFX("dh"), h, nn);
            int zd = dh < 0 ? -1 : binary(r, KILN_OP_MUL, SFX("zd"), gate[0], dh);
            h = zd < 0 ? -1 : binary(r, KILN_OP_ADD, SFX("h"), nn, zd);
        }
#undef SFX
        if (h < 0)
            return false;
        ys[t] = h;
    }
    *h_last = h;
    *c_last = c;
    return true;
}

/* A node taking over output k of the source node: a Concat of `parts`
 * along `axis` (one part: a Reshape) to shape `shape`. */
static bool output(rnn *r, int k, const int *parts, int n_parts, int axis, const kiln_shape *shape)
{
    if (k >= r->n->n_outputs || r->n->outputs[k] < 0)
        return true;
    static const char *const names[3] = {"Y", "Y_h", "Y_c"};
    char name[512];
    snprintf(name, sizeof name, "%s.%s", r->n->name, names[k]);
    kiln_node as = *r->n;
    as.name = name;
    as.outputs = &r->n->outputs[k];
    as.n_outputs = 1;
    as.n_attrs = 0;
    as.op = n_parts == 1 ? KILN_OP_RESHAPE : KILN_OP_CONCAT;
    as.n_inputs = n_parts;
    int id = kiln_rewrite_node(r->rw, &as, parts);
    if (id < 0)
        return false;
    if (n_parts == 1)
        return kiln_node_set_ints(r->rw->dst, id, "shape", shape->dims, shape->rank) == KILN_OK;
    return kiln_node_set_int(r->rw->dst, id, "axis", axis) == KILN_OK;
}

static bool lower(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n,
                  const kiln_rnn_geom *geo)
{
    int64_t S = geo->seq, B = geo->batch, H = geo->hidden, D = geo->dirs;
    rnn r = {rw, g, n, geo, {.rank = 2, .dims = {B, H}}};
    kiln_shape xs = {.rank = 2, .dims = {S * B, geo->input}};
    int x2 = reshape(&r, ".x_rows", kiln_rewrite_value(rw, n->inputs[0]), &xs);
    if (x2 < 0)
        return false;
    /* per step index arrays: 4 gates' xw, ys per direction */
    int *buf = malloc(sizeof(int) * (size_t)(S * (2 + D)));
    if (!buf)
        return false;
    int *xw = buf, *xw2 = buf + S, *ys = buf + 2 * S;
    int y_dir[2], h_dir[2], c_dir[2];
    bool ok = true;
    kiln_shape step = {.rank = 3, .dims = {1, B, H}};
    kiln_shape ydir = {.rank = 4, .dims = {S, 1, B, H}};
    kiln_shape last = {.rank = 3, .dims = {1, B, H}};
    for (int d = 0; d < D && ok; d++) {
        int *yd = ys + d * S;
        ok = direction(&r, x2, d, xw, xw2, yd, &h_dir[d], &c_dir[d]);
        /* Y of this direction: [S, 1, B, H], the steps stacked in time order */
        for (int64_t t = 0; t < S && ok; t++) {
            char sfx[48];
            snprintf(sfx, sizeof sfx, ".y%d_t%lld", d, (long long)t);
            ok = (yd[t] = reshape(&r, sfx, yd[t], &step)) >= 0;
        }
        char sfx[32];
        snprintf(sfx, sizeof sfx, ".y%d", d);
        if (ok && S > 1) {
            kiln_shape sbh = {.rank = 3, .dims = {S, B, H}};
            int id = kiln_rewrite_emit(rw, n, KILN_OP_CONCAT, sfx, yd, (int)S, &sbh, false);
            ok = id >= 0 && kiln_node_set_int(rw->dst, id, "axis", 0) == KILN_OK;
            yd[0] = ok ? kiln_rewrite_out(rw, id) : -1;
        }
        snprintf(sfx, sizeof sfx, ".y%d_4d", d);
        ok = ok && (y_dir[d] = reshape(&r, sfx, yd[0], &ydir)) >= 0;
        for (int k = 0; k < 2 && ok; k++) {
            int *v = k ? &c_dir[d] : &h_dir[d];
            if (*v < 0)
                continue;
            snprintf(sfx, sizeof sfx, ".%s%d_last", k ? "c" : "h", d);
            ok = (*v = reshape(&r, sfx, *v, &last)) >= 0;
        }
    }
    kiln_shape y = {.rank = 4, .dims = {S, D, B, H}}, hs = {.rank = 3, .dims = {D, B, H}};
    ok = ok && output(&r, 0, y_dir, (int)D, 1, &y) && output(&r, 1, h_dir, (int)D, 0, &hs) &&
         (n->op != KILN_OP_LSTM || output(&r, 2, c_dir, (int)D, 0, &hs));
    free(buf);
    return ok;
}

static bool takes(const kiln_graph *g, const kiln_node *n)
{
    kiln_rnn_geom geo;
    return plan(g, n, &geo);
}

static bool rewrite(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n)
{
    kiln_rnn_geom geo;
    return plan(g, n, &geo) && lower(rw, g, n, &geo);
}

kiln_status kiln_pass_lower_rnn(kiln_pass_ctx *ctx, kiln_error *err)
{
    return kiln_rewrite_nodes(ctx, takes, rewrite, err);
}
