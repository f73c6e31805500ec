/* codegen/c/emit_bcast.c: the row walk of kernels over numpy-broadcast
 * operands (tpl_compare.c, tpl_where.c). The output is walked row by row
 * along its last dim; a row's coordinates give each operand's offset
 * (dims an operand broadcasts have stride 0), then the row's elements
 * read each operand at a stride along the last dim.
 *
 * In a shapes_bound graph (codegen.h) the output's dims of a symbol's
 * extent, and the operand strides that hold it, are written in terms of
 * E_ (the step's extent) instead of numbers: one source for every length. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

int64_t kiln_bcast_extent(const kiln_lowered *l, const kiln_node *n)
{
    const kiln_value *y = l->ctx->g->values[n->outputs[0]];
    return y->shape.rank > 0 ? kiln_rt_sym_extent(l, &y->shape) : 0;
}

void kiln_bcast_space(kiln_lowered *l, kiln_task *t, const kiln_bcast_rows *w)
{
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    int64_t e = kiln_bcast_extent(l, n);
    t->extent = e;
    /* the rows per task follow the rows at KILN_RT_ROWS (codegen.h) */
    kiln_rt_size r = kiln_rt_dims(w->dims, 0, w->rank - 1, e);
    int64_t rows = r.c;
    for (int i = 0; i < r.pow; i++)
        rows *= KILN_RT_ROWS;
    kiln_knobs_rows(t, 1, rows, w->last);
}

void kiln_bcast_text_of(const kiln_lowered *l, const kiln_task *t, const kiln_bcast_rows *w,
                        kiln_bcast_text *x)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const int64_t e = t->extent;
    kiln_rt_str(x->rows, sizeof x->rows, kiln_rt_dims(w->dims, 0, w->rank - 1, e), "E_");
    kiln_rt_str(x->last, sizeof x->last, kiln_rt_dims(w->dims, w->rank - 1, w->rank, e), "E_");
    kiln_rt_str(x->rows_entry, sizeof x->rows_entry, kiln_rt_dims(w->dims, 0, w->rank - 1, e),
                "rt->extent");
    for (int d = 0; d < w->rank; d++)
        kiln_rt_str(x->dims[d], sizeof x->dims[d], kiln_rt_dims(w->dims, d, d + 1, e), "E_");
    for (int k = 0; k < w->n_ops; k++) {
        const kiln_shape *s = &g->values[n->inputs[k]]->shape;
        int diff = w->rank - s->rank;
        for (int d = 0; d < w->rank; d++) {
            kiln_rt_size z = {0, 0};
            if (w->st[k][d])
                z = kiln_rt_dims(s->dims, d - diff + 1, s->rank, e);
            kiln_rt_str(x->st[k][d], sizeof x->st[k][d], z, "E_");
        }
    }
}

void kiln_emit_bcast_consts(kiln_sb *b, const kiln_task *t, const kiln_bcast_text *x)
{
    if (t->extent <= 0) /* else declared in task_ (kiln_emit_bcast_walk) */
        kiln_sb_printf(b, "static const int64_t ROWS_ = %s, LAST_ = %s;\n", x->rows, x->last);
}

void kiln_emit_bcast_walk(kiln_sb *b, const kiln_task *t, const kiln_bcast_rows *w,
                          const kiln_bcast_text *x)
{
    if (t->extent > 0)
        kiln_sb_printf(b, "    const int64_t E_ = " KILN_RT_EXTENT ", ROWS_ = %s, LAST_ = %s;\n",
                       x->rows, x->last);
    kiln_sb_printf(b,
                   "    const int64_t r1 = KILN_MIN_(end_ * RPT_, ROWS_);\n"
                   "    for (int64_t row = begin_ * RPT_; row < r1; row++) {\n"
                   "        int64_t off[%d] = {0%s}, q = row;\n"
                   "        (void)q;\n",
                   w->n_ops, w->n_ops == 3 ? ", 0, 0" : w->n_ops == 2 ? ", 0" : "");
    /* with the extent at run time, the outermost dim above 1 takes q as it
     * is (below its extent): no division by a run-time value per row */
    int outer = 0;
    while (outer < w->rank - 2 && w->dims[outer] == 1)
        outer++;
    for (int d = w->rank - 2; d >= 0; d--) {
        if (w->dims[d] == 1)
            continue;
        if (t->extent > 0 && d == outer)
            kiln_sb_puts(b, "        { const int64_t c = q;");
        else
            kiln_sb_printf(b, "        { const int64_t c = q %% %s; q /= %s;", x->dims[d],
                           x->dims[d]);
        for (int k = 0; k < w->n_ops; k++)
            if (w->st[k][d])
                kiln_sb_printf(b, " off[%d] += c * %s;", k, x->st[k][d]);
        kiln_sb_puts(b, " (void)c; }\n");
    }
}

void kiln_emit_bcast_entry(kiln_sb *b, const kiln_task *t, const kiln_bcast_rows *w,
                           const kiln_bcast_text *x, int rpt)
{
    char nt[128];
    if (t->extent > 0)
        snprintf(nt, sizeof nt, "(%s + RPT_ - 1) / RPT_", x->rows_entry);
    else
        snprintf(nt, sizeof nt, "%lld", (long long)((w->rows + rpt - 1) / rpt));
    kiln_emit_entry(b, t, nt, 1);
}
