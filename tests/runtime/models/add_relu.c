/* tests/runtime/models/add_relu.c: a hand-written "compiled model" for the
 * runtime tests: out = relu(x + y) over float32 [2, 3], one step that splits
 * its 6 elements over the pool with parallel_for (grain 1). */
#include "kiln/abi.h"

typedef struct add_ctx {
    const float *x, *y;
    float *out;
} add_ctx;

static void add_relu_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    add_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) {
        float v = c->x[i] + c->y[i];
        c->out[i] = v > 0 ? v : 0;
    }
}

static void add_relu_kernel(void *const *args, const kiln_rt *rt)
{
    add_ctx c = {args[0], args[1], args[2]};
    rt->parallel_for(rt->pool, 6, 1, add_relu_task, &c);
}

static const kiln_abi_tensor tensors[] = {
    {.name = "x", .dtype = 1, .rank = 2, .dims = {2, 3}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 0, .nbytes = 24},
    {.name = "y", .dtype = 1, .rank = 2, .dims = {2, 3}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 64, .nbytes = 24},
    {.name = "out", .dtype = 1, .rank = 2, .dims = {2, 3}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 128, .nbytes = 24},
};
static const int32_t step0_args[] = {0, 1, 2};
static const kiln_abi_step steps[] = {
    {.name = "add+relu", .op = "injective", .fn = add_relu_kernel, .n_args = 3,
     .args = step0_args, .workload = "add_relu float32 [2,3]", .flops = 12,
     .shapes = "[2,3], [2,3]", .layouts = "row-major", .config = "{\"source\": \"default\"}"},
};
static const int32_t inputs[] = {0, 1};
static const int32_t outputs[] = {2};

static const kiln_abi_model model = {
    .abi_version = KILN_ABI_VERSION,
    .name = "add_relu",
    .target = "generic",
    .build_id = "test-add-relu",
    .metadata_json = "{}",
    .n_tensors = 3,
    .n_steps = 1,
    .tensors = tensors,
    .steps = steps,
    .n_inputs = 2,
    .n_outputs = 1,
    .inputs = inputs,
    .outputs = outputs,
    .arena_bytes = 192,
};

const kiln_abi_model *kiln_model_get(void)
{
    return &model;
}
