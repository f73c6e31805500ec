/* lower/geom.h: the geometry of the ops the templates implement, read once
 * from a node (attributes resolved the way shape inference resolves them),
 * shared by lowering (knob spaces, defaults, flops) and code generation. */
#ifndef KILN_LOWER_GEOM_H
#define KILN_LOWER_GEOM_H

#include "ir/graph.h"

/* 1-D and 2-D convolution and pooling; 1-D is 2-D with h = 1. */
typedef struct kiln_win2d {
    int64_t n, c, h, w;    /* input */
    int64_t m, oh, ow;     /* output channels (conv) and extents */
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int64_t groups;
    int bin, bout;         /* channel blocks of input and output (1: row-major) */
} kiln_win2d;

/* Conv (kernel from W) or pooling (kernel_shape) geometry; false when the op
 * is not 1-D/2-D or its attributes do not resolve. */
bool kiln_geom_win2d(const kiln_graph *g, const kiln_node *n, kiln_win2d *w);

/* Dense: Y[M,N] = A[M,K] x B (+ C). */
typedef struct kiln_dense {
    int64_t M, N, K;
    bool trans_a, trans_b;
    float alpha, beta;
    int bias_kind;         /* 0 none, 1 scalar, 2 per column [N], 3 full [M,N], 4 per row [M,1] */
} kiln_dense;

/* Gemm with constant B, or MatMul with a constant 2-D B (A flattened to
 * [M, K]); false otherwise. */
bool kiln_geom_dense(const kiln_graph *g, const kiln_node *n, kiln_dense *d);

/* Batched MatMul of activations: batch broadcast over leading dims. */
typedef struct kiln_bmm {
    int64_t batch, M, N, K;
    int rank;
    int64_t out_dims[KILN_MAX_RANK];
    int64_t a_bstride[KILN_MAX_RANK], b_bstride[KILN_MAX_RANK]; /* per batch dim, in matrices */
    int n_bdims;
} kiln_bmm;
bool kiln_geom_bmm(const kiln_graph *g, const kiln_node *n, kiln_bmm *b);

/* Broadcasting ops (Where, comparisons, logic): the output walked as rows
 * of its last dim, and each operand's element strides against the output's
 * dims (0 where it broadcasts or lacks the dim). A scalar output is [1]. */
#define KILN_GEOM_MAX_BCAST 3
typedef struct kiln_bcast_rows {
    int rank, n_ops;
    int64_t dims[KILN_MAX_RANK];
    int64_t st[KILN_GEOM_MAX_BCAST][KILN_MAX_RANK];
    int64_t rows, last; /* rows x last = the output's elements */
} kiln_bcast_rows;
/* Inputs [0, n_ops) of n against its output 0 (row-major); false when one
 * is absent or does not broadcast to it. */
bool kiln_geom_bcast_rows(const kiln_graph *g, const kiln_node *n, int n_ops,
                          kiln_bcast_rows *w);

/* outer x axis x inner decomposition of a shape around axis [a0, a1). */
void kiln_geom_split(const kiln_shape *s, int a0, int a1, int64_t *outer, int64_t *mid,
                     int64_t *inner);

#endif
