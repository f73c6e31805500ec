/* tests/runtime/models/two_step.c: a hand-written "compiled model" with two
 * steps, a weights blob and a per-thread workspace:
 *   t   = 2 * x          (parallel_for, grain 16, staged through the workspace)
 *   out = t + w          (w[i] = i / 2, a constant in the weights blob)
 * over float32 [1000]. It records the calls, the largest thread index a task
 * saw, and any contract violation (a thread index out of range, a chunk
 * larger than the workspace slice) in exported counters the tests read. */
#include <stdalign.h>

#include "kiln/abi.h"

#define N 1000

int rt_model_calls;       /* kernel calls of step 1 */
int rt_model_max_thread;  /* largest `thread` any task saw */
int rt_model_violations;  /* contract violations seen by the tasks */

static alignas(64) const float weights[N] = {
#define W4(i) (i) / 2.0f, (i + 1) / 2.0f, (i + 2) / 2.0f, (i + 3) / 2.0f
#define W20(i) W4(i), W4(i + 4), W4(i + 8), W4(i + 12), W4(i + 16)
#define W100(i) W20(i), W20(i + 20), W20(i + 40), W20(i + 60), W20(i + 80)
    W100(0), W100(100), W100(200), W100(300), W100(400),
    W100(500), W100(600), W100(700), W100(800), W100(900),
};

typedef struct scale_ctx {
    const float *x;
    float *t;
    const kiln_rt *rt;
} scale_ctx;

static void scale_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    scale_ctx *c = ctx;
    if (thread < 0 || thread >= c->rt->num_threads ||
        (end - begin) * (int64_t)sizeof(float) > c->rt->workspace_bytes ||
        (uintptr_t)c->rt->workspace % 64 != 0) {
        __atomic_fetch_add(&rt_model_violations, 1, __ATOMIC_RELAXED);
        return;
    }
    int seen = __atomic_load_n(&rt_model_max_thread, __ATOMIC_RELAXED);
    while (thread > seen &&
           !__atomic_compare_exchange_n(&rt_model_max_thread, &seen, thread, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
    float *ws = (float *)((char *)c->rt->workspace + thread * c->rt->workspace_bytes);
    for (int64_t i = begin; i < end; i++)
        ws[i - begin] = 2.0f * c->x[i];
    for (int64_t i = begin; i < end; i++)
        c->t[i] = ws[i - begin];
}

static void scale_kernel(void *const *args, const kiln_rt *rt)
{
    __atomic_fetch_add(&rt_model_calls, 1, __ATOMIC_RELAXED);
    scale_ctx c = {args[0], args[1], rt};
    rt->parallel_for(rt->pool, N, 16, scale_task, &c);
}

static void add_kernel(void *const *args, const kiln_rt *rt)
{
    (void)rt;
    const float *t = args[0], *w = args[1];
    float *out = args[2];
    for (int i = 0; i < N; i++)
        out[i] = t[i] + w[i];
}

static const kiln_abi_tensor tensors[] = {
    {.name = "x", .dtype = 1, .rank = 1, .dims = {N}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 0, .nbytes = 4 * N},
    {.name = "t", .dtype = 1, .rank = 1, .dims = {N}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 4032, .nbytes = 4 * N},
    {.name = "w", .dtype = 1, .rank = 1, .dims = {N}, .layout = "row-major",
     .storage = KILN_STORAGE_WEIGHTS, .offset = 0, .nbytes = 4 * N},
    /* out reuses x's storage: x is dead after step 1 */
    {.name = "out", .dtype = 1, .rank = 1, .dims = {N}, .layout = "row-major",
     .storage = KILN_STORAGE_ARENA, .offset = 0, .nbytes = 4 * N},
};
static const int32_t step0_args[] = {0, 1};
static const int32_t step1_args[] = {1, 2, 3};
static const kiln_abi_step steps[] = {
    {.name = "scale", .op = "injective", .fn = scale_kernel, .n_args = 2, .args = step0_args,
     .flops = N},
    {.name = "add_w", .op = "injective", .fn = add_kernel, .n_args = 3, .args = step1_args,
     .flops = N},
};
static const int32_t inputs[] = {0};
static const int32_t outputs[] = {3};

static const kiln_abi_model model = {
    .abi_version = KILN_ABI_VERSION,
    .name = "two_step",
    .target = "generic",
    .n_tensors = 4,
    .n_steps = 2,
    .tensors = tensors,
    .steps = steps,
    .n_inputs = 1,
    .n_outputs = 1,
    .inputs = inputs,
    .outputs = outputs,
    .arena_bytes = 8064,
    .workspace_bytes = 4 * N,
    .weights = (const unsigned char *)weights,
    .weights_bytes = sizeof weights,
};

const kiln_abi_model *kiln_model_get(void)
{
    return &model;
}
