/* report/report_table.c: the text table, laid out like TVM's debug-executor
 * report (Name, Duration (us), Percent, Device, Count, Argument Shapes, ...),
 * with Sum and Total rows, then the Configuration and Agreement blocks.
 * Column widths follow the widest cell; times have thousands separators. */
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "util/error.h"

enum { C_NAME, C_DUR, C_PCT, C_DEV, C_COUNT, C_SHAPES, C_LAYOUTS, C_HASH, C_GFLOPS, C_PEAK, NCOL };

static const char *const HEAD[NCOL] = {
    "Name", "Duration (us)", "Percent", "Device", "Count", "Argument Shapes",
    "Layouts (data/kernel/out)", "Hash", "GFLOP/s", "% of peak",
};
static const int RIGHT[NCOL] = {0, 1, 1, 0, 1, 0, 0, 0, 1, 1};

typedef struct cells {
    char dur[48], pct[16], count[16], hash[24], gflops[24], peak[16];
    const char *c[NCOL];
} cells;

static void row_cells(const kiln_report_row *row, cells *x)
{
    kiln_report_fmt_us(row->duration_us, x->dur, sizeof x->dur);
    snprintf(x->pct, sizeof x->pct, "%.2f", row->percent);
    snprintf(x->count, sizeof x->count, "%d", row->count);
    if (row->has_hash)
        snprintf(x->hash, sizeof x->hash, "%016llx", (unsigned long long)row->hash);
    else
        x->hash[0] = '\0';
    if (row->gflops > 0)
        snprintf(x->gflops, sizeof x->gflops, "%.1f", row->gflops);
    else
        x->gflops[0] = '\0';
    if (row->peak_fraction > 0)
        snprintf(x->peak, sizeof x->peak, "%.1f", 100.0 * row->peak_fraction);
    else
        x->peak[0] = '\0';
    x->c[C_NAME] = row->name;
    x->c[C_DUR] = x->dur;
    x->c[C_PCT] = x->pct;
    x->c[C_DEV] = "cpu";
    x->c[C_COUNT] = x->count;
    x->c[C_SHAPES] = row->shapes;
    x->c[C_LAYOUTS] = row->layouts;
    x->c[C_HASH] = x->hash;
    x->c[C_GFLOPS] = x->gflops;
    x->c[C_PEAK] = x->peak;
}

static void print_line(FILE *f, const char *const *c, const int *w)
{
    /* the last non-empty column ends the line (no trailing blanks) */
    int last = NCOL - 1;
    while (last > 0 && (!c[last] || !*c[last]))
        last--;
    for (int k = 0; k <= last; k++) {
        const char *s = c[k] ? c[k] : "";
        if (k == last && !RIGHT[k])
            fprintf(f, "%s", s);
        else if (RIGHT[k])
            fprintf(f, "%*s", w[k], s);
        else
            fprintf(f, "%-*s", w[k], s);
        if (k < last)
            fputs("  ", f);
    }
    fputc('\n', f);
}

static void config_block(FILE *f, const kiln_report *r)
{
    const kiln_report_config *c = &r->cfg;
    fprintf(f, "\nConfiguration\n-------------\n");
    fprintf(f, "Model: %s\n", c->model ? c->model : "");
    fprintf(f, "Number of threads: %d\n", c->threads);
    fprintf(f, "Binding: %s\n", c->binding ? c->binding : "off");
    fprintf(f, "Target ISA: %s\n", c->target && *c->target ? c->target : "(none)");
    fprintf(f, "Executor: %s\n", c->executor ? c->executor : "");
    fprintf(f, "Build id: %s\n", c->build_id && *c->build_id ? c->build_id : "(none)");
    if (c->records && *c->records)
        fprintf(f, "Tuning records: %s (%d tuned task%s)\n", c->records, c->tuned_tasks,
                c->tuned_tasks == 1 ? "" : "s");
    else
        fprintf(f, "Tuning records: none (every kernel uses its default config)\n");
    if (c->n_fallbacks == 0) {
        fprintf(f, "Fallbacks: none\n");
    } else {
        fprintf(f, "Fallbacks (%d):\n", c->n_fallbacks);
        for (int i = 0; i < c->n_fallbacks; i++)
            fprintf(f, "  %s\n", c->fallbacks[i]);
    }
    fprintf(f, "Runs: %d instrumented after %d warm-up; durations and Total are means over the "
               "runs not slowed\n",
            c->runs, c->warmup);
    if (c->peak_gflops > 0) {
        fprintf(f, "Peak: %.1f GFLOP/s on %d thread%s (%s", c->peak_gflops, c->threads,
                c->threads == 1 ? "" : "s", c->peak_source ? c->peak_source : "");
        if (c->peak_gflops_1 > 0 && c->threads > 1)
            fprintf(f, "; 1 thread: %.1f GFLOP/s", c->peak_gflops_1);
        fprintf(f, ")\n");
    }
    fprintf(f, "Rows: %d of %d shown, aggregated by %s, sorted by %s\n", r->n_rows, r->rows_total,
            r->aggregate[0] ? r->aggregate : "none", r->sort[0] ? r->sort : "time");
}

kiln_status kiln_report_write_table(FILE *f, const kiln_report *r, kiln_error *err)
{
    int w[NCOL];
    for (int k = 0; k < NCOL; k++)
        w[k] = (int)strlen(HEAD[k]);
    char sum_dur[48], sum_pct[16], sum_count[16], tot_dur[48];
    kiln_report_fmt_us(r->sum_us, sum_dur, sizeof sum_dur);
    snprintf(sum_pct, sizeof sum_pct, "%.2f", r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0);
    snprintf(sum_count, sizeof sum_count, "%d", r->sum_count);
    kiln_report_fmt_us(r->total_us, tot_dur, sizeof tot_dur);
    const char *sum_c[NCOL] = {"Sum", sum_dur, sum_pct, "", sum_count};
    const char *tot_c[NCOL] = {"Total", tot_dur, "", "cpu", "1"};
    for (int i = 0; i < r->n_rows; i++) {
        cells x;
        row_cells(&r->rows[i], &x);
        for (int k = 0; k < NCOL; k++) {
            int l = (int)strlen(x.c[k]);
            if (l > w[k])
                w[k] = l;
        }
    }
    for (int k = 0; k < 5; k++) {
        int l = (int)strlen(sum_c[k]);
        if (l > w[k])
            w[k] = l;
        if ((l = (int)strlen(tot_c[k])) > w[k])
            w[k] = l;
    }
    print_line(f, HEAD, w);
    for (int i = 0; i < r->n_rows; i++) {
        cells x;
        row_cells(&r->rows[i], &x);
        print_line(f, x.c, w);
    }
    if (r->n_rows < r->rows_total)
        fprintf(f, "... %d more row%s (--top %d)\n", r->rows_total - r->n_rows,
                r->rows_total - r->n_rows == 1 ? "" : "s", r->n_rows);
    fputc('\n', f);
    print_line(f, sum_c, w);
    print_line(f, tot_c, w);
    config_block(f, r);
    char *agree = malloc(4096);
    if (!agree)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "report: out of memory");
    kiln_report_agreement_text(r, agree, 4096);
    fprintf(f, "\nAgreement\n---------\n%s", agree);
    free(agree);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "report: write error");
    return KILN_OK;
}
