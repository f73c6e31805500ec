/* target/query.c: the questions passes and lowering ask a target's template
 * set (target/template.h). Every CPU target is served by the C template set
 * (codegen/c/templates.def); a GPU target would add its own set here. */
#include <string.h>

#include "target/template.h"

/* codegen/c/registry.c */
extern const kiln_template_set kiln_c_template_set;

/* A node reading or writing an empty tensor (a dim of 0): no template takes
 * it, the reference kernel (which handles empty extents) does, so templates
 * may assume every extent is positive (a MatMul with K = 0 divided by zero in
 * the dense geometry; a conv with an empty batch failed the blocked
 * template's own checks). */
static bool empty_node(const kiln_graph *g, const kiln_node *n)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && kiln_shape_numel(&g->values[n->inputs[k]]->shape) == 0)
            return true;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && kiln_shape_numel(&g->values[n->outputs[k]]->shape) == 0)
            return true;
    return false;
}

const kiln_template_set *kiln_target_templates(const kiln_target *tg)
{
    (void)tg;
    return &kiln_c_template_set;
}

const kiln_template *kiln_target_template(const kiln_target *tg, const kiln_graph *g,
                                          const kiln_node *n, kiln_epi_kind *epi)
{
    const kiln_template_set *set = kiln_target_templates(tg);
    kiln_epi_kind e = KILN_EPI_KIND_NONE;
    for (int i = 0; i < set->n_tpl && !empty_node(g, n); i++) {
        e = KILN_EPI_KIND_NONE;
        if (set->tpl[i]->match && set->tpl[i]->match(tg, g, n, &e)) {
            if (epi)
                *epi = e;
            return set->tpl[i];
        }
    }
    if (epi)
        *epi = KILN_EPI_KIND_NONE;
    return set->fallback;
}

const kiln_template *kiln_target_pair_template(const kiln_target *tg, const kiln_graph *g,
                                               const int *nodes, int n_nodes,
                                               const kiln_node *next, kiln_epi_kind *epi)
{
    const kiln_template_set *set = kiln_target_templates(tg);
    if (empty_node(g, next))
        return NULL;
    for (int i = 0; i < set->n_tpl; i++) {
        kiln_epi_kind e = KILN_EPI_KIND_NONE;
        if (set->tpl[i]->pair && set->tpl[i]->pair(tg, g, nodes, n_nodes, next, &e)) {
            if (epi)
                *epi = e;
            return set->tpl[i];
        }
    }
    return NULL;
}

const kiln_template *kiln_target_prologue_template(const kiln_target *tg, const kiln_graph *g,
                                                   const int *nodes, int n_nodes,
                                                   const kiln_node *n, kiln_epi_kind *epi)
{
    const kiln_template *t = kiln_target_template(tg, g, n, NULL);
    kiln_epi_kind e = KILN_EPI_KIND_NONE;
    if (!t->prologue || !t->prologue(tg, g, nodes, n_nodes, n, &e))
        return NULL;
    if (epi)
        *epi = e;
    return t;
}

bool kiln_target_has_template(const kiln_target *tg, const kiln_graph *g, const kiln_node *n)
{
    return kiln_target_template(tg, g, n, NULL) != kiln_target_templates(tg)->fallback;
}

bool kiln_target_layout(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                        kiln_layout in, kiln_tpl_layout *out)
{
    const kiln_template_set *set = kiln_target_templates(tg);
    if (empty_node(g, n))
        return false;
    for (int i = 0; i < set->n_tpl; i++) {
        *out = (kiln_tpl_layout){0}; /* a hook sets algo only to ask for one */
        if (set->tpl[i]->layout && set->tpl[i]->layout(tg, g, n, in, out))
            return true;
    }
    return false;
}

int kiln_target_blocks(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                       kiln_layout in, kiln_tpl_block *out)
{
    const kiln_template_set *set = kiln_target_templates(tg);
    if (empty_node(g, n))
        return 0;
    memset(out, 0, sizeof *out * KILN_TPL_MAX_BLOCKS); /* a hook sets algo only to ask */
    for (int i = 0; i < set->n_tpl; i++) {
        const kiln_template *t = set->tpl[i];
        if (!t->layout || !t->layout(tg, g, n, in, &out[0].lay))
            continue;
        out[0].cost = 1.0;
        if (!t->blocks)
            return 1;
        int k = t->blocks(tg, g, n, in, out);
        if (k > 0)
            return k;
        t->layout(tg, g, n, in, &out[0].lay); /* a hook that declined: layout()'s */
        out[0].cost = 1.0;
        return 1;
    }
    return 0;
}

bool kiln_target_epilogue_op(const kiln_target *tg, const kiln_graph *g, const kiln_node *n)
{
    return !empty_node(g, n) && kiln_target_templates(tg)->expr_op(g, n);
}

const kiln_template *kiln_target_template_named(const kiln_target *tg, const char *name)
{
    const kiln_template_set *set = kiln_target_templates(tg);
    for (int i = 0; i < set->n_tpl; i++)
        if (!strcmp(set->tpl[i]->name, name))
            return set->tpl[i];
    return !strcmp(set->fallback->name, name) ? set->fallback : NULL;
}

int kiln_epilogue_bcast_kind(const kiln_shape *v, const kiln_shape *y, kiln_layout l)
{
    if (kiln_shape_numel(v) == 1)
        return 1;
    if (kiln_shape_equal(v, y))
        return 4;
    if (v->rank > y->rank || y->rank < 2)
        return 0;
    int diff = y->rank - v->rank;
    bool chan = true, last = true;
    for (int d = 0; d < y->rank; d++) {
        int64_t vd = d >= diff ? v->dims[d - diff] : 1;
        if (d == 1 ? vd != y->dims[1] : vd != 1)
            chan = false;
        if (d == y->rank - 1 ? vd != y->dims[d] : vd != 1)
            last = false;
    }
    if (chan)
        return 2;
    if (last && l.kind == KILN_LAYOUT_ROW_MAJOR)
        return 3;
    return 0;
}
