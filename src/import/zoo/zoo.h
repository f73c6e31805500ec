/* import/zoo/zoo.h: internal interface of the built-in networks. */
#ifndef KILN_IMPORT_ZOO_H
#define KILN_IMPORT_ZOO_H

#include "ir/graph.h"
#include "util/rng.h"

/* Builds a network into the empty graph `g`. With `weights` false, constants
 * get shapes but no data. Weights are drawn from `rng` in a fixed order. */
typedef kiln_status (*kiln_zoo_build_fn)(kiln_graph *g, kiln_rng *rng, bool weights,
                                         kiln_error *err);

kiln_status kiln_zoo_build_resnet18(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_resnet34(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_resnet50(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_vgg16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_mobilenet_v2(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err);
kiln_status kiln_zoo_build_squeezenet11(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err);
kiln_status kiln_zoo_build_inception_v3(kiln_graph *g, kiln_rng *rng, bool weights,
                                        kiln_error *err);
kiln_status kiln_zoo_build_vit_b16(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_bert_base(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);
kiln_status kiln_zoo_build_mlp(kiln_graph *g, kiln_rng *rng, bool weights, kiln_error *err);

#endif
