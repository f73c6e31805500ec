/* lower/knobs.h: building a template's knob space. A template's space hook
 * declares each knob with kiln_knob_add (its kind, its analytic default as
 * the value, and where in the task's params the value goes), then its
 * choices; kiln_knobs_apply copies the values into the params (typed: an
 * int at the knob's offset, no names compared). */
#ifndef KILN_LOWER_KNOBS_H
#define KILN_LOWER_KNOBS_H

#include <stddef.h>

#include "lower/lower.h"

/* A new knob (NULL when the task has KILN_MAX_KNOBS already). offset: of
 * the int it sets in t->params (offsetof), or -1. */
kiln_knob *kiln_knob_add(kiln_task *t, const char *name, kiln_knob_kind kind, int value,
                         int offset);
/* Adds choice v (once; k may be NULL). */
void kiln_knob_choice(kiln_knob *k, int v);
/* Choices 0 ("all") when `zero`, then powers of two up to `max`, and the
 * knob's current value. */
void kiln_knob_pow2(kiln_knob *k, int max, bool zero);
/* Templates that split `outer` x `rows` rows into tasks: rows_per_task. */
void kiln_knobs_rows(kiln_task *t, int64_t outer, int64_t rows, int64_t work_per_row);
/* Elementwise: chunk (elements per task). */
void kiln_knobs_chunk(kiln_task *t, int64_t total);
/* Adds the configuration whose knob values are those of `params` (the
 * template's params struct, read at each knob's offset; a knob without one
 * keeps its default) as the task's next analytic pick, a value missing from
 * a knob's choices added to them. Not added when it equals the default or
 * an earlier pick, or when KILN_MAX_PICKS are there; true when added. Call
 * after every knob is declared. */
bool kiln_knob_pick(kiln_task *t, const void *params);
/* A register tile of t x o and its modelled cost. */
typedef struct kiln_tile_rank {
    int t, o;
    double cost;
} kiln_tile_rank;
/* Sorts r[0..n) cheapest first, ties kept in their order. */
void kiln_tiles_rank(kiln_tile_rank *r, int n);
/* Copies every knob with an offset into t->params. */
void kiln_knobs_apply(kiln_task *t);

#endif
