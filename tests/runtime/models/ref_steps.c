/* tests/runtime/models/ref_steps.c: a hand-written "compiled model" mixing a
 * kernel with fallback steps (nodes the runtime runs with their reference
 * kernels, include/kiln/abi.h ref_node):
 *   t      = 2 * x                      kernel, float32 [2, 3]
 *   y      = Cast(t, to=int64)          fallback
 *   v, i   = TopK(t, k=2, axis=1)       fallback, two outputs (float32, int64)
 *   c      = Clip(t, min -1.5, max 3)   fallback (its attributes as hex floats)
 * and a weights tensor w (float32 [3]) that a fallback reads:
 *   s      = Sum(t, w)                  fallback, broadcast
 *   g      = Gather(w, ix)              fallback; ix (int64 [2]) is the second input,
 *                                       so an index out of range fails the run
 * Outputs: y, v, i, c, s, g. */
#include <stdalign.h>

#include "kiln/abi.h"

static void double_kernel(void *const *args, const kiln_rt *rt)
{
    (void)rt;
    const float *x = args[0];
    float *t = args[1];
    for (int i = 0; i < 6; i++)
        t[i] = 2.0f * x[i];
}

static alignas(64) const float weights[16] = {10.0f, 20.0f, 30.0f};

#define T(nm, dt, r, d0, d1, st, off, nb)                                                        \
    {.name = nm, .dtype = dt, .rank = r, .dims = {d0, d1}, .layout = "row-major",             \
     .storage = st, .offset = off, .nbytes = nb}
static const kiln_abi_tensor tensors[] = {
    T("x", 1, 2, 2, 3, KILN_STORAGE_ARENA, 0, 24),
    T("t", 1, 2, 2, 3, KILN_STORAGE_ARENA, 64, 24),
    T("y", 10, 2, 2, 3, KILN_STORAGE_ARENA, 128, 48),
    T("v", 1, 2, 2, 2, KILN_STORAGE_ARENA, 192, 16),
    T("i", 10, 2, 2, 2, KILN_STORAGE_ARENA, 256, 32),
    T("c", 1, 2, 2, 3, KILN_STORAGE_ARENA, 320, 24),
    T("w", 1, 1, 3, 0, KILN_STORAGE_WEIGHTS, 0, 12),
    T("s", 1, 2, 2, 3, KILN_STORAGE_ARENA, 384, 24),
    T("ix", 10, 1, 2, 0, KILN_STORAGE_ARENA, 448, 16),
    T("g", 1, 1, 2, 0, KILN_STORAGE_ARENA, 512, 8),
};
static const int32_t a0[] = {0, 1}, a1[] = {1, 2}, a2[] = {1, 3, 4}, a3[] = {1, 5},
                     a4[] = {1, 6, 7}, a5[] = {6, 8, 9};
static const kiln_abi_step steps[] = {
    {.name = "double", .op = "elemwise", .fn = double_kernel, .n_args = 2, .args = a0},
    {.name = "cast", .op = "ref:Cast", .n_args = 2, .args = a1,
     .ref_node = "kiln-ref 1\nop Cast\nin 1 0\nout 1 1\nattrs 1\n2:to i 10\n"
                 "args 2\nfloat32 2 2 3\nint64 2 2 3\n"},
    {.name = "topk", .op = "ref:TopK", .n_args = 3, .args = a2,
     .ref_node = "kiln-ref 1 op TopK in 1 0 out 2 1 2 attrs 2 4:axis i 1 1:k i 2 "
                 "args 3 float32 2 2 3 float32 2 2 2 int64 2 2 2"},
    {.name = "clip", .op = "ref:Clip", .n_args = 2, .args = a3,
     .ref_node = "kiln-ref 1 op Clip in 1 0 out 1 1 attrs 2 3:min f -0x1.8p+0 3:max f 0x1.8p+1 "
                 "args 2 float32 2 2 3 float32 2 2 3"},
    {.name = "sum", .op = "ref:Sum", .n_args = 3, .args = a4,
     .ref_node = "kiln-ref 1 op Sum in 2 0 1 out 1 2 attrs 0 "
                 "args 3 float32 2 2 3 float32 1 3 float32 2 2 3"},
    {.name = "gather", .op = "ref:Gather", .n_args = 3, .args = a5,
     .ref_node = "kiln-ref 1 op Gather in 2 0 1 out 1 2 attrs 1 4:axis i 0 "
                 "args 3 float32 1 3 int64 1 2 float32 1 2"},
};
static const int32_t inputs[] = {0, 8};
static const int32_t outputs[] = {2, 3, 4, 5, 7, 9};

static const kiln_abi_model model = {
    .abi_version = KILN_ABI_VERSION,
    .name = "ref_steps",
    .target = "generic",
    .build_id = "test-ref-steps",
    .metadata_json = "{\"fallbacks\": [\"Cast 'cast'\", \"TopK 'topk'\", \"Clip 'clip'\", "
                     "\"Sum 'sum'\", \"Gather 'gather'\"]}",
    .n_tensors = 10,
    .n_steps = 6,
    .tensors = tensors,
    .steps = steps,
    .n_inputs = 2,
    .n_outputs = 6,
    .inputs = inputs,
    .outputs = outputs,
    .arena_bytes = 576,
    .weights = (const unsigned char *)weights,
    .weights_bytes = sizeof weights,
};

const kiln_abi_model *kiln_model_get(void)
{
    return &model;
}
