/* tests/compiler/test_lower_shuffle.c: DepthToSpace (DCR and CRD) and
 * SpaceToDepth compiled end to end against the reference executor (exact:
 * they move values). The lower-shuffle pass (src/pass/lower_shuffle.c)
 * writes them as Reshape -> Transpose -> Reshape; each case asserts that
 * none is left after the pipeline. Cases: ESPCN's PixelShuffle (CRD, r = 3)
 * after a conv (a blocked producer), DCR with r = 2 and batch 2, r = 4,
 * SpaceToDepth r = 2 and a round trip through both. */
#include "compiler_test.h"

static char *dir;
static int case_no;

typedef struct scase {
    kiln_op op;      /* DepthToSpace or SpaceToDepth */
    const char *mode; /* DCR, CRD (DepthToSpace) */
    int n, c, h, w, b;
    bool conv;       /* a 3x3 conv in front (its output blocked) */
    bool round_trip; /* SpaceToDepth then DepthToSpace DCR */
} scase;

static int shuffle(kiln_graph *g, kiln_op op, const char *mode, int x, int b)
{
    int id = kiln_graph_add_node(g, op, NULL, &x, 1, 1);
    assert_true(id >= 0);
    assert_int_equal(kiln_node_set_int(g, id, "blocksize", b), KILN_OK);
    if (mode)
        assert_int_equal(kiln_node_set_string(g, id, "mode", mode), KILN_OK);
    return kiln_graph_node_output(g, id, 0);
}

static void check_case(const scase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, c->n, c->conv ? 8 : c->c, c->h, c->w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    if (c->conv) {
        static const int pads[4] = {1, 1, 1, 1};
        int w = ct_param(g, "w", ks(4, c->c, 8, 3, 3), 10 + (uint64_t)case_no, -0.5f, 0.5f);
        x = ct_conv(g, x, w, -1, 3, 1, pads, 1);
    }
    int y = shuffle(g, c->op, c->mode, x, c->b);
    if (c->round_trip)
        y = shuffle(g, KILN_OP_DEPTHTOSPACE, "DCR", y, c->b);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    static const kiln_op ops[2] = {KILN_OP_DEPTHTOSPACE, KILN_OP_SPACETODEPTH};
    for (int k = 0; k < 2; k++)
        if (ct_ops_left(g, case_no, ops[k], -1))
            fail_msg("case %d: a %s left after the pipeline", case_no, kiln_op_name(ops[k]));
    char tag[32];
    snprintf(tag, sizeof tag, "shuf%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, c->conv ? 1e-4 : 0.0,
                   c->conv ? 1e-5 : 0.0);
    case_no++;
    kiln_graph_destroy(g);
}

static void test_shuffle(void **state)
{
    (void)state;
    static const scase cases[] = {
        {KILN_OP_DEPTHTOSPACE, "CRD", 1, 27, 12, 10, 3, true, false},
        {KILN_OP_DEPTHTOSPACE, "DCR", 2, 8, 5, 7, 2, false, false},
        {KILN_OP_DEPTHTOSPACE, "CRD", 1, 32, 3, 4, 4, false, false},
        {KILN_OP_DEPTHTOSPACE, NULL, 1, 16, 6, 6, 2, true, false},
        {KILN_OP_SPACETODEPTH, NULL, 2, 3, 8, 6, 2, false, false},
        {KILN_OP_SPACETODEPTH, NULL, 1, 5, 9, 12, 3, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
