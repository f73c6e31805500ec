/* import/zoo/bert.c: BERT-base encoder (Hugging Face BertModel without the
 * pooler), sequence length 128, in inference.
 *
 * Inputs input_ids and attention_mask, int64 [1, 128]; output
 * last_hidden_state [1, 128, 768]. The graph is what torch.onnx exports for
 * BertModel (scripts/export_bert.py defines the same module):
 *
 *   embeddings: Gather(word_embeddings, input_ids)
 *             + Gather(token_type_embeddings, zeros)     (token_type_ids buffer)
 *             + Gather(position_embeddings, arange(128)) (position_ids buffer)
 *             -> LayerNorm (eps 1e-12)
 *   mask:       Reshape(attention_mask, [1, 1, 1, 128]) -> Cast float
 *               -> (1 - m) * -10000                      (the extended mask)
 *   12 layers:  q, k, v = MatMul(x, W^T) + b            (Linear on [1, 128, 768])
 *               heads:    Reshape [1, 128, 12, 64] -> Transpose (0 2 1 3),
 *                         k: Transpose (0 2 3 1) (the export merges k's two)
 *               scores = MatMul(q, k^T) / 8 + mask -> Softmax(-1)
 *               ctx = MatMul(scores, v) -> Transpose (0 2 1 3) -> Reshape
 *               x = LayerNorm(x + dense(ctx))
 *               x = LayerNorm(x + output.dense(gelu(intermediate.dense(x))))
 * GELU is the exact form torch exports: x * (1 + erf(x / sqrt 2)) * 0.5.
 *
 * Weights are uniform with Hugging Face's init std (0.02, so +-0.02 sqrt 3),
 * biases small; LayerNorm weight ~1 and bias ~0. Parameter names are the
 * Hugging Face ones; Linear weights are stored as MatMul wants them, [in, out].
 */
#include <math.h>
#include <stdio.h>

#include "import/zoo/builder.h"
#include "util/error.h"

#define SEQ 128
#define DIM 768
#define HEADS 12
#define HEAD_DIM 64
#define FF_DIM 3072
#define VOCAB 30522
#define MAX_POS 512
#define LN_EPS 1e-12f
#define W_BOUND 0.0346410162f /* 0.02 * sqrt(3): uniform with std 0.02 */

typedef struct bert_scalars {
    int one, neg_big, head_scale, sqrt2, half;
} bert_scalars;

/* Linear on [1, SEQ, in]: MatMul with W [in, out] then Add bias, as exported. */
static int linear(zb *b, const char *name, int x, int64_t out)
{
    char p[128];
    snprintf(p, sizeof p, "%s", name);
    kiln_shape ws = {.rank = 2, .dims = {zb_dim(b, x, -1), out}};
    kiln_shape bs = {.rank = 1, .dims = {out}};
    int w = zb_param(b, zb_name(b, "%s.weight", p), ws, -W_BOUND, W_BOUND);
    int bias = zb_param(b, zb_name(b, "%s.bias", p), bs, -0.02f, 0.02f);
    int y = zb_matmul(b, zb_name(b, "%s.matmul", p), x, w);
    return zb_add(b, zb_name(b, "%s.add", p), y, bias);
}

static int gather(zb *b, const char *name, int table, int ids)
{
    int in[2] = {table, ids};
    int y = zb_node(b, KILN_OP_GATHER, name, in, 2);
    zb_attr_int(b, y, "axis", 0);
    return zb_infer(b, y);
}

/* An int64 [1, SEQ] constant: 0, 1, .. (iota) or all zeros. */
static int ids_const(zb *b, const char *name, bool iota)
{
    if (b->status != KILN_OK)
        return -1;
    kiln_shape s = {.rank = 2, .dims = {1, SEQ}};
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(b->g, name, KILN_DTYPE_INT64, &s, b->weights, &data);
    if (v < 0) {
        b->status = kiln_errorf(b->err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        return -1;
    }
    for (int64_t i = 0; data && i < SEQ; i++)
        ((int64_t *)data)[i] = iota ? i : 0;
    return v;
}

static int heads(zb *b, const char *name, int x, bool key)
{
    const int64_t d[4] = {1, SEQ, HEADS, HEAD_DIM};
    x = zb_reshape(b, zb_name(b, "%s.reshape", name), x, d, 4);
    const int64_t perm_q[4] = {0, 2, 1, 3}, perm_k[4] = {0, 2, 3, 1};
    return zb_transpose(b, zb_name(b, "%s.transpose", name), x, key ? perm_k : perm_q, 4);
}

static int layer(zb *b, int i, int x, int mask, const bert_scalars *c)
{
    char p[64];
    snprintf(p, sizeof p, "encoder.layer.%d", i);
    int q = heads(b, zb_name(b, "%s.attention.self.q", p),
                  linear(b, zb_name(b, "%s.attention.self.query", p), x, DIM), false);
    int k = heads(b, zb_name(b, "%s.attention.self.k", p),
                  linear(b, zb_name(b, "%s.attention.self.key", p), x, DIM), true);
    int v = heads(b, zb_name(b, "%s.attention.self.v", p),
                  linear(b, zb_name(b, "%s.attention.self.value", p), x, DIM), false);
    int s = zb_matmul(b, zb_name(b, "%s.attention.self.scores", p), q, k);
    s = zb_binary(b, KILN_OP_DIV, zb_name(b, "%s.attention.self.scale", p), s, c->head_scale);
    s = zb_add(b, zb_name(b, "%s.attention.self.mask", p), s, mask);
    s = zb_softmax(b, zb_name(b, "%s.attention.self.softmax", p), s, -1);
    int ctx = zb_matmul(b, zb_name(b, "%s.attention.self.context", p), s, v);
    const int64_t merge[4] = {0, 2, 1, 3}, flat[3] = {1, SEQ, DIM};
    ctx = zb_transpose(b, zb_name(b, "%s.attention.self.merge", p), ctx, merge, 4);
    ctx = zb_reshape(b, zb_name(b, "%s.attention.self.merge_reshape", p), ctx, flat, 3);
    int y = linear(b, zb_name(b, "%s.attention.output.dense", p), ctx, DIM);
    y = zb_add(b, zb_name(b, "%s.attention.output.residual", p), y, x);
    x = zb_layernorm(b, zb_name(b, "%s.attention.output.LayerNorm", p), y, LN_EPS);

    y = linear(b, zb_name(b, "%s.intermediate.dense", p), x, FF_DIM);
    int t = zb_binary(b, KILN_OP_DIV, zb_name(b, "%s.intermediate.gelu.div", p), y, c->sqrt2);
    t = zb_unary(b, KILN_OP_ERF, zb_name(b, "%s.intermediate.gelu.erf", p), t);
    t = zb_add(b, zb_name(b, "%s.intermediate.gelu.add", p), t, c->one);
    t = zb_mul(b, zb_name(b, "%s.intermediate.gelu.mul", p), y, t);
    y = zb_mul(b, zb_name(b, "%s.intermediate.gelu.half", p), t, c->half);
    y = linear(b, zb_name(b, "%s.output.dense", p), y, DIM);
    y = zb_add(b, zb_name(b, "%s.output.residual", p), y, x);
    return zb_layernorm(b, zb_name(b, "%s.output.LayerNorm", p), y, LN_EPS);
}

kiln_status kiln_zoo_build_bert_base(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 2, .dims = {1, SEQ}};
    int ids = kiln_graph_add_input(g, "input_ids", KILN_DTYPE_INT64, &in);
    int amask = kiln_graph_add_input(g, "attention_mask", KILN_DTYPE_INT64, &in);
    if (ids < 0 || amask < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "bert-base: out of memory");
    bert_scalars c = {
        .one = zb_scalar(&b, "one", 1.0f),
        .neg_big = zb_scalar(&b, "mask_value", -10000.0f),
        .head_scale = zb_scalar(&b, "attention_scale", sqrtf((float)HEAD_DIM)),
        .sqrt2 = zb_scalar(&b, "gelu.sqrt2", (float)sqrt(2.0)),
        .half = zb_scalar(&b, "gelu.half", 0.5f),
    };

    kiln_shape wshape = {.rank = 2, .dims = {VOCAB, DIM}};
    kiln_shape pshape = {.rank = 2, .dims = {MAX_POS, DIM}};
    kiln_shape tshape = {.rank = 2, .dims = {2, DIM}};
    int wemb = zb_param(&b, "embeddings.word_embeddings.weight", wshape, -W_BOUND, W_BOUND);
    int pemb = zb_param(&b, "embeddings.position_embeddings.weight", pshape, -W_BOUND, W_BOUND);
    int temb = zb_param(&b, "embeddings.token_type_embeddings.weight", tshape, -W_BOUND, W_BOUND);
    int x = gather(&b, "embeddings.word_embeddings", wemb, ids);
    int tt = gather(&b, "embeddings.token_type_embeddings", temb,
                    ids_const(&b, "embeddings.token_type_ids", false));
    x = zb_add(&b, "embeddings.add", x, tt);
    int pos = gather(&b, "embeddings.position_embeddings", pemb,
                     ids_const(&b, "embeddings.position_ids", true));
    x = zb_add(&b, "embeddings.add_1", x, pos);
    x = zb_layernorm(&b, "embeddings.LayerNorm", x, LN_EPS);

    const int64_t md[4] = {1, 1, 1, SEQ};
    int m = zb_reshape(&b, "extended_mask.reshape", amask, md, 4);
    m = zb_node(&b, KILN_OP_CAST, "extended_mask.cast", &m, 1);
    zb_attr_int(&b, m, "to", KILN_DTYPE_FLOAT32);
    m = zb_infer(&b, m);
    m = zb_binary(&b, KILN_OP_SUB, "extended_mask.sub", c.one, m);
    m = zb_mul(&b, "extended_mask.mul", m, c.neg_big);

    for (int i = 0; i < 12; i++)
        x = layer(&b, i, x, m, &c);
    if (x >= 0)
        g->values[x]->name = kiln_arena_strdup(g->arena, "last_hidden_state");
    return zb_finish(&b, x);
}
