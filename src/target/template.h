/* target/template.h: kernel templates and the one query passes make of them.
 *
 * A template is the unit that tuning, targets and fusion talk about. Each
 * lives in one file, codegen/<target>/tpl_<name>.c, exporting one descriptor
 * listed in one X-macro table, codegen/<target>/templates.def. A descriptor
 * answers, for its target:
 *   match:  does it take this node as the anchor of a fused group, and which
 *           epilogue ops can it absorb after it?
 *   layout: (optional) the layouts it wants for the node's data input, its
 *           weight and its output: block sizes are the template's decision,
 *           alter-layout applies them;
 *   space:  its knobs (typed, each with its choices) with the analytic
 *           default as each knob's value, and the task's flops;
 *   pack:   the weights in the layout the configuration wants, packed once
 *           at compile time (also any per-thread workspace it needs);
 *   emit:   the kernel's source for a configuration (thin glue over the
 *           kernel-library headers where the kernel is a header).
 * The order of templates.def is the order match is asked in; a node no
 * template takes runs its reference kernel inside the compiled model (the
 * "ref" template, always last).
 *
 * Passes ask kiln_target_template / kiln_target_layout /
 * kiln_target_epilogue_op and never lowering's or codegen's internals;
 * lowering calls the hooks of the template a task got. */
#ifndef KILN_TARGET_TEMPLATE_H
#define KILN_TARGET_TEMPLATE_H

#include "ir/graph.h"
#include "target/target.h"

struct kiln_lowered;
struct kiln_task;
struct kiln_sb;

/* Which elementwise ops a template absorbs after its anchor (fuse.c). */
typedef enum kiln_epi_kind {
    KILN_EPI_KIND_NONE = 0, /* nothing: the group is the node alone */
    KILN_EPI_KIND_HEADER,   /* the kernel header's own: residual Add, then Relu, then Clip */
    KILN_EPI_KIND_ANY,      /* any expression op whose other operand is the same-shaped
                               activation, a scalar, a per-channel or per-last-dim constant */
    KILN_EPI_KIND_CHAIN,    /* elementwise groups: any expression op of the same output shape */
} kiln_epi_kind;

/* The layouts a template wants for a node (template.layout). */
typedef struct kiln_tpl_layout {
    kiln_layout in;     /* data input (input 0) */
    kiln_layout weight; /* weight (input 1); row-major: as it is */
    kiln_layout out;    /* output 0 */
    int algo;           /* 0: the templates' own rules pick the kernel; else a
                           KILN_TPL_ALGO_* the choice asks for */
} kiln_tpl_layout;

/* An algorithm a block choice asks for where the templates' analytic rules
 * would pick another: alter-layout writes it on the node as the int
 * attribute KILN_TPL_ALGO_ATTR, which the template's match() reads (and
 * which workload keys carry, so that a task rebuilt from its key runs the
 * same kernel). KILN_TPL_ALGO_WINOGRAD: conv2d_wino_nchwc on a map smaller
 * than its tile rule takes (tpl_conv2d_wino_nchwc.c): whether its 4x larger
 * weights pay there depends on the machine's memory and caches, so only a
 * measured choice (the tuner's layout stage) takes it. */
#define KILN_TPL_ALGO_WINOGRAD 1
#define KILN_TPL_ALGO_ATTR "kiln_algo"


/* One block choice of a layout-preferring template (template.blocks): its
 * layouts and the analytic cost of the node's compute with them, relative
 * to the same node at full vector width with no padding (1.0); padding and
 * narrow vectors make it larger. pass/layout_dp.c weighs these against the
 * layout transforms a choice creates. */
typedef struct kiln_tpl_block {
    kiln_tpl_layout lay;
    double cost;
} kiln_tpl_block;

/* The most block choices a template offers for one node. */
#define KILN_TPL_MAX_BLOCKS 4

typedef struct kiln_template {
    const char *name; /* in workload keys, kernel names and reports */
    bool (*match)(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi);
    /* NULL: alter-layout's generic rules place the node */
    bool (*layout)(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                   kiln_layout in, kiln_tpl_layout *out);
    /* NULL: layout()'s choice is the only one, cost 1. The block choices
     * for n given its input layout, layout()'s own first (and cheapest or
     * tied: untuned builds keep it unless the layout DP finds a cheaper
     * chain), at most KILN_TPL_MAX_BLOCKS; returns how many (0: none, as
     * layout() returning false). */
    int (*blocks)(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_layout in, kiln_tpl_block *out);
    /* NULL: no knobs (flops default to output elements x nodes) */
    kiln_status (*space)(struct kiln_lowered *l, struct kiln_task *t, kiln_error *err);
    /* NULL: weights as they are. Called with the knob values final and
     * copied into t->params; may be called again after a knob changes. */
    kiln_status (*pack)(struct kiln_lowered *l, struct kiln_task *t, kiln_error *err);
    kiln_status (*emit)(struct kiln_sb *b, const struct kiln_lowered *l,
                        const struct kiln_task *t);
    /* NULL: no cost model. The template's analytic model of one call's time
     * (any unit; only ratios are used) with the knob values in `params`, a
     * copy of the task's params struct (kiln_task.params_size bytes, which
     * its space sets) with every knob written at its offset: kiln tune
     * ranks the task's whole space by it and corrects it online
     * (docs/TUNING.md, "The cost model"). The analytic default should be
     * at or near its minimum. */
    double (*cost)(const void *params, const kiln_target *tg);
    /* NULL: none. A template for two anchors in one group: whether the group
     * nodes[0..n_nodes) (anchored at nodes[0], with its epilogue so far) may
     * take the anchored node `next`, which reads the group's output, and run
     * as this template (an inverted-residual block's expand 1x1 conv and
     * depthwise conv); *epi: what it absorbs after `next`. The template's
     * own cost model decides (fuse only where it wins). */
    bool (*pair)(const kiln_target *tg, const kiln_graph *g, const int *nodes, int n_nodes,
                 const kiln_node *next, kiln_epi_kind *epi);
    /* NULL: none. An input prologue: whether node `n`, which this template
     * takes (match), may read its data input (input 0) through the
     * elementwise group nodes[0..n_nodes) that computes it, applied as n
     * reads it (a pre-activation BatchNorm's per-channel Mul/Add and Relu
     * before a conv), the group's own kernel gone. fuse has checked that
     * nothing else reads the group's values. The group then runs as this
     * template anchored at n (the prologue's nodes first in its node
     * list); *epi: what it absorbs after n. The template's cost model
     * decides. */
    bool (*prologue)(const kiln_target *tg, const kiln_graph *g, const int *nodes, int n_nodes,
                     const kiln_node *n, kiln_epi_kind *epi);
} kiln_template;

/* A target's templates, in match order, the fallback last. */
typedef struct kiln_template_set {
    const char *name;                  /* "c" */
    const kiln_template *const *tpl;
    int n_tpl;
    const kiln_template *fallback;     /* the reference-kernel template */
    /* An elementwise op the target can emit as an expression (fusable into
     * epilogues and elementwise groups). */
    bool (*expr_op)(const kiln_graph *g, const kiln_node *n);
} kiln_template_set;

/* The set serving a target. */
const kiln_template_set *kiln_target_templates(const kiln_target *tg);

/* The template for anchor node n: never NULL (the fallback when no template
 * takes it, with *epi NONE). epi may be NULL. */
const kiln_template *kiln_target_template(const kiln_target *tg, const kiln_graph *g,
                                          const kiln_node *n, kiln_epi_kind *epi);
/* The template taking anchored node `next` into the group nodes[0..n_nodes)
 * (template.pair), or NULL. epi may be NULL. */
const kiln_template *kiln_target_pair_template(const kiln_target *tg, const kiln_graph *g,
                                               const int *nodes, int n_nodes,
                                               const kiln_node *next, kiln_epi_kind *epi);
/* The template taking node n with the elementwise group nodes[0..n_nodes)
 * as its input prologue (template.prologue: asked of n's own template
 * only), or NULL. epi may be NULL. */
const kiln_template *kiln_target_prologue_template(const kiln_target *tg, const kiln_graph *g,
                                                   const int *nodes, int n_nodes,
                                                   const kiln_node *n, kiln_epi_kind *epi);
/* Whether a template other than the fallback takes n. */
bool kiln_target_has_template(const kiln_target *tg, const kiln_graph *g, const kiln_node *n);
/* The layouts the template that claims n wants, given the layout its data
 * input arrives in; false when no template has a layout preference for n. */
bool kiln_target_layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                        kiln_layout in, kiln_tpl_layout *out);
/* The block choices of the template that claims n (template.blocks; a
 * template without the hook: its layout() choice alone, cost 1), the
 * default first; 0 when no template has a layout preference for n. out
 * holds KILN_TPL_MAX_BLOCKS. */
int kiln_target_blocks(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                       kiln_layout in, kiln_tpl_block *out);
/* Whether n can be fused as an expression (epilogues, elementwise groups). */
bool kiln_target_epilogue_op(const kiln_target *tg, const kiln_graph *g, const kiln_node *n);
/* A template by name, or NULL. */
const kiln_template *kiln_target_template_named(const kiln_target *tg, const char *name);

/* How a row-major operand of shape v is indexed from the flat storage index
 * of an output y in layout l: 0 not by a simple rule, 1 scalar, 2 per channel
 * (dim 1), 3 per last dim, 4 same shape. */
int kiln_epilogue_bcast_kind(const kiln_shape *v, const kiln_shape *y, kiln_layout l);

#endif
