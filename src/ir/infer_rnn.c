/* ir/infer_rnn.c: shape inference for RNN, GRU and LSTM.
 *
 * Inputs (ONNX order): X, W, R, B, sequence_lens, initial_h, initial_c
 * (LSTM), P (LSTM). With G gates (RNN 1, GRU 3, LSTM 4), D directions
 * (bidirectional 2, else 1), S steps, batch B, input size I and hidden size
 * H:  X (S, B, I) [layout 1: (B, S, I)], W (D, G*H, I), R (D, G*H, H),
 * B (D, 2*G*H), sequence_lens (B) int32/int64, initial_h/initial_c
 * (D, B, H) [layout 1: (B, D, H)], P (D, 3*H).
 * Outputs: Y (S, D, B, H) [layout 1: (B, S, D, H)], Y_h and Y_c like
 * initial_h.
 * kiln's "activations" attribute is ONNX's list of names joined by commas
 * ("Sigmoid,Tanh,Tanh"); an empty or absent list means the op's defaults
 * (RNN Tanh; GRU Sigmoid,Tanh; LSTM Sigmoid,Tanh,Tanh), repeated for the
 * second direction. activation_alpha/activation_beta give the i-th
 * activation's parameters (defaults per function, as in ONNX). */
#include <string.h>

#include "ir/infer_nn.h"
#include "util/error.h"

#define RNN_LIMIT ((int64_t)1 << 24)

static const struct {
    const char *name;
    kiln_rnn_act act;
    float alpha, beta;
} act_names[] = {
    {"Relu", KILN_ACT_RELU, 0.f, 0.f},
    {"Tanh", KILN_ACT_TANH, 0.f, 0.f},
    {"Sigmoid", KILN_ACT_SIGMOID, 0.f, 0.f},
    {"Affine", KILN_ACT_AFFINE, 1.f, 0.f},
    {"LeakyRelu", KILN_ACT_LEAKYRELU, 0.01f, 0.f},
    {"ThresholdedRelu", KILN_ACT_THRESHOLDEDRELU, 1.f, 0.f},
    {"ScaledTanh", KILN_ACT_SCALEDTANH, 1.f, 1.f},
    {"HardSigmoid", KILN_ACT_HARDSIGMOID, 0.2f, 0.5f},
    {"Elu", KILN_ACT_ELU, 1.f, 0.f},
    {"Softsign", KILN_ACT_SOFTSIGN, 0.f, 0.f},
    {"Softplus", KILN_ACT_SOFTPLUS, 0.f, 0.f},
};

/* Case-insensitive compare of s[0..len) with a NUL-terminated name. */
static bool name_eq(const char *s, size_t len, const char *name)
{
    if (strlen(name) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char a = s[i], b = name[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return false;
    }
    return true;
}

static kiln_status parse_activations(const kiln_node *n, kiln_rnn_geom *g, kiln_error *err)
{
    static const char *defaults[] = {"Tanh", "Sigmoid,Tanh", "Sigmoid,Tanh,Tanh"};
    int per_dir = g->gates == 1 ? 1 : g->gates == 3 ? 2 : 3;
    const char *list = kiln_attr_string(n, "activations", "");
    bool dflt = *list == '\0';
    if (dflt)
        list = defaults[per_dir - 1];
    int count = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t k = 0, nn = sizeof act_names / sizeof act_names[0];
        while (k < nn && !name_eq(p, len, act_names[k].name))
            k++;
        if (k == nn)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "activation '%.*s' is not supported",
                               (int)len, p);
        if (count == KILN_RNN_MAX_ACT)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "too many activations in '%s'",
                               list);
        g->act[count] = act_names[k].act;
        g->alpha[count] = act_names[k].alpha;
        g->beta[count] = act_names[k].beta;
        count++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (dflt && g->dirs == 2) {
        for (int i = 0; i < per_dir; i++) {
            g->act[per_dir + i] = g->act[i];
            g->alpha[per_dir + i] = g->alpha[i];
            g->beta[per_dir + i] = g->beta[i];
        }
        count *= 2;
    }
    if (count != per_dir * g->dirs)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "attribute 'activations' ('%s') has %d entries, expected %d (%d per "
                           "direction)",
                           list, count, per_dir * g->dirs, per_dir);
    g->n_act = per_dir;
    const float *av = NULL, *bv = NULL;
    int na = kiln_attr_floats(n, "activation_alpha", &av);
    int nb = kiln_attr_floats(n, "activation_beta", &bv);
    for (int i = 0; i < count; i++) {
        if (i < na)
            g->alpha[i] = av[i];
        if (i < nb)
            g->beta[i] = bv[i];
    }
    return KILN_OK;
}

/* Checks input k's shape against the expected dims (rank `r`). */
static kiln_status want_shape(const kiln_shape *s, int k, const char *label, int r,
                              const int64_t *dims, kiln_error *err)
{
    kiln_shape want = {.rank = r};
    for (int i = 0; i < r; i++)
        want.dims[i] = dims[i];
    if (!kiln_shape_equal(s, &want)) {
        kiln_shape_buf b1, b2;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input %d (%s) has shape %s, expected %s",
                           k, label, kiln_shape_fmt(s, &b1), kiln_shape_fmt(&want, &b2));
    }
    return KILN_OK;
}

kiln_status kiln_rnn_resolve(const kiln_node *n, const kiln_shape *const *shapes,
                             const kiln_dtype *dtypes, int n_in, kiln_rnn_geom *out,
                             kiln_error *err)
{
    static const kiln_attr_spec specs[] = {
        {"hidden_size", KILN_ATTR_INT},       {"direction", KILN_ATTR_STRING},
        {"activations", KILN_ATTR_STRING},    {"activation_alpha", KILN_ATTR_FLOATS},
        {"activation_beta", KILN_ATTR_FLOATS}, {"clip", KILN_ATTR_FLOAT},
        {"layout", KILN_ATTR_INT},            {"input_forget", KILN_ATTR_INT},
        {"linear_before_reset", KILN_ATTR_INT}};
    static const char *labels[] = {"X", "W", "R", "B", "sequence_lens", "initial_h",
                                   "initial_c", "P"};
    kiln_shape_buf b1;
    kiln_rnn_geom g;
    memset(&g, 0, sizeof g);
    kiln_status s = kiln_node_attrs_check(n, specs, 9, err);
    if (s != KILN_OK || (s = kiln_infer_check_flag(n, "layout", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "input_forget", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "linear_before_reset", err)) != KILN_OK)
        return s;
    g.gates = n->op == KILN_OP_LSTM ? 4 : n->op == KILN_OP_GRU ? 3 : 1;
    const char *dir = kiln_attr_string(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0)
        g.dirs = 1;
    else if (strcmp(dir, "reverse") == 0)
        g.dirs = 1, g.reverse = true;
    else if (strcmp(dir, "bidirectional") == 0)
        g.dirs = 2;
    else
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "direction '%s' is not forward, reverse or bidirectional", dir);
    g.layout = (int)kiln_attr_int(n, "layout", 0);
    g.clip = kiln_attr_float(n, "clip", 0.0f);
    if (kiln_node_attr(n, "clip") && !(g.clip > 0.0f))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'clip' is %g, expected > 0",
                           (double)g.clip);
    g.input_forget = kiln_attr_int(n, "input_forget", 0) == 1;
    g.linear_before_reset = kiln_attr_int(n, "linear_before_reset", 0) == 1;
    if ((s = parse_activations(n, &g, err)) != KILN_OK)
        return s;
    for (int k = 0; k < n_in; k++) {
        if (!shapes[k])
            continue;
        kiln_dtype want = k == 4 ? dtypes[k] : KILN_DTYPE_FLOAT32;
        if (k == 4 && want != KILN_DTYPE_INT32 && want != KILN_DTYPE_INT64)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "input 4 (sequence_lens) is %s, expected int32 or int64",
                               kiln_dtype_name(want));
        if (dtypes[k] != want)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s) is %s, expected float32",
                               k, labels[k], kiln_dtype_name(dtypes[k]));
        if (kiln_shape_numel(shapes[k]) < 0)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "input %d (%s) has shape %s: symbolic or too large", k, labels[k],
                               kiln_shape_fmt(shapes[k], &b1));
    }
    const kiln_shape *xs = shapes[0], *ws = shapes[1];
    if (xs->rank != 3)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input 0 (X) has shape %s, expected rank 3 (%s)",
                           kiln_shape_fmt(xs, &b1), g.layout ? "batch, seq, input" : "seq, batch, input");
    g.seq = xs->dims[g.layout ? 1 : 0];
    g.batch = xs->dims[g.layout ? 0 : 1];
    g.input = xs->dims[2];
    if (ws->rank != 3 || ws->dims[1] % g.gates != 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "input 1 (W) has shape %s, expected (%d, %d*hidden_size, %lld)",
                           kiln_shape_fmt(ws, &b1), g.dirs, g.gates, (long long)g.input);
    g.hidden = kiln_attr_int(n, "hidden_size", ws->dims[1] / g.gates);
    if (g.hidden < 1 || g.hidden > RNN_LIMIT || g.seq < 1 || g.batch < 1 || g.input < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "hidden_size %lld with X %s: every extent must be >= 1",
                           (long long)g.hidden, kiln_shape_fmt(xs, &b1));
    int64_t D = g.dirs, GH = g.gates * g.hidden, H = g.hidden, Bt = g.batch;
    int64_t wdims[3] = {D, GH, g.input}, rdims[3] = {D, GH, H}, bdims[2] = {D, 2 * GH};
    int64_t sdims[1] = {Bt}, hdims[3] = {D, Bt, H}, pdims[2] = {D, 3 * H};
    if (g.layout) {
        hdims[0] = Bt;
        hdims[1] = D;
    }
    if ((s = want_shape(ws, 1, "W", 3, wdims, err)) != KILN_OK ||
        (s = want_shape(shapes[2], 2, "R", 3, rdims, err)) != KILN_OK ||
        (n_in > 3 && shapes[3] && (s = want_shape(shapes[3], 3, "B", 2, bdims, err)) != KILN_OK) ||
        (n_in > 4 && shapes[4] &&
         (s = want_shape(shapes[4], 4, "sequence_lens", 1, sdims, err)) != KILN_OK) ||
        (n_in > 5 && shapes[5] &&
         (s = want_shape(shapes[5], 5, "initial_h", 3, hdims, err)) != KILN_OK) ||
        (n_in > 6 && shapes[6] &&
         (s = want_shape(shapes[6], 6, "initial_c", 3, hdims, err)) != KILN_OK) ||
        (n_in > 7 && shapes[7] && (s = want_shape(shapes[7], 7, "P", 2, pdims, err)) != KILN_OK))
        return s;
    *out = g;
    return KILN_OK;
}

static kiln_status infer_recurrent(const kiln_node *n, const kiln_value *const *in,
                                   kiln_value *const *out, kiln_error *err)
{
    const kiln_shape *shapes[8] = {0};
    kiln_dtype dtypes[8] = {0};
    int n_in = n->n_inputs > 8 ? 8 : n->n_inputs;
    for (int k = 0; k < n_in; k++) {
        if (in[k]) {
            shapes[k] = &in[k]->shape;
            dtypes[k] = in[k]->dtype;
        }
    }
    kiln_rnn_geom g;
    kiln_status s = kiln_rnn_resolve(n, shapes, dtypes, n_in, &g, err);
    if (s != KILN_OK)
        return s;
    kiln_shape y = {.rank = 4, .dims = {g.seq, g.dirs, g.batch, g.hidden}};
    kiln_shape h = {.rank = 3, .dims = {g.dirs, g.batch, g.hidden}};
    if (g.layout) {
        y = (kiln_shape){.rank = 4, .dims = {g.batch, g.seq, g.dirs, g.hidden}};
        h = (kiln_shape){.rank = 3, .dims = {g.batch, g.dirs, g.hidden}};
    }
    if (kiln_shape_numel(&y) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output Y is too large");
    for (int k = 0; k < n->n_outputs; k++)
        kiln_infer_set_output(out[k], k == 0 ? &y : &h);
    return KILN_OK;
}

kiln_status kiln_infer_rnn(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    return infer_recurrent(n, in, out, err);
}

kiln_status kiln_infer_gru(const kiln_node *n, const kiln_value *const *in,
                           kiln_value *const *out, kiln_error *err)
{
    return infer_recurrent(n, in, out, err);
}

kiln_status kiln_infer_lstm(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    return infer_recurrent(n, in, out, err);
}
