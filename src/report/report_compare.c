/* report/report_compare.c: two profiles side by side (kiln profile --compare).
 *
 * Matching, in passes, each row used at most once:
 *   1. same workload hash and same name;
 *   2. same name;
 *   3. same workload hash (first unmatched in execution order);
 *   4. a fused row "a+b+c" on one side against unmatched rows named a, b, c
 *      on the other (a graph-executor kernel against the reference executor's
 *      nodes); the entry sums the absorbed rows.
 * Each entry shows A and B times, B - A and B / A; rows found on one side
 * only are listed apart. Sum and Total are compared, and the configuration
 * settings that differ are named, since they explain most gaps (threads,
 * build, executor, target, records). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "report/report.h"
#include "util/error.h"

typedef struct entry {
    const kiln_report_row *a, *b; /* the row on each side (NULL: only in the other) */
    double a_us, b_us;            /* with absorbed rows */
    int a_n, b_n;                 /* rows summed on each side */
} entry;

typedef struct cmp {
    entry *e;
    int n;
    int *used_a, *used_b; /* entry index + 1, or 0 */
} cmp;

static void pair(cmp *c, const kiln_report *a, int i, const kiln_report *b, int j)
{
    entry *e = &c->e[c->n];
    e->a = &a->rows[i];
    e->b = &b->rows[j];
    e->a_us = e->a->duration_us;
    e->b_us = e->b->duration_us;
    e->a_n = e->b_n = 1;
    c->used_a[i] = c->used_b[j] = ++c->n;
}

/* Rows of `other` named like the components of fused `name` join entry k. */
static void absorb(cmp *c, int k, const char *name, const kiln_report *other, int *used_other,
                   int other_is_b)
{
    const char *p = name;
    while (*p) {
        const char *q = strchr(p, '+');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        for (int j = 0; j < other->n_rows; j++) {
            const char *nm = other->rows[j].name;
            if (used_other[j] || strlen(nm) != len || strncmp(nm, p, len) != 0)
                continue;
            used_other[j] = k + 1;
            entry *e = &c->e[k];
            if (other_is_b) {
                e->b_us += other->rows[j].duration_us;
                if (!e->b)
                    e->b = &other->rows[j];
                e->b_n++;
            } else {
                e->a_us += other->rows[j].duration_us;
                if (!e->a)
                    e->a = &other->rows[j];
                e->a_n++;
            }
            break;
        }
        p = q ? q + 1 : p + len;
    }
}

static kiln_status match(cmp *c, const kiln_report *a, const kiln_report *b, kiln_error *err)
{
    int na = a->n_rows, nb = b->n_rows;
    c->e = calloc((size_t)(na + nb + 1), sizeof *c->e);
    c->used_a = calloc((size_t)(na + 1), sizeof *c->used_a);
    c->used_b = calloc((size_t)(nb + 1), sizeof *c->used_b);
    if (!c->e || !c->used_a || !c->used_b)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "compare: out of memory");
    for (int pass = 1; pass <= 3; pass++)
        for (int i = 0; i < na; i++) {
            if (c->used_a[i])
                continue;
            const kiln_report_row *x = &a->rows[i];
            for (int j = 0; j < nb; j++) {
                const kiln_report_row *y = &b->rows[j];
                if (c->used_b[j])
                    continue;
                int same_hash = x->has_hash && y->has_hash && x->hash == y->hash;
                int same_name = strcmp(x->name, y->name) == 0;
                if ((pass == 1 && same_hash && same_name) || (pass == 2 && same_name) ||
                    (pass == 3 && same_hash)) {
                    pair(c, a, i, b, j);
                    break;
                }
            }
        }
    /* pass 4: fused rows against their parts */
    for (int i = 0; i < na; i++)
        if (!c->used_a[i] && strchr(a->rows[i].name, '+')) {
            int k = c->n;
            c->e[k] = (entry){.a = &a->rows[i], .a_us = a->rows[i].duration_us, .a_n = 1};
            absorb(c, k, a->rows[i].name, b, c->used_b, 1);
            if (c->e[k].b_n > 0) {
                c->used_a[i] = k + 1;
                c->n++;
            } else {
                c->e[k] = (entry){0};
            }
        }
    for (int j = 0; j < nb; j++)
        if (!c->used_b[j] && strchr(b->rows[j].name, '+')) {
            int k = c->n;
            c->e[k] = (entry){.b = &b->rows[j], .b_us = b->rows[j].duration_us, .b_n = 1};
            absorb(c, k, b->rows[j].name, a, c->used_a, 0);
            if (c->e[k].a_n > 0) {
                c->used_b[j] = k + 1;
                c->n++;
            } else {
                c->e[k] = (entry){0};
            }
        }
    return KILN_OK;
}

/* sort entries by the larger of the two times, descending (insertion sort) */
static void sort_entries(entry *e, int n)
{
    for (int i = 1; i < n; i++) {
        entry x = e[i];
        double kx = fmax(x.a_us, x.b_us);
        int j = i;
        for (; j > 0 && fmax(e[j - 1].a_us, e[j - 1].b_us) < kx; j--)
            e[j] = e[j - 1];
        e[j] = x;
    }
}

static const char *entry_name(const entry *e, char *buf, size_t size)
{
    /* a fused entry is named by its fused row, the side that has one row */
    const kiln_report_row *main = e->a_n > 1 ? e->b : e->b_n > 1 ? e->a : e->a ? e->a : e->b;
    if (e->a_n > 1 || e->b_n > 1)
        snprintf(buf, size, "%s (%d rows in %s)", main->name, e->a_n > 1 ? e->a_n : e->b_n,
                 e->a_n > 1 ? "A" : "B");
    else
        snprintf(buf, size, "%s", main->name);
    return buf;
}

static void fmt_ratio(double a, double b, char *buf, size_t size)
{
    if (a > 0)
        snprintf(buf, size, "%.3f", b / a);
    else
        snprintf(buf, size, "-");
}

static const char *s_or(const char *s)
{
    return s && *s ? s : "(none)";
}

/* config differences, one per line, into buf; returns how many */
static int config_diffs(const kiln_report *a, const kiln_report *b, char *buf, size_t size)
{
    const kiln_report_config *x = &a->cfg, *y = &b->cfg;
    size_t len = 0;
    int n = 0;
    buf[0] = '\0';
#define DIFF_S(label, fa, fb)                                                               \
    if (strcmp(s_or(fa), s_or(fb)) != 0 && len < size) {                                    \
        int w_ = snprintf(buf + len, size - len, "  %s: %s (A) vs %s (B)\n", label, s_or(fa), \
                          s_or(fb));                                                        \
        len += w_ > 0 ? (size_t)w_ : 0;                                                     \
        n++;                                                                                \
    }
    if (x->threads != y->threads && len < size) {
        int w = snprintf(buf + len, size - len, "  threads: %d (A) vs %d (B)\n", x->threads,
                         y->threads);
        len += w > 0 ? (size_t)w : 0;
        n++;
    }
    DIFF_S("executor", x->executor, y->executor);
    DIFF_S("build id", x->build_id, y->build_id);
    DIFF_S("target", x->target, y->target);
    DIFF_S("binding", x->binding, y->binding);
    DIFF_S("tuning records", x->records, y->records);
    DIFF_S("model", x->model, y->model);
    DIFF_S("kiln version", x->kiln_version, y->kiln_version);
    if (x->n_fallbacks != y->n_fallbacks && len < size) {
        int w = snprintf(buf + len, size - len, "  fallbacks: %d (A) vs %d (B)\n", x->n_fallbacks,
                         y->n_fallbacks);
        len += w > 0 ? (size_t)w : 0;
        n++;
    }
#undef DIFF_S
    return n;
}

static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputs(last ? "\r\n" : ",", f);
}

static kiln_status write_json(FILE *f, const cmp *c, const kiln_report *a, const char *al,
                              const kiln_report *b, const char *bl, int shown, kiln_error *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *rows = cJSON_AddArrayToObject(root, "rows");
    int ok = root && rows;
    for (int i = 0; ok && i < shown; i++) {
        const entry *e = &c->e[i];
        char name[512], h[24] = "";
        const kiln_report_row *any = e->a ? e->a : e->b;
        if (any->has_hash)
            snprintf(h, sizeof h, "%016llx", (unsigned long long)any->hash);
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(rows, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "name", entry_name(e, name, sizeof name)) &&
             cJSON_AddStringToObject(o, "hash", h) &&
             (e->a ? cJSON_AddNumberToObject(o, "a_us", e->a_us) : cJSON_AddNullToObject(o, "a_us")) &&
             (e->b ? cJSON_AddNumberToObject(o, "b_us", e->b_us) : cJSON_AddNullToObject(o, "b_us")) &&
             (e->a && e->b ? cJSON_AddNumberToObject(o, "delta_us", e->b_us - e->a_us)
                           : cJSON_AddNullToObject(o, "delta_us")) &&
             (e->a && e->b && e->a_us > 0 ? cJSON_AddNumberToObject(o, "ratio", e->b_us / e->a_us)
                                          : cJSON_AddNullToObject(o, "ratio"));
    }
    ok = ok && cJSON_AddStringToObject(root, "a", al) && cJSON_AddStringToObject(root, "b", bl) &&
         cJSON_AddNumberToObject(root, "a_sum_us", a->sum_us) &&
         cJSON_AddNumberToObject(root, "b_sum_us", b->sum_us) &&
         cJSON_AddNumberToObject(root, "a_total_us", a->total_us) &&
         cJSON_AddNumberToObject(root, "b_total_us", b->total_us) &&
         cJSON_AddNumberToObject(root, "total_delta_us", b->total_us - a->total_us) &&
         cJSON_AddNumberToObject(root, "total_ratio", a->total_us > 0 ? b->total_us / a->total_us : 0);
    return kiln_report_json_emit(f, root, ok, 1, err);
}

kiln_status kiln_report_compare(FILE *f, const kiln_report *a, const char *a_label,
                                const kiln_report *b, const char *b_label, const char *format,
                                int top, kiln_error *err)
{
    if (!format)
        format = "table";
    if (strcmp(format, "table") != 0 && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "--compare: unknown format '%s' (available: table, csv, json)", format);
    cmp c = {0};
    kiln_status st = match(&c, a, b, err);
    if (st != KILN_OK)
        goto done;
    /* rows in only one side become entries too, after the matched ones */
    int matched = c.n;
    for (int i = 0; i < a->n_rows; i++)
        if (!c.used_a[i])
            c.e[c.n++] = (entry){.a = &a->rows[i], .a_us = a->rows[i].duration_us, .a_n = 1};
    for (int j = 0; j < b->n_rows; j++)
        if (!c.used_b[j])
            c.e[c.n++] = (entry){.b = &b->rows[j], .b_us = b->rows[j].duration_us, .b_n = 1};
    sort_entries(c.e, matched);
    sort_entries(c.e + matched, c.n - matched);
    int shown_matched = top > 0 && top < matched ? top : matched;
    if (strcmp(format, "json") == 0) {
        /* matched first, then the one-sided ones */
        if (shown_matched < matched)
            memmove(c.e + shown_matched, c.e + matched, sizeof *c.e * (size_t)(c.n - matched));
        st = write_json(f, &c, a, a_label, b, b_label, shown_matched + (c.n - matched), err);
        goto done;
    }
    if (strcmp(format, "csv") == 0) {
        static const char *const head[] = {"Name", "Hash", "A (us)", "B (us)", "Delta (us)",
                                           "Ratio B/A", "Present"};
        for (int k = 0; k < 7; k++)
            csv_field(f, head[k], k == 6);
        for (int i = 0; i < c.n; i++) {
            if (i >= shown_matched && i < matched)
                continue;
            const entry *e = &c.e[i];
            char name[512], h[24] = "", av[32] = "", bv[32] = "", dv[32] = "", rv[32] = "";
            const kiln_report_row *any = e->a ? e->a : e->b;
            if (any->has_hash)
                snprintf(h, sizeof h, "%016llx", (unsigned long long)any->hash);
            if (e->a)
                snprintf(av, sizeof av, "%.3f", e->a_us);
            if (e->b)
                snprintf(bv, sizeof bv, "%.3f", e->b_us);
            if (e->a && e->b) {
                snprintf(dv, sizeof dv, "%.3f", e->b_us - e->a_us);
                fmt_ratio(e->a_us, e->b_us, rv, sizeof rv);
            }
            const char *c7[7] = {entry_name(e, name, sizeof name), h, av, bv, dv, rv,
                                 e->a && e->b ? "both" : e->a ? "A" : "B"};
            for (int k = 0; k < 7; k++)
                csv_field(f, c7[k], k == 6);
        }
        goto done;
    }
    /* table */
    fprintf(f, "A: %s\nB: %s\n\n", a_label, b_label);
    int wn = 4;
    char name[512];
    for (int i = 0; i < c.n; i++) {
        int l = (int)strlen(entry_name(&c.e[i], name, sizeof name));
        if (l > wn)
            wn = l;
    }
    if (wn > 100)
        wn = 100;
    fprintf(f, "%-*s  %-16s  %14s  %14s  %14s  %9s\n", wn, "Name", "Hash", "A (us)", "B (us)",
            "Delta (us)", "Ratio B/A");
    for (int i = 0; i < shown_matched; i++) {
        const entry *e = &c.e[i];
        char h[24] = "", av[48], bv[48], dv[48], rv[32];
        if (e->a->has_hash || e->b->has_hash)
            snprintf(h, sizeof h, "%016llx",
                     (unsigned long long)(e->a->has_hash ? e->a->hash : e->b->hash));
        kiln_report_fmt_us(e->a_us, av, sizeof av);
        kiln_report_fmt_us(e->b_us, bv, sizeof bv);
        kiln_report_fmt_us(e->b_us - e->a_us, dv, sizeof dv);
        fmt_ratio(e->a_us, e->b_us, rv, sizeof rv);
        fprintf(f, "%-*s  %-16s  %14s  %14s  %14s  %9s\n", wn, entry_name(e, name, sizeof name),
                h, av, bv, dv, rv);
    }
    if (shown_matched < matched)
        fprintf(f, "... %d more matched row%s (--top %d)\n", matched - shown_matched,
                matched - shown_matched == 1 ? "" : "s", top);
    for (int side = 0; side < 2; side++) {
        int cnt = 0;
        double us = 0;
        for (int i = matched; i < c.n; i++)
            if ((side == 0) == (c.e[i].a != NULL)) {
                cnt++;
                us += side == 0 ? c.e[i].a_us : c.e[i].b_us;
            }
        if (cnt == 0)
            continue;
        char t[48];
        fprintf(f, "\nOnly in %s (%d row%s, %s us):\n", side == 0 ? "A" : "B", cnt,
                cnt == 1 ? "" : "s", kiln_report_fmt_us(us, t, sizeof t));
        for (int i = matched; i < c.n; i++)
            if ((side == 0) == (c.e[i].a != NULL))
                fprintf(f, "  %-*s  %14s\n", wn, (side == 0 ? c.e[i].a : c.e[i].b)->name,
                        kiln_report_fmt_us(side == 0 ? c.e[i].a_us : c.e[i].b_us, t, sizeof t));
    }
    char as[48], bs[48], ds[48], rs[32];
    fputc('\n', f);
    kiln_report_fmt_us(a->sum_us, as, sizeof as);
    kiln_report_fmt_us(b->sum_us, bs, sizeof bs);
    kiln_report_fmt_us(b->sum_us - a->sum_us, ds, sizeof ds);
    fmt_ratio(a->sum_us, b->sum_us, rs, sizeof rs);
    fprintf(f, "%-*s  %-16s  %14s  %14s  %14s  %9s\n", wn, "Sum", "", as, bs, ds, rs);
    kiln_report_fmt_us(a->total_us, as, sizeof as);
    kiln_report_fmt_us(b->total_us, bs, sizeof bs);
    kiln_report_fmt_us(b->total_us - a->total_us, ds, sizeof ds);
    fmt_ratio(a->total_us, b->total_us, rs, sizeof rs);
    fprintf(f, "%-*s  %-16s  %14s  %14s  %14s  %9s\n", wn, "Total", "", as, bs, ds, rs);
    double pct = a->total_us > 0 ? 100.0 * (b->total_us - a->total_us) / a->total_us : 0;
    fprintf(f, "\nB's Total is %.1f%% %s A's.\n", fabs(pct), pct >= 0 ? "above" : "below");
    char diffs[2048];
    if (config_diffs(a, b, diffs, sizeof diffs) > 0)
        fprintf(f, "Settings that differ (they explain a gap before any kernel does):\n%s", diffs);
    else
        fprintf(f, "Settings: the same threads, executor, build, target, binding and records: "
                   "a gap of a few %% is run-to-run noise.\n");
done:
    free(c.e);
    free(c.used_a);
    free(c.used_b);
    if (st == KILN_OK && ferror(f))
        st = kiln_errorf(err, KILN_ERR_IO, "compare: write error");
    return st;
}
