/* pass/pipeline.c: the pass pipeline, a table of {name, function}. Passes run
 * in order; after the one named by print_after ("all": after every pass) the
 * IR is printed to ctx->dump. */
#include <string.h>

#include "pass/pass.h"
#include "util/error.h"

static const kiln_pass_entry pipeline[] = {
    {"infer-shapes", kiln_pass_infer_shapes, "record every value's dtype and shape"},
    {"fold-batchnorm", kiln_pass_fold_batchnorm,
     "fold BatchNormalization into the preceding Conv (else into a scale and shift)"},
    {"fold-constant", kiln_pass_fold_constant,
     "evaluate nodes whose inputs are all constant with the reference kernels"},
    {"lower-conv-transpose", kiln_pass_lower_conv_transpose,
     "2-D ConvTranspose with constant weights to a Conv over its stride phases + interleave"},
    {"lower-to-2d", kiln_pass_lower_to_2d,
     "1-D Conv (one row) and 3-D Conv, MaxPool, AveragePool (depth to batch) as 2-D ones"},
    {"crop-taps", kiln_pass_crop_taps,
     "drop a 2-D Conv's filter rows/columns that only ever read padding (ASPP's large rates)"},
    {"lower-rnn", kiln_pass_lower_rnn,
     "LSTM and GRU with constant weights unrolled over their steps into Gemms and elementwise ops"},
    {"lower-shuffle", kiln_pass_lower_shuffle,
     "DepthToSpace and SpaceToDepth as Reshape -> Transpose -> Reshape"},
    {"fold-patterns", kiln_pass_fold_patterns,
     "exported GELU (erf form) and LayerNorm (ReduceMean/Sub/Pow/Sqrt/Div) chains to one op"},
    {"reduce-to-pool", kiln_pass_reduce_to_pool,
     "ReduceMean/ReduceMax over the spatial dims of NCHW (timm's x.mean((2, 3))) as a global pool"},
    {"remove-identity", kiln_pass_remove_identity,
     "drop Identity, no-op Reshape/Flatten, and similar pass-through nodes"},
    {"fuse-attention", kiln_pass_fuse_attention,
     "MatMul / scale / mask Add / Softmax / MatMul (and the head transposes) to one Attention"},
    {"dce", kiln_pass_dce, "remove nodes and constants no output depends on"},
    {"alter-layout", kiln_pass_alter_layout,
     "blocked NCHW{c} across runs of conv-like ops; transforms at the run edges"},
    {"fuse", kiln_pass_fuse, "group nodes into kernels by pattern kind"},
    {"plan-memory", kiln_pass_plan_memory, "liveness intervals to offsets in one arena"},
};

const kiln_pass_entry *kiln_pass_pipeline(int *count)
{
    *count = (int)(sizeof pipeline / sizeof pipeline[0]);
    return pipeline;
}

bool kiln_pass_known(const char *name)
{
    if (!name)
        return false;
    if (strcmp(name, "all") == 0 || strcmp(name, "input") == 0)
        return true;
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++)
        if (strcmp(pipeline[i].name, name) == 0)
            return true;
    return false;
}

static kiln_status run(kiln_pass_ctx *ctx, const char *last, kiln_error *err)
{
    const char *pa = ctx->print_after;
    if (pa && strcmp(pa, "input") == 0)
        kiln_pass_print(ctx, ctx->dump, "input");
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        kiln_status s = pipeline[i].fn(ctx, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "pass %s: ", pipeline[i].name);
        if (pa && (strcmp(pa, "all") == 0 || strcmp(pa, pipeline[i].name) == 0))
            kiln_pass_print(ctx, ctx->dump, pipeline[i].name);
        if (last && strcmp(last, pipeline[i].name) == 0)
            return KILN_OK;
    }
    return KILN_OK;
}

kiln_status kiln_pass_run_all(kiln_pass_ctx *ctx, kiln_error *err)
{
    return run(ctx, NULL, err);
}

kiln_status kiln_pass_run_until(kiln_pass_ctx *ctx, const char *last, kiln_error *err)
{
    if (!kiln_pass_known(last))
        return kiln_errorf(err, KILN_ERR_NOT_FOUND, "no pass named '%s'", last);
    return run(ctx, last, err);
}
