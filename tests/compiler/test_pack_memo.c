/* tests/compiler/test_pack_memo.c: the packed-weights memo (util/packmemo.h)
 * a VM's shape classes share. Its table: stable source ranges, entries
 * found by (source, key), replaced, ignored for unstable sources. Its use
 * by builds: a dense layer built at 3 rows records the file of its packed
 * weights; the same weights at 17 rows (the bytes lent, as a class's
 * import lends the model's) map that file instead of packing, and run
 * right; a deleted file is a miss that packs and writes it again; weights
 * outside the stable ranges are never memoized. */
#include "compiler_test.h"
#include "driver/driver.h"
#include "util/packmemo.h"

#include <unistd.h>

static char g_dir[256];

static void test_table(void **state)
{
    (void)state;
    static float a[64], b[64];
    kiln_pack_memo *m = kiln_pack_memo_create();
    assert_non_null(m);
    assert_true(kiln_pack_memo_add_source(m, b, sizeof b));
    assert_true(kiln_pack_memo_add_source(m, a, sizeof a));
    assert_true(kiln_pack_memo_stable(m, a, sizeof a));
    assert_true(kiln_pack_memo_stable(m, b + 8, 16 * sizeof(float)));
    assert_false(kiln_pack_memo_stable(m, a + 8, sizeof a)); /* runs past the range */
    assert_false(kiln_pack_memo_stable(m, &m, sizeof m));
    char path[64];
    int64_t nb = 0;
    assert_false(kiln_pack_memo_find(m, a, sizeof a, "k", path, sizeof path, &nb));
    assert_true(kiln_pack_memo_put(m, a, sizeof a, "k", "/x/1.w", 100));
    assert_true(kiln_pack_memo_put(m, a, sizeof a, "k2", "/x/2.w", 200));
    assert_true(kiln_pack_memo_find(m, a, sizeof a, "k", path, sizeof path, &nb));
    assert_string_equal(path, "/x/1.w");
    assert_int_equal(nb, 100);
    assert_false(kiln_pack_memo_find(m, a, 16, "k", path, sizeof path, &nb)); /* other bytes */
    assert_true(kiln_pack_memo_put(m, a, sizeof a, "k", "/x/3.w", 300)); /* replaced */
    assert_true(kiln_pack_memo_find(m, a, sizeof a, "k", path, sizeof path, &nb));
    assert_string_equal(path, "/x/3.w");
    assert_int_equal(nb, 300);
    assert_false(kiln_pack_memo_find(m, a, sizeof a, "k", path, 4, &nb)); /* no room */
    float c[4];
    assert_true(kiln_pack_memo_put(m, c, sizeof c, "k", "/x/4.w", 16)); /* not stable: ignored */
    assert_int_equal(kiln_pack_memo_count(m), 2);
    kiln_pack_memo_destroy(m);
}

/* ct_dense_layer with W's bytes `w` when given (lent: the graph does not
 * own them, as a class's import lends the model's) and the memo. */
static kiln_graph *layer(int64_t M, const float *w, kiln_pack_memo *memo)
{
    int wv = -1;
    kiln_graph *g = ct_dense_layer(M, &wv);
    if (w)
        g->values[wv]->data = (void *)w;
    g->pack_memo = memo;
    return g;
}

/* Builds g into `cache` with shared weights (as the VM does), checks it
 * against the reference executor; returns how many weights it mapped. */
static int build_check(const kiln_graph *g, const char *cache, const char *tag)
{
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2, .cache_dir = cache};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    kiln_build_share_weights(b);
    if (kiln_build_link(b, NULL, &err) != KILN_OK)
        fail_msg("%s: %s", tag, err.msg);
    int mapped = 0;
    for (int i = 0; i < b->low->n_tensors; i++)
        mapped += b->low->tensors[i].mapped;
    char so[4200];
    snprintf(so, sizeof so, "%s", kiln_build_output(b));
    kiln_build_destroy(b);
    ct_check_so(g, so, tag, 9, 1e-4, 1e-5);
    return mapped;
}

static void test_builds_map_packed_weights(void **state)
{
    (void)state;
    char cache[300], wf[1000];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    float *w = malloc(256 * 256 * sizeof(float));
    assert_non_null(w);
    kt_fill_random(w, 256 * 256, 41, -0.1f, 0.1f);
    kiln_pack_memo *memo = kiln_pack_memo_create();
    assert_non_null(memo);
    assert_true(kiln_pack_memo_add_source(memo, w, 256 * 256 * sizeof(float)));

    kiln_graph *g3 = layer(3, w, memo);
    assert_int_equal(build_check(g3, cache, "3 rows"), 0); /* packed, recorded */
    assert_int_equal(kiln_pack_memo_count(memo), 1);
    kiln_graph *g17 = layer(17, w, memo);
    assert_int_equal(build_check(g17, cache, "17 rows"), 1); /* the file mapped */
    assert_int_equal(kiln_pack_memo_count(memo), 1);

    /* the file gone (the cache bound): packed again, written, recorded */
    char models[320];
    snprintf(models, sizeof models, "%s/models", cache);
    assert_int_equal(ct_weight_files(models, wf, sizeof wf), 1); /* the packed W */
    assert_int_equal(unlink(wf), 0);
    kiln_graph *g40 = layer(40, w, memo);
    assert_int_equal(build_check(g40, cache, "40 rows, file deleted"), 0);
    assert_int_equal(build_check(g40, cache, "40 rows again"), 1);

    /* weights of the graph's own, not a stable source: never recorded */
    kiln_pack_memo *other = kiln_pack_memo_create();
    assert_non_null(other);
    kiln_graph *own = layer(5, NULL, other);
    assert_int_equal(build_check(own, cache, "own weights"), 0);
    assert_int_equal(build_check(own, cache, "own weights again"), 0);
    assert_int_equal(kiln_pack_memo_count(other), 0);

    kiln_graph_destroy(g3);
    kiln_graph_destroy(g17);
    kiln_graph_destroy(g40);
    kiln_graph_destroy(own);
    kiln_pack_memo_destroy(memo);
    kiln_pack_memo_destroy(other);
    free(w);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_pack_memo_%d", (int)getpid());
    kiln_error err = {0};
    if (kiln_mkdirs(g_dir, &err) != KILN_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_builds_map_packed_weights),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
