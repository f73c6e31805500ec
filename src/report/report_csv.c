/* report/report_csv.c: CSV (RFC 4180): a header line, one line per row
 * shown, then the Sum and Total lines. Every line has the same columns;
 * fields holding a comma, a quote or a line break are quoted, quotes
 * doubled. Times are plain numbers (no thousands separators). */
#include <string.h>

#include "report/report.h"
#include "util/error.h"

static void field(FILE *f, const char *s, int last)
{
    if (!s)
        s = "";
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

kiln_status kiln_report_write_csv(FILE *f, const kiln_report *r, kiln_error *err)
{
    static const char *const head[] = {
        "Name",   "Op",    "Duration (us)", "Percent", "Device",     "Count",
        "Argument Shapes", "Layouts", "Hash", "FLOPs", "GFLOP/s", "Fraction of peak",
    };
    enum { N = sizeof head / sizeof head[0] };
    for (int k = 0; k < N; k++)
        field(f, head[k], k == N - 1);
    for (int i = 0; i < r->n_rows; i++) {
        const kiln_report_row *row = &r->rows[i];
        char dur[32], pct[32], count[16], hash[24] = "", flops[32] = "", gf[32] = "", pk[32] = "";
        snprintf(dur, sizeof dur, "%.3f", row->duration_us);
        snprintf(pct, sizeof pct, "%.4f", row->percent);
        snprintf(count, sizeof count, "%d", row->count);
        if (row->has_hash)
            snprintf(hash, sizeof hash, "%016llx", (unsigned long long)row->hash);
        if (row->flops > 0)
            snprintf(flops, sizeof flops, "%.0f", row->flops);
        if (row->gflops > 0)
            snprintf(gf, sizeof gf, "%.3f", row->gflops);
        if (row->peak_fraction > 0)
            snprintf(pk, sizeof pk, "%.4f", row->peak_fraction);
        const char *c[N] = {row->name, row->op, dur,  pct,   "cpu", count,
                            row->shapes, row->layouts, hash, flops, gf,    pk};
        for (int k = 0; k < N; k++)
            field(f, c[k], k == N - 1);
    }
    char sum[32], spct[32], scount[16], tot[32];
    snprintf(sum, sizeof sum, "%.3f", r->sum_us);
    snprintf(spct, sizeof spct, "%.4f", r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0);
    snprintf(scount, sizeof scount, "%d", r->sum_count);
    snprintf(tot, sizeof tot, "%.3f", r->total_us);
    const char *s[N] = {"Sum", "", sum, spct, "", scount, "", "", "", "", "", ""};
    const char *t[N] = {"Total", "", tot, "100.0000", "cpu", "1", "", "", "", "", "", ""};
    for (int k = 0; k < N; k++)
        field(f, s[k], k == N - 1);
    for (int k = 0; k < N; k++)
        field(f, t[k], k == N - 1);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "report: write error");
    return KILN_OK;
}
