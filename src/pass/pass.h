/* pass/pass.h: the compiler's graph passes and the state they share.
 *
 * A compilation carries one kiln_pass_ctx through the pipeline (pipeline.c):
 *
 *   infer-shapes -> fold-batchnorm -> fold-constant -> lower-conv-transpose -> lower-to-2d
 *   -> lower-rnn -> lower-shuffle -> fold-patterns -> remove-identity
 *   -> fuse-attention -> dce -> alter-layout -> fuse -> plan-memory
 *
 * Graph-rewriting passes build a new kiln_graph from the old one (rewrite.c)
 * and keep the old one alive in the context: constants are never copied, the
 * new graph borrows their data. So the caller's graph must outlive the
 * context, and all graphs are freed together by kiln_pass_ctx_destroy.
 *
 * Layouts live on the values (kiln_value.layout). A layout transform is an
 * Identity node whose output layout differs from its input's.
 *
 * After `fuse`, ctx->groups partitions the nodes into fused groups (one
 * kernel each, or no kernel for views and in-place concats); after
 * `plan-memory`, ctx->storage gives every value needing memory an offset in
 * the one activation arena.
 */
#ifndef KILN_PASS_PASS_H
#define KILN_PASS_PASS_H

#include <stdio.h>

#include "ir/graph.h"
#include "target/target.h"

/* ---- fused groups ------------------------------------------------------------ */
typedef enum kiln_group_kind {
    KILN_GROUP_KERNEL = 0, /* one generated kernel */
    KILN_GROUP_VIEW,       /* Reshape/Flatten/Identity on row-major data: output aliases input */
    KILN_GROUP_CONCAT_INPLACE, /* Concat whose producers write into its output directly */
} kiln_group_kind;

typedef struct kiln_group {
    int id;
    kiln_group_kind kind;
    int anchor;        /* the node that decides the template (conv, pool, ...) */
    int n_nodes;
    int *nodes;        /* node ids, topological order; anchor first for anchored groups,
                          but after its input prologue's nodes (fuse.c, template.prologue) */
    int n_inputs;
    int *inputs;       /* value ids read from outside the group (activations, constants) */
    int n_outputs;
    int *outputs;      /* value ids written (visible outside the group) */
    const struct kiln_template *tpl; /* NULL: the anchor's template; else one taking two
                                        anchors (template.pair: expand + depthwise conv) or
                                        the anchor's with an input prologue */
} kiln_group;

/* ---- memory plan ------------------------------------------------------------ */
typedef struct kiln_storage {
    int root;         /* value whose buffer this value lives in (itself if it owns one); -1: none */
    int64_t offset;   /* bytes into the arena */
    int64_t nbytes;   /* bytes this value occupies (blocked layouts may pad) */
} kiln_storage;

/* ---- the context ------------------------------------------------------------- */
typedef struct kiln_pass_ctx {
    kiln_graph *g;            /* the current graph (owned) */
    kiln_graph **old;         /* previous graphs, kept for borrowed constant data */
    int n_old, cap_old;
    kiln_target target;
    FILE *dump;               /* where print-ir-after goes (stderr) */
    const char *print_after;  /* pass name, "all", or NULL */
    int verbose;
    /* fuse */
    kiln_group *groups;
    int n_groups;
    int *group_of_node;       /* node id -> group id */
    /* plan-memory */
    kiln_storage *storage;    /* one per value id */
    int64_t arena_bytes;
    /* alter-layout: measured block times or a forced choice (layout_dp.h;
     * NULL: analytic), and what it decided (owned) */
    const struct kiln_layout_hints *layout_hints;
    struct kiln_layout_decision *layout_decisions;
    int n_layout_decisions, layout_measured;
    /* the graph's shapes_bound (its copies' too): templates may take the
     * extents that vary with the symbolic dims at run time */
    bool shapes_bound;
    /* the graph's symbols (ir/graph.h): which of its extents those are */
    kiln_sym syms[KILN_MAX_SYMS];
    int n_syms;
    struct kiln_pack_memo *pack_memo; /* the graph's (ir/graph.h), not owned */
    /* statistics for reports */
    int stat_bn_folded, stat_const_folded, stat_removed, stat_transforms, stat_inplace;
} kiln_pass_ctx;

/* Creates a context holding a copy of `g` (constants borrowed). */
kiln_status kiln_pass_ctx_create(const kiln_graph *g, const kiln_target *t,
                                 kiln_pass_ctx **out, kiln_error *err);
void kiln_pass_ctx_destroy(kiln_pass_ctx *ctx);
/* Makes `ng` the current graph, keeping the previous one alive. Drops any
 * groups/plan (they refer to the old graph's ids). */
kiln_status kiln_pass_ctx_replace(kiln_pass_ctx *ctx, kiln_graph *ng, kiln_error *err);

/* ---- passes (one per file) -------------------------------------------------- */
typedef kiln_status (*kiln_pass_fn)(kiln_pass_ctx *ctx, kiln_error *err);

kiln_status kiln_pass_infer_shapes(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_fold_batchnorm(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_fold_constant(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_lower_conv_transpose(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_lower_to_2d(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_lower_rnn(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_crop_taps(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_lower_shuffle(kiln_pass_ctx *ctx, kiln_error *err);
/* reduce_to_pool.c: ReduceMean/ReduceMax over the spatial dims of NCHW as
 * GlobalAveragePool/GlobalMaxPool (+ a Reshape for keepdims 0). */
kiln_status kiln_pass_reduce_to_pool(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_fold_patterns(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_fuse_attention(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_remove_identity(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_dce(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_alter_layout(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_fuse(kiln_pass_ctx *ctx, kiln_error *err);
kiln_status kiln_pass_plan_memory(kiln_pass_ctx *ctx, kiln_error *err);

typedef struct kiln_pass_entry {
    const char *name;
    kiln_pass_fn fn;
    const char *what;
} kiln_pass_entry;

/* The pipeline table, in order; *count receives its length. */
const kiln_pass_entry *kiln_pass_pipeline(int *count);
/* True if `name` is a pass of the pipeline (or "all"). */
bool kiln_pass_known(const char *name);
/* Runs the whole pipeline; prints the IR after ctx->print_after. */
kiln_status kiln_pass_run_all(kiln_pass_ctx *ctx, kiln_error *err);
/* Runs the pipeline up to and including pass `last` (tests). */
kiln_status kiln_pass_run_until(kiln_pass_ctx *ctx, const char *last, kiln_error *err);

/* Prints the graph (with groups and storage when present). */
void kiln_pass_print(const kiln_pass_ctx *ctx, FILE *f, const char *title);

/* ---- graph rewriting helpers (rewrite.c) ----------------------------------- */
/* Building a new graph from `src`, node by node. map[src value] is the new
 * value id (-1 until mapped); constants are mapped lazily (borrowing data). */
typedef struct kiln_rewrite {
    const kiln_graph *src;
    kiln_graph *dst;
    int *map;
} kiln_rewrite;

kiln_status kiln_rewrite_begin(kiln_rewrite *rw, const kiln_graph *src, kiln_error *err);
/* The new id of source value `v` (copying a constant on first use); -1 for -1. */
int kiln_rewrite_value(kiln_rewrite *rw, int v);
/* Copies node `n` with inputs `inputs` (new ids; NULL: n's own, mapped), its
 * attributes, and outputs carrying the source values' names, types and
 * layouts. Returns the new node id, or -1 when out of memory. */
int kiln_rewrite_node(kiln_rewrite *rw, const kiln_node *n, const int *inputs);
/* A new constant in dst (data borrowed, not copied). */
int kiln_rewrite_const(kiln_rewrite *rw, const char *name, kiln_dtype dt, const kiln_shape *s,
                       void *data, kiln_layout layout);
/* Adds node `op` reading `in` (n_in new ids) for the lowering of source node
 * n: when `last`, the node that takes over n's output (its name and place
 * among the graph's outputs; no attributes copied), else a new float32 value
 * of `shape` named n's name + suffix. Returns the node id or -1 (out of
 * memory). kiln_rewrite_out gives a node's (first) output value. */
int kiln_rewrite_emit(kiln_rewrite *rw, const kiln_node *n, kiln_op op, const char *suffix,
                      const int *in, int n_in, const kiln_shape *shape, bool last);
int kiln_rewrite_out(const kiln_rewrite *rw, int node);
/* A Reshape (ints: the shape) or Transpose (ints: the perm) of new value
 * cur to `shape`, emitted as kiln_rewrite_emit does; its output value (cur's
 * dtype), or -1 (also when cur is -1). */
int kiln_rewrite_move(kiln_rewrite *rw, const kiln_node *n, kiln_op op, const char *suffix, int cur,
                      const kiln_shape *shape, const int64_t *ints, bool last);
/* A pass that rewrites some nodes: takes(g, n) says whether node n is
 * rewritten, lower(rw, g, n) writes its replacement into rw (false: out of
 * memory); every other node is copied. When no node is taken the graph is
 * left as it is. */
typedef bool (*kiln_rewrite_takes)(const kiln_graph *g, const kiln_node *n);
typedef bool (*kiln_rewrite_lower)(kiln_rewrite *rw, const kiln_graph *g, const kiln_node *n);
kiln_status kiln_rewrite_nodes(kiln_pass_ctx *ctx, kiln_rewrite_takes takes,
                               kiln_rewrite_lower lower, kiln_error *err);
/* Maps graph outputs and hands over the new graph (rw is reset). */
kiln_status kiln_rewrite_finish(kiln_rewrite *rw, kiln_graph **out, kiln_error *err);
void kiln_rewrite_abort(kiln_rewrite *rw);

/* A depthwise conv: group == C_in == C_out, weight [C, 1, kh, kw], rank 4. */
bool kiln_conv_is_depthwise(const kiln_graph *g, const kiln_node *n);

/* Consumers: for each value, how many node inputs read it (graph outputs not
 * counted). Caller frees. */
int *kiln_pass_use_counts(const kiln_graph *g);

/* Bytes a value of this dtype/shape/layout occupies (blocked layouts pad the
 * blocked dims up to the block). */
int64_t kiln_layout_nbytes(kiln_dtype dt, const kiln_shape *s, kiln_layout l);
/* "NCHW", "NCHW16c", "OIHW8i16o", "row-major" into buf. */
const char *kiln_layout_str(const kiln_shape *s, kiln_layout l, char *buf, size_t size);
bool kiln_layout_equal(kiln_layout a, kiln_layout b);

#endif
