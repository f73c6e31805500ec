/* tests/runtime/models/spin.c: a hand-written "compiled model" with a known
 * cost for the benchmark tests: out = x + 1 over float32 [1], after
 * busy-waiting rt_model_spin_us microseconds of wall time. It counts its runs
 * in rt_model_calls. */
#include <time.h>

#include "kiln/abi.h"

int rt_model_calls;
int rt_model_spin_us = 200;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void spin_kernel(void *const *args, const kiln_rt *rt)
{
    (void)rt;
    rt_model_calls++;
    double end = now_us() + rt_model_spin_us;
    while (now_us() < end) {
    }
    const float *x = args[0];
    float *out = args[1];
    out[0] = x[0] + 1.0f;
}

static const kiln_abi_tensor tensors[] = {
    {.name = "x", .dtype = 1, .rank = 1, .dims = {1}, .storage = KILN_STORAGE_ARENA,
     .offset = 0, .nbytes = 4},
    {.name = "out", .dtype = 1, .rank = 1, .dims = {1}, .storage = KILN_STORAGE_ARENA,
     .offset = 64, .nbytes = 4},
};
static const int32_t step0_args[] = {0, 1};
static const kiln_abi_step steps[] = {
    {.name = "spin", .op = "opaque", .fn = spin_kernel, .n_args = 2, .args = step0_args},
};
static const int32_t inputs[] = {0};
static const int32_t outputs[] = {1};

static const kiln_abi_model model = {
    .abi_version = KILN_ABI_VERSION,
    .name = "spin",
    .n_tensors = 2,
    .n_steps = 1,
    .tensors = tensors,
    .steps = steps,
    .n_inputs = 1,
    .n_outputs = 1,
    .inputs = inputs,
    .outputs = outputs,
    .arena_bytes = 128,
};

const kiln_abi_model *kiln_model_get(void)
{
    return &model;
}
