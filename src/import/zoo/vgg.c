/* import/zoo/vgg.c: VGG-16 without batch-norm (torchvision vgg16, config "D").
 *
 * features: thirteen 3x3 pad-1 convolutions with bias, each followed by ReLU,
 * in five groups (64, 64 | 128, 128 | 256 x3 | 512 x3 | 512 x3) closed by a
 * 2x2/2 max-pool; the module indices ("features.N") are torchvision's.
 * AdaptiveAvgPool2d((7, 7)) is the identity on the 7x7 map of a 224x224 input
 * and is left out. classifier: flatten, fc 25088->4096, ReLU, fc 4096->4096,
 * ReLU, fc 4096->1000 (dropout is the identity in inference).
 */
#include <stdio.h>

#include "import/zoo/builder.h"

kiln_status kiln_zoo_build_vgg16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    /* 0 = max-pool ("M" in torchvision's cfgs) */
    static const int cfg[] = {64,  64,  0,   128, 128, 0,   256, 256, 256, 0,
                              512, 512, 512, 0,   512, 512, 512, 0};
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 4, .dims = {1, 3, 224, 224}};
    int x = zb_input(&b, "input", in);
    int idx = 0; /* module index inside torchvision's features Sequential */
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        if (cfg[i] == 0) {
            x = zb_maxpool(&b, zb_name(&b, "features.%d", idx), x, 2, 2, 0, false);
            idx += 1;
        } else {
            x = zb_conv(&b, zb_name(&b, "features.%d", idx), x, cfg[i], 3, 1, 1, 1, true);
            x = zb_relu(&b, zb_name(&b, "features.%d", idx + 1), x);
            idx += 2;
        }
    }
    x = zb_flatten(&b, "flatten", x, 1);
    x = zb_linear(&b, "classifier.0", x, 4096, true);
    x = zb_relu(&b, "classifier.1", x);
    x = zb_linear(&b, "classifier.3", x, 4096, true);
    x = zb_relu(&b, "classifier.4", x);
    x = zb_linear(&b, "classifier.6", x, 1000, true);
    return zb_finish(&b, x);
}
