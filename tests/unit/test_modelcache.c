/* tests/unit/test_modelcache.c: the bound on <cache>/models
 * (toolchain/modelcache.c): the least recently used .so and .w files go
 * first, the model just published and what its build touched never do,
 * other files are left alone, a touch makes a model the most recent,
 * temporaries of killed builds go, and $KILN_MODEL_CACHE_MB sets the
 * bound. */
#include "test_support.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "toolchain/toolchain.h"
#include "util/error.h"

static char g_dir[256];

/* dir/name with `bytes` bytes, its mtime `age` seconds ago. */
static void put(const char *name, int bytes, int age)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (int i = 0; i < bytes; i++)
        fputc('k', f);
    fclose(f);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
}

/* An empty g_dir. */
static void clear(void)
{
    kiln_error err = {0};
    kiln_rmtree(g_dir);
    assert_int_equal(kiln_mkdirs(g_dir, &err), KILN_OK);
}

static bool there(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

static void test_prune_oldest_first(void **state)
{
    (void)state;
    clear();
    put("old.so", 1000, 300);
    put("mid.so", 1000, 200);
    put("new.so", 1000, 100);
    put("keep.so", 1000, 400); /* just published (its mtime does not matter) */
    put("notes.txt", 5000, 500);
    char keep[512];
    snprintf(keep, sizeof keep, "%s/keep.so", g_dir);
    /* 4000 bytes of models: a bound of 2500 deletes the two oldest others */
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) + 10, 2500), 2);
    assert_false(there("old.so"));
    assert_false(there("mid.so"));
    assert_true(there("new.so"));
    assert_true(there("keep.so"));
    assert_true(there("notes.txt"));
    /* within the bound: nothing */
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) + 10, 2500), 0);
    /* a bound of 0 leaves only the one kept */
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) + 10, 0), 1);
    assert_true(there("keep.so"));
    assert_false(there("new.so"));
    /* weights files count too; what the build touched (mtime since) stays */
    put("a.w", 1000, 900);
    put("b.w", 1000, 800);
    put("c.so", 1000, 0);
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) - 60, 0), 2);
    assert_false(there("a.w"));
    assert_false(there("b.w"));
    assert_true(there("c.so"));
    assert_true(there("keep.so"));
}

static void test_touch_makes_recent(void **state)
{
    (void)state;
    clear();
    put("a.so", 1000, 300);
    put("b.so", 1000, 200);
    put("k.so", 1000, 0);
    char a[512], keep[512];
    snprintf(a, sizeof a, "%s/a.so", g_dir);
    snprintf(keep, sizeof keep, "%s/k.so", g_dir);
    kiln_tc_touch(a); /* a cache hit on a: b is now the least recently used */
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) + 10, 2000), 1);
    assert_true(there("a.so"));
    assert_false(there("b.so"));
}

/* Temporary files of killed builds go once their process is gone (or
 * after a day); a live writer's fresh one stays, whatever the bound. */
static void test_stale_temporaries(void **state)
{
    (void)state;
    clear();
    pid_t gone = fork();
    assert_true(gone >= 0);
    if (gone == 0)
        _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    char dead_w[64], dead_so[64], live_w[64], old_w[64];
    snprintf(dead_w, sizeof dead_w, "a.w.tmp-%ld", (long)gone);
    snprintf(dead_so, sizeof dead_so, "b.so.tmp%ld", (long)gone);
    snprintf(live_w, sizeof live_w, "c.w.tmp-%ld", (long)getpid());
    snprintf(old_w, sizeof old_w, "d.w.tmp-%ld", (long)getpid());
    put(dead_w, 10, 0);
    put(dead_so, 10, 0);
    put(live_w, 10, 0);
    put(old_w, 10, 2 * 24 * 3600);
    put("e.tmp-notapid", 10, 0);
    put("keep.so", 10, 0);
    char keep[512];
    snprintf(keep, sizeof keep, "%s/keep.so", g_dir);
    assert_int_equal(kiln_tc_prune_models(keep, time(NULL) + 10, (int64_t)1 << 30), 3);
    assert_false(there(dead_w));
    assert_false(there(dead_so));
    assert_false(there(old_w));
    assert_true(there(live_w));
    assert_true(there("e.tmp-notapid"));
    assert_true(there("keep.so"));
}

static void test_limit_from_env(void **state)
{
    (void)state;
    unsetenv("KILN_MODEL_CACHE_MB");
    assert_int_equal(kiln_tc_model_cache_limit(), (int64_t)4096 << 20);
    setenv("KILN_MODEL_CACHE_MB", "10", 1);
    assert_int_equal(kiln_tc_model_cache_limit(), (int64_t)10 << 20);
    setenv("KILN_MODEL_CACHE_MB", "lots", 1); /* not a number: the default */
    assert_int_equal(kiln_tc_model_cache_limit(), (int64_t)4096 << 20);
    unsetenv("KILN_MODEL_CACHE_MB");
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_modelcache_%d", (int)getpid());
    kiln_error err = {0};
    if (kiln_mkdirs(g_dir, &err) != KILN_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prune_oldest_first),
        cmocka_unit_test(test_touch_makes_recent),
        cmocka_unit_test(test_stale_temporaries),
        cmocka_unit_test(test_limit_from_env),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
