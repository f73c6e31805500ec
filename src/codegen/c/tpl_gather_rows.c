/* codegen/c/tpl_gather_rows.c: Gather with any int32/int64 index tensor
 * (constant or computed at run time: embedding lookups, Gather(table [V, H],
 * ids [B, S]) -> [B, S, H]) along any axis of row-major data of any dtype.
 * The data is [outer, dim, inner] around the axis and the output
 * [outer, n_idx, inner]: output row r = (j, i) copies the inner elements of
 * data row (j, idx[i]). A negative index counts from the end, as ONNX says;
 * an index still outside [0, dim) (the reference kernel fails the run on
 * it; a generated kernel cannot fail) reads nothing and writes a row of
 * zeros. Rows are split into tasks of `rows_per_task`. A float32 result
 * absorbs an epilogue (the position-embedding Add) applied as each row is
 * copied. tpl_gather.c, before this in templates.def, takes the constant
 * scalar index (a strided copy). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

typedef struct gather_geom {
    int64_t outer, dim, n_idx, inner;
} gather_geom;

static bool geom(const kiln_graph *g, const kiln_node *n, gather_geom *o)
{
    const kiln_value *x = g->values[n->inputs[0]];
    int r = x->shape.rank;
    int64_t axis = kiln_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += r;
    if (r < 1 || axis < 0 || axis >= r)
        return false;
    kiln_geom_split(&x->shape, (int)axis, (int)axis + 1, &o->outer, &o->dim, &o->inner);
    o->n_idx = kiln_shape_numel(&g->values[n->inputs[1]]->shape);
    return o->outer >= 0 && o->inner >= 0 && o->n_idx >= 0;
}

static const char *elem_type(size_t esz)
{
    switch (esz) {
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
    if (n->op != KILN_OP_GATHER || n->n_inputs != 2 || !kiln_tpl_row_major_in(g, n))
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *ix = g->values[n->inputs[1]],
                     *y = g->values[n->outputs[0]];
    gather_geom gg;
    if ((ix->dtype != KILN_DTYPE_INT64 && ix->dtype != KILN_DTYPE_INT32) ||
        ix->layout.kind != KILN_LAYOUT_ROW_MAJOR || y->layout.kind != KILN_LAYOUT_ROW_MAJOR ||
        !elem_type(kiln_dtype_size(x->dtype)) || !geom(g, n, &gg))
        return false;
    if (y->dtype == KILN_DTYPE_FLOAT32)
        *epi = KILN_EPI_KIND_ANY;
    return true;
}

/* In a shapes_bound graph, a lookup along the first axis (outer 1: an
 * embedding of a sequence's ids) takes its rows, the indices, at run time
 * (codegen.h, KILN_RT_ROWS). */
static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    gather_geom gg;
    geom(l->ctx->g, l->ctx->g->nodes[t->anchor], &gg);
    bool rt = l->ctx->shapes_bound && gg.outer == 1 && gg.n_idx > 0;
    if (rt)
        t->extent = gg.n_idx;
    kiln_knobs_rows(t, gg.outer, rt ? KILN_RT_ROWS : gg.n_idx, gg.inner);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *ix = g->values[n->inputs[1]];
    gather_geom gg;
    geom(g, n, &gg);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t rows = gg.outer * gg.n_idx;
    const char *ty = elem_type(kiln_dtype_size(x->dtype));
    const char *it = ix->dtype == KILN_DTYPE_INT64 ? "int64_t" : "int32_t";
    bool epi = kiln_task_has_epilogue(l, t);
    const bool rt = t->extent > 0; /* the indices at run time (see space) */
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "/* %s [%lld, %lld, %lld] by ", kiln_dtype_name(x->dtype),
                   (long long)gg.outer, (long long)gg.dim, (long long)gg.inner);
    if (rt)
        kiln_sb_puts(b, "rt->extent");
    else
        kiln_sb_printf(b, "%lld", (long long)gg.n_idx);
    kiln_sb_printf(b,
                   " %s indices */\n"
                   "static const int64_t DIM_ = %lld, INNER_ = %lld;\n"
                   "enum { RPT_ = %d };\n",
                   kiln_dtype_name(ix->dtype), (long long)gg.dim, (long long)gg.inner, rpt);
    if (!rt)
        kiln_sb_printf(b, "static const int64_t NIDX_ = %lld, ROWS_ = %lld;\n",
                       (long long)(gg.n_idx ? gg.n_idx : 1), (long long)rows);
    kiln_sb_puts(b, "\n" KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (rt)
        kiln_sb_puts(b, "    const int64_t ROWS_ = " KILN_RT_EXTENT ", NIDX_ = ROWS_;\n");
    kiln_sb_printf(b,
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    const %s *ip = (const %s *)a%d;\n"
                   "    %s *yp = (%s *)o0;\n"
                   "    const int64_t r1 = KILN_MIN_(end_ * RPT_, ROWS_);\n"
                   "    for (int64_t r = begin_ * RPT_; r < r1; r++) {\n"
                   "        const int64_t j = r / NIDX_;\n"
                   "        int64_t p = (int64_t)ip[r %% NIDX_];\n"
                   "        if (p < 0)\n"
                   "            p += DIM_;\n"
                   "        const int ok = p >= 0 && p < DIM_; /* else a row of zeros */\n"
                   "        const %s *src = xp + (j * DIM_ + (ok ? p : 0)) * INNER_;\n"
                   "        %s *dst = yp + r * INNER_;\n",
                   ty, ty, kiln_task_arg(t, n->inputs[0]), it, it, kiln_task_arg(t, n->inputs[1]),
                   ty, ty, ty, ty);
    if (epi) {
        kiln_sb_puts(b, "        for (int64_t k = 0; k < INNER_; k++) {\n"
                        "            float v;\n"
                        "            if (ok)\n"
                        "                memcpy(&v, src + k, sizeof v);\n"
                        "            else\n"
                        "                v = 0.0f;\n"
                        "            const int64_t idx = r * INNER_ + k;\n"
                        "            (void)idx;\n");
        kiln_emit_epilogue(b, l, t, "v", "idx");
        kiln_sb_puts(b, "            memcpy(dst + k, &v, sizeof v);\n        }\n");
    } else {
        kiln_sb_printf(b, "        if (ok)\n"
                          "            memcpy(dst, src, (size_t)INNER_ * sizeof(%s));\n"
                          "        else\n"
                          "            memset(dst, 0, (size_t)INNER_ * sizeof(%s));\n",
                       ty, ty);
    }
    kiln_sb_puts(b, "    }\n}\n");
    kiln_emit_entry_rows(b, t, rows, "RPT_", rpt);
    return KILN_OK;
}

const kiln_template kiln_tpl_gather_rows = {
    .name = "gather_rows",
    .match = match,
    .space = space,
    .emit = emit,
};
