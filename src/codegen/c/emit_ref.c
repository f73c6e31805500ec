/* codegen/c/emit_ref.c: the reference-kernel fallback (ref_node.h). A node
 * no template takes gets no generated kernel: its step carries the node as
 * text (op, each input and output as an index into the step's arguments or
 * "-" for an absent optional input, every attribute with its type, every
 * argument's dtype and shape), and the runtime runs the op's reference
 * kernel on the step's tensors. Floats are written as C99 hex floats, so the
 * attributes round-trip exactly; names and strings are length-prefixed, so
 * any bytes round-trip. The format is docs/RUNTIME.md's "Fallback steps".
 *
 * The reference kernels read dense row-major tensors: lowering's fallback
 * groups are single nodes whose values alter-layout keeps row-major; an
 * argument that is not (a blocked or packed tensor) is refused here with a
 * message naming the node, rather than run on the wrong bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/ref_node.h"
#include "util/error.h"

bool kiln_task_is_fallback(const kiln_lowered *l, const kiln_task *t)
{
    return t->tpl == kiln_target_templates(&l->ctx->target)->fallback;
}

static void str(kiln_sb *b, const char *s)
{
    kiln_sb_printf(b, "%zu:%s", strlen(s ? s : ""), s ? s : "");
}

static void attr(kiln_sb *b, const kiln_attr *a)
{
    str(b, a->name);
    switch (a->type) {
    case KILN_ATTR_INT:
        kiln_sb_printf(b, " i %lld", (long long)a->i);
        break;
    case KILN_ATTR_FLOAT:
        kiln_sb_printf(b, " f %a", (double)a->f);
        break;
    case KILN_ATTR_STRING:
        kiln_sb_puts(b, " s ");
        str(b, a->s);
        break;
    case KILN_ATTR_INTS:
        kiln_sb_printf(b, " is %d", a->n);
        for (int k = 0; k < a->n; k++)
            kiln_sb_printf(b, " %lld", (long long)a->ints[k]);
        break;
    case KILN_ATTR_FLOATS:
        kiln_sb_printf(b, " fs %d", a->n);
        for (int k = 0; k < a->n; k++)
            kiln_sb_printf(b, " %a", (double)a->floats[k]);
        break;
    }
    kiln_sb_puts(b, "\n");
}

kiln_status kiln_ref_node_text(const kiln_lowered *l, const kiln_task *t, char **text,
                               kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    const kiln_node *n = g->nodes[t->anchor];
    const char *op = kiln_op_name(n->op);
    if (gr->n_nodes != 1)
        return kiln_errorf(err, KILN_ERR_INTERNAL,
                           "node '%s' (%s): a reference-kernel step runs one node, its group "
                           "has %d",
                           n->name, op, gr->n_nodes);
    for (int i = 0; i < t->n_args; i++) {
        const kiln_value *v = g->values[t->arg_values[i]];
        const kiln_tensor_entry *e = &l->tensors[t->args[i]];
        if (v->layout.kind != KILN_LAYOUT_ROW_MAJOR || e->owned ||
            e->nbytes != (int64_t)kiln_dtype_size(v->dtype) * kiln_shape_numel(&v->shape))
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "node '%s' (%s) has no kernel template, and its reference kernel "
                               "needs dense row-major tensors, but '%s' is stored as %s",
                               n->name, op, v->name, e->layout);
    }
    kiln_sb b = {0};
    kiln_sb_printf(&b, "kiln-ref 1\nop %s\nin %d", op, n->n_inputs);
    for (int k = 0; k < n->n_inputs; k++) {
        int a = n->inputs[k] >= 0 ? kiln_task_arg(t, n->inputs[k]) : -1;
        if (n->inputs[k] >= 0 && (a < 0 || a >= t->n_in)) {
            kiln_sb_free(&b);
            return kiln_errorf(err, KILN_ERR_INTERNAL, "node '%s' (%s): input %d is no argument",
                               n->name, op, k);
        }
        if (a < 0)
            kiln_sb_puts(&b, " -");
        else
            kiln_sb_printf(&b, " %d", a);
    }
    kiln_sb_printf(&b, "\nout %d", n->n_outputs);
    for (int k = 0; k < n->n_outputs; k++) {
        int a = kiln_task_arg(t, n->outputs[k]);
        if (a < t->n_in) {
            kiln_sb_free(&b);
            return kiln_errorf(err, KILN_ERR_INTERNAL, "node '%s' (%s): output %d is no argument",
                               n->name, op, k);
        }
        kiln_sb_printf(&b, " %d", a);
    }
    kiln_sb_printf(&b, "\nattrs %d\n", n->n_attrs);
    for (int k = 0; k < n->n_attrs; k++)
        attr(&b, &n->attrs[k]);
    kiln_sb_printf(&b, "args %d\n", t->n_args);
    for (int i = 0; i < t->n_args; i++) {
        const kiln_value *v = g->values[t->arg_values[i]];
        kiln_sb_printf(&b, "%s %d", kiln_dtype_name(v->dtype), v->shape.rank);
        for (int d = 0; d < v->shape.rank; d++)
            kiln_sb_printf(&b, " %lld", (long long)v->shape.dims[d]);
        kiln_sb_puts(&b, "\n");
    }
    *text = kiln_sb_take(&b);
    if (!*text)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory describing node '%s'",
                           n->name);
    return KILN_OK;
}

/* The template's emit: the node's text (a fallback step has no C kernel;
 * kiln_compile does not compile it). */
kiln_status kiln_emit_ref(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    char *text = NULL;
    kiln_status s = kiln_ref_node_text(l, t, &text, NULL);
    if (s == KILN_OK)
        kiln_sb_puts(b, text);
    free(text);
    return s;
}
