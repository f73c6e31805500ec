/* import/zoo/resnet.c: ResNet-18/34 (basic blocks) and ResNet-50 (bottleneck
 * blocks, v1.5: the stride sits on the 3x3 convolution), as torchvision's
 * resnet.py builds them, in inference mode.
 *
 * Stem: conv 7x7/2 -> bn -> relu -> maxpool 3x3/2 pad 1; four stages of 64,
 * 128, 256, 512 planes (x4 for bottlenecks), the first block of stages 2-4
 * striding by 2 with a 1x1 conv + bn downsample on the shortcut; global
 * average pool, flatten, fc 1000.
 *
 * The last batch-norm of every residual branch draws gamma in [0.1, 0.3)
 * (instead of ~1), so the residual stream grows slowly with depth and the
 * outputs of the randomly initialised network stay in a sane range.
 */
#include <stdio.h>

#include "import/zoo/builder.h"

#define BN_EPS 1e-5f

/* BasicBlock: conv3x3(stride) bn relu conv3x3 bn (+ shortcut) relu. */
static int basic_block(zb *b, const char *p, int x, int64_t planes, int stride, bool downsample)
{
    int y = zb_conv(b, zb_name(b, "%s.conv1", p), x, planes, 3, stride, 1, 1, false);
    y = zb_bn(b, zb_name(b, "%s.bn1", p), y, BN_EPS);
    y = zb_relu(b, zb_name(b, "%s.relu", p), y);
    y = zb_conv(b, zb_name(b, "%s.conv2", p), y, planes, 3, 1, 1, 1, false);
    y = zb_bn_gamma(b, zb_name(b, "%s.bn2", p), y, BN_EPS, 0.1f, 0.3f);
    int id = x;
    if (downsample) {
        id = zb_conv(b, zb_name(b, "%s.downsample.0", p), x, planes, 1, stride, 0, 1, false);
        id = zb_bn(b, zb_name(b, "%s.downsample.1", p), id, BN_EPS);
    }
    y = zb_add(b, zb_name(b, "%s.add", p), y, id);
    return zb_relu(b, zb_name(b, "%s.relu_1", p), y);
}

/* Bottleneck: conv1x1 bn relu conv3x3(stride) bn relu conv1x1(x4) bn
 * (+ shortcut) relu. */
static int bottleneck(zb *b, const char *p, int x, int64_t planes, int stride, bool downsample)
{
    int y = zb_conv(b, zb_name(b, "%s.conv1", p), x, planes, 1, 1, 0, 1, false);
    y = zb_bn(b, zb_name(b, "%s.bn1", p), y, BN_EPS);
    y = zb_relu(b, zb_name(b, "%s.relu", p), y);
    y = zb_conv(b, zb_name(b, "%s.conv2", p), y, planes, 3, stride, 1, 1, false);
    y = zb_bn(b, zb_name(b, "%s.bn2", p), y, BN_EPS);
    y = zb_relu(b, zb_name(b, "%s.relu_1", p), y);
    y = zb_conv(b, zb_name(b, "%s.conv3", p), y, planes * 4, 1, 1, 0, 1, false);
    y = zb_bn_gamma(b, zb_name(b, "%s.bn3", p), y, BN_EPS, 0.1f, 0.3f);
    int id = x;
    if (downsample) {
        id = zb_conv(b, zb_name(b, "%s.downsample.0", p), x, planes * 4, 1, stride, 0, 1,
                     false);
        id = zb_bn(b, zb_name(b, "%s.downsample.1", p), id, BN_EPS);
    }
    y = zb_add(b, zb_name(b, "%s.add", p), y, id);
    return zb_relu(b, zb_name(b, "%s.relu_2", p), y);
}

static kiln_status resnet(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err,
                          const int blocks[4], bool use_bottleneck)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 224, 224}};
    int x = zb_input(&b, "input", in);
    x = zb_conv(&b, "conv1", x, 64, 7, 2, 3, 1, false);
    x = zb_bn(&b, "bn1", x, BN_EPS);
    x = zb_relu(&b, "relu", x);
    x = zb_maxpool(&b, "maxpool", x, 3, 2, 1, false);

    const int expansion = use_bottleneck ? 4 : 1;
    int64_t in_ch = 64;
    for (int stage = 0; stage < 4; stage++) {
        int64_t planes = (int64_t)64 << stage;
        for (int i = 0; i < blocks[stage]; i++) {
            int stride = (stage > 0 && i == 0) ? 2 : 1;
            bool down = i == 0 && (stride != 1 || in_ch != planes * expansion);
            char p[32];
            snprintf(p, sizeof p, "layer%d.%d", stage + 1, i);
            x = use_bottleneck ? bottleneck(&b, p, x, planes, stride, down)
                               : basic_block(&b, p, x, planes, stride, down);
            in_ch = planes * expansion;
        }
    }
    x = zb_global_avgpool(&b, "avgpool", x);
    x = zb_flatten(&b, "flatten", x, 1);
    x = zb_linear(&b, "fc", x, 1000, true);
    return zb_finish(&b, x);
}

kiln_status kiln_zoo_build_resnet18(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    static const int blocks[4] = {2, 2, 2, 2};
    return resnet(g, rng, weights, err, blocks, false);
}

kiln_status kiln_zoo_build_resnet34(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    static const int blocks[4] = {3, 4, 6, 3};
    return resnet(g, rng, weights, err, blocks, false);
}

kiln_status kiln_zoo_build_resnet50(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    static const int blocks[4] = {3, 4, 6, 3};
    return resnet(g, rng, weights, err, blocks, true);
}
