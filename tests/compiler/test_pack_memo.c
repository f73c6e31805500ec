/* tests/compiler/test_pack_memo.c: the packed-weights memo (util/packmemo.h)
 * a VM's shape classes share. Its table: stable source ranges, entries
 * found by (source, key), replaced, ignored for unstable sources. Its use
 * by builds: a dense layer built at 3 rows records the file of its packed
 * weights; the same weights at 17 rows (the bytes lent, as a class's
 * import lends the model's) map that file instead of packing, and run
 * right; a deleted file is a miss that packs and writes it again; weights
 * outside the stable ranges are never memoized in the table.
 *
 * The disk tier (the model cache's .pm files, keyed by content): its files
 * found, written, and a malformed one a miss; a build with a memo of its
 * own (another process's, or a static build's, which has no stable
 * sources) maps what an earlier build packed; other bytes or a corrupt .pm
 * pack again. */
#include "compiler_test.h"
#include "driver/driver.h"
#include "lower/hash.h"
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

    /* weights of the graph's own, not a stable source: never in the table,
     * found on disk by their bytes the next time */
    kiln_pack_memo *other = kiln_pack_memo_create();
    assert_non_null(other);
    kiln_graph *own = layer(5, NULL, other);
    assert_int_equal(build_check(own, cache, "own weights"), 0);
    assert_int_equal(build_check(own, cache, "own weights again"), 1);
    assert_int_equal(kiln_pack_memo_count(other), 0);

    kiln_graph_destroy(g3);
    kiln_graph_destroy(g17);
    kiln_graph_destroy(g40);
    kiln_graph_destroy(own);
    kiln_pack_memo_destroy(memo);
    kiln_pack_memo_destroy(other);
    free(w);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_disk_table(void **state)
{
    (void)state;
    char dir[300], pm[400], path[512];
    snprintf(dir, sizeof dir, "%s/disk", g_dir);
    kiln_error err = {0};
    assert_int_equal(kiln_mkdirs(dir, &err), KILN_OK);
    kiln_pack_memo *m = kiln_pack_memo_create();
    assert_non_null(m);
    int64_t nb = 0;
    assert_false(kiln_pack_memo_has_dir(m));
    assert_false(kiln_pack_memo_put_disk(m, "0123abcd", "/x/feed.w", 64)); /* no folder */
    assert_true(kiln_pack_memo_set_dir(m, dir));
    assert_true(kiln_pack_memo_has_dir(m));
    assert_false(kiln_pack_memo_find_disk(m, "0123abcd", path, sizeof path, &nb));
    assert_true(kiln_pack_memo_put_disk(m, "0123abcd", "/elsewhere/feed01.w", 64));
    assert_true(kiln_pack_memo_find_disk(m, "0123abcd", path, sizeof path, &nb));
    char want[400];
    snprintf(want, sizeof want, "%s/feed01.w", dir); /* a name beside, not the path */
    assert_string_equal(path, want);
    assert_int_equal(nb, 64);
    assert_false(kiln_pack_memo_find_disk(m, "0123abcd", path, 8, &nb)); /* no room */
    assert_false(kiln_pack_memo_find_disk(m, "../0123abcd", path, sizeof path, &nb));
    /* malformed files are misses, never paths outside the folder */
    static const char *bad[] = {
        "",
        "kiln-pack-memo 1\n",
        "kiln-pack-memo 2\nfeed01.w\n64\n",
        "kiln-pack-memo 1\n../feed01.w\n64\n",
        "kiln-pack-memo 1\n/etc/passwd.w\n64\n",
        "kiln-pack-memo 1\nfeed01.so\n64\n",
        "kiln-pack-memo 1\n.w\n64\n",
        "kiln-pack-memo 1\nfeed01.w\n-5\n",
        "kiln-pack-memo 1\nfeed01.w\nx\n",
    };
    snprintf(pm, sizeof pm, "%s/0123abcd.pm", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(pm, bad[i]);
        if (kiln_pack_memo_find_disk(m, "0123abcd", path, sizeof path, &nb))
            fail_msg("malformed .pm %zu was taken: %s", i, path);
    }
    kiln_pack_memo_destroy(m);
    /* the code identity: 32 hex digits, the same on every call */
    const char *id = kiln_code_id();
    assert_int_equal(strlen(id), 32);
    assert_true(kiln_code_id_stable());
    assert_int_equal(strspn(id, "0123456789abcdef"), 32);
    assert_ptr_equal(id, kiln_code_id());
}

/* What another process finds: a memo with no stable sources (a static
 * build's has none; a new VM's has not built yet) and the model cache. */
static void test_disk_builds(void **state)
{
    (void)state;
    char cache[300], wf[1000], models[320];
    snprintf(cache, sizeof cache, "%s/cache2", g_dir);
    snprintf(models, sizeof models, "%s/models", cache);
    kiln_graph *a = layer(4, NULL, NULL); /* no memo: the build makes its own */
    assert_int_equal(build_check(a, cache, "first process"), 0);
    kiln_graph *b = layer(9, NULL, NULL); /* the same bytes (seeded), another graph */
    assert_int_equal(build_check(b, cache, "second process"), 1);

    /* other bytes under the same key: packed, not mapped */
    kiln_graph *c = layer(9, NULL, NULL);
    int wid = -1;
    for (int i = 0; i < c->n_values; i++)
        if (c->values[i]->name && strcmp(c->values[i]->name, "W") == 0)
            wid = i;
    assert_true(wid >= 0);
    ((float *)c->values[wid]->data)[7] += 0.25f;
    assert_int_equal(build_check(c, cache, "other bytes"), 0);

    /* a corrupt .pm: a miss, packed and written again, then found */
    DIR *d = opendir(models);
    assert_non_null(d);
    int corrupted = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 3 && strcmp(e->d_name + len - 3, ".pm") == 0) {
            snprintf(wf, sizeof wf, "%s/%s", models, e->d_name);
            write_text(wf, "kiln-pack-memo 1\nnot a name\n");
            corrupted++;
        }
    }
    closedir(d);
    assert_true(corrupted >= 1);
    kiln_graph *e = layer(13, NULL, NULL);
    assert_int_equal(build_check(e, cache, "corrupt .pm"), 0);
    assert_int_equal(build_check(e, cache, "rewritten .pm"), 1);
    kiln_graph_destroy(a);
    kiln_graph_destroy(b);
    kiln_graph_destroy(c);
    kiln_graph_destroy(e);
}

/* A 1x1 conv (conv2d_nchwc) and a 3x3 conv of 4-channel groups (gconv2d_nchwc,
 * block-diagonal weights; its key the hash of its params), each with a
 * packed form large enough for a file of its own. */
static kiln_graph *convs(int64_t hw)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {1, 256, hw, hw}});
    const int p0[4] = {0, 0, 0, 0}, p1[4] = {1, 1, 1, 1};
    int w1 = ct_param(g, "w1", (kiln_shape){4, {512, 256, 1, 1}}, 7, -0.1f, 0.1f);
    int b1 = ct_param(g, "b1", (kiln_shape){1, {512}}, 8, -0.5f, 0.5f);
    int y = ct_conv(g, x, w1, b1, 1, 1, p0, 1);
    int w2 = ct_param(g, "w2", (kiln_shape){4, {512, 4, 3, 3}}, 9, -0.1f, 0.1f);
    int z = ct_conv(g, y, w2, -1, 3, 1, p1, 128); /* 4 channels a group: block-diagonal */
    assert_int_equal(kiln_graph_add_output(g, z), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    return g;
}

static void test_disk_convs(void **state)
{
    (void)state;
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache3", g_dir);
    kiln_graph *a = convs(14), *b = convs(14), *c = convs(9);
    assert_int_equal(build_check(a, cache, "convs, first"), 0);
    assert_int_equal(build_check(b, cache, "convs, another process"), 2);
    /* another image size: the 1x1 conv's key holds no size, the grouped
     * conv's params do (a miss, never a wrong file) */
    int mapped = build_check(c, cache, "convs, 9x9");
    assert_true(mapped >= 1);
    kiln_graph_destroy(a);
    kiln_graph_destroy(b);
    kiln_graph_destroy(c);
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
        cmocka_unit_test(test_disk_table),
        cmocka_unit_test(test_disk_builds),
        cmocka_unit_test(test_disk_convs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
