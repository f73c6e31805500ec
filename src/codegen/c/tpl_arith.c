/* codegen/c/tpl_arith.c: binary arithmetic on the dtypes the elementwise
 * template (float32 expressions) does not take: Add, Sub, Mul, Min, Max of
 * integers (wrapping, through the unsigned type the reference kernel uses:
 * run-time position ids, lengths, index arithmetic), and Add, Sub, Mul, Div,
 * Min, Max of float64 and float16 (float16 computed in float32 and rounded,
 * as the reference does; Min/Max propagate NaN), with numpy broadcasting,
 * row-major, bit for bit ref/elemwise.c. Integer Div and Mod stay with the
 * reference kernel, which fails the run on a zero divisor. The output is
 * walked row by row as in tpl_where.c. Knob: rows_per_task. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

/* The element type and the unsigned type wrapping arithmetic goes through
 * (ref/elemwise_common.h); NULL for dtypes this template does not take. */
static const char *ctype(kiln_dtype t, const char **wrap)
{
    *wrap = NULL;
    switch (t) {
    case KILN_DTYPE_INT8: *wrap = "uint32_t"; return "int8_t";
    case KILN_DTYPE_INT16: *wrap = "uint32_t"; return "int16_t";
    case KILN_DTYPE_INT32: *wrap = "uint32_t"; return "int32_t";
    case KILN_DTYPE_INT64: *wrap = "uint64_t"; return "int64_t";
    case KILN_DTYPE_UINT8: *wrap = "uint32_t"; return "uint8_t";
    case KILN_DTYPE_UINT16: *wrap = "uint32_t"; return "uint16_t";
    case KILN_DTYPE_UINT32: *wrap = "uint32_t"; return "uint32_t";
    case KILN_DTYPE_UINT64: *wrap = "uint64_t"; return "uint64_t";
    case KILN_DTYPE_FLOAT64: return "double";
    case KILN_DTYPE_FLOAT16: return "uint16_t";
    default: return NULL;
    }
}

static bool op_ok(kiln_op op, bool is_int)
{
    switch (op) {
    case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_MUL: case KILN_OP_MIN: case KILN_OP_MAX:
        return true;
    case KILN_OP_DIV:
        return !is_int;
    default:
        return false;
    }
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->n_inputs != 2 || n->n_outputs != 1 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return false;
    const kiln_value *a = g->values[n->inputs[0]], *b = g->values[n->inputs[1]],
                     *y = g->values[n->outputs[0]];
    const char *wrap;
    kiln_bcast_rows w;
    return ctype(y->dtype, &wrap) && op_ok(n->op, wrap != NULL) && a->dtype == y->dtype &&
           b->dtype == y->dtype && a->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
           b->layout.kind == KILN_LAYOUT_ROW_MAJOR && y->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
           kiln_geom_bcast_rows(g, n, 2, &w);
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(l->ctx->g, l->ctx->g->nodes[t->anchor], 2, &w);
    kiln_knobs_rows(t, 1, w.rows, w.last);
    return KILN_OK;
}

/* The C expression of op on x, y of type `ty` (the computing type). */
static void expr(kiln_sb *b, kiln_op op, const char *ty, const char *wrap)
{
    const char *c = op == KILN_OP_ADD ? "+" : op == KILN_OP_SUB ? "-" : op == KILN_OP_MUL ? "*" : "/";
    if (op == KILN_OP_MIN)
        kiln_sb_puts(b, wrap ? "y < x ? y : x" : "(y < x || y != y) ? y : x");
    else if (op == KILN_OP_MAX)
        kiln_sb_puts(b, wrap ? "y > x ? y : x" : "(y > x || y != y) ? y : x");
    else if (wrap)
        kiln_sb_printf(b, "(%s)((%s)x %s (%s)y)", ty, wrap, c, wrap);
    else
        kiln_sb_printf(b, "x %s y", c);
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_dtype dt = g->values[n->outputs[0]]->dtype;
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(g, n, 2, &w);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    const char *wrap, *ty = ctype(dt, &wrap);
    bool half = dt == KILN_DTYPE_FLOAT16;
    const char *vt = half ? "float" : ty; /* the computing type */
    static const char *const headers[] = {"kiln_kernels_cast.h"};
    kiln_emit_prologue(b, l, t, headers, half ? 1 : 0);
    kiln_sb_printf(b, "/* %s of %s, %lld rows of %lld */\n"
                      "static const int64_t ROWS_ = %lld, LAST_ = %lld;\nenum { RPT_ = %d };\n\n",
                   kiln_op_name(n->op), kiln_dtype_name(dt), (long long)w.rows, (long long)w.last,
                   (long long)w.rows, (long long)w.last, rpt);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    const %s *p0 = (const %s *)a%d;\n"
                   "    const %s *p1 = (const %s *)a%d;\n"
                   "    %s *op = (%s *)o0;\n"
                   "    const int64_t r1 = KILN_MIN_(end_ * RPT_, ROWS_);\n"
                   "    for (int64_t row = begin_ * RPT_; row < r1; row++) {\n"
                   "        int64_t off[2] = {0, 0}, q = row;\n"
                   "        (void)q;\n",
                   ty, ty, kiln_task_arg(t, n->inputs[0]), ty, ty, kiln_task_arg(t, n->inputs[1]),
                   ty, ty);
    for (int d = w.rank - 2; d >= 0; d--) {
        if (w.dims[d] == 1)
            continue;
        kiln_sb_printf(b, "        { const int64_t c = q %% %lld; q /= %lld;", (long long)w.dims[d],
                       (long long)w.dims[d]);
        for (int k = 0; k < 2; k++)
            if (w.st[k][d])
                kiln_sb_printf(b, " off[%d] += c * %lld;", k, (long long)w.st[k][d]);
        kiln_sb_puts(b, " (void)c; }\n");
    }
    int r = w.rank - 1;
    const char *ld = half ? "kiln_kc_h2f" : "";
    kiln_sb_printf(b,
                   "        %s *dst = op + row * LAST_;\n"
                   "        for (int64_t j = 0; j < LAST_; j++) {\n"
                   "            const %s x = %s(p0[off[0] + j * %lld]);\n"
                   "            const %s y = %s(p1[off[1] + j * %lld]);\n"
                   "            const %s v = ",
                   ty, vt, ld, (long long)w.st[0][r], vt, ld, (long long)w.st[1][r], vt);
    expr(b, n->op, vt, wrap);
    kiln_sb_printf(b, ";\n            dst[j] = %s;\n        }\n    }\n}\n",
                   half ? "kiln_kc_f2h(v)" : "v");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)((w.rows + rpt - 1) / rpt));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_arith = {
    .name = "arith",
    .match = match,
    .space = space,
    .emit = emit,
};
