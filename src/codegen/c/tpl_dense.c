/* codegen/c/tpl_dense.c: Y = alpha * A x B + beta * C with B constant (Gemm,
 * or MatMul with a constant 2-D B, A flattened to [M, K]), run by the dense
 * kernel header (kiln_kernels_dense.h): B is scaled by alpha and packed into
 * column blocks [N/nb][K][nb] at compile time by the header's own packing
 * function; the generated file is the params literal and one call per task.
 *
 * nb is the target's vector width (16 AVX-512, 8 AVX2/generic); the knobs
 * are the header's (m_tile x n_tile register tile, m_group x n_group task
 * split, the loop order inside a task), analytic defaults from
 * kiln_dense_default_params.
 *
 * Epilogue. The group's elementwise nodes after the anchor are applied in
 * two parts. The longest prefix the header does on the registers before its
 * only store becomes its flags: a bias (Gemm's C with beta, or an Add of a
 * scalar / per-column constant), a residual Add of a same-shaped tensor, Relu,
 * Clip, in that order. The rest (GELU pieces, Sigmoid, scales...) becomes a
 * static function in the generated file that the header calls on each
 * register tile right after storing it (its epi callback): gcc inlines it,
 * the tile is still in L1, and the cost per element is the expression's plus
 * one reload, against a K-long dot product. Should a later node read an
 * intermediate value of the prefix (fuse.c's generic groups read only the
 * previous node's output today), the prefix ends where that value is its
 * last. Zero-sized dimensions are left to the reference fallback.
 *
 * Rows at run time. In a graph whose input shapes were bound from symbolic
 * dims (pass ctx shapes_bound: a VM specialization of one input-shape
 * class), the rows M are the kernel's one run-time extent: the task's
 * extent (the step's kiln_abi_step.extent, read from kiln_rt.extent), the
 * knobs the defaults for RT_ROWS rows, every row-tile width up to m_tile
 * compiled, and M written nowhere in the source, so that the same layer
 * at another sequence length or image size is the same kernel, found in
 * the object cache (its name is its source's hash). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_dense.h"
#include "lower/geom.h"
#include "lower/knobs.h"
#include "util/error.h"

/* The rows whose analytic knobs a rows-at-run-time kernel takes: the
 * knobs are within 1-2% of a specialized kernel's from 32 to 512 rows
 * (docs/VM.md). */
#define RT_ROWS KILN_RT_ROWS

static bool match(const kiln_target *tg, const kiln_graph *g, const kiln_node *n,
                  kiln_epi_kind *epi)
{
    (void)tg;
    kiln_dense d;
    if ((n->op != KILN_OP_GEMM && n->op != KILN_OP_MATMUL) || !kiln_geom_dense(g, n, &d) ||
        d.M < 1 || d.N < 1 || d.K < 1 || d.M > INT_MAX || d.N > INT_MAX || d.K > INT_MAX)
        return false;
    *epi = KILN_EPI_KIND_ANY;
    return true;
}

/* The index in the group's node list of the node producing value v, or -1. */
static int group_producer(const kiln_graph *g, const kiln_group *gr, int v)
{
    for (int i = 0; i < gr->n_nodes; i++)
        if (g->nodes[gr->nodes[i]]->outputs[0] == v)
            return i;
    return -1;
}

/* The header's part of the epilogue: sets p's epilogue flags, bias kind,
 * beta and clip bounds, *res_arg (the residual's arg, -1: none) and *from
 * (the first node it leaves to the generated epilogue); returns the arg of
 * the bias (-1: none). Nodes [1, stop) are candidates; see the top. */
static int header_prefix(const kiln_lowered *l, const kiln_task *t, const kiln_dense *d,
                         kiln_dense_params *p, int stop, int *res_arg, int *from)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    const kiln_node *anchor = g->nodes[t->anchor];
    const kiln_value *y = g->values[gr->outputs[0]];
    int bias_arg = -1;
    p->epilogue = 0;
    p->bias_kind = KILN_DENSE_BIAS_COL;
    p->beta = 1.0f;
    p->clip_min = -3.4028234663852886e38f;
    p->clip_max = 3.4028234663852886e38f;
    *res_arg = -1;
    if (d->bias_kind) {
        static const int kinds[] = {0, KILN_DENSE_BIAS_SCALAR, KILN_DENSE_BIAS_COL,
                                    KILN_DENSE_BIAS_FULL, KILN_DENSE_BIAS_ROW};
        p->epilogue |= KILN_EPI_BIAS;
        p->bias_kind = kinds[d->bias_kind];
        p->beta = d->beta;
        bias_arg = kiln_task_arg(t, anchor->inputs[2]);
    }
    int i = 1;
    for (; i < stop && i < gr->n_nodes; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        int prev = g->nodes[gr->nodes[i - 1]]->outputs[0];
        int e = p->epilogue;
        if (m->op == KILN_OP_ADD && m->n_inputs == 2 && (m->inputs[0] == prev) != (m->inputs[1] == prev)) {
            int other = m->inputs[0] == prev ? m->inputs[1] : m->inputs[0];
            const kiln_value *o = g->values[other];
            int64_t on = kiln_shape_numel(&o->shape);
            bool f32 = o->dtype == KILN_DTYPE_FLOAT32 && group_producer(g, gr, other) < 0;
            bool per_col = o->kind == KILN_VALUE_CONST && o->layout.kind == KILN_LAYOUT_ROW_MAJOR &&
                           (on == 1 || (on == d->N && o->shape.dims[o->shape.rank - 1] == d->N));
            if (f32 && per_col && !(e & (KILN_EPI_BIAS | KILN_EPI_RELU | KILN_EPI_CLIP))) {
                p->epilogue |= KILN_EPI_BIAS;
                p->bias_kind = on == 1 ? KILN_DENSE_BIAS_SCALAR : KILN_DENSE_BIAS_COL;
                bias_arg = kiln_task_arg(t, other);
            } else if (f32 && kiln_shape_equal(&o->shape, &y->shape) &&
                       kiln_layout_equal(o->layout, y->layout) &&
                       !(e & (KILN_EPI_RESIDUAL | KILN_EPI_RELU | KILN_EPI_CLIP))) {
                p->epilogue |= KILN_EPI_RESIDUAL;
                *res_arg = kiln_task_arg(t, other);
            } else {
                break;
            }
        } else if (m->op == KILN_OP_RELU && !(e & (KILN_EPI_RELU | KILN_EPI_CLIP))) {
            p->epilogue |= KILN_EPI_RELU;
        } else if (m->op == KILN_OP_CLIP && m->n_inputs == 1 && !(e & KILN_EPI_CLIP)) {
            p->epilogue |= KILN_EPI_CLIP;
            p->clip_min = kiln_attr_float(m, "min", p->clip_min);
            p->clip_max = kiln_attr_float(m, "max", p->clip_max);
        } else {
            break;
        }
    }
    *from = i;
    return bias_arg;
}

/* header_prefix, shortened until no node after it reads one of its
 * intermediate values (the generated epilogue only sees the last); sets
 * t->residual_arg and t->epi_from. */
static void header_epilogue(const kiln_lowered *l, kiln_task *t, const kiln_dense *d,
                            kiln_dense_params *p)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    int stop = gr->n_nodes;
    for (;;) {
        int from, cut;
        header_prefix(l, t, d, p, stop, &t->residual_arg, &from);
        t->epi_from = cut = from;
        for (int j = from; j < gr->n_nodes; j++) {
            const kiln_node *m = g->nodes[gr->nodes[j]];
            for (int k = 0; k < m->n_inputs; k++) {
                int i = m->inputs[k] >= 0 ? group_producer(g, gr, m->inputs[k]) : -1;
                if (i >= 0 && i < from - 1 && i + 1 < cut)
                    cut = i + 1;
            }
        }
        if (cut == from)
            return;
        stop = cut;
    }
}

/* The next analytic picks after the default d (kiln_knob_pick): the three
 * register tiles kiln_dense_tile_cost ranks next, each with the task knobs
 * the model gives it, then the default in the other loop order. */
static void add_picks(kiln_task *t, const kiln_dense_params *d, int64_t l2)
{
    const int isa = kiln_conv_model_isa(d->nb);
    const int64_t nbn = kiln_k_cdiv(d->n, d->nb);
    kiln_tile_rank r[KILN_CONV_MAXO * KILN_CONV_MAXT];
    int n = 0;
    for (int o = 1; o <= KILN_CONV_MAXO; o++)
        for (int x = 1; kiln_conv_tile_ok(isa, d->m, nbn, x, o); x++)
            r[n++] = (kiln_tile_rank){x, o, kiln_dense_tile_cost(d->m, nbn, x, o)};
    kiln_tiles_rank(r, n);
    for (int j = 0, tiles = 0; j < n && tiles < KILN_MAX_PICKS - 1; j++) {
        kiln_dense_params c = *d;
        c.m_tile = r[j].t;
        c.n_tile = r[j].o;
        kiln_dense_task_knobs(&c, l2, 2);
        tiles += kiln_knob_pick(t, &c);
    }
    kiln_dense_params c = *d;
    c.order = !d->order;
    kiln_knob_pick(t, &c);
}

static kiln_status space(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_target *tg = &l->ctx->target;
    kiln_dense d;
    kiln_geom_dense(g, n, &d);
    kiln_dense_params *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->params = p;
    t->params_size = sizeof *p;
    *p = (kiln_dense_params){.m = (int)d.M, .k = (int)d.K, .n = (int)d.N, .nb = tg->vec,
                             .w_kn = !d.trans_b, .alpha = d.alpha};
    header_epilogue(l, t, &d, p);
    if (!kiln_dense_supported(p))
        return kiln_errorf(err, KILN_ERR_INTERNAL, "dense '%s': the header rejects it", n->name);
    if (l->ctx->shapes_bound) { /* rows at run time (see the top) */
        t->extent = d.M;
        p->m = RT_ROWS;
    }
    kiln_dense_default_params(p, tg->l1_bytes, tg->l2_bytes, 2);
    p->m = (int)d.M;
    int64_t nbn = (d.N + p->nb - 1) / p->nb;
    int max_t = kiln_conv_max_t(kiln_conv_model_isa(p->nb), 1);
    kiln_knob *k = kiln_knob_add(t, "m_tile", KILN_KNOB_TILE, p->m_tile,
                                 (int)offsetof(kiln_dense_params, m_tile));
    for (int v = 1; v <= max_t && v <= d.M; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->m_tile);
    k = kiln_knob_add(t, "n_tile", KILN_KNOB_TILE, p->n_tile,
                      (int)offsetof(kiln_dense_params, n_tile));
    for (int v = 1; v <= KILN_CONV_MAXO && v <= nbn; v++)
        kiln_knob_choice(k, v);
    kiln_knob_choice(k, p->n_tile);
    k = kiln_knob_add(t, "m_group", KILN_KNOB_TILE, p->m_group,
                      (int)offsetof(kiln_dense_params, m_group));
    kiln_knob_pow2(k, p->m, true);
    k = kiln_knob_add(t, "n_group", KILN_KNOB_TILE, p->n_group,
                      (int)offsetof(kiln_dense_params, n_group));
    kiln_knob_pow2(k, (int)nbn, true);
    k = kiln_knob_add(t, "order", KILN_KNOB_ORDER, p->order,
                      (int)offsetof(kiln_dense_params, order));
    kiln_knob_choice(k, 0);
    kiln_knob_choice(k, 1);
    add_picks(t, p, tg->l2_bytes);
    t->flops = kiln_dense_flops(p);
    return KILN_OK;
}

static kiln_status pack(kiln_lowered *l, kiln_task *t, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *bv = g->values[n->inputs[1]];
    const kiln_dense_params *p = t->params;
    int64_t floats = kiln_dense_packed_weight_floats(p);
    char lb[32], key[160];
    snprintf(lb, sizeof lb, "KN%dn", p->nb);
    /* what kiln_dense_pack_weights reads besides the weights */
    snprintf(key, sizeof key, "dense k%d n%d nb%d w_kn%d alpha%a", p->k, p->n, p->nb, p->w_kn,
             (double)p->alpha);
    bool hit = false;
    kiln_status s = kiln_tpl_packed_before(l, t, bv, lb, key, floats, &hit, err);
    if (s != KILN_OK || hit)
        return s;
    float *packed;
    if ((s = kiln_tpl_pack_buffer(n, floats, &packed, err)) != KILN_OK)
        return s;
    kiln_dense_pack_weights(p, bv->data, packed);
    return kiln_tpl_use_packed_key(l, t, bv, lb, packed, floats, key, err);
}

/* The generated epilogue callback (kiln_dense_epi_fn): the group's nodes
 * from t->epi_from on, per element of a register tile, operands read at the
 * flat output index. */
static void emit_epilogue_fn(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    kiln_sb_puts(b, "static inline void epi_(void *ctx_, float *y_, int64_t ldy_, int64_t row0_,\n"
                    "                        int rows_, int64_t col0_, int cols_)\n{\n"
                    "    void *const *args = (void *const *)ctx_;\n");
    for (int i = 0; i < t->n_in; i++)
        kiln_sb_printf(b, "    const float *a%d = (const float *)args[%d];\n    (void)a%d;\n", i, i, i);
    kiln_sb_puts(b, "    for (int r_ = 0; r_ < rows_; r_++)\n"
                    "    for (int j_ = 0; j_ < cols_; j_++) {\n"
                    "        const int64_t idx = (row0_ + r_) * ldy_ + col0_ + j_;\n"
                    "        (void)idx;\n"
                    "        float v = y_[r_ * ldy_ + j_];\n");
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "        y_[r_ * ldy_ + j_] = v;\n    }\n}\n\n");
}

static kiln_status emit(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_dense_params *p = t->params;
    kiln_dense d;
    kiln_geom_dense(g, n, &d);
    /* only the tile widths the loops take are instantiated (the header's
     * KILN_DENSE_TILES_*) */
    const bool rt = t->extent > 0;
    uint32_t tm, om;
    kiln_dense_params ps = *p;
    if (rt)
        ps.m = RT_ROWS;
    kiln_dense_tile_sets(&ps, kiln_conv_model_isa(p->nb), &tm, &om);
    if (rt) /* any remainder of any row count */
        tm = (uint32_t)((1ull << (kiln_dense_plan_isa(&ps, kiln_conv_model_isa(p->nb)).T + 1)) - 2);
    kiln_emit_prologue_tiles(b, l, t, "KILN_DENSE", tm, om, 0, "kiln_kernels_dense.h");
    kiln_sb_printf(b,
                   "static const kiln_dense_params P_ = {\n"
                   "    .m = %d, .k = %d, .n = %d, .nb = %d, .w_kn = %d, .alpha = %af,\n"
                   "    .epilogue = %d, .bias_kind = %d, .beta = %af, .clip_min = %af, .clip_max = %af,\n"
                   "    .m_tile = %d, .n_tile = %d, .m_group = %d, .n_group = %d, .order = %d,\n"
                   "    .k_block = %d,\n};\n\n",
                   rt ? 0 : p->m, p->k, p->n, p->nb, p->w_kn, (double)p->alpha, p->epilogue,
                   p->bias_kind,
                   (double)p->beta, (double)p->clip_min, (double)p->clip_max, p->m_tile,
                   p->n_tile, p->m_group, p->n_group, p->order, p->k_block);
    if (rt) {
        /* the rows, and with the default knobs the loop order they pick for
         * these rows (kiln_dense_task_knobs: columns outer while a task's X
         * stays in L2): at 37 tokens BERT's 3072 -> 768 layers ran 15% slower
         * in the order 128 rows pick */
        kiln_sb_puts(b, "static inline void rt_rows_(kiln_dense_params *P, int64_t m)\n{\n"
                        "    P->m = (int)m;\n");
        if (!t->source || strcmp(t->source, "default") == 0)
            kiln_sb_printf(b,
                           "    const int64_t mg_ = P->m_group > 0 && P->m_group < P->m ? P->m_group : P->m;\n"
                           "    P->order = mg_ * kiln_dense_kc(P) * 4 <= %lldll;\n",
                           (long long)(l->ctx->target.l2_bytes / 2));
        kiln_sb_puts(b, "}\n\n");
    }
    bool hook = kiln_task_has_epilogue(l, t);
    if (hook)
        emit_epilogue_fn(b, l, t);
    /* the bias: the Gemm's C, or the Add the header took (the same prefix) */
    kiln_dense_params tmp = *p;
    int res_arg, from;
    int ba = header_prefix(l, t, &d, &tmp, t->epi_from, &res_arg, &from);
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (rt) /* the rows: the step's extent */
        kiln_sb_puts(b, "    kiln_dense_params P = P_;\n    rt_rows_(&P, k_->rt->extent);\n");
    kiln_sb_printf(b, "    kiln_dense_run_epi(%s, a%d, a%d, ", rt ? "&P" : "&P_", xa, wa);
    kiln_emit_arg_or_null(b, ba, false);
    kiln_sb_puts(b, ", ");
    kiln_emit_arg_or_null(b, t->residual_arg, false);
    kiln_sb_printf(b, ", o0, begin_, end_, %s, (void *)args);\n}\n", hook ? "epi_" : "NULL");
    if (rt) {
        kiln_sb_printf(b,
                       "\nvoid %s(void *const *args, const kiln_rt *rt)\n{\n"
                       "    kiln_dense_params P = P_;\n"
                       "    rt_rows_(&P, rt->extent);\n"
                       "    if (P.m < 1)\n        return;\n"
                       "    const int64_t n_ = kiln_dense_tasks(&P);\n"
                       "    kiln_kctx_ k_ = {args, rt};\n"
                       "    rt->parallel_for(rt->pool, n_, KILN_MAX_(1, n_ / (2 * KILN_MAX_(1, "
                       "rt->num_threads))), task_, &k_);\n}\n",
                       t->fn_name);
        return KILN_OK;
    }
    /* chunks of several tasks, two per thread (the pool's default is four
     * one-task chunks): a thread runs adjacent tasks, each prefetching its
     * successor's first weights (kiln_dense_cols), and the pool still
     * balances; vit-b-16's GEMMs took 2-3% less time in the network on 2
     * threads than with one-task chunks */
    kiln_emit_entry_grain(b, t, "kiln_dense_tasks(&P_)",
                          "KILN_MAX_(1, kiln_dense_tasks(&P_) / (2 * KILN_MAX_(1, rt->num_threads)))");
    return KILN_OK;
}

/* The whole-space cost model (template.h `cost`; kiln tune ranks the space
 * by it), in the tile model's units: kiln_dense_tile_cost per k step times
 * K for each task, plus 500 per task (its call and its first weights).
 * The entry deals chunks of tasks/(2 x threads) tasks to 2 threads (the
 * model's count, as the defaults'): the time is the most chunks a thread
 * gets, each at the average task's cost, plus a tenth of a chunk (the
 * threads' uneven finish), at least the biggest task.
 * Then the cache: rows outer (order 0) reads the task's column group of
 * packed weights again for each of its row tiles, columns outer (order 1)
 * one column tile's: x1.3 when that exceeds the L2, x1.05 half of it
 * (vit-b-16's 3072 -> 768 layer, 590 KB of weights per column tile on a
 * 1 MB L2, ran 30% slower with tiles of 393 KB and smaller tasks). Columns outer
 * also reads the task's rows of X again for each column tile: x1.1 when
 * they exceed half the L2 (x1.02 with one column tile: the prefetched
 * tile competes with them; vit-b-16's 197x3072 by 3072x768 lost 2%).
 * These are kiln_dense_task_knobs' rules, as costs. */
static double cost(const void *params, const kiln_target *tg)
{
    const kiln_dense_params *p = params;
    const kiln_dense_plan q = kiln_dense_plan_isa(p, kiln_conv_model_isa(p->nb));
    const int threads = 2;
    double total = 0, biggest = 0;
    for (int r = 0; r < 2; r++) {
        int64_t rows = r ? p->m % q.m_group : q.m_group, nr = r ? rows > 0 : p->m / q.m_group;
        for (int c = 0; c < 2 && nr; c++) {
            int64_t cols = c ? q.nbn % q.n_group : q.n_group, ncol = c ? cols > 0 : q.nbn / q.n_group;
            if (!ncol)
                continue;
            int tt = q.T < rows ? q.T : (int)rows, oo = q.O < cols ? q.O : (int)cols;
            double task = kiln_dense_tile_cost(rows, cols, tt, oo) * p->k + 500.0;
            total += task * (double)(nr * ncol);
            biggest = task > biggest ? task : biggest;
        }
    }
    int64_t tasks = q.n_mg * q.n_ng, chunk = tasks / (2 * threads);
    chunk = chunk > 1 ? chunk : 1;
    int64_t chunks = (tasks + chunk - 1) / chunk;
    double chunk_cost = (double)chunk * total / (double)tasks;
    double span = (double)((chunks + threads - 1) / threads) * chunk_cost + 0.1 * chunk_cost;
    span = span > biggest ? span : biggest;
    const double kc = (double)kiln_dense_kc(p), half_l2 = 0.5 * (double)tg->l2_bytes;
    const double wcol = kc * p->nb * 4, x_rows = (double)q.m_group * kc * 4;
    /* the weights reused across a task's row tiles: its column group's
     * (rows outer) or one column tile's (columns outer) */
    const double reused = (p->order ? q.O : q.n_group) * wcol;
    if (q.m_group > q.T && reused > half_l2)
        span *= reused > 2 * half_l2 ? 1.3 : 1.05;
    /* columns outer: the task's rows of X reused across its column tiles,
     * and competing with the prefetched tile */
    if (p->order && x_rows > half_l2)
        span *= q.n_group > q.O ? 1.1 : 1.02;
    return span;
}

const kiln_template kiln_tpl_dense = {
    .name = "dense",
    .match = match,
    .space = space,
    .pack = pack,
    .emit = emit,
    .cost = cost,
};
