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
#include "target/template.h"

#define KILN_KNOB_MAX_CHOICES 16
/* What a knob is, for a search and for a reader of a space. */
typedef enum kiln_knob_kind {
    KILN_KNOB_TILE = 0, /* a tile or split size (a count of elements, rows, panels) */
    KILN_KNOB_ORDER,    /* a loop order, one of a few enumerated schedules */
    KILN_KNOB_BLOCK,    /* a layout block size: decided with the neighbours (alter-layout);
                           fixed in a whole model, free when a task is built alone */
} kiln_knob_kind;

typedef struct kiln_knob {
    const char *name;
    kiln_knob_kind kind;
    int value;
    int offset;         /* byte offset of the int it sets in t->params; -1: none */
    int n_choices;
    int choices[KILN_KNOB_MAX_CHOICES];
} kiln_knob;

#define KILN_MAX_KNOBS 12
/* The most analytic picks a template offers per task (kiln_task.picks). */
#define KILN_MAX_PICKS 4

/* Blocked-conv geometry mirrors kiln_conv_params of the kernel header; the
 * other templates use the generic fields. */
typedef struct kiln_task {
    int group;
    const kiln_template *tpl;
    int anchor;            /* node deciding the template */
    int n_args, n_in;      /* tensors: args[0..n_in) read, the rest written */
    int *args;             /* tensor-table indices */
    int *arg_values;       /* the graph value behind each arg */
    int n_knobs;
    kiln_knob knobs[KILN_MAX_KNOBS];
    /* The template's next analytic picks after the default, best first:
     * every knob's value (kiln_knob_pick), each different from the default
     * and from one another. The tuner measures them beside the default. */
    int n_picks;
    int picks[KILN_MAX_PICKS][KILN_MAX_KNOBS];
    char *workload;
    uint64_t workload_hash;
    char *config;          /* JSON of the knobs, with "source" */
    const char *source;    /* where the knob values came from: "default" (NULL too),
                              "records", "explicit", "random" */
    char fn_name[128];     /* kiln_k_<template>_<hash> */
    double flops;
    int64_t workspace;     /* per-thread scratch bytes */
    int kernel;            /* first task with the same kernel (itself when unique) */
    int64_t extent;        /* > 0: its kernel takes this extent at run time (its template's
                              space() sets it: the dense rows); the kernel's name is then
                              its source's hash (kiln_codegen_name_by_source) */
    int epi_from;          /* index in the group's node list where the epilogue starts */
    int residual_arg;      /* arg index of the residual, or -1 */
    char *shapes, *layouts; /* for reports */
    void *params;          /* template parameters (malloc'ed by its space; knobs write into it) */
    size_t params_size;    /* its bytes, set by a space whose template has a cost model */
    bool packed;           /* weights packed for packed_knobs */
    int packed_knobs[KILN_MAX_KNOBS];
} kiln_task;

typedef struct kiln_tensor_entry {
    int value;            /* graph value */
    bool weights;         /* in the weights blob (else the arena) */
    char layout[32];
    const void *data;     /* weights: the bytes (the constant's, or `owned`) */
    void *owned;          /* packed copy made by lowering */
    int64_t nbytes;
    int64_t offset;       /* arena offset (plan) or weights offset (assigned by codegen) */
    char file[40];        /* weights kept as a file of their own (KILN_STORAGE_FILE): its
                             name, "<hash of the bytes>.w"; "" in the blob */
    /* packed weights and the pack memo (util/packmemo.h): `mapped`, data is
     * that file mapped (the memo had it; unmapped at destroy); else
     * memo_key (owned) set: record the file once written, for the source
     * [memo_src, + memo_src_bytes), and when memo_ckey is set, on the
     * memo's disk tier under that content key */
    bool mapped;
    char *memo_key;
    const void *memo_src;
    int64_t memo_src_bytes;
    char memo_ckey[33];
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

/* ---- helpers for the templates' hooks ----------------------------------------- */
/* The weights tensor of constant value v in `layout` (NULL: its own); owned:
 * a packed copy (nbytes), owned by the table from then on; NULL: the
 * constant's own bytes. -1 when out of memory (owned is freed). */
int kiln_lower_weights(kiln_lowered *l, int v, const char *layout, void *owned, int64_t nbytes);
/* The weights tensor of constant value v in `layout` whose bytes are a
 * mapping of a weights file `file` (nbytes, munmap'ed with the table; the
 * packed form the pack memo found): one tensor per mapping; -1 when out of
 * memory (the mapping is then released). */
int kiln_lower_weights_mapped(kiln_lowered *l, int v, const char *layout, void *map,
                              int64_t nbytes, const char *file);
/* Arg index of value v in the task, or -1. */
int kiln_task_arg(const kiln_task *t, int v);
/* The knob value by name (def if absent). */
int kiln_task_knob(const kiln_task *t, const char *name, int def);

/* Sets knob `name` of a task (tests sample knob spaces); false if no such knob
 * or the value is not in its space. */
bool kiln_task_set_knob(kiln_task *t, const char *name, int value);
/* After knob values changed: copies them into each task's params, packs the
 * weights again, recomputes workload/config strings, kernel names and dedupe. */
kiln_status kiln_lowered_finalize(kiln_lowered *l, kiln_error *err);
/* Tasks of one kernel name share its kernel (t->kernel: the first such). */
void kiln_lowered_share_kernels(kiln_lowered *l);

#endif
