/* codegen/c/tpl_pool2d.c: Max/AveragePool on NCHW{b}c or NCHW (the
 * emitter: emit_pool.c). Knob: rows_per_task (output rows per task). */
#include "codegen/c/codegen.h"
#include "lower/geom.h"
#include "lower/knobs.h"

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_win2d w;
    if ((n->op != KILN_OP_MAXPOOL && n->op != KILN_OP_AVERAGEPOOL) || n->n_outputs != 1 ||
        !kiln_tpl_f32(g, n->inputs[0]) || !kiln_geom_win2d(g, n, &w))
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    (void)err;
    kiln_win2d w;
    kiln_geom_win2d(l->ctx->g, l->ctx->g->nodes[t->anchor], &w);
    t->flops = (double)w.n * w.c * w.oh * w.ow * w.kh * w.kw;
    kiln_knobs_rows(t, w.n * ((w.c + w.bin - 1) / w.bin), w.oh, w.ow * w.kh * w.kw * w.bin);
    return KILN_OK;
}

const kiln_template kiln_tpl_pool2d = {
    .name = "pool2d",
    .match = match,
    .space = space,
    .emit = kiln_emit_pool,
};
