/* import/zoo/mobilenet.c: MobileNet-V2 (torchvision mobilenet_v2, width 1.0).
 *
 * features.0: conv 3x3/2 (32) -> bn -> ReLU6. Then 17 inverted residual blocks
 * from the (expansion t, channels c, repeats n, stride s) table: an optional
 * 1x1 expansion conv-bn-ReLU6 (t != 1), a 3x3 depthwise conv-bn-ReLU6 carrying
 * the stride, a linear 1x1 projection conv-bn; a residual add when the stride
 * is 1 and the channel count is unchanged. features.18: conv 1x1 (1280) -> bn
 * -> ReLU6. Then global average pool, flatten, classifier.1 (fc 1000).
 * ReLU6 is Clip(0, 6); batch-norm eps 1e-5.
 *
 * Projection batch-norms of residual blocks draw a small gamma (see resnet.c).
 */
#include "import/zoo/builder.h"

#define BN_EPS 1e-5f

/* Conv2dNormActivation: "<p>.0" conv (no bias), "<p>.1" bn, "<p>.2" ReLU6. */
static int conv_bn_relu6(zb *b, const char *p, int x, int64_t out_ch, int k, int stride,
                         int groups)
{
    x = zb_conv(b, zb_name(b, "%s.0", p), x, out_ch, k, stride, (k - 1) / 2, groups, false);
    x = zb_bn(b, zb_name(b, "%s.1", p), x, BN_EPS);
    return zb_relu6(b, zb_name(b, "%s.2", p), x);
}

static int inverted_residual(zb *b, int idx, int x, int64_t inp, int64_t oup, int stride,
                             int expand)
{
    int64_t hidden = inp * expand;
    bool residual = stride == 1 && inp == oup;
    int y = x, layer = 0; /* index inside the block's "conv" Sequential */
    if (expand != 1)
        y = conv_bn_relu6(b, zb_name(b, "features.%d.conv.%d", idx, layer++), y, hidden, 1, 1,
                          1);
    y = conv_bn_relu6(b, zb_name(b, "features.%d.conv.%d", idx, layer++), y, hidden, 3, stride,
                      (int)hidden);
    y = zb_conv(b, zb_name(b, "features.%d.conv.%d", idx, layer), y, oup, 1, 1, 0, 1, false);
    const char *bn = zb_name(b, "features.%d.conv.%d", idx, layer + 1);
    y = residual ? zb_bn_gamma(b, bn, y, BN_EPS, 0.1f, 0.3f) : zb_bn(b, bn, y, BN_EPS);
    if (residual)
        y = zb_add(b, zb_name(b, "features.%d.add", idx), x, y);
    return y;
}

kiln_status kiln_zoo_build_mobilenet_v2(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err)
{
    static const int setting[7][4] = {
        {1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2},  {6, 64, 4, 2},
        {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1},
    };
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 224, 224}};
    int x = zb_input(&b, "input", in);
    x = conv_bn_relu6(&b, "features.0", x, 32, 3, 2, 1);
    int64_t ch = 32;
    int idx = 1;
    for (int r = 0; r < 7; r++) {
        int t = setting[r][0], c = setting[r][1], n = setting[r][2], s = setting[r][3];
        for (int i = 0; i < n; i++) {
            x = inverted_residual(&b, idx++, x, ch, c, i == 0 ? s : 1, t);
            ch = c;
        }
    }
    x = conv_bn_relu6(&b, zb_name(&b, "features.%d", idx), x, 1280, 1, 1, 1);
    x = zb_global_avgpool(&b, "avgpool", x);
    x = zb_flatten(&b, "flatten", x, 1);
    x = zb_linear(&b, "classifier.1", x, 1000, true);
    return zb_finish(&b, x);
}
