/* import/zoo/squeezenet.c: SqueezeNet 1.1 (torchvision squeezenet1_1).
 *
 * features: conv 3x3/2 (64, bias) -> ReLU -> max-pool 3x3/2 (ceil_mode) ->
 * fire x2 -> pool -> fire x2 -> pool -> fire x4, where a fire module squeezes
 * with a 1x1 conv + ReLU and concatenates a 1x1 and a 3x3 expansion (each with
 * ReLU) on the channel axis. classifier: conv 1x1 -> 1000 (bias) -> ReLU ->
 * global average pool; then flatten. Module indices are torchvision's.
 */
#include "import/zoo/builder.h"

static int fire(zb *b, int idx, int x, int64_t squeeze, int64_t e1, int64_t e3)
{
    x = zb_conv(b, zb_name(b, "features.%d.squeeze", idx), x, squeeze, 1, 1, 0, 1, true);
    x = zb_relu(b, zb_name(b, "features.%d.squeeze_activation", idx), x);
    int y[2];
    y[0] = zb_conv(b, zb_name(b, "features.%d.expand1x1", idx), x, e1, 1, 1, 0, 1, true);
    y[0] = zb_relu(b, zb_name(b, "features.%d.expand1x1_activation", idx), y[0]);
    y[1] = zb_conv(b, zb_name(b, "features.%d.expand3x3", idx), x, e3, 3, 1, 1, 1, true);
    y[1] = zb_relu(b, zb_name(b, "features.%d.expand3x3_activation", idx), y[1]);
    return zb_concat(b, zb_name(b, "features.%d.cat", idx), y, 2, 1);
}

kiln_status kiln_zoo_build_squeezenet11(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 224, 224}};
    int x = zb_input(&b, "input", in);
    x = zb_conv(&b, "features.0", x, 64, 3, 2, 0, 1, true);
    x = zb_relu(&b, "features.1", x);
    x = zb_maxpool(&b, "features.2", x, 3, 2, 0, true);
    x = fire(&b, 3, x, 16, 64, 64);
    x = fire(&b, 4, x, 16, 64, 64);
    x = zb_maxpool(&b, "features.5", x, 3, 2, 0, true);
    x = fire(&b, 6, x, 32, 128, 128);
    x = fire(&b, 7, x, 32, 128, 128);
    x = zb_maxpool(&b, "features.8", x, 3, 2, 0, true);
    x = fire(&b, 9, x, 48, 192, 192);
    x = fire(&b, 10, x, 48, 192, 192);
    x = fire(&b, 11, x, 64, 256, 256);
    x = fire(&b, 12, x, 64, 256, 256);
    x = zb_conv(&b, "classifier.1", x, 1000, 1, 1, 0, 1, true);
    x = zb_relu(&b, "classifier.2", x);
    x = zb_global_avgpool(&b, "classifier.3", x);
    x = zb_flatten(&b, "flatten", x, 1);
    return zb_finish(&b, x);
}
