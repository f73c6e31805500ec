/* codegen/c/emit_norm.c: softmax, layer normalization and reductions.
 *
 * softmax: lines along one axis (outer x len x inner); per line max, then
 *   sum of exp(x - max), then exp(x - max) / sum (LogSoftmax: x - max -
 *   log(sum)), tasks of `rows_per_task` lines. Contiguous lines (inner 1)
 *   keep 16 partial maxima and sums (vector registers; the sums added in
 *   double) and use kiln_m_expf; strided lines are scalar with a double sum.
 * layernorm: rows of `size` = prod(dims[axis:]) elements; mean, then the
 *   variance about it (two passes, 16 float partial sums each, folded in
 *   halves to 4 and added in double), then (x - mean) * inv * scale (+ B).
 * reduce: any set of axes: each output element walks its reduced elements
 *   (offsets through the reduced dims' coordinates); sums in double. */
#include <stdio.h>

#include "codegen/c/codegen.h"
#include "lower/geom.h"

static int norm_axis(int64_t axis, int rank)
{
    return (int)(axis < 0 ? axis + rank : axis);
}

kiln_status kiln_emit_softmax(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]];
    int ax = norm_axis(kiln_attr_int(n, "axis", -1), x->shape.rank);
    int64_t outer, len, inner;
    kiln_geom_split(&x->shape, ax, ax + 1, &outer, &len, &inner);
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    int64_t lines = outer * inner;
    bool logsm = n->op == KILN_OP_LOGSOFTMAX;
    int xa = kiln_task_arg(t, n->inputs[0]);
    kiln_emit_prologue(b, l, t, NULL, 0);
    if (t->extent > 0) { /* the lines at run time (tpl_softmax.c) */
        kiln_sb_printf(b, "enum { LEN_ = %lld, INNER_ = %lld, RPT_ = %d };\n\n", (long long)len,
                       (long long)inner, rpt);
        kiln_sb_puts(b, KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
        kiln_sb_puts(b, "    const int64_t LINES_ = " KILN_RT_EXTENT ";\n");
    } else {
        kiln_sb_printf(b, "enum { LEN_ = %lld, INNER_ = %lld, LINES_ = %lld, RPT_ = %d };\n\n",
                       (long long)len, (long long)inner, (long long)lines, rpt);
        kiln_sb_puts(b, KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
    }
    if (inner == 1) {
        /* contiguous lines: 16 partial maxima and sums that the compiler keeps
         * in vector registers, and the vectorizable exp (kiln_kernels_math.h) */
        kiln_sb_printf(b,
                       "    for (int64_t line = begin_ * RPT_; line < KILN_MIN_(end_ * RPT_, (int64_t)LINES_); line++) {\n"
                       "        int64_t base = line * (int64_t)LEN_;\n"
                       "        const float *xp = a%d + base;\n"
                       "        float *yp = o0 + base;\n"
                       "        float m16[16], s16[16] = {0};\n"
                       "        for (int k = 0; k < 16; k++)\n"
                       "            m16[k] = xp[0];\n"
                       "        int64_t j = 0;\n"
                       "        for (; j + 16 <= LEN_; j += 16)\n"
                       "            for (int k = 0; k < 16; k++)\n"
                       "                m16[k] = xp[j + k] > m16[k] ? xp[j + k] : m16[k];\n"
                       "        float mx = m16[0];\n"
                       "        for (int k = 1; k < 16; k++)\n"
                       "            mx = m16[k] > mx ? m16[k] : mx;\n"
                       "        for (; j < LEN_; j++)\n"
                       "            mx = xp[j] > mx ? xp[j] : mx;\n"
                       "        j = 0;\n"
                       "        for (; j + 16 <= LEN_; j += 16)\n"
                       "            for (int k = 0; k < 16; k++) {\n"
                       "                float e = kiln_m_expf_nonpos(xp[j + k] - mx);\n"
                       "                s16[k] += e;\n"
                       "                %s\n"
                       "            }\n"
                       "        double sum = 0.0;\n"
                       "        for (int k = 0; k < 16; k++)\n"
                       "            sum += s16[k];\n"
                       "        for (; j < LEN_; j++) {\n"
                       "            float e = kiln_m_expf_nonpos(xp[j] - mx);\n"
                       "            sum += e;\n"
                       "            %s\n"
                       "        }\n"
                       "        const float f = %s;\n"
                       "        for (j = 0; j < LEN_; j++) {\n"
                       "            float v = %s;\n"
                       "            int64_t idx = base + j;\n"
                       "            (void)idx;\n",
                       xa, logsm ? "" : "yp[j + k] = e;", logsm ? "" : "yp[j] = e;",
                       logsm ? "(float)log(sum)" : "(float)(1.0 / sum)",
                       logsm ? "xp[j] - mx - f" : "yp[j] * f");
        kiln_emit_epilogue(b, l, t, "v", "idx");
        kiln_sb_puts(b, "            yp[j] = v;\n        }\n    }\n}\n");
        kiln_emit_entry_rows(b, t, lines, "RPT_", rpt);
        return KILN_OK;
    }
    kiln_sb_printf(b,
                   "    for (int64_t line = begin_ * RPT_; line < KILN_MIN_(end_ * RPT_, (int64_t)LINES_); line++) {\n"
                   "        int64_t base = (line / INNER_) * (int64_t)LEN_ * INNER_ + line %% INNER_;\n"
                   "        const float *xp = a%d + base;\n"
                   "        float *yp = o0 + base;\n"
                   "        float mx = xp[0];\n"
                   "        for (int64_t j = 1; j < LEN_; j++)\n"
                   "            mx = xp[j * INNER_] > mx ? xp[j * INNER_] : mx;\n"
                   "        double sum = 0.0;\n"
                   "        for (int64_t j = 0; j < LEN_; j++) {\n"
                   "            float e = expf(xp[j * INNER_] - mx);\n"
                   "            sum += e;\n"
                   "            %s\n"
                   "        }\n"
                   "        const float f = %s;\n"
                   "        for (int64_t j = 0; j < LEN_; j++) {\n"
                   "            float v = %s;\n"
                   "            int64_t idx = base + j * INNER_;\n"
                   "            (void)idx;\n",
                   xa, logsm ? "" : "yp[j * INNER_] = e;",
                   logsm ? "(float)log(sum)" : "(float)(1.0 / sum)",
                   logsm ? "xp[j * INNER_] - mx - f" : "yp[j * INNER_] * f");
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "            yp[j * INNER_] = v;\n        }\n    }\n}\n");
    kiln_emit_entry_rows(b, t, lines, "RPT_", rpt);
    return KILN_OK;
}

/* A layer or instance norm's rows and their length. */
static void norm_rows(const kiln_graph *g, const kiln_node *n, int64_t *rows, int64_t *size)
{
    const kiln_value *x = g->values[n->inputs[0]];
    int ax = n->op == KILN_OP_INSTANCENORM ? 2
                                           : norm_axis(kiln_attr_int(n, "axis", -1), x->shape.rank);
    int64_t one;
    kiln_geom_split(&x->shape, ax, x->shape.rank, rows, size, &one);
}

int64_t kiln_norm_rows(const kiln_graph *g, const kiln_node *n)
{
    int64_t rows, size;
    norm_rows(g, n, &rows, &size);
    return rows;
}

kiln_status kiln_emit_layernorm(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]];
    /* InstanceNormalization: a row per (n, c) over the spatial dims, its
     * scale and bias per channel (row % C) instead of per element */
    bool inst = n->op == KILN_OP_INSTANCENORM;
    int64_t rows, size, chans = inst ? x->shape.dims[1] : 0;
    norm_rows(g, n, &rows, &size);
    const bool rt = t->extent > 0; /* the rows at run time (codegen.h) */
    int rpt = kiln_task_knob(t, "rows_per_task", 1);
    double eps = kiln_attr_float(n, "epsilon", 1e-5f);
    int xa = kiln_task_arg(t, n->inputs[0]), sa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_emit_prologue(b, l, t, NULL, 0);
    kiln_sb_printf(b, "enum { SIZE_ = %lld, RPT_ = %d, CH_ = %lld };\n", (long long)size, rpt,
                   (long long)(chans > 0 ? chans : 1));
    if (!rt)
        kiln_sb_printf(b, "enum { ROWS_ = %lld };\n", (long long)rows);
    kiln_sb_puts(b, "\n" KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    if (rt)
        kiln_sb_puts(b, "    const int64_t ROWS_ = " KILN_RT_EXTENT ";\n");
    kiln_sb_printf(b,
                   "    for (int64_t row = begin_ * RPT_; row < KILN_MIN_(end_ * RPT_, (int64_t)ROWS_); row++) {\n"
                   "        const float *xp = a%d + row * (int64_t)SIZE_;\n"
                   "        /* two passes, 16 partial sums each (vector registers), added in double */\n"
                   "        float s16[16] = {0}, v16[16] = {0};\n"
                   "        int64_t i = 0;\n"
                   "        for (; i + 16 <= SIZE_; i += 16)\n"
                   "            for (int k = 0; k < 16; k++)\n"
                   "                s16[k] += xp[i + k];\n"
                   "        /* the 16 partials folded in vector halves (a serial double\n"
                   "         * chain of 16 adds was most of a short row's time) */\n"
                   "        for (int k = 0; k < 8; k++)\n"
                   "            s16[k] += s16[k + 8];\n"
                   "        for (int k = 0; k < 4; k++)\n"
                   "            s16[k] += s16[k + 4];\n"
                   "        double mean = (double)(s16[0] + s16[2]) + (double)(s16[1] + s16[3]), var = 0.0;\n"
                   "        for (; i < SIZE_; i++)\n"
                   "            mean += xp[i];\n"
                   "        mean /= (double)SIZE_;\n"
                   "        const float mf = (float)mean;\n"
                   "        for (i = 0; i + 16 <= SIZE_; i += 16)\n"
                   "            for (int k = 0; k < 16; k++) {\n"
                   "                float d = xp[i + k] - mf;\n"
                   "                v16[k] += d * d;\n"
                   "            }\n"
                   "        for (int k = 0; k < 8; k++)\n"
                   "            v16[k] += v16[k + 8];\n"
                   "        for (int k = 0; k < 4; k++)\n"
                   "            v16[k] += v16[k + 4];\n"
                   "        var = (double)(v16[0] + v16[2]) + (double)(v16[1] + v16[3]);\n"
                   "        for (; i < SIZE_; i++) {\n"
                   "            double d = xp[i] - mean;\n"
                   "            var += d * d;\n"
                   "        }\n"
                   "        var /= (double)SIZE_;\n"
                   "        const float inv = (float)(1.0 / sqrt(var + %.17g));\n"
                   "        const int64_t ch_ = row %% CH_;\n        (void)ch_;\n"
                   "        for (int64_t i = 0; i < SIZE_; i++) {\n"
                   "            float v = (xp[i] - mf) * inv * a%d[%s]",
                   xa, eps, sa, inst ? "ch_" : "i");
    if (ba >= 0)
        kiln_sb_printf(b, " + a%d[%s]", ba, inst ? "ch_" : "i");
    kiln_sb_puts(b, ";\n            int64_t idx = row * (int64_t)SIZE_ + i;\n            (void)idx;\n");
    /* an instance row is one channel: per-channel operands (GroupNorm's
     * exported scale and shift) read it once per row, not per element */
    bool row_major = g->values[l->ctx->groups[t->group].outputs[0]]->layout.kind != KILN_LAYOUT_NCHWC;
    kiln_emit_epilogue_ch(b, l, t, "v", "idx", inst && row_major ? "ch_" : NULL);
    kiln_sb_puts(b, "            o0[idx] = v;\n        }\n    }\n}\n");
    kiln_emit_entry_rows(b, t, rows, "RPT_", rpt);
    return KILN_OK;
}

kiln_status kiln_emit_reduce(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_node *n = g->nodes[t->anchor];
    const kiln_value *x = g->values[n->inputs[0]];
    int r = x->shape.rank;
    const int64_t *axes = NULL;
    int na = kiln_attr_ints(n, "axes", &axes);
    bool red[KILN_MAX_RANK] = {false};
    if (na <= 0) {
        bool noop = kiln_attr_int(n, "noop_with_empty_axes", 0) != 0;
        for (int d = 0; d < r; d++)
            red[d] = !noop;
    } else {
        for (int i = 0; i < na; i++)
            red[norm_axis(axes[i], r)] = true;
    }
    /* the sizes as literals, or with t->extent (a symbol's extent, > 0:
     * tpl_reduce.c) in terms of E_ (codegen.h) */
    const int64_t e = t->extent;
    char dims[KILN_MAX_RANK][48], strides[KILN_MAX_RANK][48], out_s[64], red_s[64], nt[80];
    kiln_rt_size out_z = {1, 0}, red_z = {1, 0};
    for (int d = r - 1; d >= 0; d--) {
        kiln_rt_str(dims[d], sizeof dims[d], kiln_rt_dims(x->shape.dims, d, d + 1, e), "E_");
        kiln_rt_str(strides[d], sizeof strides[d], kiln_rt_dims(x->shape.dims, d + 1, r, e), "E_");
        kiln_rt_size z = kiln_rt_dims(x->shape.dims, d, d + 1, e), *into = red[d] ? &red_z : &out_z;
        into->c *= z.c;
        into->pow += z.pow;
    }
    int64_t out_n = 1;
    for (int d = 0; d < r; d++)
        if (!red[d])
            out_n *= x->shape.dims[d];
    kiln_rt_str(out_s, sizeof out_s, out_z, "E_");
    kiln_rt_str(red_s, sizeof red_s, red_z, "E_");
    const char *init = "0.0", *acc = "s += v;", *fin = "s";
    switch (n->op) {
    case KILN_OP_REDUCEMEAN:
        fin = "s / (double)RED_";
        break;
    case KILN_OP_REDUCEMAX:
        init = "-HUGE_VAL";
        acc = "s = v > s ? v : s;";
        break;
    case KILN_OP_REDUCEMIN:
        init = "HUGE_VAL";
        acc = "s = v < s ? v : s;";
        break;
    case KILN_OP_REDUCEPROD:
        init = "1.0";
        acc = "s *= v;";
        break;
    case KILN_OP_REDUCEL1:
        acc = "s += fabs(v);";
        break;
    case KILN_OP_REDUCEL2:
        acc = "s += v * v;";
        fin = "sqrt(s)";
        break;
    case KILN_OP_REDUCESUMSQUARE:
        acc = "s += v * v;";
        break;
    default:
        break;
    }
    int xa = kiln_task_arg(t, n->inputs[0]);
    kiln_emit_prologue(b, l, t, NULL, 0);
    if (e > 0) {
        kiln_sb_puts(b, "\n" KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
        kiln_sb_printf(b, "    const int64_t E_ = " KILN_RT_EXTENT ", RED_ = %s;\n", red_s);
        kiln_rt_str(nt, sizeof nt, out_z, "rt->extent");
    } else {
        kiln_sb_printf(b, "enum { OUT_ = %s, RED_ = %s };\n\n", out_s, red_s);
        kiln_sb_puts(b, KILN_TASK_SIG);
        kiln_emit_arg_ptrs(b, t);
        snprintf(nt, sizeof nt, "%lld", (long long)out_n);
    }
    kiln_sb_puts(b, "    for (int64_t o = begin_; o < end_; o++) {\n"
                    "        int64_t base = 0, q = o;\n        (void)q;\n");
    for (int d = r - 1; d >= 0; d--)
        if (!red[d])
            kiln_sb_printf(b, "        base += (q %% %s) * %s;\n        q /= %s;\n", dims[d],
                           strides[d], dims[d]);
    kiln_sb_printf(b, "        double s = %s;\n        for (int64_t e = 0; e < RED_; e++) {\n"
                      "            int64_t off = base, p = e;\n            (void)p;\n",
                   init);
    for (int d = r - 1; d >= 0; d--)
        if (red[d])
            kiln_sb_printf(b, "            off += (p %% %s) * %s;\n            p /= %s;\n",
                           dims[d], strides[d], dims[d]);
    kiln_sb_printf(b,
                   "            double v = a%d[off];\n            %s\n        }\n"
                   "        float v = (float)(%s);\n        int64_t idx = o;\n        (void)idx;\n",
                   xa, acc, fin);
    kiln_emit_epilogue(b, l, t, "v", "idx");
    kiln_sb_puts(b, "        o0[o] = v;\n    }\n}\n");
    kiln_emit_entry(b, t, nt, 64);
    return KILN_OK;
}
