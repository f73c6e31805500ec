/* import/zoo/mlp.c: a small multi-layer perceptron, 784-128-64-10 with ReLU
 * between the layers (an MNIST-sized classifier; the smallest zoo network,
 * used by quick tests). Layers are named like an nn.Sequential: fc1..fc3. */
#include "import/zoo/builder.h"

kiln_status kiln_zoo_build_mlp(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    zb b;
    zb_init(&b, g, rng, weights, err);
    kiln_shape in = {.rank = 2, .dims = {1, 784}};
    int x = zb_input(&b, "input", in);
    x = zb_linear(&b, "fc1", x, 128, true);
    x = zb_relu(&b, "relu1", x);
    x = zb_linear(&b, "fc2", x, 64, true);
    x = zb_relu(&b, "relu2", x);
    x = zb_linear(&b, "fc3", x, 10, true);
    return zb_finish(&b, x);
}
