/* kiln_kernels_layout.h: NCHW <-> NCHW{cb}c relayouts, inserted by the
 * compiler at the edges of a run of blocked ops; and NCHW{cb}c <-> NHWC, the
 * Transposes perm [0,2,3,1] / [0,3,1,2] of a blocked value (channels-last
 * blocks of a network such as ConvNeXt: depthwise conv in blocks, LayerNorm
 * and the Linears over the last axis).
 *
 * NCHW [n][c][hw] <-> NCHW{cb}c [n][ceil(c/cb)][hw][cb]; to_blocked writes
 * zeros into the padding channels of the last block, from_blocked drops them.
 * Each is a transpose of a [cb][hw] slab into [hw][cb] (or back), done in
 * chunks of pixels so the cb source rows stay in L1. Tasks are image x
 * channel block (enough for 2+ threads on any real activation). */
#ifndef KILN_KERNELS_LAYOUT_H
#define KILN_KERNELS_LAYOUT_H

#include "kiln_kernels_common.h"

typedef struct kiln_layout_params {
    int n, c, hw; /* hw: product of the spatial extents */
    int cb;       /* channel block */
} kiln_layout_params;

static KILN_KINLINE int64_t kiln_layout_tasks(const kiln_layout_params *p)
{
    return (int64_t)p->n * kiln_k_cdiv(p->c, p->cb);
}

/* Floats of the blocked tensor (with channel padding). */
static inline int64_t kiln_layout_blocked_floats(const kiln_layout_params *p)
{
    return (int64_t)p->n * kiln_k_cdiv(p->c, p->cb) * p->cb * p->hw;
}

#define KILN_LAYOUT_CHUNK 64

static KILN_KINLINE void kiln_layout_to_blocked(const kiln_layout_params *p, const float *src,
                                                float *dst, int64_t task_begin, int64_t task_end)
{
    const int64_t cbn = kiln_k_cdiv(p->c, p->cb), hw = p->hw, cb = p->cb;
    for (int64_t t = task_begin; t < task_end; t++) {
        int64_t b = t % cbn, n = t / cbn;
        int64_t valid = kiln_k_min64(cb, p->c - b * cb);
        const float *s = src + (n * p->c + b * cb) * hw;
        float *d = dst + t * hw * cb;
        for (int64_t i0 = 0; i0 < hw; i0 += KILN_LAYOUT_CHUNK) {
            int64_t i1 = kiln_k_min64(hw, i0 + KILN_LAYOUT_CHUNK);
            for (int64_t l = 0; l < valid; l++)
                for (int64_t i = i0; i < i1; i++)
                    d[i * cb + l] = s[l * hw + i];
            for (int64_t l = valid; l < cb; l++)
                for (int64_t i = i0; i < i1; i++)
                    d[i * cb + l] = 0.0f;
        }
    }
}

static KILN_KINLINE void kiln_layout_from_blocked(const kiln_layout_params *p, const float *src,
                                                  float *dst, int64_t task_begin, int64_t task_end)
{
    const int64_t cbn = kiln_k_cdiv(p->c, p->cb), hw = p->hw, cb = p->cb;
    for (int64_t t = task_begin; t < task_end; t++) {
        int64_t b = t % cbn, n = t / cbn;
        int64_t valid = kiln_k_min64(cb, p->c - b * cb);
        const float *s = src + t * hw * cb;
        float *d = dst + (n * p->c + b * cb) * hw;
        for (int64_t i0 = 0; i0 < hw; i0 += KILN_LAYOUT_CHUNK) {
            int64_t i1 = kiln_k_min64(hw, i0 + KILN_LAYOUT_CHUNK);
            for (int64_t l = 0; l < valid; l++)
                for (int64_t i = i0; i < i1; i++)
                    d[l * hw + i] = s[i * cb + l];
        }
    }
}

/* NCHW{cb}c [n][ceil(c/cb)][hw][cb] <-> NHWC [n][hw][c]: a pixel's lanes
 * of one block are a contiguous run of cb floats in both, so each is one
 * short copy per pixel and block (a whole block: cb a constant after
 * inlining, one vector move). Tasks: image x chunk of `chunk` pixels. */
typedef struct kiln_nhwc_params {
    int n, c, hw; /* hw: product of the spatial extents */
    int cb;       /* channel block of the blocked side */
    int chunk;    /* pixels per task */
} kiln_nhwc_params;

static KILN_KINLINE int64_t kiln_nhwc_tasks(const kiln_nhwc_params *p)
{
    return (int64_t)p->n * kiln_k_cdiv(p->hw, p->chunk);
}

/* blocked -> NHWC; the padding lanes of a partial last block are dropped */
static KILN_KINLINE void kiln_nhwc_from_blocked(const kiln_nhwc_params *p, const float *src,
                                                float *dst, int64_t task_begin, int64_t task_end)
{
    const int64_t cbn = kiln_k_cdiv(p->c, p->cb), hw = p->hw, cb = p->cb, c = p->c;
    const int64_t nt = kiln_k_cdiv(p->hw, p->chunk);
    for (int64_t t = task_begin; t < task_end; t++) {
        int64_t n = t / nt, p0 = t % nt * p->chunk, p1 = kiln_k_min64(hw, p0 + p->chunk);
        if (c % cb == 0) {
            /* whole blocks: pixel by pixel, its row written contiguously */
            const float *s = src + n * cbn * hw * cb;
            float *d = dst + n * hw * c;
            for (int64_t i = p0; i < p1; i++)
                for (int64_t b = 0; b < cbn; b++)
                    for (int64_t l = 0; l < cb; l++)
                        d[i * c + b * cb + l] = s[(b * hw + i) * cb + l];
            continue;
        }
        for (int64_t b = 0; b < cbn; b++) {
            const float *s = src + (n * cbn + b) * hw * cb;
            float *d = dst + n * hw * c + b * cb;
            int64_t valid = kiln_k_min64(cb, c - b * cb);
            if (valid == cb) {
                for (int64_t i = p0; i < p1; i++)
                    for (int64_t l = 0; l < cb; l++)
                        d[i * c + l] = s[i * cb + l];
            } else {
                for (int64_t i = p0; i < p1; i++)
                    for (int64_t l = 0; l < valid; l++)
                        d[i * c + l] = s[i * cb + l];
            }
        }
    }
}

/* NHWC -> blocked; zeros into the padding lanes of a partial last block */
static KILN_KINLINE void kiln_nhwc_to_blocked(const kiln_nhwc_params *p, const float *src,
                                              float *dst, int64_t task_begin, int64_t task_end)
{
    const int64_t cbn = kiln_k_cdiv(p->c, p->cb), hw = p->hw, cb = p->cb, c = p->c;
    const int64_t nt = kiln_k_cdiv(p->hw, p->chunk);
    for (int64_t t = task_begin; t < task_end; t++) {
        int64_t n = t / nt, p0 = t % nt * p->chunk, p1 = kiln_k_min64(hw, p0 + p->chunk);
        for (int64_t b = 0; b < cbn; b++) {
            const float *s = src + n * hw * c + b * cb;
            float *d = dst + (n * cbn + b) * hw * cb;
            int64_t valid = kiln_k_min64(cb, c - b * cb);
            if (valid == cb) {
                for (int64_t i = p0; i < p1; i++)
                    for (int64_t l = 0; l < cb; l++)
                        d[i * cb + l] = s[i * c + l];
            } else {
                for (int64_t i = p0; i < p1; i++) {
                    for (int64_t l = 0; l < valid; l++)
                        d[i * cb + l] = s[i * c + l];
                    for (int64_t l = valid; l < cb; l++)
                        d[i * cb + l] = 0.0f;
                }
            }
        }
    }
}

#endif /* KILN_KERNELS_LAYOUT_H */
