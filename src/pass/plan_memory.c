/* pass/plan_memory.c: memory planning.
 *
 * Every value that crosses a group boundary (graph inputs, group outputs)
 * needs memory in the one activation arena; values inside a fused group live
 * in registers and need none. Algorithm:
 *  1. Buffers. Walking the groups in order, each value either owns a buffer
 *     (a "root") or lives inside another value's: a VIEW group's output is its
 *     input's buffer; the inputs of an in-place Concat are slices of its
 *     output (at the running byte offset; of its chain head's output, and a
 *     shorter concat of the chain is the head's leading bytes); the output of an elementwise group
 *     takes over the buffer of a same-shaped, same-layout input whose buffer
 *     is dead after this group (in-place), unless that input is a graph input.
 *  2. Liveness. A root is live from the first group that defines any value in
 *     it to the last group reading any of them (graph inputs for the whole
 *     run, so that running twice on one input is allowed; graph outputs to
 *     the end).
 *  3. Offsets. Roots in decreasing size get the lowest 64-byte aligned offset
 *     where they overlap no already placed root whose interval intersects
 *     theirs (greedy by size, as in TVM's and XNNPACK's planners). Two values
 *     live at once never share bytes, except an in-place output with the
 *     input it replaces, which the kernel reads element by element before
 *     writing. */
#include <stdlib.h>
#include <string.h>

#include "pass/pass.h"
#include "target/template.h"
#include "util/error.h"

#define ALIGN 64

typedef struct root_info {
    int64_t size;
    int first, last; /* live interval, in group steps (-1 .. n_groups) */
    int64_t offset;
    bool placed;
} root_info;

static int64_t align_up(int64_t x)
{
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

typedef struct sort_item {
    int v;
    int64_t size;
    int first;
} sort_item;

static int cmp_items(const void *pa, const void *pb)
{
    const sort_item *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->v - b->v;
}

/* Whether group gr computes out[i] from in[i] only (in-place legal). */
static bool elementwise_group(const kiln_pass_ctx *ctx, const kiln_group *gr)
{
    const kiln_graph *g = ctx->g;
    if (gr->kind != KILN_GROUP_KERNEL || gr->n_outputs != 1)
        return false;
    for (int i = 0; i < gr->n_nodes; i++)
        if (!kiln_target_epilogue_op(&ctx->target, g, g->nodes[gr->nodes[i]]))
            return false;
    return true;
}

/* The head of in-place concat group r's chain (fuse.c): of the in-place
 * concats with the same first input whose inputs begin with r's, the one
 * with the most inputs (the first such group on a tie). */
static const kiln_node *concat_head(const kiln_pass_ctx *ctx, int r)
{
    const kiln_graph *g = ctx->g;
    const kiln_node *n = g->nodes[ctx->groups[r].anchor], *head = n;
    int head_s = r;
    for (int s = 0; s < ctx->n_groups; s++) {
        const kiln_group *gs = &ctx->groups[s];
        if (s == r || gs->kind != KILN_GROUP_CONCAT_INPLACE)
            continue;
        const kiln_node *m = g->nodes[gs->anchor];
        if (m->n_inputs < head->n_inputs || (m->n_inputs == head->n_inputs && s > head_s))
            continue;
        bool prefix = true;
        for (int k = 0; k < n->n_inputs && prefix; k++)
            prefix = m->inputs[k] == n->inputs[k];
        if (prefix) {
            head = m;
            head_s = s;
        }
    }
    return head;
}

kiln_status kiln_pass_plan_memory(kiln_pass_ctx *ctx, kiln_error *err)
{
    const kiln_graph *g = ctx->g;
    int nv = g->n_values, ng = ctx->n_groups;
    if (!ctx->groups)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "plan-memory needs the fuse pass first");
    kiln_storage *sto = malloc(sizeof *sto * (size_t)(nv ? nv : 1));
    int *def = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *last = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int64_t *member_off = calloc((size_t)(nv ? nv : 1), sizeof(int64_t));
    int *concat_of = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    root_info *ri = calloc((size_t)(nv ? nv : 1), sizeof *ri);
    sort_item *items = malloc(sizeof *items * (size_t)(nv ? nv : 1));
    kiln_status st = KILN_OK;
    if (!sto || !def || !last || !member_off || !concat_of || !ri || !items) {
        st = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int v = 0; v < nv; v++) {
        const kiln_value *x = g->values[v];
        sto[v].root = -1;
        sto[v].offset = 0;
        sto[v].nbytes = x->dtype == KILN_DTYPE_UNDEFINED
                            ? 0
                            : kiln_layout_nbytes(x->dtype, &x->shape, x->layout);
        def[v] = -2;
        last[v] = -2;
        concat_of[v] = -1;
    }
    /* liveness of every value in group steps */
    for (int i = 0; i < g->n_inputs; i++)
        def[g->inputs[i]] = -1;
    for (int r = 0; r < ng; r++) {
        const kiln_group *gr = &ctx->groups[r];
        for (int k = 0; k < gr->n_outputs; k++)
            def[gr->outputs[k]] = r;
        for (int k = 0; k < gr->n_inputs; k++)
            last[gr->inputs[k]] = r;
        /* multi-output kernels write every output, used or not */
        const kiln_node *a = g->nodes[gr->anchor];
        for (int k = 0; k < a->n_outputs && a->n_outputs > 1; k++)
            if (def[a->outputs[k]] < -1)
                def[a->outputs[k]] = r;
    }
    for (int i = 0; i < g->n_outputs; i++)
        last[g->outputs[i]] = ng;
    /* graph inputs stay intact for the whole run (a second run may reuse them) */
    for (int i = 0; i < g->n_inputs; i++)
        last[g->inputs[i]] = ng;
    /* in-place concats: their inputs are slices of the chain head's output,
     * shorter concats of the chain its leading bytes (fuse.c) */
    for (int r = 0; r < ng; r++) {
        const kiln_group *gr = &ctx->groups[r];
        if (gr->kind != KILN_GROUP_CONCAT_INPLACE)
            continue;
        const kiln_node *n = g->nodes[gr->anchor];
        const kiln_node *head = concat_head(ctx, r);
        int64_t off = 0;
        for (int k = 0; k < head->n_inputs; k++) {
            concat_of[head->inputs[k]] = head->outputs[0];
            member_off[head->inputs[k]] = off;
            off += sto[head->inputs[k]].nbytes;
        }
        if (head != n) {
            concat_of[n->outputs[0]] = head->outputs[0];
            member_off[n->outputs[0]] = 0;
        }
    }
    /* 1. buffers */
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        sto[v].root = v;
    }
    for (int r = 0; r < ng; r++) {
        const kiln_group *gr = &ctx->groups[r];
        const kiln_node *a = g->nodes[gr->anchor];
        if (gr->kind == KILN_GROUP_VIEW) {
            int in = a->inputs[0], out = gr->outputs[0];
            sto[out].root = sto[in].root;
            sto[out].offset = sto[in].offset;
            continue;
        }
        if (gr->kind == KILN_GROUP_CONCAT_INPLACE) {
            sto[gr->outputs[0]].root = gr->outputs[0]; /* a chain member: resolved below */
            continue;
        }
        int n_out = a->n_outputs > 1 ? a->n_outputs : gr->n_outputs;
        for (int k = 0; k < n_out; k++) {
            int v = a->n_outputs > 1 ? a->outputs[k] : gr->outputs[k];
            sto[v].root = v;
            if (concat_of[v] >= 0)
                continue; /* a slice of its concat: resolved below */
            if (k != 0 || !elementwise_group(ctx, gr))
                continue;
            for (int j = 0; j < gr->n_inputs; j++) {
                int in = gr->inputs[j];
                const kiln_value *x = g->values[in];
                int root = sto[in].root;
                if (x->kind != KILN_VALUE_NODE || root < 0 || sto[in].offset != 0 ||
                    sto[in].nbytes != sto[v].nbytes || sto[root].nbytes != sto[v].nbytes ||
                    g->values[root]->kind != KILN_VALUE_NODE || concat_of[root] >= 0 ||
                    !kiln_shape_equal(&x->shape, &g->values[v]->shape) ||
                    !kiln_layout_equal(x->layout, g->values[v]->layout) || x->dtype != g->values[v]->dtype)
                    continue;
                /* the root's buffer must be dead after this group, the
                 * slices of a concat buffer included (their roots are
                 * still the members themselves here; they may be read
                 * after the concat) */
                bool dead = true;
                for (int u = 0; u < nv && dead; u++) {
                    int ur = sto[u].root;
                    if (ur >= 0 && (ur == root || concat_of[ur] == root) && last[u] > r)
                        dead = false;
                }
                if (!dead)
                    continue;
                sto[v].root = root;
                ctx->stat_inplace++;
                break;
            }
        }
    }
    /* concat members: slices of their concat's buffer (the concat output is a
     * root assigned above, or later; resolve now), then the views of members
     * (whose root is still the member) */
    for (int v = 0; v < nv; v++)
        if (concat_of[v] >= 0) {
            sto[v].root = concat_of[v];
            sto[v].offset = member_off[v];
        }
    for (int v = 0; v < nv; v++) /* views of concat members */
        if (sto[v].root >= 0 && concat_of[sto[v].root] >= 0) {
            int m = sto[v].root;
            sto[v].root = concat_of[m];
            sto[v].offset += member_off[m];
        }
    /* 2. liveness per root */
    for (int v = 0; v < nv; v++) {
        ri[v].first = 1 << 30;
        ri[v].last = -3;
    }
    for (int v = 0; v < nv; v++) {
        int root = sto[v].root;
        if (root < 0)
            continue;
        int d = def[v] < -1 ? last[v] : def[v];
        int l = last[v] < -1 ? def[v] : last[v];
        if (d < ri[root].first)
            ri[root].first = d;
        if (l > ri[root].last)
            ri[root].last = l;
    }
    /* 3. offsets */
    int n_items = 0;
    for (int v = 0; v < nv; v++)
        if (sto[v].root == v && sto[v].nbytes > 0) {
            ri[v].size = align_up(sto[v].nbytes);
            items[n_items++] = (sort_item){v, ri[v].size, ri[v].first};
        }
    qsort(items, (size_t)n_items, sizeof *items, cmp_items);
    int64_t arena = 0;
    for (int i = 0; i < n_items; i++) {
        int v = items[i].v;
        root_info *me = &ri[v];
        int64_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const root_info *o = &ri[items[j].v];
                if (o->last < me->first || me->last < o->first)
                    continue;
                if (off < o->offset + o->size && o->offset < off + me->size) {
                    off = o->offset + o->size;
                    moved = true;
                }
            }
        }
        me->offset = off;
        me->placed = true;
        if (off + me->size > arena)
            arena = off + me->size;
    }
    for (int v = 0; v < nv; v++) {
        int root = sto[v].root;
        if (root >= 0)
            sto[v].offset += ri[root].offset;
    }
    ctx->storage = sto;
    sto = NULL;
    ctx->arena_bytes = arena;
done:
    free(sto);
    free(def);
    free(last);
    free(member_off);
    free(concat_of);
    free(ri);
    free(items);
    return st;
}
