/* lower/workload.h: workload keys, written and parsed in one place.
 *
 * A task's workload key names everything its generated code depends on
 * except the knob values: the template, the target, every argument (dtype,
 * shape, the value's layout, whether it is a weight and, for integer
 * weights, their values) and the group's nodes (op, wiring, attributes,
 * output layouts). The same key and the same knobs give the same kernel;
 * tuning records are keyed by it. The grammar (docs/COMPILER.md, "Workload
 * keys"):
 *
 *   key    := template "|" target "|" arg ("," arg)* "|" node (">" node)*
 *   arg    := dtype shape ":" layout [":w" [data]]
 *   data   := "=[" int ("," int)* "]"      integer/bool weights of <= 64 elements
 *                                          (larger ones: run-time data, not in the key)
 *   node   := op "(" [ref ("," ref)*] ")" "{" (attr ";")* "}" "->" out ("," out)*
 *   ref    := "a" N                        argument N
 *           | "t" J ["." K]                output K (default 0) of the group's node J
 *           | "-"                          an absent optional input
 *   out    := "a" N | layout               an argument, or an internal value's layout
 *   attr   := name "=" (int | hexfloat | "[" ints "]" | "f[" hexfloats "]"
 *                        | "'" string "'")  (\\, \' and \xHH escapes)
 *   layout := "row-major" | "NCHW" (row-major, rank 4) | "NCHW" B "c"
 *           | "OIHW" I "i" O "o"
 *
 * Arguments are the task's tensors in its order: inputs (first read first),
 * then outputs; an argument some node writes ("->aN") is an output. The
 * layout is the graph value's (what alter-layout decided), never a
 * template's packed form: packing is a function of the template, the value's
 * layout and the knobs (dense packs its B as KN{nb}n, nb a knob), so the key
 * stays the same for every configuration of the task. */
#ifndef KILN_LOWER_WORKLOAD_H
#define KILN_LOWER_WORKLOAD_H

#include "lower/lower.h"
#include "util/sb.h"

/* Integer weights with at most this many elements are written out (a
 * template may build such small constants into its code: Gather's scalar
 * index); larger ones are data every template reads at run time, left out
 * of the key like float weights, so a parsed task gets seeded values and
 * still builds back into the same key. */
#define KILN_WL_MAX_DATA 64

/* Appends task t's workload key to b. */
void kiln_workload_write(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);

/* ---- parsing ------------------------------------------------------------ */
typedef struct kiln_wl_arg {
    kiln_dtype dtype;
    kiln_shape shape;
    kiln_layout layout;
    bool weight;
    bool output;       /* written by a node of the key */
    int n_data;        /* -1: no values recorded; else the count in data */
    int64_t *data;     /* recorded integer values (uint64 as their bits) */
} kiln_wl_arg;

/* A node input: kind 'a' (argument index), 't' (node index, output index),
 * or '-' (absent). */
typedef struct kiln_wl_ref {
    char kind;
    int index, output;
} kiln_wl_ref;

typedef struct kiln_wl_node {
    kiln_op op;
    int n_inputs, n_outputs, n_attrs;
    kiln_wl_ref *inputs;
    int *out_arg;          /* per output: argument index, or -1 (internal) */
    kiln_layout *out_layout; /* per output: the internal value's layout */
    kiln_attr *attrs;      /* names, strings and lists owned by the parse */
} kiln_wl_node;

typedef struct kiln_wl {
    char tpl[64];
    char target[32];
    int n_args, n_nodes;
    kiln_wl_arg *args;
    kiln_wl_node *nodes;
    struct kiln_arena *arena; /* everything above lives here */
} kiln_wl;

/* Parses a workload key. A malformed key is KILN_ERR_PARSE naming the
 * offset and what was expected there; an unknown op, dtype or a reference
 * to a later node is KILN_ERR_PARSE too. */
kiln_status kiln_wl_parse(const char *key, kiln_wl **out, kiln_error *err);
void kiln_wl_destroy(kiln_wl *w);

#endif
