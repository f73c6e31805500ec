/* pass/layout_dp.h: graph-level choice of conv block sizes (layout_dp.c),
 * and alter-layout's walk run as a cost evaluation (alter_layout.c).
 *
 * A layout-preferring template offers block choices per node
 * (template.blocks, target/template.h), its own layout() choice first. A
 * choice of a whole graph is one requested (input block, output block) per
 * node; alter-layout applies it: the requested (input, output) blocks
 * where the node offers them, else its choice with the requested output
 * block (its input arrived in another block), else the template's
 * default. Its analytic cost is
 * the sum over the chosen nodes of flops x choice cost / KILN_LAYOUT_CONV_RATE
 * plus, for every layout transform the walk creates, the bytes it reads
 * and writes / KILN_LAYOUT_TRANSFORM_BW + KILN_LAYOUT_TRANSFORM_US. */
#ifndef KILN_PASS_LAYOUT_DP_H
#define KILN_PASS_LAYOUT_DP_H

#include "pass/pass.h"
#include "target/template.h"

/* The cost model's constants, read off `kiln profile` of mobilenet-v2 and
 * resnet-18 on the 2-core development machine (2 threads): the blocked
 * convs ran at ~100 GFLOP/s, the image's NCHW -> NCHW3c transform moved
 * 1.2 MB in ~50 us. */
#define KILN_LAYOUT_CONV_RATE 100e9   /* FLOP/s of a conv at cost 1 */
#define KILN_LAYOUT_TRANSFORM_BW 24e9 /* bytes read + written per second */
#define KILN_LAYOUT_TRANSFORM_US 2.0  /* per transform kernel */

/* A requested choice for one node: the blocks of its data input and of
 * its output (1: row-major) and the algorithm (kiln_tpl_layout.algo);
 * 0, 0: the template's default. */
typedef struct kiln_layout_choice {
    int in_block, out_block, algo;
} kiln_layout_choice;

/* Measured block choices (docs/TUNING.md, "Graph-level layout choice"):
 * the tuner's layout stage times each conv's task at each block choice and
 * `kiln compile --records` reads those times back. A node's choice is
 * named by kiln_layout_node_key; a choice with a time is costed by it (in
 * us, in place of flops x cost / rate), a choice without one by the
 * analytic cost scaled into the times' units (analytic_scale). */
typedef struct kiln_layout_time {
    const char *key; /* kiln_layout_node_key */
    double us;       /* the task's median time */
} kiln_layout_time;

typedef struct kiln_layout_hints {
    int force;                     /* >= 0: no DP; every node offered more than `force`
                                      choices takes choice `force` (the tuner's builds
                                      that find each choice's task); -1: none */
    int force_phase;               /* with force: 0 every such node; 1 (2) only the
                                      nodes with block choices of even (odd) ordinal
                                      in node order, the others their first choice
                                      (so that neighbours differ) */
    int n_times;
    const kiln_layout_time *times; /* sorted by key (kiln_layout_times_sort) */
    /* set by the DP: analytic compute costs times this (0: 1), so that a
     * choice without a time is costed in the times' units: the measured
     * sum over the analytic one, over the default walk's timed choices */
    double analytic_scale;
} kiln_layout_hints;

/* With measured times a chain leaves its analytic choice only when the
 * times say the whole model gains at least KILN_LAYOUT_MEASURED_MIN_GAIN
 * of its time, or at least KILN_LAYOUT_MEASURED_MIN_CHAIN_GAIN of the
 * time of the convs the move changes (their times at the choices the walk
 * gave them), and in either case at least KILN_LAYOUT_MEASURED_MIN_FLOOR of
 * the model's. A conv's times carry a few percent of noise, so smaller
 * gains are noise; the convs that move are where the noise of a gain lies.
 * (Resnet-50's 14x14 3x3 convs by Winograd save ~20% of their own time,
 * each ~0.5% of the model's and 9-10% of its bottleneck chain's: a margin
 * on the chain's time took them in one run and left them in the next.)
 * The end-to-end validation judges the sum. */
#define KILN_LAYOUT_MEASURED_MIN_GAIN 0.01
#define KILN_LAYOUT_MEASURED_MIN_CHAIN_GAIN 0.10
#define KILN_LAYOUT_MEASURED_MIN_FLOOR 0.001

#define KILN_LAYOUT_KEY_MAX 384

/* The key of node n at block choice b: the target, the op, the input and
 * weight shapes, strides, pads, dilations, groups, bias, and b's input and
 * output blocks (the input block follows the producer's choice: a conv
 * reading NCHW8c runs another kernel than one reading NCHW16c), then
 * " algo A" where the choice asks for an algorithm (kiln_tpl_layout.algo). */
void kiln_layout_node_key(const char *target, const kiln_graph *g, const kiln_node *n,
                          const kiln_tpl_block *b, char *buf, size_t size);
void kiln_layout_times_sort(kiln_layout_time *t, int n);
/* The time of `key` in hints (sorted), or -1. */
double kiln_layout_time_of(const kiln_layout_hints *h, const char *key);

/* A node that was offered block choices, as the applied walk saw it
 * (kiln_pass_ctx.layout_decisions, after alter-layout). */
typedef struct kiln_layout_decision {
    char *name;                             /* the node's name ("" when unnamed) */
    int n_blocks, picked;
    kiln_tpl_block blocks[KILN_TPL_MAX_BLOCKS];
    char keys[KILN_TPL_MAX_BLOCKS][KILN_LAYOUT_KEY_MAX];
    bool measured;                          /* its choice costed by a measured time */
} kiln_layout_decision;

void kiln_layout_decisions_free(kiln_layout_decision *d, int n); /* NULL: no-op */

/* What one walk saw, per source node (arrays of ctx->g->n_nodes, owned). */
typedef struct kiln_layout_eval {
    double cost_us;       /* the analytic cost above */
    int transforms;       /* layout transforms created */
    int *n_blocks;        /* block choices the node was offered (0: none) */
    kiln_tpl_block (*blocks)[KILN_TPL_MAX_BLOCKS]; /* ... and which */
    int *picked;          /* the index applied */
    double *node_us;      /* its cost at that choice: measured, or analytic (scaled) */
    int measured;         /* nodes whose choice was costed by a measured time */
    double measured_us;   /* their times */
    double measured_analytic_us; /* their analytic costs */
} kiln_layout_eval;

void kiln_layout_eval_free(kiln_layout_eval *ev);

/* The block of a layout's channels: its NCHW{b}c block, 1 for row-major. */
int kiln_layout_block(kiln_layout l);

/* Runs alter-layout's walk over ctx->g with `choice` (one per source node;
 * NULL: every default) without changing ctx: *ev receives the cost and,
 * when want_blocks, the choices each node was offered. */
kiln_status kiln_alter_layout_eval(const kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                                   bool want_blocks, kiln_layout_eval *ev, kiln_error *err);

/* One chain the DP decided (a connected set of nodes with block choices). */
typedef struct kiln_layout_chain {
    int first;            /* the chain's first node with choices (source id) */
    int n_nodes;          /* nodes with choices in it */
    double default_us, chosen_us; /* whole-graph analytic cost, default vs chosen */
    bool changed;         /* chosen_us < default_us: its choice is applied */
} kiln_layout_chain;

typedef struct kiln_layout_plan {
    kiln_layout_choice *choice; /* per source node (0, 0 where default) */
    int n_chains;
    kiln_layout_chain *chains;
    int evaluations;      /* walks run */
    double default_us, chosen_us;
} kiln_layout_plan;

void kiln_layout_plan_free(kiln_layout_plan *p);

/* The DP (layout_dp.c): the block choices of ctx->g minimizing the
 * analytic cost, chain by chain; a chain keeps its defaults unless its
 * choice is strictly cheaper. On failure *plan is untouched. */
kiln_status kiln_layout_dp(const kiln_pass_ctx *ctx, kiln_layout_plan *plan, kiln_error *err);

/* alter-layout applying a given choice (NULL: defaults), no DP (tests). */
kiln_status kiln_pass_alter_layout_with(kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                                        kiln_error *err);

#endif
