/* lower/lower.h: fused groups -> kernel tasks.
 *
 * Lowering turns each KERNEL group of the planned graph into a task: the
 * kernel template that implements it, the tensors it reads and writes (in the
 * template's order), its workload key (template, ops, attributes, shapes,
 * dtypes, layouts, target: everything the generated code depends on), its
 * knobs (each with its space and the value used; "source": "default" for the
 * analytic defaults) and its floating-point operation count. Tasks with equal
 * workload keys and knob values share one generated kernel.
 *
 * The lowered model also owns the tensor table of the compiled model: one
 * arena tensor per planned value, one weights tensor per (constant, packing)
 * pair, the packed data made here at compile time by the kernel headers' pack
 * functions.
 */
#ifndef KILN_LOWER_LOWER_H
#define KILN_LOWER_LOWER_H

#include "pass/pass.h"

typedef enum kiln_tpl {
    KILN_TPL_CONV2D_NCHWC,   /* blocked direct conv, kiln_kernels_conv.h */
    KILN_TPL_DWCONV2D_NCHWC, /* depthwise conv on NCHW{b}c */
    KILN_TPL_CONV2D_DIRECT,  /* row-major direct conv: any groups (fallback) */
    KILN_TPL_DENSE,          /* Gemm / MatMul with a constant B: packed panels */
    KILN_TPL_MATMUL,         /* batched MatMul of two activations */
    KILN_TPL_POOL2D,         /* Max/AveragePool, NCHW or NCHW{b}c */
    KILN_TPL_GLOBAL_POOL,    /* GlobalAverage/MaxPool */
    KILN_TPL_SOFTMAX,        /* Softmax / LogSoftmax along one axis */
    KILN_TPL_LAYERNORM,
    KILN_TPL_REDUCE,         /* Reduce{Mean,Sum,Max,Min} */
    KILN_TPL_ELEMWISE,       /* fused elementwise/broadcast chains */
    KILN_TPL_TRANSPOSE,
    KILN_TPL_COPY,           /* Reshape/Flatten that cannot be a view, Identity */
    KILN_TPL_CONCAT,
    KILN_TPL_SLICE,
    KILN_TPL_SPLIT,
    KILN_TPL_GATHER,
    KILN_TPL_PAD,
    KILN_TPL_LAYOUT,         /* layout transform NCHW{a}c -> NCHW{b}c */
    KILN_TPL_REF,            /* fallback: the reference kernel, linked into the .so */
    KILN_TPL_COUNT
} kiln_tpl;

const char *kiln_tpl_name(kiln_tpl t);

#define KILN_KNOB_MAX_CHOICES 16
typedef struct kiln_knob {
    const char *name;
    int value;
    int n_choices;
    int choices[KILN_KNOB_MAX_CHOICES];
} kiln_knob;

#define KILN_MAX_KNOBS 8

/* Blocked-conv geometry mirrors kiln_conv_params of the kernel header; the
 * other templates use the generic fields. */
typedef struct kiln_task {
    int group;
    kiln_tpl tpl;
    int anchor;            /* node deciding the template */
    int n_args, n_in;      /* tensors: args[0..n_in) read, the rest written */
    int *args;             /* tensor-table indices */
    int *arg_values;       /* the graph value behind each arg */
    int n_knobs;
    kiln_knob knobs[KILN_MAX_KNOBS];
    char *workload;
    uint64_t workload_hash;
    char *config;          /* JSON of the knobs */
    char fn_name[128];     /* kiln_k_<template>_<hash> */
    double flops;
    int64_t workspace;     /* per-thread scratch bytes */
    int kernel;            /* first task with the same kernel (itself when unique) */
    int epi_from;          /* index in the group's node list where the epilogue starts */
    int conv_epi;          /* KILN_EPI_* flags for the blocked conv */
    int residual_arg;      /* arg index of the residual, or -1 */
    float clip_lo, clip_hi;
    char *shapes, *layouts; /* for reports */
    void *params;          /* template parameters (malloc'ed; kiln_conv_params for conv) */
} kiln_task;

typedef struct kiln_tensor_entry {
    int value;            /* graph value */
    bool weights;         /* in the weights blob (else the arena) */
    char layout[32];
    const void *data;     /* weights: the bytes (the constant's, or `owned`) */
    void *owned;          /* packed copy made by lowering */
    int64_t nbytes;
    int64_t offset;       /* arena offset (plan) or weights offset (assigned by codegen) */
} kiln_tensor_entry;

typedef struct kiln_lowered {
    kiln_pass_ctx *ctx;
    kiln_tensor_entry *tensors;
    int n_tensors, cap_tensors;
    kiln_task *tasks;
    int n_tasks;
    int *value_tensor;    /* graph value -> arena tensor index (-1 none) */
    int64_t workspace;    /* max per-thread scratch over tasks */
    int n_fallback;       /* tasks on the reference fallback */
    uint64_t knob_seed;   /* nonzero: random knob values (tests of the knob spaces) */
    uint64_t rng[4];
    char fallback_ops[512];
} kiln_lowered;

/* Lowers every group of ctx (after plan-memory). knob_seed 0: the analytic
 * defaults; else knob values drawn at random from each space (tests). */
kiln_status kiln_lower(kiln_pass_ctx *ctx, uint64_t knob_seed, kiln_lowered **out,
                       kiln_error *err);
void kiln_lowered_destroy(kiln_lowered *l);

/* ---- queries used by the passes ------------------------------------------- */
/* Whether an anchored op has a template for these attributes (else the
 * reference fallback). */
bool kiln_lower_has_template(const kiln_graph *g, const kiln_node *n);
/* An elementwise float32 op the code generator can emit as an expression
 * (fusable into epilogues and elementwise groups). */
bool kiln_epilogue_op(const kiln_graph *g, const kiln_node *n);
/* How a row-major operand of shape v is indexed from the flat storage index
 * of an output y in layout l: 0 not by a simple rule, 1 scalar, 2 per channel
 * (dim 1), 3 per last dim, 4 same shape. */
int kiln_epilogue_bcast_kind(const kiln_shape *v, const kiln_shape *y, kiln_layout l);

/* Sets knob `name` of a task (tests sample knob spaces); false if no such knob
 * or the value is not in its space. */
bool kiln_task_set_knob(kiln_task *t, const char *name, int value);
/* Recomputes workload/config strings, kernel names and dedupe. */
kiln_status kiln_lowered_finalize(kiln_lowered *l, kiln_error *err);

#endif
