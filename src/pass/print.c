/* pass/print.c: a readable dump of the IR between passes
 * (`kiln compile --print-ir-after PASS`). One line per node:
 *
 *   [g12] %57 = Conv(%41, %w3, %w4) group=1 pads=[1,1,1,1] strides=[1,1]
 *         -> float32[1,64,56,56] NCHW16c @arena+802816  # layer1.0.conv1
 *
 * %wN are constants (their shapes and layouts are listed once at the top),
 * [gK] the fused group once `fuse` ran, @arena+offset the storage once
 * `plan-memory` ran ("=%v" when the value shares another value's buffer). */
#include <stdio.h>
#include <string.h>

#include "pass/pass.h"

static void print_attr(FILE *f, const kiln_attr *a)
{
    fprintf(f, " %s=", a->name);
    switch (a->type) {
    case KILN_ATTR_INT:
        fprintf(f, "%lld", (long long)a->i);
        break;
    case KILN_ATTR_FLOAT:
        fprintf(f, "%g", (double)a->f);
        break;
    case KILN_ATTR_STRING:
        fprintf(f, "\"%s\"", a->s);
        break;
    case KILN_ATTR_INTS:
        fputc('[', f);
        for (int i = 0; i < a->n && i < 16; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        fprintf(f, "%s]", a->n > 16 ? ",..." : "");
        break;
    case KILN_ATTR_FLOATS:
        fputc('[', f);
        for (int i = 0; i < a->n && i < 16; i++)
            fprintf(f, "%s%g", i ? "," : "", (double)a->floats[i]);
        fprintf(f, "%s]", a->n > 16 ? ",..." : "");
        break;
    }
}

static void print_value_type(FILE *f, const kiln_value *v)
{
    char sb[160], lb[32];
    kiln_shape_str(&v->shape, sb, sizeof sb);
    fprintf(f, "%s%s %s", kiln_dtype_name(v->dtype), sb,
            kiln_layout_str(&v->shape, v->layout, lb, sizeof lb));
}

static void print_ref(FILE *f, const kiln_graph *g, int id)
{
    if (id < 0) {
        fputs("_", f);
        return;
    }
    fprintf(f, "%s%d", g->values[id]->kind == KILN_VALUE_CONST ? "%w" : "%", id);
}

static void print_storage(FILE *f, const kiln_pass_ctx *ctx, int id)
{
    if (!ctx->storage || ctx->storage[id].root < 0)
        return;
    const kiln_storage *st = &ctx->storage[id];
    fprintf(f, " @arena+%lld", (long long)st->offset);
    if (st->root != id)
        fprintf(f, "(=%%%d)", st->root);
}

void kiln_pass_print(const kiln_pass_ctx *ctx, FILE *f, const char *title)
{
    const kiln_graph *g = ctx->g;
    int n_const = 0;
    int64_t const_bytes = 0;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->kind == KILN_VALUE_CONST) {
            n_const++;
            const_bytes += kiln_layout_nbytes(g->values[i]->dtype, &g->values[i]->shape,
                                              g->values[i]->layout);
        }
    fprintf(f, "== IR after %s: graph '%s': %d nodes, %d values, %d constants (%.2f MB)", title,
            g->name ? g->name : "", g->n_nodes, g->n_values, n_const, (double)const_bytes / 1e6);
    if (ctx->groups)
        fprintf(f, ", %d groups", ctx->n_groups);
    if (ctx->storage)
        fprintf(f, ", arena %.2f MB", (double)ctx->arena_bytes / 1e6);
    fputc('\n', f);
    for (int i = 0; i < g->n_values; i++) {
        const kiln_value *v = g->values[i];
        if (v->kind == KILN_VALUE_CONST) {
            fprintf(f, "  const %%w%d : ", i);
            print_value_type(f, v);
            fprintf(f, "  # %s\n", v->name);
        }
    }
    for (int i = 0; i < g->n_inputs; i++) {
        const kiln_value *v = g->values[g->inputs[i]];
        fprintf(f, "  input %%%d : ", v->id);
        print_value_type(f, v);
        print_storage(f, ctx, v->id);
        fprintf(f, "  # %s\n", v->name);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (ctx->group_of_node) {
            const kiln_group *gr = &ctx->groups[ctx->group_of_node[n->id]];
            static const char *const kinds[] = {"", " view", " concat-in-place"};
            fprintf(f, "  [g%d%s] ", gr->id, kinds[gr->kind]);
        } else {
            fputs("  ", f);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            if (k)
                fputs(", ", f);
            print_ref(f, g, n->outputs[k]);
        }
        fprintf(f, " = %s(", kiln_op_name(n->op));
        for (int k = 0; k < n->n_inputs; k++) {
            if (k)
                fputs(", ", f);
            print_ref(f, g, n->inputs[k]);
        }
        fputc(')', f);
        for (int k = 0; k < n->n_attrs; k++)
            print_attr(f, &n->attrs[k]);
        for (int k = 0; k < n->n_outputs; k++) {
            const kiln_value *v = g->values[n->outputs[k]];
            fputs(k ? ", " : " -> ", f);
            print_value_type(f, v);
            print_storage(f, ctx, v->id);
        }
        fprintf(f, "  # %s\n", n->name);
    }
    fputs("  outputs:", f);
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, " %%%d (%s)", g->outputs[i], g->values[g->outputs[i]]->name);
    fputc('\n', f);
}
