/* tests/compiler/test_attention.c: the fuse-attention pass and the attention
 * template against the reference executor on the unfused graph: random
 * batch, heads, sequence lengths (Sq != Sk, odd, 1) and head sizes (D not a
 * multiple of 16, Dv over 64), additive masks of several broadcast shapes or
 * none, and three exported forms (bert: head split/merge transposes around,
 * scores / c; vit: q * c, K^T by a transpose, no merge; torchvision's
 * nn.MultiheadAttention: rank 3, q / c), and masked_fill's Where with -inf
 * or float32's min (a constant causal mask, a run-time one). rtol 1e-3,
 * atol 1e-4. The Attention
 * reference kernel is checked the same way against the unfused graph's. In
 * a shapes_bound graph, self-attention's length comes at run time: one
 * kernel for every length (test_rt_len); so does the key count of a step
 * over a KV cache (test_rt_keys). */
#include "codegen/c/codegen.h"
#include "compiler_test.h"
#include "pass/pass.h"
#include "target/target.h"
#include "util/rng.h"

static char *dir;
static int case_no;

static int node(kiln_graph *g, kiln_op op, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, NULL, in, n_in, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

static int transpose(kiln_graph *g, int x, int a, int b, int c, int d)
{
    int id = kiln_graph_add_node(g, KILN_OP_TRANSPOSE, NULL, &x, 1, 1);
    const int64_t p[4] = {a, b, c, d};
    assert_int_equal(kiln_node_set_ints(g, id, "perm", p, 4), KILN_OK);
    return kiln_graph_node_output(g, id, 0);
}

static int transpose3(kiln_graph *g, int x, int a, int b, int c)
{
    int id = kiln_graph_add_node(g, KILN_OP_TRANSPOSE, NULL, &x, 1, 1);
    const int64_t p[3] = {a, b, c};
    assert_int_equal(kiln_node_set_ints(g, id, "perm", p, 3), KILN_OK);
    return kiln_graph_node_output(g, id, 0);
}

static int scalar(kiln_graph *g, float v)
{
    kiln_shape s = {.rank = 0};
    return kiln_graph_add_const(g, NULL, KILN_DTYPE_FLOAT32, &s, &v);
}

typedef struct acase {
    int64_t B, H, Sq, Sk, D, Dv;
    int mask; /* 0 none, 1 [B,1,1,Sk] input, 2 [Sq,Sk] const with -1e4 entries, 3 full input,
               * masked_fill: 4 Where(B, -inf, S), B a causal [Sq,Sk] bool constant;
               * 5 Where(B, S, float32 min), B a [B,1,Sq,Sk] bool input (not form 2) */
    int form; /* 0 bert's, 1 vit's, 2 torchvision's nn.MultiheadAttention (rank 3, B = 1),
               * 3 vit's unscaled (softmax(q k^T) v: a scale of exactly 1, also what
               * a decoder's folded constant queries leave), 4 vit's with V and
               * the output channel-major ([B, H, Dv, Sk] in, [B, H, Dv, Sq] out:
               * a diffusion UNet's attention over [C, HW]) */
} acase;

/* Runs graph g's output through the reference executor on inputs from seed. */
static float *ref_run(const kiln_graph *g, int64_t *n)
{
    kiln_ref_executor *ex = NULL;
    kiln_error err = {0};
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    for (int i = 0; i < kiln_graph_num_inputs(g); i++) {
        kiln_tensor t = {0};
        const char *name;
        assert_int_equal(kiln_graph_input_info(g, i, &name, &t.dtype, &t.shape), KILN_OK);
        assert_int_equal(kiln_tensor_alloc(&t, t.dtype, &t.shape, &err), KILN_OK);
        if (t.dtype == KILN_DTYPE_BOOL)
            ct_fill_bool(t.data, kiln_shape_numel(&t.shape), 600 + (uint64_t)i);
        else
            kt_fill_random(t.data, kiln_shape_numel(&t.shape), 600 + (uint64_t)i, -1.0f, 1.0f);
        assert_int_equal(kiln_ref_executor_set_input(ex, i, &t, &err), KILN_OK);
        kiln_tensor_release(&t);
    }
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    const kiln_tensor *o = kiln_ref_executor_output(ex, 0);
    *n = kiln_shape_numel(&o->shape);
    float *copy = malloc(sizeof(float) * (size_t)*n);
    assert_non_null(copy);
    memcpy(copy, o->data, sizeof(float) * (size_t)*n);
    kiln_ref_executor_destroy(ex);
    return copy;
}

/* The Attention reference kernel (on the fused graph f) against the unfused
 * graph g's MatMul / Softmax reference kernels. */
static void ref_vs_ref(const kiln_graph *g, const kiln_graph *f)
{
    int64_t n1, n2;
    float *a = ref_run(g, &n1), *b = ref_run(f, &n2);
    assert_int_equal(n1, n2);
    ct_result r = ct_compare(a, b, n1, 1e-4, 1e-5);
    if (r.bad)
        fail_msg("case %d: the Attention reference kernel differs from the unfused graph at %lld "
                 "of %lld elements",
                 case_no, (long long)r.bad, (long long)n1);
    free(a);
    free(b);
}

/* The unfused graph of case c, its shapes inferred. */
static kiln_graph *build_case(const acase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int q, kt, v;
    if (c->form == 2) {
        kiln_shape qs = {.rank = 3, .dims = {c->Sq, c->H, c->D}};
        kiln_shape kvs = {.rank = 3, .dims = {c->Sk, c->H, c->D}};
        kiln_shape vs = {.rank = 3, .dims = {c->Sk, c->H, c->Dv}};
        q = transpose3(g, kiln_graph_add_input(g, "q", KILN_DTYPE_FLOAT32, &qs), 1, 0, 2);
        int in[2] = {q, scalar(g, 2.9f)};
        q = node(g, KILN_OP_DIV, in, 2);
        kt = transpose3(g, kiln_graph_add_input(g, "k", KILN_DTYPE_FLOAT32, &kvs), 1, 2, 0);
        v = transpose3(g, kiln_graph_add_input(g, "v", KILN_DTYPE_FLOAT32, &vs), 1, 0, 2);
    } else if (c->form == 1 || c->form == 3 || c->form == 4) {
        kiln_shape qs = {.rank = 4, .dims = {c->B, c->H, c->Sq, c->D}};
        kiln_shape kvs = {.rank = 4, .dims = {c->B, c->H, c->Sk, c->D}};
        kiln_shape vs = {.rank = 4, .dims = {c->B, c->H, c->Sk, c->Dv}};
        q = kiln_graph_add_input(g, "q", KILN_DTYPE_FLOAT32, &qs);
        if (c->form == 1) {
            int in[2] = {q, scalar(g, 0.37f)};
            q = node(g, KILN_OP_MUL, in, 2);
        }
        kt = transpose(g, kiln_graph_add_input(g, "k", KILN_DTYPE_FLOAT32, &kvs), 0, 1, 3, 2);
        if (c->form == 4) {
            kiln_shape vt = {.rank = 4, .dims = {c->B, c->H, c->Dv, c->Sk}};
            v = transpose(g, kiln_graph_add_input(g, "v", KILN_DTYPE_FLOAT32, &vt), 0, 1, 3, 2);
        } else {
            v = kiln_graph_add_input(g, "v", KILN_DTYPE_FLOAT32, &vs);
        }
    } else {
        kiln_shape qs = {.rank = 4, .dims = {c->B, c->Sq, c->H, c->D}};
        kiln_shape kvs = {.rank = 4, .dims = {c->B, c->Sk, c->H, c->D}};
        kiln_shape vs = {.rank = 4, .dims = {c->B, c->Sk, c->H, c->Dv}};
        q = transpose(g, kiln_graph_add_input(g, "q", KILN_DTYPE_FLOAT32, &qs), 0, 2, 1, 3);
        kt = transpose(g, kiln_graph_add_input(g, "k", KILN_DTYPE_FLOAT32, &kvs), 0, 2, 3, 1);
        v = transpose(g, kiln_graph_add_input(g, "v", KILN_DTYPE_FLOAT32, &vs), 0, 2, 1, 3);
    }
    int in[2] = {q, kt};
    int s = node(g, KILN_OP_MATMUL, in, 2);
    if (c->form == 0) {
        int d[2] = {s, scalar(g, 1.7f)};
        s = node(g, KILN_OP_DIV, d, 2);
    }
    if (c->mask >= 4) {
        int b, in3[3];
        if (c->mask == 4) {
            kiln_shape bs = {.rank = 2, .dims = {c->Sq, c->Sk}};
            uint8_t *data = NULL;
            b = kiln_graph_add_const_uninit(g, "causal", KILN_DTYPE_BOOL, &bs, true,
                                            (void **)&data);
            for (int64_t i = 0; i < c->Sq; i++)
                for (int64_t j = 0; j < c->Sk; j++)
                    data[i * c->Sk + j] = j > i;
            in3[0] = b, in3[1] = scalar(g, -INFINITY), in3[2] = s;
        } else {
            kiln_shape bs = {.rank = 4, .dims = {c->B, 1, c->Sq, c->Sk}};
            b = kiln_graph_add_input(g, "keep", KILN_DTYPE_BOOL, &bs);
            in3[0] = b, in3[1] = s, in3[2] = scalar(g, -3.4028235e38f);
        }
        s = node(g, KILN_OP_WHERE, in3, 3);
    } else if (c->mask) {
        int m;
        if (c->mask == 2) {
            kiln_shape ms = {.rank = 2, .dims = {c->Sq, c->Sk}};
            float *data = NULL;
            m = kiln_graph_add_const_uninit(g, "mask", KILN_DTYPE_FLOAT32, &ms, true,
                                            (void **)&data);
            kt_fill_random(data, c->Sq * c->Sk, 77 + (uint64_t)case_no, -2.0f, 0.0f);
            for (int64_t i = 0; i < c->Sq; i++)
                for (int64_t j = i + 1; j < c->Sk; j++)
                    data[i * c->Sk + j] = -10000.0f; /* causal */
        } else {
            kiln_shape ms = c->mask == 1 ? (kiln_shape){.rank = 4, .dims = {c->B, 1, 1, c->Sk}}
                                         : (kiln_shape){.rank = 4,
                                                        .dims = {c->B, c->H, c->Sq, c->Sk}};
            if (c->form == 2) /* rank 3: [1, Sk] or [H, Sq, Sk] */
                ms = c->mask == 1 ? (kiln_shape){.rank = 2, .dims = {1, c->Sk}}
                                  : (kiln_shape){.rank = 3, .dims = {c->H, c->Sq, c->Sk}};
            m = kiln_graph_add_input(g, "mask", KILN_DTYPE_FLOAT32, &ms);
        }
        int a[2] = {m, s}; /* mask first: either order is matched */
        s = node(g, KILN_OP_ADD, a, 2);
    }
    int sm = kiln_graph_add_node(g, KILN_OP_SOFTMAX, NULL, &s, 1, 1);
    assert_int_equal(kiln_node_set_int(g, sm, "axis", -1), KILN_OK);
    int in2[2] = {kiln_graph_node_output(g, sm, 0), v};
    int y = node(g, KILN_OP_MATMUL, in2, 2);
    if (c->form == 0)
        y = transpose(g, y, 0, 2, 1, 3);
    else if (c->form == 2)
        y = transpose3(g, y, 1, 0, 2);
    else if (c->form == 4)
        y = transpose(g, y, 0, 1, 3, 2);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    return g;
}

static void run_case(const acase *c)
{
    kiln_graph *g = build_case(c);
    kiln_error err = {0};

    /* the pass makes one Attention of it */
    kiln_pass_ctx *ctx = NULL;
    kiln_target tg;
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    assert_int_equal(kiln_pass_ctx_create(g, &tg, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "dce", &err), KILN_OK);
    int n_att = 0, n_other = 0;
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        n_att += ctx->g->nodes[i]->op == KILN_OP_ATTENTION;
        n_other += ctx->g->nodes[i]->op != KILN_OP_ATTENTION;
    }
    if (n_att != 1 || n_other != (c->mask == 5)) /* a run-time fill: its mask's Where */
        fail_msg("case %d: %d Attention and %d other nodes after fuse-attention", case_no, n_att,
                 n_other);
    ref_vs_ref(g, ctx->g);
    kiln_pass_ctx_destroy(ctx);

    char tag[32];
    snprintf(tag, sizeof tag, "att%d", case_no);
    ct_check_graph(g, dir, tag, 0, 300 + (uint64_t)case_no, 1e-3, 1e-4);
    snprintf(tag, sizeof tag, "att%d_k", case_no);
    ct_check_graph(g, dir, tag, 900 + (uint64_t)case_no, 400 + (uint64_t)case_no, 1e-3, 1e-4);
    /* the AVX2 register block too (4 rows x 2 vectors of 8, not 4 x 4 of
     * 16) where the host runs AVX-512 */
    if (tg.vec == 16) {
        snprintf(tag, sizeof tag, "att%d_avx2", case_no);
        ct_check_graph_on(g, dir, tag, "avx2", 0, 500 + (uint64_t)case_no, 1e-3, 1e-4);
    }
    case_no++;
    kiln_graph_destroy(g);
}

static void test_fixed(void **state)
{
    (void)state;
    static const acase cases[] = {
        {1, 12, 128, 128, 64, 64, 1, 0}, /* bert-base's */
        {1, 3, 197, 197, 64, 64, 0, 1},   /* vit's, fewer heads */
        {1, 3, 197, 197, 64, 64, 0, 2},   /* torchvision vit_b_16's export, fewer heads */
        {2, 2, 5, 9, 7, 3, 3, 0},
        {1, 1, 1, 1, 1, 1, 0, 0},
        {1, 2, 33, 33, 17, 17, 2, 1},
        {1, 3, 20, 20, 9, 70, 2, 2},
        {1, 2, 70, 150, 32, 128, 1, 0},   /* two 64-column V blocks, P V in three key blocks */
        {1, 1, 100, 65, 16, 64, 3, 1},    /* one key past a whole score block */
        {1, 2, 40, 40, 16, 16, 0, 3},     /* unscaled: SCALE_ 1 (once printed "1f") */
        {1, 1, 256, 256, 64, 128, 0, 4},  /* channel-major V and output (V packed, rows staged) */
        {2, 2, 37, 45, 9, 70, 3, 4},      /* the same, ragged, a mask, a partial column block */
        {1, 4, 96, 96, 64, 64, 4, 0},     /* nanoGPT's masked_fill(causal, -inf) */
        {1, 2, 30, 41, 16, 16, 4, 1},     /* the same, Sq != Sk */
        {2, 3, 19, 19, 8, 8, 5, 0},       /* GPT-2's torch.where(keep, S, min), a run-time mask */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

static void test_random(void **state)
{
    (void)state;
    kiln_rng rng;
    kiln_rng_seed(&rng, 2024);
    for (int i = 0; i < 8; i++) {
        acase c;
        c.B = 1 + (int64_t)(kiln_rng_uniform(&rng) * 2);
        c.H = 1 + (int64_t)(kiln_rng_uniform(&rng) * 4);
        c.Sq = 1 + (int64_t)(kiln_rng_uniform(&rng) * 70);
        c.Sk = 1 + (int64_t)(kiln_rng_uniform(&rng) * 70);
        c.D = 1 + (int64_t)(kiln_rng_uniform(&rng) * 40);
        c.Dv = 1 + (int64_t)(kiln_rng_uniform(&rng) * 40);
        c.mask = (int)(kiln_rng_uniform(&rng) * 4);
        c.form = (int)(kiln_rng_uniform(&rng) * 3);
        if (i == 7)
            c.form = 4;
        if (c.form == 2)
            c.B = 1;
        if (c.mask == 2 && c.form)
            c.Sq = c.Sk;
        run_case(&c);
    }
}

/* The attention kernel of g's build (one task), its extent in *extent. */
static char *attention_kernel(const kiln_graph *g, int64_t *extent)
{
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    if (kiln_build_codegen(b, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    char *src = NULL;
    for (int i = 0; i < b->low->n_tasks; i++) {
        const kiln_task *t = &b->low->tasks[i];
        if (strcmp(t->tpl->name, "attention") != 0)
            continue;
        assert_null(src);
        *extent = t->extent;
        assert_int_equal(kiln_codegen_kernel(b->low, t, &src, &err), KILN_OK);
    }
    assert_non_null(src);
    kiln_build_destroy(b);
    return src;
}

/* In a shapes_bound graph (a VM specialization), self-attention of one
 * sequence takes its length at run time: one kernel source for every
 * length from 5 (tail blocks of 1, 2 and 3 vectors, whole blocks), its
 * extent the length, the values the reference executor's, for operands
 * whose strides hold the length too (vit's [B, H, S, D] head stride, a
 * causal mask's row stride: written as a multiple of the length). At
 * length 1 a mask's last dim broadcasts (stride 0): its kernel differs,
 * and is still right. */
static void test_rt_len(void **state)
{
    (void)state;
    static const int64_t lens[] = {1, 5, 17, 33, 64, 70}; /* lens[1]'s kernel: the reference */
    static const acase forms[] = {
        {1, 2, 0, 0, 16, 16, 1, 0}, /* bert's, a [1, 1, 1, S] mask */
        {1, 3, 0, 0, 9, 20, 0, 1},  /* vit's, no mask */
        {1, 2, 0, 0, 8, 8, 1, 2},   /* nn.MultiheadAttention's, a [1, S] mask */
        {1, 2, 0, 0, 16, 16, 4, 0}, /* causal masked_fill: a [S, S] mask */
        {3, 2, 0, 0, 16, 16, 1, 0}, /* bert's at batch 3: [3, 1, 1, S] padding masks */
        {2, 3, 0, 0, 9, 20, 0, 1},  /* vit's at batch 2 */
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        char *first = NULL;
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            acase c = forms[f];
            c.Sq = c.Sk = lens[i];
            kiln_graph *g = build_case(&c);
            g->shapes_bound = true;
            int64_t extent = -1;
            char *src = attention_kernel(g, &extent);
            assert_int_equal(extent, lens[i]);
            if (first && strcmp(first, src) != 0)
                fail_msg("form %zu: the kernel at length %lld differs from length %lld's", f,
                         (long long)lens[i], (long long)lens[1]);
            if (!first && i == 1)
                first = src;
            else
                free(src);
            char tag[32];
            snprintf(tag, sizeof tag, "rt%zu_%lld", f, (long long)lens[i]);
            ct_check_graph(g, dir, tag, 0, 700 + (uint64_t)i, 1e-3, 1e-4);
            kiln_graph_destroy(g);
            case_no++;
        }
        free(first);
    }
}

/* A decoder's step over a KV cache: Sq queries (the new tokens) and Sk =
 * past + Sq keys. In a shapes_bound graph the keys' count comes at run
 * time: one source for every Sk above Sq, the extent Sk, the values the
 * reference executor's, for K and V whose head strides hold Sk, and masks
 * whose rows do (a [B, 1, 1, Sk] padding mask, a [B, H, Sq, Sk] input). */
static void test_rt_keys(void **state)
{
    (void)state;
    static const int64_t past[] = {1, 4, 16, 33, 69}; /* past[1]'s kernel: the reference */
    static const acase forms[] = {
        {1, 2, 1, 0, 16, 16, 1, 0}, /* one new token, bert's form, a padding mask */
        {1, 3, 1, 0, 9, 20, 0, 1},  /* vit's form, no mask */
        {1, 2, 4, 0, 16, 16, 3, 0}, /* four new tokens, a full [1, 2, 4, Sk] mask */
        {2, 2, 1, 0, 8, 8, 1, 0},   /* batch 2 */
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        char *first = NULL;
        for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
            acase c = forms[f];
            c.Sk = past[i] + c.Sq;
            kiln_graph *g = build_case(&c);
            g->shapes_bound = true;
            int64_t extent = -1;
            char *src = attention_kernel(g, &extent);
            assert_int_equal(extent, c.Sk);
            if (first && strcmp(first, src) != 0)
                fail_msg("form %zu: the kernel at %lld keys differs from %lld keys'", f,
                         (long long)c.Sk, (long long)(past[1] + c.Sq));
            if (!first && i == 1)
                first = src;
            else
                free(src);
            char tag[32];
            snprintf(tag, sizeof tag, "kv%zu_%lld", f, (long long)c.Sk);
            ct_check_graph(g, dir, tag, 0, 800 + (uint64_t)i, 1e-3, 1e-4);
            kiln_graph_destroy(g);
            case_no++;
        }
        free(first);
    }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_rt_len),
        cmocka_unit_test(test_rt_keys),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
