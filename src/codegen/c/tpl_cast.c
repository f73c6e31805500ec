/* codegen/c/tpl_cast.c: Cast between any two of kiln's dtypes (float32,
 * float16, float64, int8..int64, uint8..uint64, bool) on row-major data, bit
 * for bit the reference kernel (ref/compare.c): one loop over the elements in
 * chunks of `chunk`, each converted by one expression chosen the way the
 * reference dispatches:
 *   same dtype                  a copy;
 *   float32 -> float16          round to nearest even;
 *   int64/uint64 -> float32     one C conversion (no double detour);
 *   float16 -> float32          exact, a signaling NaN quieted (as through
 *                               double);
 *   from or to a float, to bool through double: floats to integers
 *                               truncate toward zero and saturate, NaN -> 0;
 *                               to bool x != 0;
 *   integer/bool -> integer     the low bits (bool reads 0/1).
 * The conversions are kiln_kernels_cast.h's. A float32 result absorbs the
 * elementwise chain after it (the attention-mask pattern Cast -> Sub -> Mul),
 * applied before the only store. Knob: chunk (elements per task). */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/knobs.h"

static const char *ctype(kiln_dtype t)
{
    return kiln_tpl_ctype(t);
}

static bool is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    if (n->op != KILN_OP_CAST || !kiln_tpl_row_major_in(g, n) || n->n_outputs != 1)
        return false;
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    if (!ctype(x->dtype) || !ctype(y->dtype) || y->layout.kind != KILN_LAYOUT_ROW_MAJOR ||
        kiln_attr_int(n, "to", KILN_DTYPE_UNDEFINED) != (int64_t)y->dtype ||
        kiln_shape_numel(&x->shape) != kiln_shape_numel(&y->shape))
        return false;
    if (y->dtype == KILN_DTYPE_FLOAT32)
        *epi = KILN_EPI_KIND_CHAIN;
    return true;
}

/* In a shapes_bound graph the element count comes at run time (codegen.h;
 * the chunk knob still follows this class's count: a small cast, an
 * attention mask, is one chunk at any length). */
static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_value *y = l->ctx->g->values[l->ctx->g->nodes[t->anchor]->outputs[0]];
    int64_t total = kiln_shape_numel(&y->shape);
    if (l->ctx->shapes_bound && total > 0)
        t->extent = total;
    kiln_knobs_chunk(t, total);
    return KILN_OK;
}

/* Element `x` of dtype s as double (the reference's kiln_ew_load_f64). */
static void load_f64(kiln_sb *b, kiln_dtype s)
{
    switch (s) {
    case KILN_DTYPE_FLOAT32: kiln_sb_puts(b, "(double)x"); return;
    case KILN_DTYPE_FLOAT64: kiln_sb_puts(b, "x"); return;
    case KILN_DTYPE_FLOAT16: kiln_sb_puts(b, "(double)kiln_kc_h2f(x)"); return;
    case KILN_DTYPE_UINT64: kiln_sb_puts(b, "(double)x"); return;
    case KILN_DTYPE_BOOL: kiln_sb_puts(b, "(double)(int64_t)(x != 0)"); return;
    default: kiln_sb_puts(b, "(double)(int64_t)x"); return;
    }
}

/* The statement storing double `v` into `dst` of dtype d (kiln_ew_store_f64). */
static void store_f64(kiln_sb *b, kiln_dtype d, const char *dst)
{
    switch (d) {
    case KILN_DTYPE_FLOAT32: kiln_sb_printf(b, "%s = (float)v;", dst); return;
    case KILN_DTYPE_FLOAT64: kiln_sb_printf(b, "%s = v;", dst); return;
    case KILN_DTYPE_FLOAT16: kiln_sb_printf(b, "%s = kiln_kc_d2h(v);", dst); return;
    case KILN_DTYPE_BOOL: kiln_sb_printf(b, "%s = (uint8_t)(v != 0.0);", dst); return;
    case KILN_DTYPE_INT8: kiln_sb_printf(b, "%s = kiln_kc_d2i8(v);", dst); return;
    case KILN_DTYPE_UINT8: kiln_sb_printf(b, "%s = kiln_kc_d2u8(v);", dst); return;
    case KILN_DTYPE_INT16: kiln_sb_printf(b, "%s = kiln_kc_d2i16(v);", dst); return;
    case KILN_DTYPE_UINT16: kiln_sb_printf(b, "%s = kiln_kc_d2u16(v);", dst); return;
    case KILN_DTYPE_INT32: kiln_sb_printf(b, "%s = kiln_kc_d2i32(v);", dst); return;
    case KILN_DTYPE_UINT32: kiln_sb_printf(b, "%s = kiln_kc_d2u32(v);", dst); return;
    case KILN_DTYPE_INT64: kiln_sb_printf(b, "%s = kiln_kc_d2i64(v);", dst); return;
    case KILN_DTYPE_UINT64: kiln_sb_printf(b, "%s = kiln_kc_d2u64(v);", dst); return;
    default: return;
    }
}

/* Statements converting `x` (dtype s) into `dst` (dtype d). */
static void convert(kiln_sb *b, kiln_dtype s, kiln_dtype d, const char *dst)
{
    if (s == d) {
        kiln_sb_printf(b, "%s = x;", dst);
    } else if (s == KILN_DTYPE_FLOAT32 && d == KILN_DTYPE_FLOAT16) {
        kiln_sb_printf(b, "%s = kiln_kc_f2h(x);", dst);
    } else if (s == KILN_DTYPE_FLOAT16 && d == KILN_DTYPE_FLOAT32) {
        kiln_sb_printf(b, "%s = kiln_kc_h2f_quiet(x);", dst);
    } else if (d == KILN_DTYPE_FLOAT32 && (s == KILN_DTYPE_INT64 || s == KILN_DTYPE_UINT64)) {
        kiln_sb_printf(b, "%s = (float)x;", dst);
    } else if (is_float(s) || is_float(d) || d == KILN_DTYPE_BOOL) {
        kiln_sb_puts(b, "const double v = ");
        load_f64(b, s);
        kiln_sb_puts(b, "; ");
        store_f64(b, d, dst);
    } else {
        /* integer/bool -> integer: the low bits */
        kiln_sb_printf(b, "%s = (%s)(uint64_t)%s;", dst, ctype(d),
                       s == KILN_DTYPE_BOOL ? "(int64_t)(x != 0)" : "(int64_t)x");
    }
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    int64_t total = kiln_shape_numel(&y->shape);
    int chunk = kiln_task_knob(t, "chunk", 16384);
    const char *st = ctype(x->dtype), *dt = ctype(y->dtype);
    static const char *const headers[] = {"kiln_kernels_cast.h"};
    const bool rt = t->extent > 0; /* the element count at run time (see space) */
    kiln_emit_prologue(b, l, t, headers, 1);
    kiln_sb_printf(b, "/* %s -> %s */\nenum { CHUNK_ = %d };\n", kiln_dtype_name(x->dtype),
                   kiln_dtype_name(y->dtype), chunk);
    if (!rt)
        kiln_sb_printf(b, "static const int64_t TOTAL_ = %lld;\n", (long long)total);
    kiln_sb_puts(b, "\n" KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (rt)
        kiln_sb_puts(b, "    const int64_t TOTAL_ = " KILN_RT_EXTENT ";\n");
    kiln_sb_printf(b,
                   "    const %s *xp = (const %s *)a%d;\n"
                   "    %s *yp = (%s *)o0;\n"
                   "    int64_t hi = KILN_MIN_(end_ * CHUNK_, TOTAL_);\n"
                   "    for (int64_t i = begin_ * CHUNK_; i < hi; i++) {\n"
                   "        const %s x = xp[i];\n        ",
                   st, st, kiln_task_arg(t, n->inputs[0]), dt, dt, st);
    if (y->dtype == KILN_DTYPE_FLOAT32 && kiln_task_has_epilogue(l, t)) {
        kiln_sb_puts(b, "float r_;\n        { ");
        convert(b, x->dtype, y->dtype, "r_");
        kiln_sb_puts(b, " }\n");
        kiln_emit_epilogue(b, l, t, "r_", "i");
        kiln_sb_puts(b, "        yp[i] = r_;\n");
    } else {
        convert(b, x->dtype, y->dtype, "yp[i]");
        kiln_sb_puts(b, "\n");
    }
    kiln_sb_puts(b, "    }\n}\n");
    kiln_emit_entry_rows(b, t, total, "CHUNK_", chunk);
    return KILN_OK;
}

const kiln_template kiln_tpl_cast = {
    .name = "cast",
    .match = match,
    .space = space,
    .emit = emit,
};
