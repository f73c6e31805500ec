/* tests/runtime/models/corrupt.c: a one-step model corrupted in the way
 * CORRUPT selects, built once per value (see tests/CMakeLists.txt):
 *   1 wrong ABI version        2 tensor outside the arena   3 step arg id out of range
 *   4 negative dimension       5 kiln_model_get returns NULL 6 no kiln_model_get symbol
 *   7 misaligned offset        8 invalid dtype               9 output id out of range
 *  10 storage smaller than the shape                        11 NULL kernel
 * and fallback steps (a node run by its reference kernel) whose description
 *  12 disagrees with the op's shape inference               13 names an unknown op
 *  14 stops early          15 claims a huge attribute count  16 has an input out of range */
#include <stddef.h>

#include "kiln/abi.h"

#ifndef CORRUPT
#define CORRUPT 0
#endif

static void copy_kernel(void *const *args, const kiln_rt *rt)
{
    (void)rt;
    ((float *)args[1])[0] = ((const float *)args[0])[0];
}

static const kiln_abi_tensor tensors[] = {
    {.name = "x", .dtype = CORRUPT == 8 ? 99 : 1, .rank = 1, .dims = {CORRUPT == 4 ? -3 : 1},
     .storage = KILN_STORAGE_ARENA, .offset = 0, .nbytes = 4},
    {.name = "out", .dtype = 1, .rank = 1, .dims = {CORRUPT == 10 ? 100 : 1},
     .storage = KILN_STORAGE_ARENA, .offset = CORRUPT == 2 ? 1 << 20 : CORRUPT == 7 ? 4 : 64,
     .nbytes = 4},
};
static const int32_t step0_args[] = {0, CORRUPT == 3 ? 7 : 1};
#define ARGS " args 2 float32 1 1 float32 1 1"
static const char *const ref_nodes[] = {
    [12] = "kiln-ref 1 op Cast in 1 0 out 1 1 attrs 1 2:to i 10" ARGS,
    [13] = "kiln-ref 1 op Frobnicate in 1 0 out 1 1 attrs 0" ARGS,
    [14] = "kiln-ref 1 op Relu in 1 0",
    [15] = "kiln-ref 1 op Relu in 1 0 out 1 1 attrs 99999999" ARGS,
    [16] = "kiln-ref 1 op Relu in 1 5 out 1 1 attrs 0" ARGS,
};
static const kiln_abi_step steps[] = {
    {.name = "copy", .op = "injective", .fn = CORRUPT == 11 || CORRUPT >= 12 ? NULL : copy_kernel,
     .n_args = 2, .args = step0_args, .ref_node = CORRUPT >= 12 ? ref_nodes[CORRUPT] : NULL},
};
static const int32_t inputs[] = {0};
static const int32_t outputs[] = {CORRUPT == 9 ? -1 : 1};

static const kiln_abi_model model = {
    .abi_version = CORRUPT == 1 ? 42 : KILN_ABI_VERSION,
    .name = "corrupt",
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

#if CORRUPT == 6
const kiln_abi_model *kiln_model_get_wrong_name(void)
#else
const kiln_abi_model *kiln_model_get(void)
#endif
{
    return CORRUPT == 5 ? NULL : &model;
}
