/* codegen/c/tpl_common.c: small questions and pieces several templates share
 * (operand checks of their match hooks, the kernel headers' epilogue). */
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/c/codegen.h"
#include "codegen/c/kernels/kiln_kernels_common.h"
#include "lower/geom.h"
#include "lower/hash.h"
#include "util/bigmem.h"
#include "util/packmemo.h"

bool kiln_tpl_f32(const kiln_graph *g, int v)
{
    return v >= 0 && g->values[v]->dtype == KILN_DTYPE_FLOAT32;
}

bool kiln_tpl_row_major_in(const kiln_graph *g, const kiln_node *n)
{
    return n->n_inputs > 0 && n->inputs[0] >= 0 &&
           g->values[n->inputs[0]]->layout.kind == KILN_LAYOUT_ROW_MAJOR;
}

bool kiln_tpl_conv_operands(const kiln_graph *g, const kiln_node *n)
{
    kiln_win2d w;
    return n->op == KILN_OP_CONV && kiln_tpl_f32(g, n->inputs[0]) &&
           g->values[n->inputs[1]]->kind == KILN_VALUE_CONST && kiln_geom_win2d(g, n, &w);
}

int64_t kiln_tpl_narrow_group_width(const kiln_graph *g, const kiln_node *n, int block)
{
    const kiln_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
    int64_t grp = kiln_attr_int(n, "group", 1);
    if (n->op != KILN_OP_CONV || x->shape.rank != 4 || y->shape.rank != 4 || grp < 2 ||
        block < 2)
        return 0;
    int64_t c_in = x->shape.dims[1], c_out = y->shape.dims[1];
    if (c_in % grp || c_out % grp || c_in / grp != c_out / grp)
        return 0;
    int64_t gw = c_in / grp;
    return gw >= 2 && gw < block && block % gw == 0 && c_in % block == 0 ? gw : 0;
}

void kiln_tpl_emit_conv_tasks(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                              const char *prefix, bool spans)
{
    const kiln_node *n = l->ctx->g->nodes[t->anchor];
    int xa = kiln_task_arg(t, n->inputs[0]), wa = kiln_task_arg(t, n->inputs[1]);
    int ba = n->n_inputs > 2 && n->inputs[2] >= 0 ? kiln_task_arg(t, n->inputs[2]) : -1;
    kiln_sb_puts(b, KILN_TASK_SIG);
    kiln_emit_arg_ptrs(b, t);
    bool epi = kiln_task_has_epilogue(l, t);
    if (epi)
        kiln_sb_puts(b, "    for (int64_t tk_ = begin_; tk_ < end_; tk_++) {\n    ");
    kiln_sb_printf(b, "    %s_run(&P_, a%d, a%d, ", prefix, xa, wa);
    kiln_emit_arg_or_null(b, ba, false);
    kiln_sb_puts(b, ", ");
    kiln_emit_arg_or_null(b, t->residual_arg, false);
    kiln_sb_printf(b, ", o0, %s, %s);\n", epi ? "tk_, tk_ + 1" : "begin_, end_",
                   t->workspace > 0 ? KILN_TASK_WS : "NULL");
    if (epi) {
        /* the rest of the fused epilogue on the task's output, still in cache */
        if (spans) {
            kiln_sb_printf(b, "        int64_t f_, len_, ns_, st_;\n"
                              "        %s_task_out(&P_, tk_, &f_, &len_, &ns_, &st_);\n"
                              "        for (int64_t s_ = 0; s_ < ns_; s_++) {\n",
                           prefix);
            kiln_emit_epilogue_span(b, l, t, "f_ + s_ * st_", "len_");
        } else {
            kiln_sb_printf(b, "        int64_t f_, len_;\n"
                              "        %s_task_out(&P_, tk_, &f_, &len_);\n"
                              "        {\n",
                           prefix);
            kiln_emit_epilogue_span(b, l, t, "f_", "len_");
        }
        kiln_sb_puts(b, "        }\n    }\n");
    }
    kiln_sb_puts(b, "}\n");
    char tasks[64];
    snprintf(tasks, sizeof tasks, "%s_tasks(&P_)", prefix);
    kiln_emit_entry(b, t, tasks, 1);
}

/* The index in the group of the node producing value v, -1 if none does. */
static int group_index(const kiln_graph *g, const kiln_group *gr, int v)
{
    for (int i = 0; i < gr->n_nodes; i++)
        if (g->nodes[gr->nodes[i]]->outputs[0] == v)
            return i;
    return -1;
}

int kiln_tpl_header_epilogue(const kiln_lowered *l, kiln_task *t, bool has_bias, float *lo,
                             float *hi)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    const kiln_value *y = g->values[gr->outputs[0]];
    int stop = gr->n_nodes;
    /* the anchor: nodes[0], or after its input prologue's nodes */
    int first = group_index(g, gr, g->nodes[gr->anchor]->outputs[0]) + 1;
    for (;;) {
        int epi = has_bias ? KILN_EPI_BIAS : 0, res = -1, i = first;
        *lo = -3.4028234663852886e38f;
        *hi = 3.4028234663852886e38f;
        for (; i < stop; i++) {
            const kiln_node *m = g->nodes[gr->nodes[i]];
            int prev = g->nodes[gr->nodes[i - 1]]->outputs[0];
            if (m->op == KILN_OP_ADD && m->n_inputs == 2 &&
                (m->inputs[0] == prev) != (m->inputs[1] == prev)) {
                int other = m->inputs[0] == prev ? m->inputs[1] : m->inputs[0];
                const kiln_value *o = g->values[other];
                if ((epi & (KILN_EPI_RESIDUAL | KILN_EPI_RELU | KILN_EPI_CLIP)) ||
                    o->kind == KILN_VALUE_CONST || group_index(g, gr, other) >= 0 ||
                    !kiln_shape_equal(&o->shape, &y->shape) || !kiln_layout_equal(o->layout, y->layout))
                    break;
                epi |= KILN_EPI_RESIDUAL;
                res = kiln_task_arg(t, other);
            } else if (m->op == KILN_OP_RELU && !(epi & (KILN_EPI_RELU | KILN_EPI_CLIP))) {
                epi |= KILN_EPI_RELU;
            } else if (m->op == KILN_OP_CLIP && !(epi & KILN_EPI_CLIP)) {
                epi |= KILN_EPI_CLIP;
                *lo = kiln_attr_float(m, "min", *lo);
                *hi = kiln_attr_float(m, "max", *hi);
            } else {
                break;
            }
        }
        /* the generated rest sees the prefix's last value only (as the
         * anchor's result): shorten the prefix until no later node reads an
         * earlier one */
        bool ok = true;
        for (int j = i; j < gr->n_nodes && ok; j++) {
            const kiln_node *m = g->nodes[gr->nodes[j]];
            for (int k = 0; k < m->n_inputs; k++) {
                int pi = m->inputs[k] >= 0 ? group_index(g, gr, m->inputs[k]) : -1;
                if (pi >= 0 && pi < i - 1)
                    ok = false;
            }
        }
        if (ok || i == first) {
            t->epi_from = i;
            t->residual_arg = res;
            return epi;
        }
        stop = i - 1;
    }
}

const char *kiln_tpl_ctype(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return "float";
    case KILN_DTYPE_FLOAT64: return "double";
    case KILN_DTYPE_FLOAT16: return "uint16_t";
    case KILN_DTYPE_INT8: return "int8_t";
    case KILN_DTYPE_UINT8: return "uint8_t";
    case KILN_DTYPE_INT16: return "int16_t";
    case KILN_DTYPE_UINT16: return "uint16_t";
    case KILN_DTYPE_INT32: return "int32_t";
    case KILN_DTYPE_UINT32: return "uint32_t";
    case KILN_DTYPE_INT64: return "int64_t";
    case KILN_DTYPE_UINT64: return "uint64_t";
    case KILN_DTYPE_BOOL: return "uint8_t";
    default: return NULL;
    }
}

void kiln_emit_arg_or_null(kiln_sb *b, int arg, bool out)
{
    if (arg < 0)
        kiln_sb_puts(b, "NULL");
    else
        kiln_sb_printf(b, "%c%d", out ? 'o' : 'a', arg);
}

void kiln_emit_epilogue_span(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                             const char *first, const char *len)
{
    const kiln_value *y = l->ctx->g->values[l->ctx->groups[t->group].outputs[0]];
    int64_t bb = y->layout.kind == KILN_LAYOUT_NCHWC ? y->layout.block_a : 0;
    if (bb > 1 && y->shape.rank >= 2) {
        /* spans start and end on whole blocks: a loop over each pixel's lanes
         * knows the channel (per-channel operands read contiguously) */
        int64_t inner = 1;
        for (int d = 2; d < y->shape.rank; d++)
            inner *= y->shape.dims[d];
        int64_t cb = (y->shape.dims[1] + bb - 1) / bb;
        kiln_sb_printf(b,
                       "            for (int64_t j_ = (%s) / %lld, je_ = ((%s) + (%s)) / %lld; j_ < je_; j_++) {\n"
                       "              const int64_t c0_ = j_ / %lld %% %lld * %lld;\n"
                       "              (void)c0_;\n"
                       /* operands never alias o0 here; kept a loop (not unrolled
                        * into 16 statements gcc then leaves scalar) */
                       "#pragma GCC ivdep\n#pragma GCC unroll 1\n"
                       "              for (int64_t l_ = 0; l_ < %lld; l_++) {\n"
                       "                const int64_t i = j_ * %lld + l_;\n"
                       "                float v = o0[i];\n",
                       first, (long long)bb, first, len, (long long)bb, (long long)inner,
                       (long long)cb, (long long)bb, (long long)bb, (long long)bb);
        kiln_emit_epilogue_ch(b, l, t, "v", "i", "c0_ + l_");
        kiln_sb_puts(b, "                o0[i] = v;\n              }\n            }\n");
        return;
    }
    kiln_sb_printf(b,
                   "            for (int64_t i = %s, ie_ = %s + %s; i < ie_; i++) {\n"
                   "                float v = o0[i];\n",
                   first, first, len);
    kiln_emit_epilogue(b, l, t, "v", "i");
    kiln_sb_puts(b, "                o0[i] = v;\n            }\n");
}

kiln_status kiln_tpl_pack_buffer(const kiln_node *n, int64_t floats, float **out, kiln_error *err)
{
    *out = kiln_big_malloc(sizeof(float) * (size_t)floats, NULL);
    if (!*out)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory packing '%s'", n->name);
    return KILN_OK;
}

kiln_status kiln_tpl_use_packed(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                const char *layout, float *packed, int64_t floats,
                                kiln_error *err)
{
    int id = kiln_lower_weights(l, wv->id, layout, packed, (int64_t)sizeof(float) * floats);
    if (id < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[kiln_task_arg(t, wv->id)] = id;
    return KILN_OK;
}

/* The bytes of wv as the memo keys them: (pointer, size) when the memo can
 * take it: a stable source (in-process tier), or any constant when the memo
 * has a disk tier (content keys; only with a code identity that is kiln's
 * own file, lower/hash.h). */
static bool memo_source(const kiln_lowered *l, const kiln_value *wv, size_t *n, bool *stable)
{
    if (!l->ctx->pack_memo || !wv->data || wv->kind != KILN_VALUE_CONST)
        return false;
    *n = kiln_dtype_size(wv->dtype) * (size_t)kiln_shape_numel(&wv->shape);
    *stable = kiln_pack_memo_stable(l->ctx->pack_memo, wv->data, *n);
    return *stable || (kiln_pack_memo_has_dir(l->ctx->pack_memo) && kiln_code_id_stable());
}

/* The disk tier's key: this kiln's code, the packing's key, the bytes. */
static void content_key(const kiln_value *wv, size_t n, const char *key, char out[33])
{
    kiln_hash h;
    kiln_hash_init(&h, 0x706d656dULL); /* "pmem" */
    kiln_hash_str(&h, kiln_code_id());
    kiln_hash_str(&h, key);
    int32_t dt = (int32_t)wv->dtype;
    uint64_t nb = (uint64_t)n;
    kiln_hash_update(&h, &dt, sizeof dt);
    kiln_hash_update(&h, &nb, sizeof nb);
    kiln_hash_update(&h, wv->data, n);
    kiln_hash_hex(&h, out);
}

kiln_status kiln_tpl_packed_before(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                   const char *layout, const char *key, int64_t floats,
                                   bool *hit, kiln_error *err)
{
    *hit = false;
    size_t n = 0;
    bool st = false, disk = false;
    char path[4200];
    int64_t nbytes = 0;
    if (!memo_source(l, wv, &n, &st))
        return KILN_OK;
    kiln_pack_memo *m = l->ctx->pack_memo;
    bool found = st && kiln_pack_memo_find(m, wv->data, n, key, path, sizeof path, &nbytes);
    if (!found && kiln_pack_memo_has_dir(m) && kiln_code_id_stable()) {
        /* another process (or an unstable source's earlier build) packed it */
        char ck[33];
        content_key(wv, n, key, ck);
        found = disk = kiln_pack_memo_find_disk(m, ck, path, sizeof path, &nbytes);
    }
    if (!found || nbytes != (int64_t)sizeof(float) * floats)
        return KILN_OK;
    /* the file an earlier build wrote: mapped as the packed weights (a
     * missing or short one, pruned by the cache bound, is a miss) */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st_;
    if (fd < 0)
        return KILN_OK;
    void *map = fstat(fd, &st_) == 0 && st_.st_size == nbytes
                    ? mmap(NULL, (size_t)nbytes, PROT_READ, MAP_PRIVATE, fd, 0)
                    : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED)
        return KILN_OK;
    const char *slash = strrchr(path, '/');
    int id = kiln_lower_weights_mapped(l, wv->id, layout, map, nbytes, slash ? slash + 1 : path);
    if (id < 0)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    t->args[kiln_task_arg(t, wv->id)] = id;
    /* a stable source found on disk: the next class finds it without hashing */
    if (disk && st && !kiln_pack_memo_put(m, wv->data, n, key, path, nbytes))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    *hit = true;
    return KILN_OK;
}

kiln_status kiln_tpl_use_packed_key(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                    const char *layout, float *packed, int64_t floats,
                                    const char *key, kiln_error *err)
{
    kiln_status s = kiln_tpl_use_packed(l, t, wv, layout, packed, floats, err);
    size_t n = 0;
    bool st = false;
    if (s != KILN_OK || !memo_source(l, wv, &n, &st))
        return s;
    kiln_tensor_entry *e = &l->tensors[t->args[kiln_task_arg(t, wv->id)]];
    if (!e->memo_key && !(e->memo_key = strdup(key)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    e->memo_src = wv->data;
    e->memo_src_bytes = (int64_t)n;
    if (kiln_pack_memo_has_dir(l->ctx->pack_memo) && kiln_code_id_stable())
        content_key(wv, n, key, e->memo_ckey);
    return KILN_OK;
}

void kiln_tpl_params_key(char *key, size_t cap, const char *name, const void *params,
                         size_t size)
{
    kiln_hash h;
    kiln_hash_init(&h, 0x70726d73ULL); /* "prms" */
    kiln_hash_update(&h, params, size);
    char hex[33];
    kiln_hash_hex(&h, hex);
    snprintf(key, cap, "%s %s", name, hex);
}

kiln_status kiln_tpl_pad_bias(kiln_lowered *l, kiln_task *t, const kiln_node *n, int64_t c,
                              int cb, kiln_error *err)
{
    const kiln_graph *g = l->ctx->g;
    if (n->n_inputs <= 2 || n->inputs[2] < 0 || c % cb == 0)
        return KILN_OK;
    const kiln_value *bv = g->values[n->inputs[2]];
    if (bv->kind != KILN_VALUE_CONST || !bv->data || kiln_shape_numel(&bv->shape) != c)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "conv '%s': padded channels need a constant bias",
                           n->name);
    int64_t nb = (c + cb - 1) / cb * cb;
    float *pb = calloc((size_t)nb, sizeof(float));
    if (!pb)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory padding '%s'", n->name);
    memcpy(pb, bv->data, sizeof(float) * (size_t)c);
    char lb[32];
    snprintf(lb, sizeof lb, "pad%lld", (long long)nb);
    return kiln_tpl_use_packed(l, t, bv, lb, pb, nb, err);
}
