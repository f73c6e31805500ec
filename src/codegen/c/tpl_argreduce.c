/* codegen/c/tpl_argreduce.c: ArgMax / ArgMin along one axis of row-major
 * data of any numeric dtype (the greedy-decoding head of exported language
 * models), as the reference kernel (ref/reduce.c) picks: the first extreme
 * (the last with select_last_index), a NaN beating any number (and, with
 * select_last_index, a later NaN beating it), integers compared in their own
 * signedness, float16 as float32. The data is [outer, len, inner] around the
 * axis; each of the outer x inner int64 results scans its len elements
 * (stride inner). Knob: rows_per_task (results per task). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

static const char *ctype(kiln_dtype t)
{
    return t == KILN_DTYPE_BOOL ? NULL : kiln_tpl_ctype(t); /* bool is not numeric */
}

static bool geom(const kiln_graph *g, const kiln_node *n, int64_t *outer, int64_t *len,
                 int64_t *inner)
{
    const kiln_value *x = g->values[n->inputs[0]];
    int r = x->shape.rank;
    int64_t a = kiln_attr_int(n, "axis", 0);
    if (a < -r || a >= r)
        return false;
    if (a < 0)
        a += r;
    kiln_geom_split(&x->shape, (int)a, (int)a + 1, outer, len, inner);
    return *len >= 1;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    if ((n->op != KILN_OP_ARGMAX && n->op != KILN_OP_ARGMIN) || n->n_inputs != 1 ||
        n->n_outputs != 1 || !kiln_tpl_row_major_in(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    int64_t outer, len, inner;
    return ctype(x->dtype) && y->dtype == KILN_DTYPE_INT64 &&
           y->layout.kind == KILN_LAYOUT_ROW_MAJOR && geom(g, n, &outer, &len, &inner);
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
    bool is_max = n->op == KILN_OP_ARGMAX;
    bool last = kiln_attr_int(n, "select_last_index", 0) == 1;
    bool fl = dt == KILN_DTYPE_FLOAT32 || dt == KILN_DTYPE_FLOAT64 || dt == KILN_DTYPE_FLOAT16;
    const char *st = ctype(dt);                               /* as stored */
    const char *vt = dt == KILN_DTYPE_FLOAT16 ? "float" : st; /* as compared */
    static const char *const headers[] = {"kiln_kernels_cast.h"};
    kiln_emit_prologue(b, l, t, headers, dt == KILN_DTYPE_FLOAT16 ? 1 : 0);
    kiln_sb_printf(b, "/* %s of %s [%lld, %lld, %lld]%s */\n"
                      "static const int64_t LEN_ = %lld, INNER_ = %lld, TOTAL_ = %lld;\n"
                      "enum { RPT_ = %d };\n\n",
                   kiln_op_name(n->op), kiln_dtype_name(dt), (long long)outer, (long long)len,
                   (long long)inner, last ? ", last index" : "", (long long)len,
                   (long long)inner, (long long)(outer * inner), rpt);
    /* whether candidate v replaces the best b */
    kiln_sb_printf(b, "static inline int better_(%s v, %s b)\n{\n", vt, vt);
    if (fl)
        kiln_sb_printf(b, "    if (b != b)\n        return %s;\n"
                          "    if (v != v)\n        return 1;\n",
                       last ? "v != v" : "0");
    kiln_sb_printf(b, "    return v %s b;\n}\n\n", is_max ? (last ? ">=" : ">") : (last ? "<=" : "<"));
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    const char *ld = dt == KILN_DTYPE_FLOAT16 ? "kiln_kc_h2f" : "";
    kiln_sb_printf(b,
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    int64_t *yp = (int64_t *)o0;\n"
                   "    const int64_t e1 = KILN_MIN_(end_ * RPT_, TOTAL_);\n"
                   "    for (int64_t e = begin_ * RPT_; e < e1; e++) {\n"
                   "        const %s *p = xp + (e / INNER_) * LEN_ * INNER_ + e %% INNER_;\n"
                   "        %s best = %s(p[0]);\n"
                   "        int64_t at = 0;\n"
                   "        for (int64_t j = 1; j < LEN_; j++) {\n"
                   "            const %s v = %s(p[j * INNER_]);\n"
                   "            if (better_(v, best)) {\n"
                   "                best = v;\n"
                   "                at = j;\n"
                   "            }\n"
                   "        }\n"
                   "        yp[e] = at;\n"
                   "    }\n}\n",
                   st, st, kiln_task_arg(t, n->inputs[0]), st, vt, ld, vt, ld);
    char nt[64];
    snprintf(nt, sizeof nt, "%lld", (long long)((outer * inner + rpt - 1) / rpt));
    kiln_emit_entry(b, t, nt, 1);
    return KILN_OK;
}

const kiln_template kiln_tpl_argreduce = {
    .name = "argreduce",
    .match = match,
    .space = space,
    .emit = emit,
};
