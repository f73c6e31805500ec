/* driver/layout_records.c: the measured block times of tuning records,
 * for alter-layout's DP (pass/layout_dp.h; docs/TUNING.md, "Graph-level
 * layout choice"), and the build's view of what alter-layout decided.
 *
 * A block line (written by the tuner's layout stage, tune/layouts.c):
 *   {"version": 2, "kind": "block", "block_key": "<kiln_layout_node_key>",
 *    "workload": "<the task's key>", "template": "conv2d_nchwc",
 *    "template_hash": "...", "fingerprint_id": "...", "knobs": {...},
 *    "status": "measured" | "tuned", "median_us": 123.4, "samples_us": [...]}
 * Only "tuned" lines apply (the stage validated the choice they lead to end
 * to end), and only with this CPU's fingerprint and this kiln's template
 * hash; for a key given twice the last line wins. */
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/driver.h"
#include "pass/layout_dp.h"
#include "tune/tune.h"
#include "util/error.h"

typedef struct times {
    kiln_layout_time *t;
    int n, cap;
} times;

void kiln_driver_free_layout_hints(kiln_layout_hints *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n_times; i++)
        free((char *)h->times[i].key);
    free((kiln_layout_time *)h->times);
    free(h);
}

static const char *str_of(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A block line of this CPU and kiln (tuned_only: of status "tuned", else
 * "measured" too): its key and median; else NULL. */
static const char *applicable(const cJSON *rec, bool tuned_only, double *us)
{
    const char *key = str_of(rec, "block_key"), *st = str_of(rec, "status");
    const char *fp = str_of(rec, "fingerprint_id"), *tpl = str_of(rec, "template");
    const char *th = str_of(rec, "template_hash");
    const cJSON *med = cJSON_GetObjectItemCaseSensitive(rec, "median_us");
    if (!key || !st || (strcmp(st, "tuned") && (tuned_only || strcmp(st, "measured"))) || !fp ||
        strcmp(fp, kiln_cpu_fingerprint_id()) ||
        !tpl || !th || !cJSON_IsNumber(med) || !(med->valuedouble > 0))
        return NULL;
    char h[17];
    kiln_template_hash(tpl, h);
    if (strcmp(h, th) != 0)
        return NULL;
    *us = med->valuedouble;
    return key;
}

static bool put(times *ts, const char *key, double us)
{
    for (int i = 0; i < ts->n; i++)
        if (!strcmp(ts->t[i].key, key)) {
            ts->t[i].us = us; /* the last line wins */
            return true;
        }
    if (ts->n == ts->cap) {
        int nc = ts->cap ? 2 * ts->cap : 32;
        kiln_layout_time *m = realloc(ts->t, sizeof *m * (size_t)nc);
        if (!m)
            return false;
        ts->t = m;
        ts->cap = nc;
    }
    char *k = strdup(key);
    if (!k)
        return false;
    ts->t[ts->n++] = (kiln_layout_time){k, us};
    return true;
}

static kiln_status read_file(const char *path, bool tuned_only, times *ts, kiln_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT && !tuned_only
                   ? KILN_OK /* the tuner's records, not written yet */
                   : kiln_errorf(err, KILN_ERR_IO, "cannot read tuning records '%s': %s", path,
                                 strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    kiln_status s = KILN_OK;
    while (s == KILN_OK && getline(&line, &cap, f) >= 0) {
        if (!strstr(line, "\"block\""))
            continue; /* no block line: not parsed twice */
        cJSON *rec = cJSON_Parse(line);
        double us = 0;
        const char *key =
            kiln_driver_is_block_record(rec) ? applicable(rec, tuned_only, &us) : NULL;
        if (key && !put(ts, key, us))
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        cJSON_Delete(rec);
    }
    free(line);
    fclose(f);
    return s;
}

kiln_status kiln_driver_block_times(const char *records, bool tuned_only,
                                    kiln_layout_hints **out, kiln_error *err)
{
    times ts = {0};
    struct stat st;
    kiln_status s = KILN_OK;
    *out = NULL;
    if (stat(records, &st) == 0 && S_ISDIR(st.st_mode)) {
        char **names = NULL;
        int n = 0;
        s = kiln_driver_records_files(records, &names, &n, err);
        for (int k = 0; k < n && s == KILN_OK; k++)
            s = read_file(names[k], tuned_only, &ts, err);
        for (int k = 0; k < n; k++)
            free(names[k]);
        free(names);
    } else {
        s = read_file(records, tuned_only, &ts, err);
    }
    kiln_layout_hints *h = NULL;
    if (s == KILN_OK && ts.n > 0) {
        h = calloc(1, sizeof *h);
        if (!h)
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (s != KILN_OK || !h) {
        for (int i = 0; i < ts.n; i++)
            free((char *)ts.t[i].key);
        free(ts.t);
        return s;
    }
    kiln_layout_times_sort(ts.t, ts.n);
    h->force = -1;
    h->n_times = ts.n;
    h->times = ts.t;
    *out = h;
    return KILN_OK;
}

kiln_status kiln_driver_read_layout_records(kiln_build *b, kiln_error *err)
{
    return kiln_driver_block_times(b->records, true, &b->rec_hints, err);
}

void kiln_driver_report_layouts(const kiln_build *b)
{
    struct stat st;
    bool shipped = stat(b->records, &st) == 0 && S_ISDIR(st.st_mode);
    const kiln_pass_ctx *ctx = b->ctx;
    if (!b->opts.verbose && !(shipped && ctx->layout_measured > 0))
        return;
    int other = 0;
    for (int i = 0; i < ctx->n_layout_decisions; i++)
        other += ctx->layout_decisions[i].picked != 0;
    fprintf(stderr,
            "kiln compile: %srecords %s: block sizes chosen on measured times: %d of %d convs "
            "with block choices took a timed choice; %d not the template's first choice\n",
            shipped ? "shipped " : "", b->records, ctx->layout_measured,
            ctx->n_layout_decisions, other);
}

void kiln_build_set_layout_hints(kiln_build *b, const kiln_layout_hints *h)
{
    if (b)
        b->layout_hints = h;
}

const kiln_layout_decision *kiln_build_layout_decisions(const kiln_build *b, int *n,
                                                        int *measured)
{
    if (!b || !b->ctx || b->stage < BUILD_PASSES) {
        *n = 0;
        if (measured)
            *measured = 0;
        return NULL;
    }
    *n = b->ctx->n_layout_decisions;
    if (measured)
        *measured = b->ctx->layout_measured;
    return b->ctx->layout_decisions;
}

int kiln_build_task_of_node(const kiln_build *b, const char *name)
{
    if (!b || !b->low || !name || !*name)
        return -1;
    const kiln_graph *g = b->low->ctx->g;
    for (int i = 0; i < b->low->n_tasks; i++) {
        const kiln_node *n = g->nodes[b->low->tasks[i].anchor];
        if (n->name && !strcmp(n->name, name))
            return i;
    }
    return -1;
}
