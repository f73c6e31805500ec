/* import/zoo/inception.c: Inception-v3 (torchvision inception_v3 with
 * aux_logits=False, transform_input=False), input 299x299.
 *
 * Every convolution is a BasicConv2d: conv (no bias) -> batch-norm (eps 1e-3)
 * -> ReLU, named "<block>.<branch>.conv"/".bn"/".relu". Stem: 1a 3x3/2, 2a 3x3,
 * 2b 3x3 pad 1, max-pool 3x3/2, 3b 1x1, 4a 3x3, max-pool 3x3/2. Then Mixed_5b-d
 * (InceptionA), 6a (B, grid reduction), 6b-e (C, factorised 7x7), 7a (D, grid
 * reduction), 7b-c (E, expanded filter banks); global average pool, flatten,
 * fc 2048 -> 1000. The branch pools of A, C and E are 3x3/1 pad 1 average
 * pools counting the padding (PyTorch's default count_include_pad=True); the
 * reductions use plain 3x3/2 max-pools. Branch outputs are concatenated on the
 * channel axis in torchvision's order.
 */
#include "import/zoo/builder.h"

#define BN_EPS 1e-3f

/* BasicConv2d "<block>.<branch>" (just "<block>" for an empty branch) with
 * kernel kh x kw, stride s, padding ph/pw. */
static int basic(zb *b, const char *block, const char *branch, int x, int64_t out_ch, int kh,
                 int kw, int s, int ph, int pw)
{
    const char *p = branch[0] ? zb_name(b, "%s.%s", block, branch) : block;
    x = zb_conv_rect(b, zb_name(b, "%s.conv", p), x, out_ch, kh, kw, s, s, ph, pw, 1, false);
    x = zb_bn(b, zb_name(b, "%s.bn", p), x, BN_EPS);
    return zb_relu(b, zb_name(b, "%s.relu", p), x);
}

/* Square-kernel shorthand. */
static int basic_k(zb *b, const char *block, const char *branch, int x, int64_t out_ch, int k,
                   int s, int p)
{
    return basic(b, block, branch, x, out_ch, k, k, s, p, p);
}

static int branch_avgpool(zb *b, const char *block, int x)
{
    return zb_avgpool(b, zb_name(b, "%s.avg_pool", block), x, 3, 1, 1, true);
}

static int inception_a(zb *b, const char *n, int x, int64_t pool_features)
{
    int br[4];
    br[0] = basic_k(b, n, "branch1x1", x, 64, 1, 1, 0);
    br[1] = basic_k(b, n, "branch5x5_1", x, 48, 1, 1, 0);
    br[1] = basic_k(b, n, "branch5x5_2", br[1], 64, 5, 1, 2);
    br[2] = basic_k(b, n, "branch3x3dbl_1", x, 64, 1, 1, 0);
    br[2] = basic_k(b, n, "branch3x3dbl_2", br[2], 96, 3, 1, 1);
    br[2] = basic_k(b, n, "branch3x3dbl_3", br[2], 96, 3, 1, 1);
    br[3] = branch_avgpool(b, n, x);
    br[3] = basic_k(b, n, "branch_pool", br[3], pool_features, 1, 1, 0);
    return zb_concat(b, zb_name(b, "%s.cat", n), br, 4, 1);
}

static int inception_b(zb *b, const char *n, int x)
{
    int br[3];
    br[0] = basic_k(b, n, "branch3x3", x, 384, 3, 2, 0);
    br[1] = basic_k(b, n, "branch3x3dbl_1", x, 64, 1, 1, 0);
    br[1] = basic_k(b, n, "branch3x3dbl_2", br[1], 96, 3, 1, 1);
    br[1] = basic_k(b, n, "branch3x3dbl_3", br[1], 96, 3, 2, 0);
    br[2] = zb_maxpool(b, zb_name(b, "%s.max_pool", n), x, 3, 2, 0, false);
    return zb_concat(b, zb_name(b, "%s.cat", n), br, 3, 1);
}

static int inception_c(zb *b, const char *n, int x, int64_t c7)
{
    int br[4];
    br[0] = basic_k(b, n, "branch1x1", x, 192, 1, 1, 0);
    br[1] = basic_k(b, n, "branch7x7_1", x, c7, 1, 1, 0);
    br[1] = basic(b, n, "branch7x7_2", br[1], c7, 1, 7, 1, 0, 3);
    br[1] = basic(b, n, "branch7x7_3", br[1], 192, 7, 1, 1, 3, 0);
    br[2] = basic_k(b, n, "branch7x7dbl_1", x, c7, 1, 1, 0);
    br[2] = basic(b, n, "branch7x7dbl_2", br[2], c7, 7, 1, 1, 3, 0);
    br[2] = basic(b, n, "branch7x7dbl_3", br[2], c7, 1, 7, 1, 0, 3);
    br[2] = basic(b, n, "branch7x7dbl_4", br[2], c7, 7, 1, 1, 3, 0);
    br[2] = basic(b, n, "branch7x7dbl_5", br[2], 192, 1, 7, 1, 0, 3);
    br[3] = branch_avgpool(b, n, x);
    br[3] = basic_k(b, n, "branch_pool", br[3], 192, 1, 1, 0);
    return zb_concat(b, zb_name(b, "%s.cat", n), br, 4, 1);
}

static int inception_d(zb *b, const char *n, int x)
{
    int br[3];
    br[0] = basic_k(b, n, "branch3x3_1", x, 192, 1, 1, 0);
    br[0] = basic_k(b, n, "branch3x3_2", br[0], 320, 3, 2, 0);
    br[1] = basic_k(b, n, "branch7x7x3_1", x, 192, 1, 1, 0);
    br[1] = basic(b, n, "branch7x7x3_2", br[1], 192, 1, 7, 1, 0, 3);
    br[1] = basic(b, n, "branch7x7x3_3", br[1], 192, 7, 1, 1, 3, 0);
    br[1] = basic_k(b, n, "branch7x7x3_4", br[1], 192, 3, 2, 0);
    br[2] = zb_maxpool(b, zb_name(b, "%s.max_pool", n), x, 3, 2, 0, false);
    return zb_concat(b, zb_name(b, "%s.cat", n), br, 3, 1);
}

static int inception_e(zb *b, const char *n, int x)
{
    int br[4], pair[2];
    br[0] = basic_k(b, n, "branch1x1", x, 320, 1, 1, 0);
    br[1] = basic_k(b, n, "branch3x3_1", x, 384, 1, 1, 0);
    pair[0] = basic(b, n, "branch3x3_2a", br[1], 384, 1, 3, 1, 0, 1);
    pair[1] = basic(b, n, "branch3x3_2b", br[1], 384, 3, 1, 1, 1, 0);
    br[1] = zb_concat(b, zb_name(b, "%s.branch3x3.cat", n), pair, 2, 1);
    br[2] = basic_k(b, n, "branch3x3dbl_1", x, 448, 1, 1, 0);
    br[2] = basic_k(b, n, "branch3x3dbl_2", br[2], 384, 3, 1, 1);
    pair[0] = basic(b, n, "branch3x3dbl_3a", br[2], 384, 1, 3, 1, 0, 1);
    pair[1] = basic(b, n, "branch3x3dbl_3b", br[2], 384, 3, 1, 1, 1, 0);
    br[2] = zb_concat(b, zb_name(b, "%s.branch3x3dbl.cat", n), pair, 2, 1);
    br[3] = branch_avgpool(b, n, x);
    br[3] = basic_k(b, n, "branch_pool", br[3], 192, 1, 1, 0);
    return zb_concat(b, zb_name(b, "%s.cat", n), br, 4, 1);
}

kiln_status kiln_zoo_build_inception_v3(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 299, 299}};
    int x = zb_input(&b, "input", in);
    x = basic_k(&b, "Conv2d_1a_3x3", "", x, 32, 3, 2, 0);
    x = basic_k(&b, "Conv2d_2a_3x3", "", x, 32, 3, 1, 0);
    x = basic_k(&b, "Conv2d_2b_3x3", "", x, 64, 3, 1, 1);
    x = zb_maxpool(&b, "maxpool1", x, 3, 2, 0, false);
    x = basic_k(&b, "Conv2d_3b_1x1", "", x, 80, 1, 1, 0);
    x = basic_k(&b, "Conv2d_4a_3x3", "", x, 192, 3, 1, 0);
    x = zb_maxpool(&b, "maxpool2", x, 3, 2, 0, false);
    x = inception_a(&b, "Mixed_5b", x, 32);
    x = inception_a(&b, "Mixed_5c", x, 64);
    x = inception_a(&b, "Mixed_5d", x, 64);
    x = inception_b(&b, "Mixed_6a", x);
    x = inception_c(&b, "Mixed_6b", x, 128);
    x = inception_c(&b, "Mixed_6c", x, 160);
    x = inception_c(&b, "Mixed_6d", x, 160);
    x = inception_c(&b, "Mixed_6e", x, 192);
    x = inception_d(&b, "Mixed_7a", x);
    x = inception_e(&b, "Mixed_7b", x);
    x = inception_e(&b, "Mixed_7c", x);
    x = zb_global_avgpool(&b, "avgpool", x);
    x = zb_flatten(&b, "flatten", x, 1);
    x = zb_linear(&b, "fc", x, 1000, true);
    return zb_finish(&b, x);
}
