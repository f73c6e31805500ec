/* pass/layout_dp.c: graph-level choice of conv block sizes, a dynamic
 * programme over each chain of convs that have block choices (AutoTVM's
 * graph tuner, with kiln's analytic costs).
 *
 * Algorithm:
 *  1. One dry alter-layout walk with every default (kiln_alter_layout_eval)
 *     says which nodes are offered more than one block choice
 *     (template.blocks): the decision nodes.
 *  2. Chains: decision nodes whose blocks can meet are joined (union-find).
 *     From each decision node's output the data flow is followed through
 *     the ops alter-layout passes blocks through (unary and binary
 *     elementwise ops, pools, Pad, Concat); a decision node reached is
 *     joined and the walk stops there; a pass-through node reached from two
 *     decision nodes (a residual Add, a Concat) joins them. Other consumers
 *     read row-major whatever the blocks, so they join nothing.
 *  3. Per chain, its decision nodes d_1..d_m in node (topological) order,
 *     Viterbi: best[i][b] is the cheapest assignment of d_1..d_i ending in
 *     choice b, found as the minimum over the choices a of d_{i-1} of the
 *     whole graph's cost with d_1..d_{i-1} as best[i-1][a] gives them, d_i
 *     = b, and everything after at its default. A cost is one dry walk
 *     (layout_dp.h: compute at each choice's cost plus the bytes every
 *     transform moves), so what a disagreement creates (transforms at a
 *     residual Add, a Concat of partial blocks, a re-blocking depthwise) is
 *     counted exactly as alter-layout would build it; the DP is exact where
 *     a chain's costs couple only neighbouring decisions and otherwise a
 *     good heuristic whose every candidate is costed exactly.
 *  4. A chain takes its best assignment only when it is strictly cheaper
 *     than its defaults (others as decided so far): untuned builds are
 *     unchanged unless the DP finds a cheaper chain.
 * Walks: sum over the chains of K_{i-1} x K_i (K <= KILN_TPL_MAX_BLOCKS);
 * a graph needing more than KILN_LAYOUT_DP_MAX_WALKS keeps its defaults. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pass/layout_dp.h"
#include "util/error.h"

#define KILN_LAYOUT_DP_MAX_WALKS 20000

void kiln_layout_plan_free(kiln_layout_plan *p)
{
    if (!p)
        return;
    free(p->choice);
    free(p->chains);
    memset(p, 0, sizeof *p);
}

static int uf_find(int *par, int x)
{
    while (par[x] != x) {
        par[x] = par[par[x]];
        x = par[x];
    }
    return x;
}

static void uf_join(int *par, int a, int b)
{
    a = uf_find(par, a);
    b = uf_find(par, b);
    if (a != b)
        par[a < b ? b : a] = a < b ? a : b; /* the smaller id is the root */
}

/* Ops alter-layout may pass blocks through (see its top). */
static bool passes_blocks(kiln_op op)
{
    const kiln_op_info *info = kiln_op_get(op);
    if (info->pattern == KILN_PATTERN_ELEMWISE && op != KILN_OP_CAST && op != KILN_OP_IDENTITY)
        return true;
    return op == KILN_OP_MAXPOOL || op == KILN_OP_AVERAGEPOOL || op == KILN_OP_PAD ||
           op == KILN_OP_CONCAT;
}

/* Joins the decision nodes whose blocks can meet (step 2). owner[node]:
 * the decision node that first reached a pass-through node (-1: none). */
static kiln_status join_chains(const kiln_graph *g, const int *n_blocks, int *par, kiln_error *err)
{
    int nn = g->n_nodes;
    int *owner = malloc(sizeof(int) * (size_t)nn), *stack = malloc(sizeof(int) * (size_t)nn);
    int *seen = malloc(sizeof(int) * (size_t)nn);
    /* consumers of each value, CSR */
    int *cnt = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!owner || !stack || !seen || !cnt)
        goto oom;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++)
            if (g->nodes[i]->inputs[k] >= 0)
                cnt[g->nodes[i]->inputs[k] + 1]++;
    for (int v = 0; v < g->n_values; v++)
        cnt[v + 1] += cnt[v];
    int *use = malloc(sizeof(int) * (size_t)(cnt[g->n_values] > 0 ? cnt[g->n_values] : 1));
    int *fill = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!use || !fill) {
        free(use);
        free(fill);
        goto oom;
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++) {
            int v = g->nodes[i]->inputs[k];
            if (v >= 0)
                use[cnt[v] + fill[v]++] = i;
        }
    free(fill);
    for (int i = 0; i < nn; i++) {
        owner[i] = -1;
        seen[i] = -1;
    }
    for (int d = 0; d < nn; d++) {
        if (n_blocks[d] < 2)
            continue;
        int sp = 0;
        stack[sp++] = d;
        seen[d] = d;
        while (sp > 0) {
            const kiln_node *n = g->nodes[stack[--sp]];
            for (int o = 0; o < n->n_outputs; o++) {
                int v = n->outputs[o];
                if (v < 0)
                    continue;
                for (int u = cnt[v]; u < cnt[v + 1]; u++) {
                    int m = use[u];
                    if (seen[m] == d)
                        continue;
                    seen[m] = d;
                    if (n_blocks[m] >= 2) {
                        uf_join(par, d, m);
                        continue;
                    }
                    if (!passes_blocks(g->nodes[m]->op))
                        continue;
                    if (owner[m] >= 0)
                        uf_join(par, d, owner[m]);
                    else
                        owner[m] = d;
                    stack[sp++] = m;
                }
            }
        }
    }
    free(use);
    free(cnt);
    free(owner);
    free(stack);
    free(seen);
    return KILN_OK;
oom:
    free(cnt);
    free(owner);
    free(stack);
    free(seen);
    return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory in the layout DP");
}

static kiln_layout_choice choice_of(const kiln_tpl_block *b)
{
    return (kiln_layout_choice){kiln_layout_block(b->lay.in), kiln_layout_block(b->lay.out),
                                b->lay.algo};
}

/* The whole graph's cost with `choice`. */
static kiln_status cost_of(const kiln_pass_ctx *ctx, const kiln_layout_choice *choice,
                           int *walks, double *cost, kiln_error *err)
{
    kiln_layout_eval ev;
    kiln_status st = kiln_alter_layout_eval(ctx, choice, false, &ev, err);
    if (st != KILN_OK)
        return st;
    (*walks)++;
    *cost = ev.cost_us;
    return KILN_OK;
}

/* Viterbi over one chain's decision nodes dn[0..m) (step 3); choice holds
 * the assignment so far (this chain's nodes at their defaults) and receives
 * the chain's best one when it is strictly cheaper. */
static kiln_status dp_chain(const kiln_pass_ctx *ctx, const kiln_layout_eval *ev0, const int *dn,
                            int m, kiln_layout_choice *choice, kiln_layout_chain *ch, int *walks,
                            kiln_error *err)
{
    enum { K = KILN_TPL_MAX_BLOCKS };
    kiln_status st = KILN_OK;
    /* path[b * m + j]: the choice index of dn[j] on the best path ending in b */
    int *path = malloc(sizeof(int) * (size_t)(K * m)), *next = malloc(sizeof(int) * (size_t)(K * m));
    double best[K] = {0}, nbest[K] = {0};
    if (!path || !next) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory in the layout DP");
        goto done;
    }
    double base;
    if ((st = cost_of(ctx, choice, walks, &base, err)) != KILN_OK)
        goto done;
    int k0 = ev0->n_blocks[dn[0]];
    for (int b = 0; b < k0; b++) {
        choice[dn[0]] = choice_of(&ev0->blocks[dn[0]][b]);
        if ((st = cost_of(ctx, choice, walks, &best[b], err)) != KILN_OK)
            goto done;
        path[b * m] = b;
    }
    choice[dn[0]] = (kiln_layout_choice){0, 0, 0};
    int kp = k0;
    for (int i = 1; i < m; i++) {
        int ki = ev0->n_blocks[dn[i]];
        for (int b = 0; b < ki; b++) {
            nbest[b] = -1.0;
            for (int a = 0; a < kp; a++) {
                for (int j = 0; j < i; j++)
                    choice[dn[j]] = choice_of(&ev0->blocks[dn[j]][path[a * m + j]]);
                choice[dn[i]] = choice_of(&ev0->blocks[dn[i]][b]);
                double c;
                if ((st = cost_of(ctx, choice, walks, &c, err)) != KILN_OK)
                    goto done;
                if (nbest[b] < 0.0 || c < nbest[b]) {
                    nbest[b] = c;
                    memcpy(&next[b * m], &path[a * m], sizeof(int) * (size_t)i);
                    next[b * m + i] = b;
                }
            }
        }
        for (int j = 0; j <= i; j++)
            choice[dn[j]] = (kiln_layout_choice){0, 0, 0};
        int *t = path;
        path = next;
        next = t;
        memcpy(best, nbest, sizeof best);
        kp = ki;
    }
    int bb = 0;
    for (int b = 1; b < kp; b++)
        if (best[b] < best[bb])
            bb = b;
    ch->first = dn[0];
    ch->n_nodes = m;
    ch->default_us = base;
    ch->chosen_us = base;
    /* strictly cheaper beyond rounding (with measured times, by the
     * margins of layout_dp.h): keep the defaults otherwise */
    double need = 0;
    if (ctx->layout_hints && ctx->layout_hints->n_times > 0) {
        double moved_us = 0; /* the convs the best path moves, at their walk's choices */
        for (int j = 0; j < m; j++)
            if (path[bb * m + j] != 0)
                moved_us += ev0->node_us ? ev0->node_us[dn[j]] : 0;
        need = fmax(KILN_LAYOUT_MEASURED_MIN_FLOOR * base,
                    fmin(KILN_LAYOUT_MEASURED_MIN_GAIN * base,
                         KILN_LAYOUT_MEASURED_MIN_CHAIN_GAIN * moved_us));
    }
    if (best[bb] < base - need - 1e-9) {
        bool differs = false;
        for (int j = 0; j < m; j++)
            differs |= path[bb * m + j] != 0;
        if (differs) {
            for (int j = 0; j < m; j++)
                if (path[bb * m + j] != 0)
                    choice[dn[j]] = choice_of(&ev0->blocks[dn[j]][path[bb * m + j]]);
            ch->chosen_us = best[bb];
            ch->changed = true;
        }
    }
done:
    free(path);
    free(next);
    return st;
}

kiln_status kiln_layout_dp(const kiln_pass_ctx *ctx_in, kiln_layout_plan *plan, kiln_error *err)
{
    /* with measured times, the walks run on a copy of the context whose
     * hints carry the scale of the analytic costs (layout_dp.h) */
    kiln_pass_ctx cx = *ctx_in;
    kiln_layout_hints hs = {.force = -1};
    if (ctx_in->layout_hints && ctx_in->layout_hints->n_times > 0) {
        kiln_layout_eval e = {0};
        kiln_status st0 = kiln_alter_layout_eval(ctx_in, NULL, false, &e, err);
        if (st0 != KILN_OK)
            return st0;
        hs = *ctx_in->layout_hints;
        hs.force = -1;
        hs.analytic_scale = e.measured_analytic_us > 0 ? e.measured_us / e.measured_analytic_us : 1;
        cx.layout_hints = &hs;
    }
    const kiln_pass_ctx *ctx = &cx;
    const kiln_graph *g = ctx->g;
    int nn = g->n_nodes;
    kiln_layout_plan p = {0};
    kiln_layout_eval ev0 = {0};
    int *par = NULL, *dn = NULL;
    kiln_status st = KILN_OK;
    p.choice = calloc((size_t)(nn > 0 ? nn : 1), sizeof *p.choice);
    if (!p.choice)
        goto oom;
    if ((st = kiln_alter_layout_eval(ctx, NULL, true, &ev0, err)) != KILN_OK)
        goto fail;
    p.evaluations = 1;
    p.default_us = p.chosen_us = ev0.cost_us;
    /* the walks the DP needs; none when no node has a choice */
    long walks = 0;
    int decisions = 0;
    for (int i = 0; i < nn; i++)
        if (ev0.n_blocks[i] >= 2) {
            decisions++;
            walks += (long)ev0.n_blocks[i] * KILN_TPL_MAX_BLOCKS;
        }
    if (decisions == 0 || walks > KILN_LAYOUT_DP_MAX_WALKS)
        goto done;
    par = malloc(sizeof(int) * (size_t)nn);
    dn = malloc(sizeof(int) * (size_t)nn);
    p.chains = calloc((size_t)decisions, sizeof *p.chains);
    if (!par || !dn || !p.chains)
        goto oom;
    for (int i = 0; i < nn; i++)
        par[i] = i;
    if ((st = join_chains(g, ev0.n_blocks, par, err)) != KILN_OK)
        goto fail;
    /* chains in the order of their first decision node (the root: the
     * smallest id) */
    for (int r = 0; r < nn; r++) {
        if (ev0.n_blocks[r] < 2 || uf_find(par, r) != r)
            continue;
        int m = 0;
        for (int i = r; i < nn; i++)
            if (ev0.n_blocks[i] >= 2 && uf_find(par, i) == r)
                dn[m++] = i;
        kiln_layout_chain *ch = &p.chains[p.n_chains++];
        if ((st = dp_chain(ctx, &ev0, dn, m, p.choice, ch, &p.evaluations, err)) != KILN_OK)
            goto fail;
        if (ch->changed)
            p.chosen_us = ch->chosen_us;
    }
done:
    free(par);
    free(dn);
    kiln_layout_eval_free(&ev0);
    *plan = p;
    return KILN_OK;
oom:
    st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory in the layout DP");
fail:
    free(par);
    free(dn);
    kiln_layout_eval_free(&ev0);
    kiln_layout_plan_free(&p);
    return st;
}
