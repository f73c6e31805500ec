/* import/zoo/stubs.c: STUB placeholders so the project links; to be replaced. */
#include "import/zoo/zoo.h"
#include "util/error.h"

kiln_status kiln_zoo_build_resnet18(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "resnet18: not built yet");
}

kiln_status kiln_zoo_build_resnet34(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "resnet34: not built yet");
}

kiln_status kiln_zoo_build_resnet50(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "resnet50: not built yet");
}

kiln_status kiln_zoo_build_vgg16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "vgg16: not built yet");
}

kiln_status kiln_zoo_build_mobilenet_v2(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "mobilenet_v2: not built yet");
}

kiln_status kiln_zoo_build_squeezenet11(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "squeezenet11: not built yet");
}

kiln_status kiln_zoo_build_inception_v3(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "inception_v3: not built yet");
}

kiln_status kiln_zoo_build_vit_b16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "vit_b16: not built yet");
}

kiln_status kiln_zoo_build_mlp(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err)
{
    (void)g; (void)rng; (void)weights;
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "mlp: not built yet");
}
