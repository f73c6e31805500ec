/* codegen/c/tpl_compare.c: the ops that make masks, as the reference kernels
 * (ref/compare.c, ref/unary.c) compute them: Equal, Greater, Less,
 * GreaterOrEqual, LessOrEqual of two operands of one dtype (any numeric
 * type, typed compares; float16 compared as float32, exactly; bool as 0/1;
 * NaN compares false), And, Or, Xor of bools, and Not; numpy broadcasting,
 * row-major; results 0/1 bytes, a bool byte reading true when nonzero. The
 * output is walked row by row along its last dim as in tpl_where.c (each
 * operand's base from the row's coordinates, inner strides constants).
 * Knob: rows_per_task. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

/* The C type an operand is read as (float16: its bits). */
static const char *ctype(kiln_dtype t)
{
    return kiln_tpl_ctype(t);
}

/* The C operator of a comparison or logic op; NULL for others. */
static const char *op_of(kiln_op op)
{
    switch (op) {
    case KILN_OP_EQUAL: return "==";
    case KILN_OP_GREATER: return ">";
    case KILN_OP_LESS: return "<";
    case KILN_OP_GREATEROREQUAL: return ">=";
    case KILN_OP_LESSOREQUAL: return "<=";
    case KILN_OP_AND: return "&";
    case KILN_OP_OR: return "|";
    case KILN_OP_XOR: return "^";
    case KILN_OP_NOT: return "!";
    default: return NULL;
    }
}

static bool is_logic(kiln_op op)
{
    return op == KILN_OP_AND || op == KILN_OP_OR || op == KILN_OP_XOR || op == KILN_OP_NOT;
}

static int n_operands(const kiln_node *n)
{
    return n->op == KILN_OP_NOT ? 1 : 2;
}

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    (void)epi;
    int nops = n_operands(n);
    if (!op_of(n->op) || n->n_inputs != nops || n->n_outputs != 1)
        return false;
    const kiln_value *o = g->values[n->outputs[0]];
    if (o->dtype != KILN_DTYPE_BOOL || o->layout.kind != KILN_LAYOUT_ROW_MAJOR)
        return false;
    kiln_dtype t = KILN_DTYPE_UNDEFINED;
    for (int k = 0; k < nops; k++) {
        if (n->inputs[k] < 0)
            return false;
        const kiln_value *x = g->values[n->inputs[k]];
        if (x->layout.kind != KILN_LAYOUT_ROW_MAJOR || !ctype(x->dtype) ||
            (k > 0 && x->dtype != t))
            return false;
        t = x->dtype;
    }
    kiln_bcast_rows w;
    return (!is_logic(n->op) || t == KILN_DTYPE_BOOL) && kiln_geom_bcast_rows(g, n, nops, &w);
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(l->ctx->g, n, n_operands(n), &w);
    kiln_bcast_space(l, t, &w);
    return KILN_OK;
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    int nops = n_operands(n);
    kiln_dtype dt = g->values[n->inputs[0]]->dtype;
    kiln_bcast_rows w;
    kiln_geom_bcast_rows(g, n, nops, &w);
    kiln_bcast_text x;
    kiln_bcast_text_of(l, t, &w, &x);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    const char *ty = ctype(dt);
    static const char *const headers[] = {"kiln_kernels_cast.h"};
    kiln_emit_prologue(b, l, t, headers, dt == KILN_DTYPE_FLOAT16 ? 1 : 0);
    kiln_sb_printf(b, "/* %s of %s, %s rows of %s */\n", kiln_op_name(n->op), kiln_dtype_name(dt),
                   x.rows, x.last);
    kiln_emit_bcast_consts(b, t, &x);
    kiln_sb_printf(b, "enum { RPT_ = %d };\n\n", rpt);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    for (int k = 0; k < nops; k++)
        kiln_sb_printf(b, "    const %s *p%d = (const %s *)a%d;\n", ty, k, ty,
                       kiln_task_arg(t, n->inputs[k]));
    kiln_sb_puts(b, "    uint8_t *op = (uint8_t *)o0;\n");
    kiln_emit_bcast_walk(b, t, &w, &x);
    int r = w.rank - 1;
    kiln_sb_puts(b, "        uint8_t *dst = op + row * LAST_;\n"
                    "        for (int64_t j = 0; j < LAST_; j++) {\n");
    /* the operands as compared: bool as 0/1, float16 as float */
    for (int k = 0; k < nops; k++) {
        char el[128];
        snprintf(el, sizeof el, "p%d[off[%d] + j * %s]", k, k, x.st[k][r]);
        if (dt == KILN_DTYPE_BOOL)
            kiln_sb_printf(b, "            const int %c = %s != 0;\n", 'x' + k, el);
        else if (dt == KILN_DTYPE_FLOAT16)
            kiln_sb_printf(b, "            const float %c = kiln_kc_h2f(%s);\n", 'x' + k, el);
        else
            kiln_sb_printf(b, "            const %s %c = %s;\n", ty, 'x' + k, el);
    }
    if (n->op == KILN_OP_NOT)
        kiln_sb_puts(b, "            dst[j] = (uint8_t)!x;\n");
    else
        kiln_sb_printf(b, "            dst[j] = (uint8_t)(x %s y);\n", op_of(n->op));
    kiln_sb_puts(b, "        }\n    }\n}\n");
    kiln_emit_bcast_entry(b, t, &w, &x, rpt);
    return KILN_OK;
}

const kiln_template kiln_tpl_compare = {
    .name = "compare",
    .match = match,
    .space = space,
    .emit = emit,
};
