/* codegen/c/tpl_cumsum.c: CumSum along one axis of row-major data of any
 * numeric dtype (exclusive, reverse), bit for bit ref/scan.c: floats summed
 * in double and rounded at each store (float16 through float, as the
 * reference does), integers summed wrapping in 64 bits and stored as their
 * low bits. Exported transformers number positions this way (RoBERTa,
 * XLM-R: cumsum(ids != pad) * mask + pad). The data is [outer, len, inner]
 * around the axis; each of the outer x inner lines is one running sum.
 * Knob: rows_per_task (lines per task). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

static const char *ctype(kiln_dtype t)
{
    return t == KILN_DTYPE_BOOL ? NULL : kiln_tpl_ctype(t);
}

static bool geom(const kiln_graph *g, const kiln_node *n, int64_t *outer, int64_t *len,
                 int64_t *inner)
{
    const kiln_value *x = g->values[n->inputs[0]];
    int r = x->shape.rank;
    int64_t a = kiln_attr_int(n, "axis", 0);
    if (r < 1 || a < -r || a >= r)
        return false;
    if (a < 0)
        a += r;
    kiln_geom_split(&x->shape, (int)a, (int)a + 1, outer, len, inner);
    return true;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if (n->op != KILN_OP_CUMSUM || n->n_inputs != 1 || n->n_outputs != 1 ||
        !kiln_tpl_row_major_in(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    int64_t outer, len, inner;
    return ctype(x->dtype) && y->dtype == x->dtype && y->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
           kiln_shape_equal(&x->shape, &y->shape) && geom(g, n, &outer, &len, &inner);
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    int64_t outer, len, inner;
    geom(l->ctx->g, l->ctx->g->nodes[t->anchor], &outer, &len, &inner);
    t->flops = (double)outer * (double)len * (double)inner;
    kiln_knobs_rows(t, 1, outer * inner, len);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    kiln_dtype dt = g->values[n->inputs[0]]->dtype;
    int64_t outer, len, inner;
    geom(g, n, &outer, &len, &inner);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    bool excl = kiln_attr_int(n, "exclusive", 0) == 1, rev = kiln_attr_int(n, "reverse", 0) == 1;
    bool fl = dt == KILN_DTYPE_FLOAT32 || dt == KILN_DTYPE_FLOAT64 || dt == KILN_DTYPE_FLOAT16;
    const char *ty = ctype(dt), *load, *store;
    switch (dt) {
    case KILN_DTYPE_FLOAT16: load = "(double)kiln_kc_h2f(x)"; store = "kiln_kc_f2h((float)acc)"; break;
    case KILN_DTYPE_FLOAT32: load = "(double)x"; store = "(float)acc"; break;
    case KILN_DTYPE_FLOAT64: load = "x"; store = "acc"; break;
    default: load = "(uint64_t)(int64_t)x"; store = NULL; break;
    }
    static const char *const headers[] = {"kiln_kernels_cast.h"};
    kiln_emit_prologue(b, l, t, headers, dt == KILN_DTYPE_FLOAT16 ? 1 : 0);
    kiln_sb_printf(b, "/* CumSum of %s [%lld, %lld, %lld]%s%s */\n"
                      "static const int64_t LEN_ = %lld, INNER_ = %lld, LINES_ = %lld;\n"
                      "enum { RPT_ = %d };\n\n",
                   kiln_dtype_name(dt), (long long)outer, (long long)len, (long long)inner,
                   excl ? ", exclusive" : "", rev ? ", reverse" : "", (long long)len,
                   (long long)inner, (long long)(outer * inner), rpt);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    kiln_sb_printf(b,
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    %s *yp = (%s *)o0;\n"
                   "    const int64_t e1 = KILN_MIN_(end_ * RPT_, LINES_);\n"
                   "    for (int64_t e = begin_ * RPT_; e < e1; e++) {\n"
                   "        const int64_t base = (e / INNER_) * LEN_ * INNER_ + e %% INNER_;\n"
                   "        %s acc = 0;\n"
                   "        for (int64_t s = 0; s < LEN_; s++) {\n"
                   "            const int64_t off = base + (%s) * INNER_;\n"
                   "            const %s x = xp[off];\n"
                   "            const %s v = %s;\n"
                   "%s"
                   "            yp[off] = ",
                   ty, ty, kiln_task_arg(t, n->inputs[0]), ty, ty, fl ? "double" : "uint64_t",
                   rev ? "LEN_ - 1 - s" : "s", ty, fl ? "double" : "uint64_t", load,
                   excl ? "" : "            acc += v;\n");
    if (store)
        kiln_sb_printf(b, "%s;\n", store);
    else
        kiln_sb_printf(b, "(%s)acc;\n", ty);
    if (excl)
        kiln_sb_puts(b, "            acc += v;\n");
    kiln_sb_puts(b, "        }\n    }\n}\n");
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)((outer * inner + rpt - 1) / rpt));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_cumsum = {
    .name = "cumsum",
    .match = match,
    .space = space,
    .emit = emit,
};
