/* codegen/c/emit_common.c: what every kernel file shares: the banner and
 * includes, the exported entry point, and the fused
 * epilogue (the group's elementwise nodes after the anchor, applied to the
 * anchor's result in registers just before the only store).
 *
 * Epilogue operands are read from the flat storage index of the output:
 * same-shaped tensors at idx, scalars at 0, per-channel constants at the
 * channel of idx (blocked layouts: ((idx / (HW*b)) % (C/b))*b + idx % b),
 * per-last-dim constants at idx % N, and anything else that broadcasts (in
 * row-major elementwise groups) through the output's coordinates. */
#include <stdio.h>
#include <string.h>

#include "codegen/c/codegen.h"

void kiln_emit_operand(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int arg,
                       const kiln_value *y, const char *idx)
{
    kiln_emit_operand_ch(b, l, t, arg, y, idx, NULL);
}

void kiln_emit_operand_ch(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int arg,
                          const kiln_value *y, const char *idx, const char *chan)
{
    const kiln_value *v = l->ctx->g->values[t->arg_values[arg]];
    int kind = kiln_shape_equal(&v->shape, &y->shape) && kiln_layout_equal(v->layout, y->layout)
                   ? 4
                   : kiln_epilogue_bcast_kind(&v->shape, &y->shape, y->layout);
    if (kind == 4 && !kiln_layout_equal(v->layout, y->layout))
        kind = 0;
    int64_t inner = 1;
    for (int d = 2; d < y->shape.rank; d++)
        inner *= y->shape.dims[d];
    switch (kind) {
    case 1:
        kiln_sb_printf(b, "a%d[0]", arg);
        return;
    case 4:
        kiln_sb_printf(b, "a%d[%s]", arg, idx);
        return;
    case 3:
        kiln_sb_printf(b, "a%d[(%s) %% %lld]", arg, idx, (long long)y->shape.dims[y->shape.rank - 1]);
        return;
    case 2: {
        int64_t c = y->shape.dims[1];
        if (y->layout.kind == KILN_LAYOUT_NCHWC && chan &&
            (c % y->layout.block_a == 0 || kiln_layout_equal(v->layout, y->layout))) {
            /* the loop gives the channel: contiguous in the block's lanes (a
             * partial last block's padded lanes too, when the operand is
             * blocked alike: its storage is padded, its padding finite) */
            kiln_sb_printf(b, "a%d[%s]", arg, chan);
        } else if (y->layout.kind == KILN_LAYOUT_NCHWC && chan) {
            /* a row-major operand of a partial last block: the padded lanes
             * read the last channel (finite; the padding is never read back) */
            kiln_sb_printf(b, "a%d[KILN_MIN_(%s, %lld)]", arg, chan, (long long)(c - 1));
        } else if (y->layout.kind == KILN_LAYOUT_NCHWC) {
            int64_t bb = y->layout.block_a, cb = (c + bb - 1) / bb;
            kiln_sb_printf(b, "a%d[KILN_MIN_(((%s) / %lld %% %lld) * %lld + (%s) %% %lld, %lld)]",
                           arg, idx, (long long)(inner * bb), (long long)cb, (long long)bb, idx,
                           (long long)bb, (long long)(c - 1));
        } else if (chan) {
            kiln_sb_printf(b, "a%d[%s]", arg, chan);
        } else {
            kiln_sb_printf(b, "a%d[(%s) / %lld %% %lld]", arg, idx, (long long)inner, (long long)c);
        }
        return;
    }
    default: {
        /* general broadcast (row-major): through the output coordinates */
        int diff = y->shape.rank - v->shape.rank;
        int64_t ys = 1, vs = 1;
        int64_t ystr[KILN_MAX_RANK], vstr[KILN_MAX_RANK];
        for (int d = y->shape.rank - 1; d >= 0; d--) {
            int64_t vd = d >= diff ? v->shape.dims[d - diff] : 1;
            ystr[d] = ys;
            vstr[d] = vd == 1 ? 0 : vs;
            ys *= y->shape.dims[d];
            vs *= vd;
        }
        /* runs of dims the operand has (dims of 1 join any run) are one
         * term each; the outermost run needs no modulo (the index is
         * below the output's size), so an operand that lacks only leading
         * dims of 1 reads at the index itself, whatever the extents */
        kiln_sb_printf(b, "a%d[0", arg);
        bool outer = true; /* no dim above 1 before d */
        for (int d = 0; d < y->shape.rank;) {
            if (y->shape.dims[d] == 1) {
                d++;
                continue;
            }
            if (!vstr[d]) {
                outer = false;
                d++;
                continue;
            }
            int e = d, last = d;
            int64_t prod = 1;
            for (; e < y->shape.rank && (y->shape.dims[e] == 1 || vstr[e]); e++) {
                prod *= y->shape.dims[e];
                if (y->shape.dims[e] != 1)
                    last = e;
            }
            kiln_sb_printf(b, " + (%s)", idx);
            if (ystr[last] != 1)
                kiln_sb_printf(b, " / %lld", (long long)ystr[last]);
            if (!outer)
                kiln_sb_printf(b, " %% %lld", (long long)prod);
            if (vstr[last] != 1)
                kiln_sb_printf(b, " * %lld", (long long)vstr[last]);
            outer = false;
            d = e;
        }
        kiln_sb_puts(b, "]");
        return;
    }
    }
}

bool kiln_task_has_epilogue(const kiln_lowered *l, const kiln_task *t)
{
    return t->epi_from < l->ctx->groups[t->group].n_nodes;
}

/* The C name of node output `v` inside the chain: the anchor's result is
 * `var`, chain nodes e0, e1, .. */
static void operand_name(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int v,
                         const char *var, const kiln_value *y, const char *idx, const char *chan)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    int arg = kiln_task_arg(t, v);
    if (arg >= 0 && arg < t->n_in) {
        kiln_emit_operand_ch(b, l, t, arg, y, idx, chan);
        return;
    }
    for (int i = 0; i < gr->n_nodes; i++) {
        const kiln_node *m = ctx->g->nodes[gr->nodes[i]];
        if (m->outputs[0] == v) {
            if (i < t->epi_from)
                kiln_sb_puts(b, var);
            else
                kiln_sb_printf(b, "e%d", i);
            return;
        }
    }
    kiln_sb_puts(b, "0.0f /* unreachable operand */");
}

void kiln_emit_epilogue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, const char *var,
                        const char *idx)
{
    kiln_emit_epilogue_ch(b, l, t, var, idx, NULL);
}

void kiln_emit_epilogue_ch(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, const char *var,
                           const char *idx, const char *chan)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    const kiln_value *y = ctx->g->values[gr->outputs[0]];
    int last = -1;
    for (int i = t->epi_from; i < gr->n_nodes; i++) {
        const kiln_node *m = ctx->g->nodes[gr->nodes[i]];
        kiln_sb ops[4] = {{0}};
        const char *opp[4];
        int nx = m->n_inputs < 4 ? m->n_inputs : 4;
        for (int k = 0; k < nx; k++) {
            operand_name(&ops[k], l, t, m->inputs[k], var, y, idx, chan);
            opp[k] = ops[k].s ? ops[k].s : "0.0f";
        }
        char out[16];
        snprintf(out, sizeof out, "e%d", i);
        kiln_sb_printf(b, "        float %s; ", out);
        kiln_expr_emit(b, m, opp, nx, out);
        kiln_sb_puts(b, "\n");
        for (int k = 0; k < nx; k++)
            kiln_sb_free(&ops[k]);
        last = i;
    }
    if (last >= 0)
        kiln_sb_printf(b, "        %s = e%d;\n", var, last);
}

void kiln_emit_prologue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                        const char *const *headers, int n_headers)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_group *gr = &ctx->groups[t->group];
    kiln_sb_printf(b, "/* Generated by kiln %s: kernel %s (template %s). Do not edit.\n", KILN_VERSION,
                   t->fn_name, t->tpl->name);
    kiln_sb_puts(b, " * nodes:");
    for (int i = 0; i < gr->n_nodes && i < 8; i++)
        kiln_sb_printf(b, " %s%s", i ? "+ " : "", kiln_op_name(ctx->g->nodes[gr->nodes[i]]->op));
    /* the knobs, not their "source": the kernel's text (and so its object in
     * the cache) is the same whether the defaults or equal records chose them */
    /* a kernel taking its rows at run time: the workload names them; the
     * source must not (kiln_codegen_name_by_source) */
    if (t->extent > 0)
        kiln_sb_puts(b, "\n * rows: at run time (kiln_rt.extent)\n * knobs:");
    else
        kiln_sb_printf(b, "\n * workload: %s\n * knobs:", t->workload);
    for (int i = 0; i < t->n_knobs; i++)
        kiln_sb_printf(b, " %s=%d", t->knobs[i].name, t->knobs[i].value);
    kiln_sb_puts(b, "\n */\n");
    kiln_sb_puts(b, "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n#include \"kiln/abi.h\"\n");
    /* the vectorizable transcendental functions expressions call (expr.c) */
    kiln_sb_puts(b, "#include \"kiln_kernels_math.h\"\n");
    for (int i = 0; i < n_headers; i++)
        kiln_sb_printf(b, headers[i][0] == '#' ? "%s\n" : "#include \"%s\"\n", headers[i]);
    kiln_sb_puts(b, "\n#define KILN_MIN_(a, b) ((a) < (b) ? (a) : (b))\n#define KILN_MAX_(a, b) ((a) > (b) ? (a) : (b))\n\n");
    kiln_sb_printf(b, "void %s(void *const *args, const kiln_rt *rt);\n\n", t->fn_name);
    kiln_sb_puts(b, "typedef struct kiln_kctx_ {\n    void *const *args;\n    const kiln_rt *rt;\n} kiln_kctx_;\n\n");
}

void kiln_emit_prologue_tiles(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                              const char *prefix, uint32_t tm, uint32_t om, uint32_t ps,
                              const char *header)
{
    char dt[64], dom[64], dps[64];
    snprintf(dt, sizeof dt, "#define %s_TILES_T 0x%xu", prefix, (unsigned)tm);
    snprintf(dom, sizeof dom, "#define %s_TILES_O 0x%xu", prefix, (unsigned)om);
    snprintf(dps, sizeof dps, "#define %s_PS 0x%xu", prefix, (unsigned)ps);
    const char *const hdr[] = {dt, dom, dps, header};
    const char *const hdr_nops[] = {dt, dom, header};
    if (ps)
        kiln_emit_prologue(b, l, t, hdr, 4);
    else
        kiln_emit_prologue(b, l, t, hdr_nops, 3);
}

void kiln_emit_entry_grain(kiln_sb *b, const kiln_task *t, const char *n_tasks, const char *grain)
{
    kiln_sb_printf(b,
                   "\nvoid %s(void *const *args, const kiln_rt *rt)\n{\n"
                   "    kiln_kctx_ k_ = {args, rt};\n"
                   "    rt->parallel_for(rt->pool, %s, %s, task_, &k_);\n}\n",
                   t->fn_name, n_tasks, grain);
}

void kiln_emit_entry(kiln_sb *b, const kiln_task *t, const char *n_tasks, int64_t grain)
{
    char g[24];
    snprintf(g, sizeof g, "%lld", (long long)grain);
    kiln_emit_entry_grain(b, t, n_tasks, g);
}

int64_t kiln_rt_sym_extent(const kiln_lowered *l, const kiln_shape *shape)
{
    return l->ctx->shapes_bound ? kiln_graph_sym_extent(l->ctx->syms, l->ctx->n_syms, shape) : 0;
}

int64_t kiln_rt_numel(const kiln_shape *shape, int64_t e)
{
    int64_t n = 1;
    for (int d = 0; d < shape->rank; d++)
        n *= e > 0 && shape->dims[d] == e ? KILN_RT_ROWS : shape->dims[d];
    return n;
}

const char *kiln_rt_str(char *buf, size_t n, kiln_rt_size z, const char *ev)
{
    int k = snprintf(buf, n, "%s%lld", z.pow ? "(" : "", (long long)z.c);
    for (int i = 0; i < z.pow && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, " * %s", ev);
    if (z.pow && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ")");
    return buf;
}

kiln_rt_size kiln_rt_dims(const int64_t *dims, int from, int to, int64_t e)
{
    kiln_rt_size z = {1, 0};
    for (int d = from; d < to; d++) {
        if (e > 0 && dims[d] == e)
            z.pow++;
        else
            z.c *= dims[d];
    }
    return z;
}

void kiln_emit_entry_rows(kiln_sb *b, const kiln_task *t, int64_t rows, const char *per_name,
                          int64_t per)
{
    char nt[96];
    if (t->extent > 0)
        snprintf(nt, sizeof nt, "(rt->extent + %s - 1) / %s", per_name, per_name);
    else
        snprintf(nt, sizeof nt, "%lld", (long long)((rows + per - 1) / per));
    kiln_emit_entry(b, t, nt, 1);
}

/* Declares a<k> (inputs) and o<k> (outputs) float pointers from args. */
void kiln_emit_arg_ptrs(kiln_sb *b, const kiln_task *t)
{
    kiln_sb_puts(b, "    const kiln_kctx_ *k_ = (const kiln_kctx_ *)ctx_;\n"
                    "    void *const *args = k_->args;\n");
    for (int i = 0; i < t->n_in; i++)
        kiln_sb_printf(b, "    const float *a%d = (const float *)args[%d];\n", i, i);
    for (int i = t->n_in; i < t->n_args; i++)
        kiln_sb_printf(b, "    float *o%d = (float *)args[%d];\n", i - t->n_in, i);
    for (int i = 0; i < t->n_args; i++)
        kiln_sb_printf(b, "    (void)%c%d;\n", i < t->n_in ? 'a' : 'o', i < t->n_in ? i : i - t->n_in);
    kiln_sb_puts(b, "    (void)thread_;\n");
}
