/* codegen/c/codegen.h: C code generation for lowered tasks and the model.
 *
 * Every unique kernel becomes one C file:
 *
 *   #include "kiln/abi.h"            (and the kernel headers it needs)
 *   static const <params> = {...};    the geometry and knobs as literals
 *   static void task_(void *ctx, int64_t begin, int64_t end, int thread)
 *   void kiln_k_<template>_<hash>(void *const *args, const kiln_rt *rt)
 *       { rt->parallel_for(rt->pool, n_tasks, grain, task_, (void *)args); }
 *
 * and model.c holds the tensor and step tables and kiln_model_get(); the
 * weights are a binary blob pulled in by an assembly file with .incbin.
 */
#ifndef KILN_CODEGEN_C_CODEGEN_H
#define KILN_CODEGEN_C_CODEGEN_H

#include <stdint.h>

#include "kiln/abi.h"
#include "util/arena.h"
#include "util/sb.h"
#include "lower/lower.h"
#include "target/template.h"

/* ---- elementwise expressions (expr.c) --------------------------------------- */
/* Whether op can be emitted as a float expression. */
bool kiln_expr_supported(const kiln_node *n);
/* A float32 node the generator can emit as an expression: the C template
 * set's expr_op (fusable into epilogues and elementwise groups). */
bool kiln_expr_op(const kiln_graph *g, const kiln_node *n);
/* Appends "<out> = f(operands);" for node n (float operands as C expressions).
 * Returns false if the op is not supported. */
bool kiln_expr_emit(kiln_sb *b, const kiln_node *n, const char *const *operands, int n_operands,
                    const char *out);

/* The C expression reading task arg `arg` (a float operand of the epilogue or
 * an elementwise group) at flat output storage index `idx` (a C expression),
 * for output value y. */
void kiln_emit_operand(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int arg,
                       const kiln_value *y, const char *idx);
/* The same, given `chan`: a C expression for the channel of idx when the
 * loop knows it, so per-channel operands are read without dividing idx:
 * blocked outputs (a block's base channel plus the lane: contiguous across
 * the lanes; whole blocks only), or a row-major one whose loop runs over
 * one channel (InstanceNormalization's rows). NULL: derived from idx. */
void kiln_emit_operand_ch(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int arg,
                          const kiln_value *y, const char *idx, const char *chan);
void kiln_emit_epilogue_ch(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, const char *var,
                           const char *idx, const char *chan);
/* Emits statements applying the group's nodes [t->epi_from, ..) to float
 * variable `var` (holding the anchor's result) at flat index `idx`. */
void kiln_emit_epilogue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, const char *var,
                        const char *idx);
/* True when the task has epilogue nodes. */
bool kiln_task_has_epilogue(const kiln_lowered *l, const kiln_task *t);

/* Declares a<k> (inputs) and o<k> (outputs) float pointers from the task
 * context, first lines of task_. */
void kiln_emit_arg_ptrs(kiln_sb *b, const kiln_task *t);
/* The task function's opening line. */
#define KILN_TASK_SIG "static void task_(void *ctx_, int64_t begin_, int64_t end_, int thread_)\n{\n"
/* Kernels that take their rows at run time (a shapes_bound graph: a VM
 * specialization). The task's extent is the rows (kiln_task.extent, the
 * step's kiln_rt.extent); the source never names them, so the same layer at
 * another sequence length is the same kernel (kiln_codegen_name_by_source).
 * Knobs that depend on the rows take KILN_RT_ROWS instead: a transformer's
 * usual sequence length. KILN_RT_EXTENT reads the rows inside task_. */
#define KILN_RT_ROWS 128
#define KILN_RT_EXTENT "k_->rt->extent"
/* The symbol extent a kernel of a shapes_bound graph leaves out of its
 * source for a value of `shape` (kiln_graph_sym_extent), 0: none (not a
 * shapes_bound graph, or no dim of `shape` is a symbol's). */
int64_t kiln_rt_sym_extent(const kiln_lowered *l, const kiln_shape *shape);
/* The element count of `shape` with the dims of extent e (> 0) at
 * KILN_RT_ROWS: what knobs that follow the size are chosen for. */
int64_t kiln_rt_numel(const kiln_shape *shape, int64_t e);
/* A size in a kernel that takes the symbol extent e at run time: c * e^pow.
 * kiln_rt_str writes it with `ev` for e ("(c * ev * ..)"), or the literal c
 * when pow is 0; kiln_rt_dims is the product of dims[from, to) with the dims
 * of extent e (> 0) counted in pow (e 0: a literal product). */
typedef struct kiln_rt_size {
    int64_t c;
    int pow;
} kiln_rt_size;
const char *kiln_rt_str(char *buf, size_t n, kiln_rt_size z, const char *ev);
kiln_rt_size kiln_rt_dims(const int64_t *dims, int from, int to, int64_t e);

/* Kernels over broadcast operands walked by output rows (emit_bcast.c:
 * tpl_compare.c, tpl_where.c). kiln_bcast_space sets the task's extent (a
 * symbol's, in a shapes_bound graph) and its rows_per_task knob;
 * kiln_bcast_text_of writes the sizes and operand strides (numbers, or in
 * terms of E_); the consts go before task_, the walk opens the row loop
 * with off[k] set for each operand; the entry runs the rows' tasks. */
struct kiln_bcast_rows;
typedef struct kiln_bcast_text {
    char rows[64], last[64], rows_entry[96];
    char dims[KILN_MAX_RANK][48];
    char st[3][KILN_MAX_RANK][48];
} kiln_bcast_text;
int64_t kiln_bcast_extent(const kiln_lowered *l, const kiln_node *n);
void kiln_bcast_space(kiln_lowered *l, kiln_task *t, const struct kiln_bcast_rows *w);
void kiln_bcast_text_of(const kiln_lowered *l, const kiln_task *t, const struct kiln_bcast_rows *w,
                        kiln_bcast_text *x);
void kiln_emit_bcast_consts(kiln_sb *b, const kiln_task *t, const kiln_bcast_text *x);
void kiln_emit_bcast_walk(kiln_sb *b, const kiln_task *t, const struct kiln_bcast_rows *w,
                          const kiln_bcast_text *x);
void kiln_emit_bcast_entry(kiln_sb *b, const kiln_task *t, const struct kiln_bcast_rows *w,
                           const kiln_bcast_text *x, int rpt);
/* Per-thread workspace pointer expression inside task_. */
#define KILN_TASK_WS "((char *)k_->rt->workspace + (int64_t)thread_ * k_->rt->workspace_bytes)"

/* Opening of a kernel file: banner, includes, the args pointer typedefs.
 * A `headers` entry that starts with '#' is a preprocessor line printed as it
 * is, in order (a #define the next header reads). */
void kiln_emit_prologue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                        const char *const *headers, int n_headers);
/* kiln_emit_prologue of a kernel on one register-tiled header, with the
 * bit sets of the tile widths its loops take defined before it:
 * <prefix>_TILES_T = tm, <prefix>_TILES_O = om (kiln_kernels_conv.h,
 * kiln_kernels_dense.h), and, when ps is not 0, the input strides its
 * tiles take, <prefix>_PS = ps (kiln_conv_ps_bit). */
void kiln_emit_prologue_tiles(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                              const char *prefix, uint32_t tm, uint32_t om, uint32_t ps,
                              const char *header);
/* The exported kernel function running `n_tasks` tasks of task_ with `grain`. */
void kiln_emit_entry(kiln_sb *b, const kiln_task *t, const char *n_tasks, int64_t grain);
/* kiln_emit_entry over `rows` in tasks of `per` (a constant the source names
 * `per_name`): ceil(rows / per) tasks, or, for a task whose rows come at
 * run time (t->extent > 0), ceil(rt->extent / per_name). */
void kiln_emit_entry_rows(kiln_sb *b, const kiln_task *t, int64_t rows, const char *per_name,
                          int64_t per);
/* kiln_emit_entry with the grain a C expression of the generated code (it
 * may read rt, the kiln_rt: rt->num_threads). */
void kiln_emit_entry_grain(kiln_sb *b, const kiln_task *t, const char *n_tasks, const char *grain);

/* ---- shared by several templates (tpl_common.c, emit_movement.c) ---------- */
/* A float32 Conv with a constant weight whose 1-D/2-D geometry resolves. */
bool kiln_tpl_conv_operands(const kiln_graph *g, const kiln_node *n);
/* Whether conv2d_wino_nchwc takes a conv of this geometry (3x3 stride 1,
 * groups 1, enough channels and output tiles; tpl_conv2d_wino_nchwc.c), given
 * NCHW{vec}c in and out: conv2d_nchwc asks for a blocked input when so. */
struct kiln_win2d;
bool kiln_tpl_wino_takes(const struct kiln_win2d *w);
/* Whether it takes one that kiln_tpl_wino_takes leaves to conv2d_nchwc (a
 * small map) when the node asks for it (KILN_TPL_ALGO_WINOGRAD). */
bool kiln_tpl_wino_on_request(const struct kiln_win2d *w);
/* Row-major data input (input 0). */
bool kiln_tpl_row_major_in(const kiln_graph *g, const kiln_node *n);
/* Whether every reader of value v keeps a blocked input blocked (tpl_transpose.c;
 * concat: a channel Concat counts as one). */
bool kiln_tpl_readers_take_blocks(const kiln_graph *g, int v, bool concat);
/* The group width gw of a grouped Conv whose blocks of `block` channels hold
 * whole groups (C_in/g == C_out/g == gw, 2 <= gw < block, block % gw == 0,
 * C_in % block == 0), or 0: the narrow-group templates' conv. */
int64_t kiln_tpl_narrow_group_width(const kiln_graph *g, const kiln_node *n, int block);
/* The task function and entry of a conv template whose kernel header has
 * PREFIX_run(&P_, x, w, bias, residual, out, begin, end, ws),
 * PREFIX_task_out and PREFIX_tasks (dwconv, gconv): the run on the task
 * range, or, when the group has epilogue nodes the header does not apply,
 * task by task with those nodes on each task's output while in cache.
 * spans: PREFIX_task_out also gives a span count and stride
 * (&first, &len, &n_spans, &stride: a task writing every channel block's
 * rows, as the Winograd conv's), else one span (&first, &len). */
void kiln_tpl_emit_conv_tasks(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                              const char *prefix, bool spans);
/* Value v is float32. */
bool kiln_tpl_f32(const kiln_graph *g, int v);
/* The kernel headers' epilogue of a conv-like group: KILN_EPI_* flags from
 * the bias and the longest prefix of the group's nodes after the anchor that
 * the header applies (a residual Add, then Relu, then Clip) and that no
 * later node reads past; sets t->residual_arg, t->epi_from (the first node
 * the generated code applies, kiln_emit_epilogue) and the clip bounds. */
int kiln_tpl_header_epilogue(const kiln_lowered *l, kiln_task *t, bool has_bias, float *lo,
                             float *hi);
/* A loop applying the group's nodes [t->epi_from, ..) in place to o0[first,
 * first + len) (C expressions): the conv-like templates' epilogue beyond
 * what their kernel header applies, run on each task's output while it is
 * in cache. */
void kiln_emit_epilogue_span(kiln_sb *b, const kiln_lowered *l, const kiln_task *t,
                             const char *first, const char *len);
/* The C type generated code reads and writes a dtype's elements as
 * (float16: its bits, bool: a byte); NULL for dtypes without one. */
const char *kiln_tpl_ctype(kiln_dtype t);
/* Packing a constant weight operand (tpl_common.c; every template that
 * packs one): kiln_tpl_pack_buffer allocates room for `floats` floats of
 * node n's packed weights; kiln_tpl_use_packed takes the filled buffer
 * (owned from then on, freed on failure too), adds it to the model's
 * weights as constant value wv in `layout` and points task t's argument
 * for wv at it. */
kiln_status kiln_tpl_pack_buffer(const kiln_node *n, int64_t floats, float **out, kiln_error *err);
kiln_status kiln_tpl_use_packed(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                const char *layout, float *packed, int64_t floats,
                                kiln_error *err);
/* The same through the graph's pack memo (util/packmemo.h), for a packing
 * whose every parameter besides wv's bytes is in `key` (template, sizes,
 * flags): kiln_tpl_packed_before points task t's argument for wv at the
 * weights file of an earlier build that packed wv's bytes so (mapped, *hit
 * true: nothing to pack); kiln_tpl_use_packed_key is kiln_tpl_use_packed
 * that records the file for the next build. Without a memo, or for bytes
 * that are not the memo's stable sources, they are a miss and
 * kiln_tpl_use_packed. */
kiln_status kiln_tpl_packed_before(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                   const char *layout, const char *key, int64_t floats,
                                   bool *hit, kiln_error *err);
kiln_status kiln_tpl_use_packed_key(kiln_lowered *l, kiln_task *t, const kiln_value *wv,
                                    const char *layout, float *packed, int64_t floats,
                                    const char *key, kiln_error *err);
/* A memo key for a packing that reads nothing but its template's params
 * struct (plain numbers) and the weights: `name` and the hash of the
 * struct's bytes. Knobs the packing ignores make it stricter than needed
 * (a miss, never a wrong file). */
void kiln_tpl_params_key(char *key, size_t cap, const char *name, const void *params,
                         size_t size);
/* A conv whose c output channels are padded to blocks of cb reads its bias
 * (input 2, a constant) as whole blocks: re-lowers it zero-padded
 * (tpl_common.c; the blocked and depthwise convs). Nothing to do without a
 * bias or padding. */
kiln_status kiln_tpl_pad_bias(kiln_lowered *l, kiln_task *t, const kiln_node *n, int64_t c,
                              int cb, kiln_error *err);
/* A conv's geometry as the conv kernel header's params (tpl_conv2d_nchwc.c). */
struct kiln_win2d;
struct kiln_conv_params;
struct kiln_conv_params kiln_tpl_conv_params(const struct kiln_win2d *w, int groups, int cb_in,
                                             int cb_out);
/* The body of a kiln_conv_params task after its prologue: params literal,
 * task function with the epilogue beyond the header's, entry
 * (tpl_conv2d_nchwc.c; gconv2d_nchwc uses it too). */
void kiln_tpl_emit_conv_body(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
/* The opening of a kernel on kiln_conv_run (this template's and
 * gconv2d_nchwc's): kiln_emit_prologue with the tile widths its loops take
 * (KILN_CONV_TILES_T/O, kiln_kernels_conv.h) defined before the header. */
void kiln_tpl_emit_conv_prologue(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
/* "NULL" or a<k> / o<k>. */
void kiln_emit_arg_or_null(kiln_sb *b, int arg, bool out);

/* Emitters kept by op family (emit_pool.c, emit_norm.c, emit_movement.c);
 * the templates' descriptors point at them. */
kiln_status kiln_emit_pool(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_global_pool(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_softmax(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_layernorm(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
/* A LayerNormalization's or InstanceNormalization's rows (emit_norm.c). */
int64_t kiln_norm_rows(const kiln_graph *g, const kiln_node *n);
kiln_status kiln_emit_reduce(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_elemwise(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_strided(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
/* The space of the strided and copy emitters' templates: in a shapes_bound
 * graph a row-major output with a symbol's extent takes it at run time. */
kiln_status kiln_space_strided(kiln_lowered *l, kiln_task *t, kiln_error *err);
/* Concat and Split (emit_movement.c); kiln_space_slabs: their sizes at
 * run time in a shapes_bound graph (the symbol's extent) */
kiln_status kiln_space_slabs(kiln_lowered *l, kiln_task *t, kiln_error *err);
kiln_status kiln_emit_concat(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_split(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_pad(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_layout(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
kiln_status kiln_emit_resize(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);
/* The reference-kernel fallback (emit_ref.c). */
kiln_status kiln_emit_ref(kiln_sb *b, const kiln_lowered *l, const kiln_task *t);

/* The whole source of the task's kernel. */
kiln_status kiln_codegen_kernel(const kiln_lowered *l, const kiln_task *t, char **source,
                                kiln_error *err);

/* ---- the model (emit_model.c) ---------------------------------------------------- */
/* Names each task whose kernel takes an extent at run time (t->extent > 0)
 * by the hash of its source, and shares kernels by name again: the same
 * layer at another extent is the same kernel (object cache). After the
 * last kiln_lowered_finalize, before the kernels are generated. */
kiln_status kiln_codegen_name_by_source(kiln_lowered *l, kiln_error *err);
/* Lays the weights out (64-byte aligned offsets into the blob; not the
 * tensors kept as files) and writes the blob to `path` (NULL: only the
 * layout). */
kiln_status kiln_codegen_weights(kiln_lowered *l, const char *path, int64_t *total,
                                 kiln_error *err);
/* model.c: tensors, steps, kiln_model_get(). */
kiln_status kiln_codegen_model(const kiln_lowered *l, const char *name, const char *target,
                               const char *build_id, const char *metadata_json,
                               int64_t weights_bytes, char **source, kiln_error *err);
/* A step's name: its fused group's nodes, "+"-joined (at most 6, then
 * "+..."); malloc'ed, NULL when out of memory. */
char *kiln_codegen_group_name(const kiln_lowered *l, const kiln_task *t);
/* The assembly file embedding the blob at `blob_path`. */
char *kiln_codegen_weights_asm(const char *blob_path);
/* The descriptor model.c would hold, built in arena `a` (model_desc.c):
 * the same tables, each kernel resolved by `resolve` (the function of that
 * name in a loaded .so, or NULL), the weights blob copied in. *out stays
 * NULL, with KILN_OK, when a kernel does not resolve (the caller links a
 * .so of its own instead). */
kiln_status kiln_codegen_model_desc(kiln_lowered *l, const char *name, const char *target,
                                    const char *build_id, const char *metadata_json,
                                    kiln_kernel_fn (*resolve)(void *, const char *), void *rctx,
                                    kiln_arena *a, kiln_abi_model **out, kiln_error *err);

#endif
