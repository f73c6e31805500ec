/* import/zoo/zoo.c: the table of built-in networks and kiln_zoo_build. */
#include <string.h>

#include "import/zoo/zoo.h"
#include "util/error.h"

typedef struct zoo_entry {
    kiln_zoo_info info;
    kiln_zoo_build_fn build;
} zoo_entry;

#define IMG(c, h, w) {.rank = 4, .dims = {1, c, h, w}}

static const zoo_entry zoo[] = {
    {{"resnet-18", "ResNet-18 (torchvision resnet18), ImageNet 1000 classes", IMG(3, 224, 224)},
     kiln_zoo_build_resnet18},
    {{"resnet-34", "ResNet-34 (torchvision resnet34)", IMG(3, 224, 224)},
     kiln_zoo_build_resnet34},
    {{"resnet-50", "ResNet-50 v1.5 (torchvision resnet50), bottleneck blocks", IMG(3, 224, 224)},
     kiln_zoo_build_resnet50},
    {{"vgg-16", "VGG-16 without batch-norm (torchvision vgg16)", IMG(3, 224, 224)},
     kiln_zoo_build_vgg16},
    {{"mobilenet-v2", "MobileNet-V2 (torchvision mobilenet_v2), depthwise + ReLU6",
      IMG(3, 224, 224)},
     kiln_zoo_build_mobilenet_v2},
    {{"squeezenet-1.1", "SqueezeNet 1.1 (torchvision squeezenet1_1), fire modules",
      IMG(3, 224, 224)},
     kiln_zoo_build_squeezenet11},
    {{"inception-v3", "Inception-v3 (torchvision inception_v3, no aux head), 299x299",
      IMG(3, 299, 299)},
     kiln_zoo_build_inception_v3},
    {{"vit-b-16", "ViT-B/16 (torchvision vit_b_16), 12 encoder layers", IMG(3, 224, 224)},
     kiln_zoo_build_vit_b16},
    {{"bert-base",
      "BERT-base encoder (Hugging Face BertModel, no pooler), seq 128; inputs input_ids, "
      "attention_mask",
      {.rank = 2, .dims = {1, 128}}},
     kiln_zoo_build_bert_base},
    {{"mlp", "MLP 784-128-64-10 with ReLU", {.rank = 2, .dims = {1, 784}}}, kiln_zoo_build_mlp},
};

int kiln_zoo_count(void)
{
    return (int)(sizeof zoo / sizeof zoo[0]);
}

const kiln_zoo_info *kiln_zoo_get(int i)
{
    if (i < 0 || i >= kiln_zoo_count())
        return NULL;
    return &zoo[i].info;
}

const kiln_zoo_info *kiln_zoo_find(const char *name)
{
    for (int i = 0; name && i < kiln_zoo_count(); i++)
        if (strcmp(zoo[i].info.name, name) == 0)
            return &zoo[i].info;
    return NULL;
}

kiln_status kiln_zoo_build(const char *name, uint64_t seed, unsigned flags, kiln_graph **out,
                           kiln_error *err)
{
    const zoo_entry *e = NULL;
    for (int i = 0; name && i < kiln_zoo_count(); i++)
        if (strcmp(zoo[i].info.name, name) == 0)
            e = &zoo[i];
    if (!e)
        return kiln_errorf(err, KILN_ERR_NOT_FOUND,
                           "no zoo network named '%s' (see `kiln zoo` for the list)",
                           name ? name : "(null)");
    kiln_graph *g = NULL;
    if (kiln_graph_create(&g) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    g->name = kiln_arena_strdup(g->arena, e->info.name);
    kiln_rng rng;
    kiln_rng_seed(&rng, seed);
    kiln_status s = e->build(g, &rng, !(flags & KILN_ZOO_NO_WEIGHTS), err);
    if (s == KILN_OK)
        s = kiln_graph_infer_shapes(g, err);
    if (s != KILN_OK) {
        kiln_error_prefix(err, s, "zoo '%s': ", e->info.name);
        kiln_graph_destroy(g);
        return s;
    }
    *out = g;
    return KILN_OK;
}
