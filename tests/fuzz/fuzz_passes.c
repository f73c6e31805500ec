/* tests/fuzz/fuzz_passes.c: libFuzzer target for the compiler's pass pipeline
 * (and lowering, when built with KILN_FUZZ_LOWER).
 *
 * The fuzzer's bytes are a program that builds a small graph through the IR
 * API: one or two float32 inputs, then up to MAX_STEPS steps, each a recipe
 * (a byte) that picks operands among the values built so far (more bytes) and
 * adds one node with consistent shapes: elementwise and broadcasting ops with
 * new constants, Conv/BatchNorm/pools, MatMul/Gemm, the movement ops
 * (Reshape, Transpose, Slice, Concat, Split, Pad, Gather, Expand), softmax,
 * layer norm and reductions, int64 shape arithmetic on scalars and 1-D
 * constants (Mod/Sub/Div chains, Concat, Gather, Where, Cast to every dtype)
 * mixed back into the float data path, and any op of the registry on any
 * value. Before a node is added, the op's own shape inference runs on it
 * (a stand-alone copy, as the ONNX folder does): a candidate it refuses is
 * dropped, so every graph is valid by construction and only the choices of
 * the bytes differ. Then a few values become graph outputs (inputs and
 * constants too) and the graph goes through kiln_pass_ctx_create,
 * kiln_pass_run_all and kiln_lower.
 *
 * It hunts crashes, hangs, leaks and sanitizer reports, not wrong values: a
 * pass may refuse a graph with a status (an integer division by zero or an
 * out-of-range index that folding meets), but it must say why. A failure
 * without a message traps, and so does KILN_ERR_INTERNAL (one part of the
 * compiler disagreeing with another: a bug, whatever the graph); a graph
 * that the whole-graph validator rejects is a generator bug and traps too.
 *
 * KILN_FUZZ_STATS=1 in the environment prints, at exit, how many graphs were
 * built, how many node candidates were refused, and which statuses the
 * pipeline returned; KILN_FUZZ_PRINT=PASS prints the IR after that pass
 * ("input", "all", as kiln compile --print-ir-after), to read a crashing
 * input's graph. Built and run by tests/fuzz/smoke_passes.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "pass/pass.h"
#include "util/error.h"
#include "util/half.h"
#ifdef KILN_FUZZ_LOWER
#include "lower/lower.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STEPS 40
#define MAX_VALUES 256
#define MAX_IO 8
#define MAX_ATTRS 8

/* ---- the byte reader ---------------------------------------------------------- */
/* Past the end every read is 0, so any prefix is a complete program. */
typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static unsigned u8(fz *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

/* 0 .. n-1 (0 when n is 0) */
static int pick(fz *f, int n)
{
    return n > 0 ? (int)(u8(f) % (unsigned)n) : 0;
}

static bool coin(fz *f)
{
    return u8(f) & 1;
}

/* ---- statistics (KILN_FUZZ_STATS) --------------------------------------------- */
#define STAT_MSGS 6
static struct {
    long graphs, nodes, refused, status[64];
    char msg[64][STAT_MSGS][160]; /* the first few distinct messages of each status */
} stats;

/* A message without its node names and numbers, to tell kinds apart. */
static void stat_message(int s, const char *msg)
{
    char key[160];
    size_t j = 0;
    for (const char *p = msg; *p && j + 1 < sizeof key; p++)
        if (!(*p >= '0' && *p <= '9'))
            key[j++] = *p;
    key[j] = '\0';
    for (int i = 0; i < STAT_MSGS; i++) {
        if (!stats.msg[s][i][0]) {
            snprintf(stats.msg[s][i], sizeof stats.msg[s][i], "%s", msg);
            return;
        }
        char k2[160];
        size_t m = 0;
        for (const char *p = stats.msg[s][i]; *p && m + 1 < sizeof k2; p++)
            if (!(*p >= '0' && *p <= '9'))
                k2[m++] = *p;
        k2[m] = '\0';
        if (strcmp(k2, key) == 0)
            return;
    }
}

static void print_stats(void)
{
    fprintf(stderr, "fuzz_passes: %ld graphs, %ld nodes, %ld candidates refused\n", stats.graphs,
            stats.nodes, stats.refused);
    for (int s = 0; s < 64; s++) {
        if (!stats.status[s])
            continue;
        fprintf(stderr, "  %-24s %ld\n", kiln_status_str((kiln_status)s), stats.status[s]);
        for (int i = 0; i < STAT_MSGS && stats.msg[s][i][0]; i++)
            fprintf(stderr, "      %s\n", stats.msg[s][i]);
    }
}

/* ---- the generator -------------------------------------------------------------- */
typedef struct gen {
    fz in;
    kiln_graph *g;
    int vals[MAX_VALUES]; /* values operands are picked from */
    int nv;
    int names;
} gen;

static const kiln_value *val(const gen *G, int v)
{
    return G->g->values[v];
}

static const char *fresh(gen *G, const char *what)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%s%d", what, G->names++);
    return buf;
}

static void remember(gen *G, int v)
{
    if (v >= 0 && G->nv < MAX_VALUES)
        G->vals[G->nv++] = v;
}

typedef bool (*pred_fn)(const kiln_value *v, const void *arg);

/* One of the values satisfying pred (NULL: any), chosen by a byte; -1 if none. */
static int pick_value(gen *G, pred_fn pred, const void *arg)
{
    int cand[MAX_VALUES], n = 0;
    for (int i = 0; i < G->nv; i++)
        if (!pred || pred(val(G, G->vals[i]), arg))
            cand[n++] = G->vals[i];
    return n ? cand[pick(&G->in, n)] : -1;
}

static bool is_f32(const kiln_value *v, const void *arg)
{
    (void)arg;
    return v->dtype == KILN_DTYPE_FLOAT32;
}

static bool is_f32_rank(const kiln_value *v, const void *arg)
{
    int r = *(const int *)arg;
    return v->dtype == KILN_DTYPE_FLOAT32 && (r < 0 ? v->shape.rank >= -r : v->shape.rank == r);
}

static bool is_int_small(const kiln_value *v, const void *arg)
{
    (void)arg;
    return (v->dtype == KILN_DTYPE_INT64 || v->dtype == KILN_DTYPE_INT32) && v->shape.rank <= 1 &&
           kiln_shape_numel(&v->shape) <= 8;
}

static bool same_dtype(const kiln_value *v, const void *arg)
{
    return v->dtype == *(const kiln_dtype *)arg;
}

static bool same_shape_dtype(const kiln_value *v, const void *arg)
{
    const kiln_value *w = arg;
    return v->dtype == w->dtype && kiln_shape_equal(&v->shape, &w->shape);
}

static int64_t numel(const kiln_shape *s)
{
    return kiln_shape_numel(s);
}

/* A constant of any dtype with small values from the bytes; `nonzero` keeps
 * zero out (divisors). Bool constants hold 0/1. */
static int new_const(gen *G, kiln_dtype dt, kiln_shape s, bool nonzero)
{
    int64_t n = numel(&s);
    if (n < 0 || n > 4096)
        return -1;
    void *d = NULL;
    int id = kiln_graph_add_const_uninit(G->g, fresh(G, "c"), dt, &s, true, &d);
    if (id < 0)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        int v = (int)(int8_t)u8(&G->in) % 8;
        if (dt == KILN_DTYPE_BOOL)
            v = v & 1;
        else if (nonzero && v == 0)
            v = 1;
        else if (v < 0 && (dt == KILN_DTYPE_UINT8 || dt == KILN_DTYPE_UINT16 ||
                           dt == KILN_DTYPE_UINT32 || dt == KILN_DTYPE_UINT64))
            v = -v; /* small unsigned values, not 2^64 - 3 */
        switch (dt) {
        case KILN_DTYPE_FLOAT32: ((float *)d)[i] = (float)v / 4.0f; break;
        case KILN_DTYPE_FLOAT64: ((double *)d)[i] = (double)v / 4.0; break;
        case KILN_DTYPE_FLOAT16: ((uint16_t *)d)[i] = kiln_f32_to_f16((float)v / 4.0f); break;
        case KILN_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
        case KILN_DTYPE_UINT8: case KILN_DTYPE_BOOL: ((uint8_t *)d)[i] = (uint8_t)v; break;
        case KILN_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
        case KILN_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
        case KILN_DTYPE_INT32: ((int32_t *)d)[i] = v; break;
        case KILN_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
        case KILN_DTYPE_INT64: ((int64_t *)d)[i] = v; break;
        case KILN_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)(int64_t)v; break;
        default: break;
        }
    }
    return id;
}

static int i64_const(gen *G, const int64_t *v, int n, bool scalar)
{
    kiln_shape s = {.rank = scalar ? 0 : 1, .dims = {n}};
    void *d = NULL;
    int id = kiln_graph_add_const_uninit(G->g, fresh(G, "i"), KILN_DTYPE_INT64, &s, true, &d);
    if (id >= 0)
        memcpy(d, v, sizeof(int64_t) * (size_t)n);
    return id;
}

/* Attributes of a candidate node. */
typedef struct attrs {
    kiln_attr a[MAX_ATTRS];
    int64_t ints[MAX_ATTRS][KILN_MAX_RANK * 2];
    float floats[MAX_ATTRS][4];
    int n;
} attrs;

static void at_int(attrs *A, const char *name, int64_t v)
{
    if (A->n < MAX_ATTRS)
        A->a[A->n++] = (kiln_attr){.name = name, .type = KILN_ATTR_INT, .i = v};
}

static void at_float(attrs *A, const char *name, float v)
{
    if (A->n < MAX_ATTRS)
        A->a[A->n++] = (kiln_attr){.name = name, .type = KILN_ATTR_FLOAT, .f = v};
}

static void at_string(attrs *A, const char *name, const char *v)
{
    if (A->n < MAX_ATTRS)
        A->a[A->n++] = (kiln_attr){.name = name, .type = KILN_ATTR_STRING, .s = v};
}

static void at_ints(attrs *A, const char *name, const int64_t *v, int n)
{
    if (A->n >= MAX_ATTRS || n > KILN_MAX_RANK * 2)
        return;
    memcpy(A->ints[A->n], v, sizeof(int64_t) * (size_t)n);
    A->a[A->n] = (kiln_attr){.name = name, .type = KILN_ATTR_INTS, .ints = A->ints[A->n], .n = n};
    A->n++;
}

/* Known open bugs outside src/pass and src/ir (reproducers in
 * tests/fuzz/open-passes/): candidates that would only find them again are
 * refused, so that the fuzzer looks further. -DKILN_FUZZ_ALL generates them
 * anyway (to check a fix); remove an entry once its bug is fixed, and move
 * its reproducer to tests/fuzz/regressions-passes/. None is open. */
static bool known_bug(const kiln_node *n, const kiln_value *const *in, const kiln_value *out)
{
    (void)n, (void)in, (void)out;
    return false;
}

/* Adds node `op` if its shape inference accepts it, with every output in the
 * pool; returns output 0 (outs[] gets all), or -1 when refused. */
static int add_node(gen *G, kiln_op op, const int *ins, int n_in, const attrs *A, int n_out,
                    int *outs)
{
    const kiln_op_info *info = kiln_op_get(op);
    if (!info || n_in > MAX_IO || n_out > MAX_IO || n_in < info->min_inputs ||
        n_in > info->max_inputs || n_out < info->min_outputs || n_out > info->max_outputs)
        goto refused;
    for (int k = 0; k < n_in; k++) /* absent (-1) only past the minimum, as validate wants */
        if (ins[k] < -1 || ins[k] >= G->g->n_values || (ins[k] == -1 && k < info->min_inputs))
            goto refused;
    /* the candidate, stand-alone */
    static const attrs none;
    if (!A)
        A = &none;
    int in_ids[MAX_IO], out_ids[MAX_IO];
    const kiln_value *pin[MAX_IO];
    kiln_value vout[MAX_IO], *pout[MAX_IO];
    for (int k = 0; k < n_in; k++) {
        in_ids[k] = ins[k];
        pin[k] = ins[k] >= 0 ? val(G, ins[k]) : NULL;
    }
    for (int k = 0; k < n_out; k++) {
        vout[k] = (kiln_value){.id = G->g->n_values + k, .name = "candidate",
                               .kind = KILN_VALUE_NODE, .producer = G->g->n_nodes,
                               .output_index = k};
        pout[k] = &vout[k];
        out_ids[k] = vout[k].id;
    }
    kiln_node cand = {.id = G->g->n_nodes, .op = op, .name = "candidate", .n_inputs = n_in,
                      .inputs = in_ids, .n_outputs = n_out, .outputs = out_ids,
                      .n_attrs = A->n, .cap_attrs = A->n, .attrs = (kiln_attr *)A->a};
    kiln_error err = {0};
    if (info->infer(&cand, pin, pout, &err) != KILN_OK || known_bug(&cand, pin, &vout[0]))
        goto refused;
    for (int k = 0; k < n_out; k++)
        if (vout[k].dtype == KILN_DTYPE_UNDEFINED || numel(&vout[k].shape) < 0 ||
            numel(&vout[k].shape) > (1 << 16))
            goto refused; /* keep the graphs small: this is about passes, not kernels */
    /* the real node */
    int id = kiln_graph_add_node(G->g, op, fresh(G, info->name), ins, n_in, n_out);
    if (id < 0)
        return -1;
    for (int i = 0; i < A->n; i++) {
        const kiln_attr *a = &A->a[i];
        switch (a->type) {
        case KILN_ATTR_INT: kiln_node_set_int(G->g, id, a->name, a->i); break;
        case KILN_ATTR_FLOAT: kiln_node_set_float(G->g, id, a->name, a->f); break;
        case KILN_ATTR_STRING: kiln_node_set_string(G->g, id, a->name, a->s); break;
        case KILN_ATTR_INTS: kiln_node_set_ints(G->g, id, a->name, a->ints, a->n); break;
        case KILN_ATTR_FLOATS: kiln_node_set_floats(G->g, id, a->name, a->floats, a->n); break;
        }
    }
    for (int k = 0; k < n_out; k++) {
        int v = kiln_graph_node_output(G->g, id, k);
        G->g->values[v]->dtype = vout[k].dtype;
        G->g->values[v]->shape = vout[k].shape;
        remember(G, v);
        if (outs)
            outs[k] = v;
    }
    stats.nodes++;
    return kiln_graph_node_output(G->g, id, 0);
refused:
    stats.refused++;
    return -1;
}

static int add1(gen *G, kiln_op op, const int *ins, int n_in, const attrs *A)
{
    return add_node(G, op, ins, n_in, A, 1, NULL);
}

/* A shape that broadcasts against s: scalar, s's last dim, per channel
 * [C,1,..], s itself, or s with some extents 1. */
static kiln_shape bcast_shape(fz *f, const kiln_shape *s)
{
    kiln_shape r = *s;
    switch (pick(f, 5)) {
    case 0:
        r.rank = 0;
        break;
    case 1:
        r.rank = s->rank ? 1 : 0;
        r.dims[0] = s->rank ? s->dims[s->rank - 1] : 1;
        break;
    case 2:
        if (s->rank >= 3) {
            r.rank = s->rank - 1;
            for (int d = 1; d < r.rank; d++)
                r.dims[d] = 1;
            r.dims[0] = s->dims[1];
        }
        break;
    case 3:
        for (int d = 0; d < r.rank; d++)
            if (coin(f))
                r.dims[d] = 1;
        break;
    default:
        break;
    }
    return r;
}

/* ---- recipes: float data path ---------------------------------------------------- */
static void r_unary(gen *G)
{
    static const kiln_op ops[] = {
        KILN_OP_RELU,    KILN_OP_SIGMOID, KILN_OP_TANH,      KILN_OP_EXP,     KILN_OP_NEG,
        KILN_OP_ABS,     KILN_OP_SQRT,    KILN_OP_CLIP,      KILN_OP_LEAKYRELU, KILN_OP_HARDSWISH,
        KILN_OP_ERF,     KILN_OP_GELU,    KILN_OP_SOFTPLUS,  KILN_OP_FLOOR,   KILN_OP_IDENTITY,
        KILN_OP_HARDSIGMOID, KILN_OP_ELU, KILN_OP_SIN,       KILN_OP_LOG,     KILN_OP_RECIPROCAL,
        KILN_OP_MISH,    KILN_OP_SELU,    KILN_OP_SOFTSIGN,  KILN_OP_ROUND,   KILN_OP_CEIL,
    };
    kiln_op op = ops[pick(&G->in, (int)(sizeof ops / sizeof ops[0]))];
    int x = pick_value(G, is_f32, NULL);
    attrs A = {0};
    if (op == KILN_OP_CLIP) {
        if (coin(&G->in))
            at_float(&A, "min", (float)((int)pick(&G->in, 5) - 2));
        if (coin(&G->in))
            at_float(&A, "max", (float)pick(&G->in, 7));
    } else if (op == KILN_OP_LEAKYRELU) {
        at_float(&A, "alpha", 0.1f);
    } else if (op == KILN_OP_GELU && coin(&G->in)) {
        at_string(&A, "approximate", "tanh");
    }
    add1(G, op, &x, 1, &A);
}

static void r_binary(gen *G)
{
    static const kiln_op ops[] = {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_DIV,
                                  KILN_OP_POW, KILN_OP_MAX, KILN_OP_MIN, KILN_OP_SUM,
                                  KILN_OP_MEAN, KILN_OP_PRELU};
    kiln_op op = ops[pick(&G->in, (int)(sizeof ops / sizeof ops[0]))];
    int x = pick_value(G, is_f32, NULL);
    if (x < 0)
        return;
    const kiln_value *xv = val(G, x);
    int y;
    if (coin(&G->in)) { /* another activation of the same shape, or x itself */
        y = pick_value(G, same_shape_dtype, xv);
    } else {
        y = new_const(G, KILN_DTYPE_FLOAT32, bcast_shape(&G->in, &xv->shape), op == KILN_OP_DIV);
    }
    int ins[2] = {x, y};
    if (op != KILN_OP_PRELU && coin(&G->in)) { /* the constant first */
        ins[0] = y;
        ins[1] = x;
    }
    add1(G, op, ins, 2, NULL);
}

static void r_conv_bn(gen *G)
{
    int r4 = 4, r3 = 3;
    int x = pick_value(G, is_f32_rank, coin(&G->in) ? (const void *)&r4 : (const void *)&r3);
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    int sp = s->rank - 2; /* spatial dims */
    int64_t c = s->dims[1];
    if (c <= 0)
        return;
    int64_t group = 1;
    switch (pick(&G->in, 3)) {
    case 1: group = c; break; /* depthwise */
    case 2:
        for (int64_t d = 2; d <= c; d++)
            if (c % d == 0) {
                group = d;
                break;
            }
        break;
    default: break;
    }
    int64_t oc = group * (1 + pick(&G->in, 4));
    if (group == c && coin(&G->in))
        oc = c;
    int64_t k = 1 + pick(&G->in, 3), st = 1 + pick(&G->in, 2), dil = 1 + (pick(&G->in, 4) == 0);
    int64_t pad = pick(&G->in, (int)k);
    kiln_shape ws = {.rank = s->rank, .dims = {oc, c / group}};
    int64_t ks[3], sts[3], ds[3], pads[6];
    for (int d = 0; d < sp; d++) {
        ws.dims[2 + d] = k;
        ks[d] = k;
        sts[d] = st;
        ds[d] = dil;
        pads[d] = pads[sp + d] = pad;
    }
    int ins[3] = {x, new_const(G, KILN_DTYPE_FLOAT32, ws, false), -1};
    int n_in = 2;
    if (coin(&G->in)) {
        kiln_shape bs = {.rank = 1, .dims = {oc}};
        ins[2] = new_const(G, KILN_DTYPE_FLOAT32, bs, false);
        n_in = 3;
    }
    attrs A = {0};
    at_ints(&A, "kernel_shape", ks, sp);
    at_ints(&A, "strides", sts, sp);
    at_ints(&A, "dilations", ds, sp);
    at_ints(&A, "pads", pads, 2 * sp);
    at_int(&A, "group", group);
    int y = add1(G, KILN_OP_CONV, ins, n_in, &A);
    if (y < 0 || coin(&G->in))
        return;
    /* BatchNormalization after it (fold-batchnorm) */
    kiln_shape cs = {.rank = 1, .dims = {oc}};
    int bn[5] = {y, new_const(G, KILN_DTYPE_FLOAT32, cs, true), new_const(G, KILN_DTYPE_FLOAT32, cs, false),
                 new_const(G, KILN_DTYPE_FLOAT32, cs, false), -1};
    void *d = NULL;
    bn[4] = kiln_graph_add_const_uninit(G->g, fresh(G, "var"), KILN_DTYPE_FLOAT32, &cs, true, &d);
    if (bn[4] < 0)
        return;
    for (int64_t i = 0; i < oc; i++)
        ((float *)d)[i] = 0.5f + (float)pick(&G->in, 4);
    attrs B = {0};
    at_float(&B, "epsilon", 1e-5f);
    y = add1(G, KILN_OP_BATCHNORM, bn, 5, &B);
    if (y >= 0 && coin(&G->in))
        add1(G, KILN_OP_RELU, &y, 1, NULL);
}

static void r_pool(gen *G)
{
    int r4 = 4;
    int x = pick_value(G, is_f32_rank, &r4);
    if (x < 0)
        return;
    int kind = pick(&G->in, 4);
    if (kind >= 2) {
        add1(G, kind == 2 ? KILN_OP_GLOBALAVERAGEPOOL : KILN_OP_GLOBALMAXPOOL, &x, 1, NULL);
        return;
    }
    int64_t k = 1 + pick(&G->in, 3), st = 1 + pick(&G->in, 2), pad = pick(&G->in, (int)k);
    int64_t ks[2] = {k, k}, sts[2] = {st, st}, pads[4] = {pad, pad, pad, pad};
    attrs A = {0};
    at_ints(&A, "kernel_shape", ks, 2);
    at_ints(&A, "strides", sts, 2);
    at_ints(&A, "pads", pads, 4);
    if (coin(&G->in))
        at_int(&A, "ceil_mode", 1);
    if (kind == 1 && coin(&G->in))
        at_int(&A, "count_include_pad", 1);
    add1(G, kind == 0 ? KILN_OP_MAXPOOL : KILN_OP_AVERAGEPOOL, &x, 1, &A);
}

static void r_matmul(gen *G)
{
    int r2 = -2;
    int x = pick_value(G, is_f32_rank, &r2);
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    int64_t kdim = s->dims[s->rank - 1], n = 1 + pick(&G->in, 12);
    switch (pick(&G->in, 3)) {
    case 0: { /* constant B: dense */
        kiln_shape bs = {.rank = 2, .dims = {kdim, n}};
        int ins[2] = {x, new_const(G, KILN_DTYPE_FLOAT32, bs, false)};
        add1(G, KILN_OP_MATMUL, ins, 2, NULL);
        break;
    }
    case 1: { /* x @ x^T (attention scores) */
        int64_t perm[KILN_MAX_RANK];
        for (int d = 0; d < s->rank; d++)
            perm[d] = d;
        perm[s->rank - 1] = s->rank - 2;
        perm[s->rank - 2] = s->rank - 1;
        attrs A = {0};
        at_ints(&A, "perm", perm, s->rank);
        int t = add1(G, KILN_OP_TRANSPOSE, &x, 1, &A);
        int ins[2] = {x, t};
        if (t >= 0)
            add1(G, KILN_OP_MATMUL, ins, 2, NULL);
        break;
    }
    default: { /* Gemm on 2-D */
        if (s->rank != 2)
            return;
        bool tb = coin(&G->in);
        kiln_shape bs = {.rank = 2, .dims = {tb ? n : kdim, tb ? kdim : n}};
        int ins[3] = {x, new_const(G, KILN_DTYPE_FLOAT32, bs, false), -1};
        int n_in = 2;
        if (coin(&G->in)) {
            kiln_shape cs = {.rank = 1, .dims = {n}};
            ins[2] = new_const(G, KILN_DTYPE_FLOAT32, cs, false);
            n_in = 3;
        }
        attrs A = {0};
        at_int(&A, "transB", tb);
        if (coin(&G->in))
            at_float(&A, "alpha", 0.5f);
        add1(G, KILN_OP_GEMM, ins, n_in, &A);
        break;
    }
    }
}

/* ---- recipes: movement ----------------------------------------------------------- */
static bool any_value(const kiln_value *v, const void *arg)
{
    (void)arg;
    return v->shape.rank >= 0;
}

static bool ranked(const kiln_value *v, const void *arg)
{
    (void)arg;
    return v->shape.rank >= 1;
}

static void r_reshape(gen *G)
{
    int x = pick_value(G, any_value, NULL);
    if (x < 0)
        return;
    kiln_shape s = val(G, x)->shape, t = s;
    attrs A = {0};
    if (pick(&G->in, 6) == 0) {
        at_int(&A, "axis", pick(&G->in, s.rank + 1));
        add1(G, KILN_OP_FLATTEN, &x, 1, &A);
        return;
    }
    switch (pick(&G->in, 5)) {
    case 0: /* merge two neighbours */
        if (s.rank >= 2) {
            int d = pick(&G->in, s.rank - 1);
            t.dims[d] *= t.dims[d + 1];
            for (int e = d + 1; e < s.rank - 1; e++)
                t.dims[e] = t.dims[e + 1];
            t.rank--;
        }
        break;
    case 1: /* split one by a divisor */
        if (s.rank >= 1 && s.rank < KILN_MAX_RANK) {
            int d = pick(&G->in, s.rank);
            int64_t a = 1;
            for (int64_t q = 2; q <= s.dims[d]; q++)
                if (s.dims[d] % q == 0 && coin(&G->in)) {
                    a = q;
                    break;
                }
            for (int e = s.rank; e > d + 1; e--)
                t.dims[e] = t.dims[e - 1];
            t.dims[d] = a;
            t.dims[d + 1] = s.dims[d] / a;
            t.rank++;
        }
        break;
    case 2: /* flatten with -1 */
        t.rank = 1;
        t.dims[0] = -1;
        break;
    case 3: /* unsqueeze */
        if (s.rank < KILN_MAX_RANK) {
            int d = pick(&G->in, s.rank + 1);
            for (int e = s.rank; e > d; e--)
                t.dims[e] = t.dims[e - 1];
            t.dims[d] = 1;
            t.rank++;
        }
        break;
    default: /* the same extents, with a 0 (copy) and a -1 */
        if (s.rank >= 2) {
            t.dims[0] = 0;
            t.dims[s.rank - 1] = -1;
        }
        break;
    }
    at_ints(&A, "shape", t.dims, t.rank);
    add1(G, KILN_OP_RESHAPE, &x, 1, &A);
}

static void r_transpose(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    if (x < 0)
        return;
    int r = val(G, x)->shape.rank;
    int64_t perm[KILN_MAX_RANK];
    for (int d = 0; d < r; d++)
        perm[d] = d;
    for (int d = r - 1; d > 0; d--) {
        int e = pick(&G->in, d + 1);
        int64_t t = perm[d];
        perm[d] = perm[e];
        perm[e] = t;
    }
    attrs A = {0};
    at_ints(&A, "perm", perm, r);
    add1(G, KILN_OP_TRANSPOSE, &x, 1, &A);
}

static void r_slice(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    int64_t st[KILN_MAX_RANK], en[KILN_MAX_RANK], ax[KILN_MAX_RANK], sp[KILN_MAX_RANK];
    int n = 1 + pick(&G->in, s->rank);
    for (int i = 0; i < n; i++) {
        ax[i] = (i + pick(&G->in, 2)) % s->rank; /* may repeat: refused */
        int64_t dim = s->dims[ax[i]];
        sp[i] = pick(&G->in, 4) == 0 ? -1 : 1 + pick(&G->in, 2);
        st[i] = pick(&G->in, (int)dim + 2) - 1;
        en[i] = pick(&G->in, 6) == 0 ? (sp[i] > 0 ? INT64_MAX : INT64_MIN + 1)
                                     : pick(&G->in, (int)dim + 3) - 1;
        if (coin(&G->in))
            ax[i] -= s->rank;
    }
    attrs A = {0};
    at_ints(&A, "starts", st, n);
    at_ints(&A, "ends", en, n);
    at_ints(&A, "axes", ax, n);
    if (coin(&G->in))
        at_ints(&A, "steps", sp, n);
    add1(G, KILN_OP_SLICE, &x, 1, &A);
}

typedef struct cat_arg {
    const kiln_value *x;
    int axis;
} cat_arg;

static bool concat_partner(const kiln_value *v, const void *arg)
{
    const cat_arg *c = arg;
    if (v->dtype != c->x->dtype || v->shape.rank != c->x->shape.rank)
        return false;
    for (int d = 0; d < v->shape.rank; d++)
        if (d != c->axis && v->shape.dims[d] != c->x->shape.dims[d])
            return false;
    return true;
}

static void r_concat_split(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    if (x < 0)
        return;
    const kiln_value *xv = val(G, x);
    int axis = pick(&G->in, xv->shape.rank);
    if (coin(&G->in)) {
        cat_arg c = {xv, axis};
        int ins[4] = {x};
        int n = 2 + pick(&G->in, 3);
        for (int i = 1; i < n; i++)
            ins[i] = pick_value(G, concat_partner, &c);
        attrs A = {0};
        at_int(&A, "axis", coin(&G->in) ? axis - xv->shape.rank : axis);
        add1(G, KILN_OP_CONCAT, ins, n, &A);
        return;
    }
    int64_t dim = xv->shape.dims[axis];
    int n = 1 + pick(&G->in, 3);
    int64_t split[4], left = dim;
    for (int i = 0; i < n - 1; i++) {
        split[i] = left ? pick(&G->in, (int)left + 1) : 0;
        left -= split[i];
    }
    split[n - 1] = left;
    attrs A = {0};
    at_int(&A, "axis", axis);
    if (coin(&G->in))
        at_ints(&A, "split", split, n);
    int outs[4];
    add_node(G, KILN_OP_SPLIT, &x, 1, &A, n, outs);
}

static void r_pad(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    int64_t pads[2 * KILN_MAX_RANK];
    for (int d = 0; d < 2 * s->rank; d++)
        pads[d] = pick(&G->in, 4) == 0 ? pick(&G->in, 3) - (pick(&G->in, 4) == 0) : 0;
    static const char *modes[] = {"constant", "reflect", "edge"};
    attrs A = {0};
    at_ints(&A, "pads", pads, 2 * s->rank);
    at_string(&A, "mode", modes[pick(&G->in, 3)]);
    if (coin(&G->in))
        at_float(&A, "value", 0.5f);
    add1(G, KILN_OP_PAD, &x, 1, &A);
}

static void r_gather_expand(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    int axis = pick(&G->in, s->rank);
    if (coin(&G->in)) {
        int64_t dim = s->dims[axis], idx[6];
        int n = 1 + pick(&G->in, 6);
        for (int i = 0; i < n; i++)
            idx[i] = dim ? (int64_t)pick(&G->in, (int)(2 * dim)) - dim : 0;
        int ins[2] = {x, i64_const(G, idx, n, n == 1 && coin(&G->in))};
        attrs A = {0};
        at_int(&A, "axis", axis);
        add1(G, KILN_OP_GATHER, ins, 2, &A);
        return;
    }
    int64_t t[KILN_MAX_RANK];
    int lead = s->rank < KILN_MAX_RANK ? pick(&G->in, 2) : 0;
    for (int d = 0; d < lead; d++)
        t[d] = 1 + pick(&G->in, 3);
    for (int d = 0; d < s->rank; d++)
        t[lead + d] = s->dims[d] == 1 ? 1 + pick(&G->in, 3) : (coin(&G->in) ? 1 : s->dims[d]);
    attrs A = {0};
    at_ints(&A, "shape", t, lead + s->rank);
    add1(G, KILN_OP_EXPAND, &x, 1, &A);
}

static void r_norm_reduce(gen *G)
{
    int x = pick_value(G, is_f32_rank, &(int){-1});
    if (x < 0)
        return;
    const kiln_shape *s = &val(G, x)->shape;
    attrs A = {0};
    switch (pick(&G->in, 4)) {
    case 0:
        at_int(&A, "axis", pick(&G->in, s->rank) - (coin(&G->in) ? s->rank : 0));
        add1(G, coin(&G->in) ? KILN_OP_SOFTMAX : KILN_OP_LOGSOFTMAX, &x, 1, &A);
        break;
    case 1: {
        kiln_shape ls = {.rank = 1, .dims = {s->dims[s->rank - 1]}};
        int ins[3] = {x, new_const(G, KILN_DTYPE_FLOAT32, ls, true), -1};
        int n_in = 2;
        if (coin(&G->in)) {
            ins[2] = new_const(G, KILN_DTYPE_FLOAT32, ls, false);
            n_in = 3;
        }
        at_int(&A, "axis", -1);
        add1(G, KILN_OP_LAYERNORM, ins, n_in, &A);
        break;
    }
    default: {
        static const kiln_op ops[] = {KILN_OP_REDUCEMEAN, KILN_OP_REDUCESUM, KILN_OP_REDUCEMAX,
                                      KILN_OP_REDUCEMIN, KILN_OP_REDUCEL2, KILN_OP_ARGMAX,
                                      KILN_OP_CUMSUM};
        kiln_op op = ops[pick(&G->in, (int)(sizeof ops / sizeof ops[0]))];
        if (op == KILN_OP_ARGMAX || op == KILN_OP_CUMSUM) {
            at_int(&A, "axis", pick(&G->in, s->rank));
        } else {
            int64_t axes[KILN_MAX_RANK];
            int n = 0;
            for (int d = 0; d < s->rank; d++)
                if (coin(&G->in))
                    axes[n++] = d;
            if (n)
                at_ints(&A, "axes", axes, n);
        }
        if (op != KILN_OP_CUMSUM)
            at_int(&A, "keepdims", coin(&G->in));
        add1(G, op, &x, 1, &A);
        break;
    }
    }
}

/* ---- recipes: int64 shape arithmetic ---------------------------------------------- */
/* A new int64 scalar or 1-D constant from the extents of some value (what an
 * exporter's Shape -> Gather gives), or small numbers. */
static int shape_const(gen *G)
{
    int x = pick_value(G, ranked, NULL);
    int64_t v[4];
    int n = 1 + pick(&G->in, 4);
    for (int i = 0; i < n; i++) {
        const kiln_shape *s = x >= 0 ? &val(G, x)->shape : NULL;
        v[i] = s && coin(&G->in) ? s->dims[pick(&G->in, s->rank)] : 1 + pick(&G->in, 8);
    }
    return i64_const(G, v, n, n == 1 && coin(&G->in));
}

static void r_int_chain(gen *G)
{
    int a = coin(&G->in) ? pick_value(G, is_int_small, NULL) : -1;
    if (a < 0)
        a = shape_const(G);
    if (a < 0)
        return;
    const kiln_value *av = val(G, a);
    switch (pick(&G->in, 6)) {
    case 0: case 1: { /* (win - size % win) % win and friends */
        static const kiln_op ops[] = {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_DIV,
                                      KILN_OP_MOD, KILN_OP_MAX, KILN_OP_MIN};
        kiln_op op = ops[pick(&G->in, 7)];
        int b;
        if (op == KILN_OP_DIV || op == KILN_OP_MOD || !coin(&G->in)) {
            kiln_shape bs = av->shape.rank && coin(&G->in) ? av->shape : (kiln_shape){0};
            b = new_const(G, av->dtype, bs, true);
        } else {
            b = pick_value(G, same_dtype, &av->dtype);
        }
        int ins[2] = {a, b};
        if (op != KILN_OP_DIV && op != KILN_OP_MOD && coin(&G->in)) {
            ins[0] = b;
            ins[1] = a;
        }
        attrs A = {0};
        if (op == KILN_OP_MOD && coin(&G->in))
            at_int(&A, "fmod", 1);
        add1(G, op, ins, 2, &A);
        break;
    }
    case 2: { /* unsqueeze and concat into a shape vector */
        int u = a;
        if (av->shape.rank == 0) {
            attrs A = {0};
            at_ints(&A, "shape", (int64_t[]){1}, 1);
            u = add1(G, KILN_OP_RESHAPE, &a, 1, &A);
        }
        int ins[4] = {u, shape_const(G), -1, -1};
        int n = 2;
        if (coin(&G->in))
            ins[n++] = i64_const(G, (int64_t[]){0}, 1, false);
        for (int k = 0; k < n; k++)
            if (ins[k] >= 0 && val(G, ins[k])->shape.rank == 0)
                return;
        attrs A = {0};
        at_int(&A, "axis", 0);
        add1(G, KILN_OP_CONCAT, ins, n, &A);
        break;
    }
    case 3: { /* Equal -> Where, as exporters expand with */
        int b = new_const(G, av->dtype, av->shape, false);
        int eq[2] = {a, b};
        int c = add1(G, coin(&G->in) ? KILN_OP_EQUAL : KILN_OP_GREATER, eq, 2, NULL);
        if (c < 0)
            return;
        int w[3] = {c, a, b};
        add1(G, KILN_OP_WHERE, w, 3, NULL);
        break;
    }
    case 4: { /* Cast anywhere and maybe back */
        attrs A = {0};
        at_int(&A, "to", 1 + pick(&G->in, KILN_DTYPE_COUNT - 1));
        int c = add1(G, KILN_OP_CAST, &a, 1, &A);
        if (c >= 0 && coin(&G->in)) {
            attrs B = {0};
            at_int(&B, "to", KILN_DTYPE_INT64);
            add1(G, KILN_OP_CAST, &c, 1, &B);
        }
        break;
    }
    default: { /* Gather / Slice of a shape vector */
        if (av->shape.rank != 1 || av->shape.dims[0] == 0)
            return;
        if (coin(&G->in)) {
            int64_t i = pick(&G->in, (int)av->shape.dims[0]);
            int ins[2] = {a, i64_const(G, &i, 1, coin(&G->in))};
            attrs A = {0};
            at_int(&A, "axis", 0);
            add1(G, KILN_OP_GATHER, ins, 2, &A);
        } else {
            attrs A = {0};
            at_ints(&A, "starts", (int64_t[]){pick(&G->in, 3) - 1}, 1);
            at_ints(&A, "ends", (int64_t[]){coin(&G->in) ? INT64_MAX : -1}, 1);
            add1(G, KILN_OP_SLICE, &a, 1, &A);
        }
        break;
    }
    }
}

/* A non-float value back into the float path: Cast to float32 and add to an
 * activation it broadcasts with, or select with a bool. */
static bool not_f32(const kiln_value *v, const void *arg)
{
    (void)arg;
    return v->dtype != KILN_DTYPE_FLOAT32 && v->dtype != KILN_DTYPE_UNDEFINED;
}

static void r_mix(gen *G)
{
    int a = pick_value(G, not_f32, NULL);
    int x = pick_value(G, is_f32, NULL);
    if (a < 0 || x < 0)
        return;
    if (val(G, a)->dtype == KILN_DTYPE_BOOL && coin(&G->in)) {
        int y = new_const(G, KILN_DTYPE_FLOAT32, (kiln_shape){0}, false);
        int w[3] = {a, x, y};
        add1(G, KILN_OP_WHERE, w, 3, NULL);
        return;
    }
    attrs A = {0};
    at_int(&A, "to", KILN_DTYPE_FLOAT32);
    int c = add1(G, KILN_OP_CAST, &a, 1, &A);
    int ins[2] = {x, c};
    if (c >= 0)
        add1(G, coin(&G->in) ? KILN_OP_ADD : KILN_OP_MUL, ins, 2, NULL);
}

/* Any op of the registry on values of the pool, with an axis now and then:
 * shape inference decides. */
static void r_any(gen *G)
{
    kiln_op op = (kiln_op)pick(&G->in, KILN_OP_COUNT);
    const kiln_op_info *info = kiln_op_get(op);
    int n_in = info->min_inputs + (info->max_inputs > info->min_inputs ? pick(&G->in, 2) : 0);
    if (n_in > 3)
        n_in = 3;
    int ins[3];
    for (int k = 0; k < n_in; k++)
        ins[k] = pick_value(G, NULL, NULL);
    attrs A = {0};
    if (coin(&G->in))
        at_int(&A, "axis", pick(&G->in, 3) - 1);
    int n_out = info->min_outputs;
    int outs[MAX_IO];
    add_node(G, op, ins, n_in, &A, n_out, outs);
}

typedef void (*recipe)(gen *G);
static const recipe recipes[] = {
    r_unary,   r_binary,  r_binary,     r_conv_bn,      r_conv_bn,       r_pool,
    r_matmul,  r_reshape, r_transpose,  r_slice,        r_concat_split,  r_pad,
    r_gather_expand,      r_norm_reduce, r_int_chain,   r_int_chain,     r_int_chain,
    r_mix,     r_any,
};

/* ---- the harness ------------------------------------------------------------------ */
static kiln_graph *build(const uint8_t *data, size_t size)
{
    gen G = {.in = {data, size}};
    if (kiln_graph_create(&G.g) != KILN_OK)
        return NULL;
    /* input 0: NCHW; input 1 (maybe): rank 1..3 */
    kiln_shape s0 = {.rank = 4, .dims = {1 + pick(&G.in, 2), 1 + pick(&G.in, 8),
                                         1 + pick(&G.in, 9), 1 + pick(&G.in, 9)}};
    remember(&G, kiln_graph_add_input(G.g, "x", KILN_DTYPE_FLOAT32, &s0));
    if (coin(&G.in)) {
        kiln_shape s1 = {.rank = 1 + pick(&G.in, 3)};
        for (int d = 0; d < s1.rank; d++)
            s1.dims[d] = 1 + pick(&G.in, 8);
        remember(&G, kiln_graph_add_input(G.g, "x2", KILN_DTYPE_FLOAT32, &s1));
    }
    int steps = 1 + pick(&G.in, MAX_STEPS);
    for (int i = 0; i < steps && G.in.n > 0; i++)
        recipes[pick(&G.in, (int)(sizeof recipes / sizeof recipes[0]))](&G);
    /* outputs: the newest node output, then up to two values of any kind */
    int last = -1;
    for (int i = G.nv - 1; i >= 0 && last < 0; i--)
        if (val(&G, G.vals[i])->kind == KILN_VALUE_NODE)
            last = G.vals[i];
    kiln_graph_add_output(G.g, last >= 0 ? last : G.vals[0]);
    for (int k = pick(&G.in, 3); k > 0; k--)
        kiln_graph_add_output(G.g, G.vals[pick(&G.in, G.nv)]);
    return G.g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool init;
    static const char *print_after;
    if (!init) {
        init = true;
        const char *e = getenv("KILN_FUZZ_STATS");
        if (e && *e == '1')
            atexit(print_stats);
        print_after = getenv("KILN_FUZZ_PRINT");
    }
    kiln_graph *g = build(data, size);
    if (!g)
        return 0;
    stats.graphs++;
    kiln_error err;
    memset(&err, 0, sizeof err);
    /* valid by construction: the whole-graph checks must agree */
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK || kiln_graph_validate(g, &err) != KILN_OK) {
        fprintf(stderr, "fuzz_passes: generated an invalid graph: %s\n", err.msg);
        __builtin_trap();
    }
    kiln_target t;
    kiln_status s = kiln_target_resolve((data && size && (data[0] & 1)) ? "avx2" : "avx512", &t,
                                        &err);
    kiln_pass_ctx *ctx = NULL;
    if (s == KILN_OK)
        s = kiln_pass_ctx_create(g, &t, &ctx, &err);
    if (s == KILN_OK) {
        ctx->print_after = print_after;
        s = kiln_pass_run_all(ctx, &err);
    }
#ifdef KILN_FUZZ_LOWER
    if (s == KILN_OK) {
        kiln_lowered *l = NULL;
        s = kiln_lower(ctx, size > 1 ? data[1] : 0, &l, &err);
        kiln_lowered_destroy(l);
    }
#endif
    stats.status[(unsigned)s < 64 ? (unsigned)s : 63]++;
    if (s != KILN_OK)
        stat_message((unsigned)s < 64 ? (int)s : 63, err.msg);
    if (s != KILN_OK && err.msg[0] == '\0')
        __builtin_trap(); /* a failure says why */
    if (s == KILN_ERR_INTERNAL) { /* a kiln bug: a pass or lowering disagrees with another */
        fprintf(stderr, "fuzz_passes: internal error: %s\n", err.msg);
        __builtin_trap();
    }
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
    return 0;
}
