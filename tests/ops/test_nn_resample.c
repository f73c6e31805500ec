/* tests/ops/test_nn_resample.c: the reference Resize and GridSample.
 *
 * Resize: hand-computed nearest up/downsampling (half_pixel), every
 * nearest_mode on asymmetric coordinates, linear interpolation of a linear
 * ramp f(i, j) = 10 i + j (exact, so the expected value is f at the clamped
 * source coordinate, derived here per coordinate mode), cubic against Keys'
 * kernel written as a function of the tap distance (with and without
 * exclude_outside), and tf_crop_and_resize's extrapolation.
 * Both of the kernel's paths (only the last two dims resized: plane by
 * plane; any dim: the general loop) equal the per-dim taps' product summed
 * in the documented order, bit for bit.
 * GridSample: hand-computed bilinear/nearest values under every padding mode
 * and both align_corners settings, and bicubic against the distance form of
 * Keys' kernel (A = -0.75). */
#include "nn_run.h"

#include "ir/infer_nn.h"
#include "ref/ref.h"

static nr resize_build(kiln_shape xs, const float *x, const char *mode, const char *coord)
{
    nr_in in = nr_f32(xs, x);
    nr t = nr_build(KILN_OP_RESIZE, 1, &in, 1);
    if (mode)
        kiln_node_set_string(t.g, t.node, "mode", mode);
    if (coord)
        kiln_node_set_string(t.g, t.node, "coordinate_transformation_mode", coord);
    return t;
}

static void test_nearest_hand(void **state)
{
    (void)state;
    static const float x[4] = {1, 2, 3, 4};
    nr t = resize_build(ks(4, 1, 1, 2, 2), x, "nearest", NULL);
    static const float sc[4] = {1, 1, 2, 3};
    kiln_node_set_floats(t.g, t.node, "scales", sc, 4);
    nr_run(&t);
    static const float want[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                   3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
    nr_expect_shape(&t, 0, ks(4, 1, 1, 4, 6));
    assert_allclose(t.out[0].data, want, 24, 0, 0);
    nr_free(&t);

    /* downsampling by 0.6: floor(2*0.6) = 1 row, floor(4*0.6) = 2 columns */
    static const float x2[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    t = resize_build(ks(4, 1, 1, 2, 4), x2, "nearest", NULL);
    static const float sc2[4] = {1, 1, 0.6f, 0.6f};
    kiln_node_set_floats(t.g, t.node, "scales", sc2, 4);
    nr_run(&t);
    static const float want2[2] = {1, 3};
    nr_expect_shape(&t, 0, ks(4, 1, 1, 1, 2));
    assert_allclose(t.out[0].data, want2, 2, 0, 0);
    nr_free(&t);
}

static void test_nearest_modes(void **state)
{
    (void)state;
    /* asymmetric, scale 2: x_ori = 0, 0.5, 1, 1.5, 2, 2.5 */
    static const float x[3] = {10, 20, 30};
    static const struct {
        const char *mode;
        float want[6];
    } cases[] = {{"round_prefer_floor", {10, 10, 20, 20, 30, 30}},
                 {"round_prefer_ceil", {10, 20, 20, 30, 30, 30}},
                 {"floor", {10, 10, 20, 20, 30, 30}},
                 {"ceil", {10, 20, 20, 30, 30, 30}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nr t = resize_build(ks(1, 3), x, "nearest", "asymmetric");
        kiln_node_set_string(t.g, t.node, "nearest_mode", cases[i].mode);
        static const int64_t sz[1] = {6};
        kiln_node_set_ints(t.g, t.node, "sizes", sz, 1);
        nr_run(&t);
        assert_allclose(t.out[0].data, cases[i].want, 6, 0, 0);
        nr_free(&t);
    }
}

/* Source coordinate of output x (extent out, input extent in, scale s). */
static double src_coord(const char *coord, int64_t x, int64_t in, double s)
{
    double ow = s * (double)in;
    if (strcmp(coord, "align_corners") == 0)
        return ow == 1.0 ? 0.0 : (double)x * (double)(in - 1) / (ow - 1.0);
    if (strcmp(coord, "asymmetric") == 0)
        return (double)x / s;
    if (strcmp(coord, "pytorch_half_pixel") == 0 && ow == 1.0)
        return -0.5;
    return ((double)x + 0.5) / s - 0.5;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void test_linear_ramp(void **state)
{
    (void)state;
    static const char *coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                   "asymmetric"};
    static const int64_t sizes[][2] = {{7, 5}, {2, 9}, {1, 3}, {4, 4}};
    const int64_t H = 4, W = 6;
    float x[24];
    for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++)
            x[i * W + j] = (float)(10 * i + j);
    for (size_t c = 0; c < 4; c++) {
        for (size_t z = 0; z < 4; z++) {
            int64_t oh = sizes[z][0], ow = sizes[z][1];
            nr t = resize_build(ks(4, 1, 1, H, W), x, "linear", coords[c]);
            int64_t sz[4] = {1, 1, oh, ow};
            kiln_node_set_ints(t.g, t.node, "sizes", sz, 4);
            nr_run(&t);
            nr_expect_shape(&t, 0, ks(4, 1, 1, oh, ow));
            float want[64];
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double yi = clampd(src_coord(coords[c], i, H, (double)oh / H), 0, H - 1);
                    double xj = clampd(src_coord(coords[c], j, W, (double)ow / W), 0, W - 1);
                    want[i * ow + j] = (float)(10 * yi + xj);
                }
            assert_allclose(t.out[0].data, want, oh * ow, 1e-5, 1e-5);
            nr_free(&t);
        }
    }
    /* hand: half_pixel 2x2 -> 4x4 (ONNX's documented example) */
    static const float x2[4] = {1, 2, 3, 4};
    nr t = resize_build(ks(4, 1, 1, 2, 2), x2, "linear", NULL);
    static const float sc[4] = {1, 1, 2, 2};
    kiln_node_set_floats(t.g, t.node, "scales", sc, 4);
    nr_run(&t);
    static const float want2[16] = {1,   1.25f, 1.75f, 2,   1.5f, 1.75f, 2.25f, 2.5f,
                                    2.5f, 2.75f, 3.25f, 3.5f, 3,    3.25f, 3.75f, 4};
    assert_allclose(t.out[0].data, want2, 16, 1e-6, 1e-6);
    nr_free(&t);
}

/* Keys' cubic kernel as a function of the distance t. */
static double keys(double t, double a)
{
    t = fabs(t);
    if (t <= 1)
        return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2)
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0;
}

static void test_cubic_1d(void **state)
{
    (void)state;
    const int64_t in = 6;
    float x[6];
    kt_fill_random(x, in, 7, -2.0f, 2.0f);
    static const int64_t outs[] = {13, 4};
    for (int excl = 0; excl < 2; excl++) {
        for (int a_i = 0; a_i < 2; a_i++) {
            for (int o_i = 0; o_i < 2; o_i++) {
                double a = a_i ? -0.5 : -0.75;
                int64_t out = outs[o_i];
                nr t = resize_build(ks(1, in), x, "cubic", NULL);
                kiln_node_set_ints(t.g, t.node, "sizes", &out, 1);
                kiln_node_set_float(t.g, t.node, "cubic_coeff_a", (float)a);
                kiln_node_set_int(t.g, t.node, "exclude_outside", excl);
                nr_run(&t);
                float want[16];
                double s = (double)out / (double)in;
                for (int64_t o = 0; o < out; o++) {
                    double xo = ((double)o + 0.5) / s - 0.5, acc = 0, wsum = 0;
                    /* the 4 integer taps within distance 2 (left-preferring) */
                    int64_t first = (int64_t)ceil(xo) - 2;
                    for (int64_t i = first; i < first + 4; i++) {
                        double wt = keys(xo - (double)i, a);
                        if (excl && (i < 0 || i >= in))
                            wt = 0;
                        int64_t ci = i < 0 ? 0 : i >= in ? in - 1 : i;
                        acc += wt * x[ci];
                        wsum += wt;
                    }
                    want[o] = (float)(excl ? acc / wsum : acc);
                }
                assert_allclose(t.out[0].data, want, out, 1e-5, 1e-6);
                nr_free(&t);
            }
        }
    }
}

static void test_crop_and_resize(void **state)
{
    (void)state;
    static const float x[4] = {0, 1, 2, 3};
    nr t = resize_build(ks(1, 4), x, "linear", "tf_crop_and_resize");
    static const int64_t sz[1] = {3};
    static const float roi[2] = {0.4f, 1.2f};
    kiln_node_set_ints(t.g, t.node, "sizes", sz, 1);
    kiln_node_set_floats(t.g, t.node, "roi", roi, 2);
    kiln_node_set_float(t.g, t.node, "extrapolation_value", 10.0f);
    nr_run(&t);
    /* x_ori = 0.4*3 + x*0.8*3/2 = 1.2, 2.4, 3.6 (outside: extrapolated) */
    static const float want[3] = {1.2f, 2.4f, 10.0f};
    assert_allclose(t.out[0].data, want, 3, 1e-6, 1e-6);
    nr_free(&t);
}

/* ---- GridSample ------------------------------------------------------------ */

static void grid_case(const float *x, kiln_shape xs, const float *grid, int64_t npts,
                      const char *mode, const char *pad, int ac, const float *want)
{
    nr_in ins[2] = {nr_f32(xs, x), nr_f32(ks(4, 1, 1, npts, 2), grid)};
    nr t = nr_build(KILN_OP_GRIDSAMPLE, 2, ins, 1);
    kiln_node_set_string(t.g, t.node, "mode", mode);
    kiln_node_set_string(t.g, t.node, "padding_mode", pad);
    kiln_node_set_int(t.g, t.node, "align_corners", ac);
    nr_run(&t);
    nr_expect_shape(&t, 0, ks(4, 1, 1, 1, npts));
    assert_allclose(t.out[0].data, want, npts, 1e-6, 1e-6);
    nr_free(&t);
}

static void test_grid_hand(void **state)
{
    (void)state;
    static const float x[4] = {1, 2, 3, 4};
    kiln_shape xs = ks(4, 1, 1, 2, 2);
    /* align_corners=1: corners are pixel centres */
    static const float g1[8] = {-1, -1, 1, 1, 0, 0, 1, -1};
    static const float w1[4] = {1, 4, 2.5f, 2};
    grid_case(x, xs, g1, 4, "bilinear", "zeros", 1, w1);
    /* align_corners=0: -1 -> -0.5, 0 -> 0.5, 1.5 -> 2.0 */
    static const float g2[6] = {-1, -1, 0, 0, 1.5f, -1};
    static const float zeros[3] = {0.25f, 2.5f, 0.0f}; /* (2, -0.5): every tap outside but one */
    static const float border[3] = {1, 2.5f, 2};
    static const float reflect[3] = {1, 2.5f, 2}; /* 2.0 reflects about 1.5 to 1.0 */
    grid_case(x, xs, g2, 3, "bilinear", "border", 0, border);
    grid_case(x, xs, g2, 3, "bilinear", "reflection", 0, reflect);
    /* zeros at (2.0, -0.5): taps (x 2, 3) are outside: 0 */
    grid_case(x, xs, g2, 3, "bilinear", "zeros", 0, zeros);
    /* nearest rounds half to even: (0.5, 0.5) -> (0, 0); 0.2 -> x 0.7 -> 1 */
    static const float g3[4] = {0, 0, 0.2f, 0};
    static const float w3[2] = {1, 2};
    grid_case(x, xs, g3, 2, "nearest", "zeros", 0, w3);
}

static void test_grid_bicubic(void **state)
{
    (void)state;
    float x[16];
    kt_fill_random(x, 16, 3, -1.0f, 1.0f);
    /* interior points (all 16 taps inside), align_corners=1: c -> (c+1)*1.5 */
    static const float g[4] = {-0.1333f, 0.0667f, 0.2f, -0.3f};
    float want[2];
    for (int p = 0; p < 2; p++) {
        double ix = (g[2 * p] + 1.0) * 1.5, iy = (g[2 * p + 1] + 1.0) * 1.5, acc = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc += keys(iy - i, -0.75) * keys(ix - j, -0.75) * x[i * 4 + j];
        want[p] = (float)acc;
    }
    grid_case(x, ks(4, 1, 1, 4, 4), g, 2, "bicubic", "zeros", 1, want);
    /* at pixel centres bicubic returns the pixel, under border padding too */
    static const float gc[4] = {-1, -1, 1, 1};
    float wc[2] = {x[0], x[15]};
    grid_case(x, ks(4, 1, 1, 4, 4), gc, 2, "bicubic", "border", 1, wc);
}

/* The per-dim taps' tensor product, summed as the kernel's general loop
 * does (taps in lexicographic order, the weight a product from 1.0 in dim
 * order, double accumulation): the kernel must equal it bit for bit on both
 * of its paths, planes (only the last two dims resized) and general. */
static void resize_by_taps(const kiln_node *n, kiln_shape xs, const float *x, float *y)
{
    kiln_resize_params p;
    kiln_error err = {0};
    assert_int_equal(kiln_resize_resolve(n, &xs, &p, &err), KILN_OK);
    int64_t idx[KILN_MAX_RANK][64][4], str[KILN_MAX_RANK];
    double w[KILN_MAX_RANK][64][4];
    int cnt[KILN_MAX_RANK][64];
    int64_t numel = 1;
    for (int d = p.rank - 1, s = 1; d >= 0; s *= (int)xs.dims[d], d--)
        str[d] = s;
    for (int d = 0; d < p.rank; d++) {
        assert_true(p.out[d] <= 64);
        numel *= p.out[d];
        for (int64_t o = 0; o < p.out[d]; o++)
            kiln_resize_dim_taps(&p, d, xs.dims[d], o, idx[d][o], w[d][o], &cnt[d][o]);
    }
    for (int64_t q = 0; q < numel; q++) {
        int64_t o[KILN_MAX_RANK], r = q;
        for (int d = p.rank - 1; d >= 0; d--) {
            o[d] = r % p.out[d];
            r /= p.out[d];
        }
        int t[KILN_MAX_RANK] = {0};
        double acc = 0.0;
        for (;;) {
            int64_t src = 0;
            double wt = 1.0;
            for (int d = 0; d < p.rank; d++) {
                src += idx[d][o[d]][t[d]] * str[d];
                wt *= w[d][o[d]][t[d]];
            }
            acc += wt * (double)x[src];
            int d = p.rank - 1;
            while (d >= 0 && ++t[d] == cnt[d][o[d]])
                t[d--] = 0;
            if (d < 0)
                break;
        }
        y[q] = (float)acc;
    }
}

static void test_planes_and_general(void **state)
{
    (void)state;
    const kiln_shape xs = ks(4, 2, 3, 7, 5);
    float *x = nn_random_buf(kiln_shape_numel(&xs), 31);
    static const char *modes[] = {"nearest", "linear", "cubic"};
    /* planes: only H and W resized (up and down); general: C too */
    static const float scales[2][4] = {{1, 1, 1.6f, 0.6f}, {1, 2, 1.6f, 2.2f}};
    for (int m = 0; m < 3; m++) {
        for (int k = 0; k < 2; k++) {
            nr t = resize_build(xs, x, modes[m], k ? "align_corners" : NULL);
            kiln_node_set_floats(t.g, t.node, "scales", scales[k], 4);
            nr_run(&t);
            int64_t n = kiln_shape_numel(&t.out[0].shape);
            float *want = malloc(sizeof(float) * (size_t)n);
            assert_non_null(want);
            resize_by_taps(t.g->nodes[t.node], xs, x, want);
            if (memcmp(t.out[0].data, want, sizeof(float) * (size_t)n) != 0)
                fail_msg("Resize %s, scales case %d: differs from the taps' product", modes[m],
                         k);
            free(want);
            nr_free(&t);
        }
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_hand),   cmocka_unit_test(test_nearest_modes),
        cmocka_unit_test(test_linear_ramp),    cmocka_unit_test(test_cubic_1d),
        cmocka_unit_test(test_crop_and_resize), cmocka_unit_test(test_grid_hand),
        cmocka_unit_test(test_grid_bicubic),   cmocka_unit_test(test_planes_and_general),
    };
    return cmocka_run_group_tests_name("ops/nn_resample", tests, NULL, NULL);
}
