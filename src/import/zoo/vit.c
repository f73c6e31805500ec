/* import/zoo/vit.c: ViT-B/16 (torchvision vit_b_16), 224x224, in inference.
 *
 * Patchify: conv_proj 16x16/16 -> 768 (bias), reshape [1, 768, 196], transpose
 * to [1, 196, 768]; prepend class_token [1, 1, 768]; add
 * encoder.pos_embedding [1, 197, 768]. Twelve pre-norm encoder blocks:
 *
 *   x = x + out_proj(attention(ln_1(x)))     12 heads of 64
 *   x = x + mlp.3(gelu(mlp.0(ln_2(x))))      768 -> 3072 -> 768
 *
 * then encoder.ln, the class token (Slice [0, 1) on axis 1, reshape [1, 768])
 * and heads.head (fc 768 -> 1000). LayerNorm eps is 1e-6.
 *
 * Attention is nn.MultiheadAttention's packed form: one in-projection Gemm
 * (in_proj_weight [2304, 768], in_proj_bias [2304]) on the tokens as a
 * [197, 768] matrix, reshaped to [197, 3, 12, 64], transposed to
 * [3, 12, 197, 64] and split into q, k, v; q is scaled by 1/sqrt(64); then
 * softmax(q k^T) v per head, heads merged back to [197, 768] and out_proj.
 * Linear layers are Gemm(transB = 1) on [197, 768] matrices between reshapes.
 * GELU is the exact form 0.5 x (1 + erf(x / sqrt(2))).
 *
 * The scalars (the attention scale and GELU's constants) are four rank-0
 * constants shared by all blocks.
 */
#include <math.h>
#include <stdio.h>

#include "import/zoo/builder.h"

#define LN_EPS 1e-6f
#define TOKENS 197
#define DIM 768
#define HEADS 12
#define HEAD_DIM 64
#define MLP_DIM 3072

typedef struct vit_scalars {
    int scale, inv_sqrt2, one, half;
} vit_scalars;

/* [1, T, D] <-> [T, D] around the Gemms. */
static int to_2d(zb *b, const char *name, int x)
{
    const int64_t d[2] = {TOKENS, zb_dim(b, x, -1)};
    return zb_reshape(b, name, x, d, 2);
}

static int to_3d(zb *b, const char *name, int x)
{
    const int64_t d[3] = {1, TOKENS, zb_dim(b, x, -1)};
    return zb_reshape(b, name, x, d, 3);
}

static int self_attention(zb *b, const char *prefix, int x, const vit_scalars *c)
{
    char p[96]; /* own copy: zb_name's buffers rotate */
    snprintf(p, sizeof p, "%s", prefix);
    float in_bound = sqrtf(6.0f / (float)(DIM + 3 * DIM)); /* xavier, as torch's MHA */
    float bb = 1.0f / sqrtf((float)DIM);
    kiln_shape ws = {.rank = 2, .dims = {3 * DIM, DIM}}, bs = {.rank = 1, .dims = {3 * DIM}};
    int w = zb_param(b, zb_name(b, "%s.in_proj_weight", p), ws, -in_bound, in_bound);
    int bias = zb_param(b, zb_name(b, "%s.in_proj_bias", p), bs, -bb, bb);

    x = to_2d(b, zb_name(b, "%s.in_reshape", p), x);
    int qkv = zb_gemm(b, zb_name(b, "%s.in_proj", p), x, w, bias);
    const int64_t split_heads[4] = {TOKENS, 3, HEADS, HEAD_DIM};
    qkv = zb_reshape(b, zb_name(b, "%s.qkv_reshape", p), qkv, split_heads, 4);
    const int64_t to_heads[4] = {1, 2, 0, 3}; /* [3, heads, tokens, head_dim] */
    qkv = zb_transpose(b, zb_name(b, "%s.qkv_transpose", p), qkv, to_heads, 4);
    int qkv_parts[3];
    const int64_t ones[3] = {1, 1, 1};
    zb_split(b, zb_name(b, "%s.qkv_split", p), qkv, 0, ones, 3, qkv_parts);

    int q = zb_mul(b, zb_name(b, "%s.q_scale", p), qkv_parts[0], c->scale);
    const int64_t kt_perm[4] = {0, 1, 3, 2};
    int kt = zb_transpose(b, zb_name(b, "%s.k_transpose", p), qkv_parts[1], kt_perm, 4);
    int att = zb_matmul(b, zb_name(b, "%s.qk", p), q, kt);
    att = zb_softmax(b, zb_name(b, "%s.softmax", p), att, -1);
    int ctx = zb_matmul(b, zb_name(b, "%s.av", p), att, qkv_parts[2]);
    const int64_t merge_perm[4] = {0, 2, 1, 3}; /* [1, tokens, heads, head_dim] */
    ctx = zb_transpose(b, zb_name(b, "%s.merge_transpose", p), ctx, merge_perm, 4);
    const int64_t merged[2] = {TOKENS, DIM};
    ctx = zb_reshape(b, zb_name(b, "%s.merge_reshape", p), ctx, merged, 2);
    ctx = zb_linear(b, zb_name(b, "%s.out_proj", p), ctx, DIM, true);
    return to_3d(b, zb_name(b, "%s.out_reshape", p), ctx);
}

/* 0.5 * x * (1 + erf(x / sqrt(2))) */
static int gelu(zb *b, const char *p, int x, const vit_scalars *c)
{
    int t = zb_mul(b, zb_name(b, "%s.div_sqrt2", p), x, c->inv_sqrt2);
    t = zb_unary(b, KILN_OP_ERF, zb_name(b, "%s.erf", p), t);
    t = zb_add(b, zb_name(b, "%s.add_one", p), t, c->one);
    t = zb_mul(b, zb_name(b, "%s.mul_x", p), x, t);
    return zb_mul(b, zb_name(b, "%s.mul_half", p), t, c->half);
}

static int encoder_block(zb *b, int i, int x, const vit_scalars *c)
{
    char p[64];
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d", i);
    int y = zb_layernorm(b, zb_name(b, "%s.ln_1", p), x, LN_EPS);
    y = self_attention(b, zb_name(b, "%s.self_attention", p), y, c);
    x = zb_add(b, zb_name(b, "%s.add", p), y, x);

    y = zb_layernorm(b, zb_name(b, "%s.ln_2", p), x, LN_EPS);
    y = to_2d(b, zb_name(b, "%s.mlp.reshape", p), y);
    y = zb_linear(b, zb_name(b, "%s.mlp.0", p), y, MLP_DIM, true);
    y = gelu(b, zb_name(b, "%s.mlp.1", p), y, c);
    y = zb_linear(b, zb_name(b, "%s.mlp.3", p), y, DIM, true);
    y = to_3d(b, zb_name(b, "%s.mlp.out_reshape", p), y);
    return zb_add(b, zb_name(b, "%s.add_1", p), x, y);
}

kiln_status kiln_zoo_build_vit_b16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 224, 224}};
    int x = zb_input(&b, "input", in);
    vit_scalars c = {
        .scale = zb_scalar(&b, "attention_scale", 1.0f / sqrtf((float)HEAD_DIM)),
        .inv_sqrt2 = zb_scalar(&b, "gelu.inv_sqrt2", (float)(1.0 / sqrt(2.0))),
        .one = zb_scalar(&b, "gelu.one", 1.0f),
        .half = zb_scalar(&b, "gelu.half", 0.5f),
    };

    x = zb_conv(&b, "conv_proj", x, DIM, 16, 16, 0, 1, true);
    const int64_t flat[3] = {1, DIM, TOKENS - 1};
    x = zb_reshape(&b, "reshape", x, flat, 3);
    const int64_t perm[3] = {0, 2, 1};
    x = zb_transpose(&b, "permute", x, perm, 3);
    /* class token and position embedding: small, like torchvision's
     * normal(std 0.02) (its class token starts at zero; ours does not) */
    kiln_shape cls_shape = {.rank = 3, .dims = {1, 1, DIM}};
    int cls = zb_param(&b, "class_token", cls_shape, -0.035f, 0.035f);
    int cat[2] = {cls, x};
    x = zb_concat(&b, "cat", cat, 2, 1);
    kiln_shape pos_shape = {.rank = 3, .dims = {1, TOKENS, DIM}};
    int pos = zb_param(&b, "encoder.pos_embedding", pos_shape, -0.035f, 0.035f);
    x = zb_add(&b, "encoder.add", x, pos);

    for (int i = 0; i < 12; i++)
        x = encoder_block(&b, i, x, &c);

    x = zb_layernorm(&b, "encoder.ln", x, LN_EPS);
    const int64_t s0[1] = {0}, s1[1] = {1}, ax[1] = {1};
    x = zb_slice(&b, "class_token_slice", x, s0, s1, ax, 1);
    const int64_t tok[2] = {1, DIM};
    x = zb_reshape(&b, "class_token_reshape", x, tok, 2);
    x = zb_linear(&b, "heads.head", x, 1000, true);
    return zb_finish(&b, x);
}
