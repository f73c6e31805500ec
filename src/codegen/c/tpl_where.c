/* codegen/c/tpl_where.c: Where(cond, X, Y) with numpy broadcasting of all
 * three operands, row-major, X/Y of any dtype (only moved, so by element
 * size as in the reference kernel; a condition byte reads true when
 * nonzero). The output is walked row by row along its last dim: a row's
 * coordinates give each operand's base (dims an operand broadcasts have
 * stride 0, folded out at generation), then one select per element with each
 * operand's inner stride (0 or 1) a constant. A float32 result absorbs an
 * epilogue. Knob: rows_per_task. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

static const char *elem_type(kiln_dtype t)
{
    if (t == KILN_DTYPE_FLOAT32)
        return "float";
    switch (kiln_dtype_size(t)) {
    case 1: return "uint8_t";
    case 2: return "uint16_t";
    case 4: return "uint32_t";
    case 8: return "uint64_t";
    default: return NULL;
    }
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (n->op != KILN_OP_WHERE || n->n_inputs != 3 || n->n_outputs != 1)
        return false;
    for (int k = 0; k < 3; k++)
        if (n->inputs[k] < 0 || g->values[n->inputs[k]]->layout.kind != KILN_LAYOUT_ROW_MAJOR)
            return false;
    const kiln_value *c = g->values[n->inputs[0]], *x = g->values[n->inputs[1]],
                     *yy = g->values[n->inputs[2]], *o = g->values[n->outputs[0]];
    kiln_bcast_rows w;
    if (c->dtype != KILN_DTYPE_BOOL || x->dtype != yy->dtype || o->dtype != x->dtype ||
        o->layout.kind != KILN_LAYOUT_ROW_MAJOR || !elem_type(o->dtype) ||
        !kiln_geom_bcast_rows(g, n, 3, &w))
        return false;
    if (o->dtype == KILN_DTYPE_FLOAT32)
        *epi = KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(l->ctx->g, l->ctx->g->nodes[t->anchor], 3, &w);
    kiln_bcast_space(l, t, &w);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *o = g->values[n->outputs[0]];
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(g, n, 3, &w);
    kiln_bcast_text x;
    kiln_bcast_text_of(l, t, &w, &x);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    const char *ty = elem_type(o->dtype);
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "/* %s, %s rows of %s */\n", kiln_dtype_name(o->dtype), x.rows, x.last);
    kiln_emit_bcast_consts(b, t, &x);
    kiln_sb_printf(b, "enum { RPT_ = %d };\n\n", rpt);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    const uint8_t *cp = (const uint8_t *)a%d;\n"
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    const %s *yp = (const %s *)a%d;\n"
                   "    %s *op = (%s *)o0;\n",
                   kiln_task_arg(t, n->inputs[0]), ty, ty, kiln_task_arg(t, n->inputs[1]), ty, ty,
                   kiln_task_arg(t, n->inputs[2]), ty, ty);
    kiln_emit_bcast_walk(b, t, &w, &x);
    int r = w.rank - 1;
    kiln_sb_printf(b,
                   "        const uint8_t *cr = cp + off[0];\n"
                   "        const %s *xr = xp + off[1], *yr = yp + off[2];\n"
                   "        %s *dst = op + row * LAST_;\n"
                   "        for (int64_t j = 0; j < LAST_; j++) {\n"
                   "            %s v = cr[j * %s] ? xr[j * %s] : yr[j * %s];\n",
                   ty, ty, ty, x.st[0][r], x.st[1][r], x.st[2][r]);
    if (kiln_task_has_epilogue(l, t)) {
        kiln_sb_puts(b, "            const int64_t idx = row * LAST_ + j;\n"
                        "            (void)idx;\n");
        kiln_emit_epilogue(b, l, t, "v", "idx");
    }
    kiln_sb_puts(b, "            dst[j] = v;\n        }\n    }\n}\n");
    kiln_emit_bcast_entry(b, t, &w, &x, rpt);
    return KILN_OK;
}

const kiln_template kiln_tpl_where = {
    .name = "where",
    .match = match,
    .space = space,
    .emit = emit,
};
