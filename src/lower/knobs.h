/* lower/knobs.h: knob spaces and analytic defaults per template. Each
 * function declares the task's knobs (name, space, default value). The
 * defaults come from the shapes and the cache sizes: the blocked conv's from
 * kiln_conv_default_params (the kernel header's register/cache model), the
 * others from simple work-per-task rules below. */
#ifndef KILN_LOWER_KNOBS_H
#define KILN_LOWER_KNOBS_H

#include "lower/geom.h"
#include "lower/lower.h"

/* Blocked conv: ow_tile, oc_tile, ic_tile, loop_order, oh_tile, oc_group
 * from the params the header's default filled. */
void kiln_knobs_conv_nchwc(kiln_task *t, const void *conv_params);
/* Copies the knob values back into the conv params. */
void kiln_knobs_apply_conv(const kiln_task *t, void *conv_params);
/* Depthwise conv: ow_tile, oh_tile (kiln_kernels_dwconv.h). */
void kiln_knobs_dwconv(kiln_task *t, const void *dw_params);
void kiln_knobs_apply_dwconv(const kiln_task *t, void *dw_params);
/* Templates that split `outer` x `rows` rows into tasks: rows_per_task. */
void kiln_knobs_rows(kiln_task *t, int64_t outer, int64_t rows, int64_t work_per_row);
/* Dense: mr (rows per register tile), nb (panel width), panels (per task). */
void kiln_knobs_dense(kiln_task *t, const kiln_dense *d, const kiln_target *tg);
/* Elementwise: chunk (elements per task). */
void kiln_knobs_chunk(kiln_task *t, int64_t total);

#endif
