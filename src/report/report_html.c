/* report/report_html.c: a self-contained HTML report (no scripts, no external
 * resources): a summary, an inline SVG bar chart of where the time goes (one
 * <rect class="bar"> per row shown, width proportional to its time, longest
 * first as in the table), the table with Sum and Total, the configuration and
 * the agreement lines. Every text is HTML-escaped. */
#include <string.h>

#include "report/report.h"
#include "util/error.h"

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void td(FILE *f, const char *cls, const char *s)
{
    fprintf(f, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
    esc(f, s);
    fputs("</td>", f);
}

static void chart(FILE *f, const kiln_report *r)
{
    const int label_w = 360, bar_w = 520, row_h = 18, pad = 4;
    double max_us = 0;
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].duration_us > max_us)
            max_us = r->rows[i].duration_us;
    int h = r->n_rows * (row_h + pad) + pad;
    fprintf(f, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" role=\"img\" aria-label=\"time per row\">\n",
            label_w + bar_w + 160, h);
    for (int i = 0; i < r->n_rows; i++) {
        const kiln_report_row *row = &r->rows[i];
        int y = pad + i * (row_h + pad);
        double w = max_us > 0 ? bar_w * row->duration_us / max_us : 0;
        if (w < 1)
            w = 1;
        char name[64];
        size_t n = strlen(row->name);
        if (n > 52)
            snprintf(name, sizeof name, "%.49s...", row->name);
        else
            snprintf(name, sizeof name, "%s", row->name);
        char dur[48];
        kiln_report_fmt_us(row->duration_us, dur, sizeof dur);
        fprintf(f, "<g><text x=\"%d\" y=\"%d\" text-anchor=\"end\">", label_w - 6, y + row_h - 5);
        esc(f, name);
        fprintf(f, "</text><rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\">"
                   "<title>",
                label_w, y, w, row_h);
        esc(f, row->name);
        fprintf(f, ": %s us (%.2f%%)</title></rect><text x=\"%.1f\" y=\"%d\">%s us, %.1f%%</text>"
                   "</g>\n",
                dur, row->percent, label_w + w + 6, y + row_h - 5, dur, row->percent);
    }
    fputs("</svg>\n", f);
}

static void table(FILE *f, const kiln_report *r)
{
    fputs("<table class=\"rows\">\n<thead><tr><th>Name</th><th>Duration (us)</th>"
          "<th>Percent</th><th>Device</th><th>Count</th><th>Argument Shapes</th>"
          "<th>Layouts (data/kernel/out)</th><th>Hash</th><th>GFLOP/s</th>"
          "<th>% of peak</th></tr></thead>\n<tbody>\n",
          f);
    for (int i = 0; i < r->n_rows; i++) {
        const kiln_report_row *row = &r->rows[i];
        char dur[48], pct[16], cnt[16], hash[24] = "", gf[24] = "", pk[16] = "";
        kiln_report_fmt_us(row->duration_us, dur, sizeof dur);
        snprintf(pct, sizeof pct, "%.2f", row->percent);
        snprintf(cnt, sizeof cnt, "%d", row->count);
        if (row->has_hash)
            snprintf(hash, sizeof hash, "%016llx", (unsigned long long)row->hash);
        if (row->gflops > 0)
            snprintf(gf, sizeof gf, "%.1f", row->gflops);
        if (row->peak_fraction > 0)
            snprintf(pk, sizeof pk, "%.1f", 100.0 * row->peak_fraction);
        fputs("<tr>", f);
        td(f, NULL, row->name);
        td(f, "num", dur);
        td(f, "num", pct);
        td(f, NULL, "cpu");
        td(f, "num", cnt);
        td(f, NULL, row->shapes);
        td(f, NULL, row->layouts);
        td(f, "hash", hash);
        td(f, "num", gf);
        td(f, "num", pk);
        fputs("</tr>\n", f);
    }
    char sum[48], spct[16], scnt[16], tot[48];
    kiln_report_fmt_us(r->sum_us, sum, sizeof sum);
    snprintf(spct, sizeof spct, "%.2f", r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0);
    snprintf(scnt, sizeof scnt, "%d", r->sum_count);
    kiln_report_fmt_us(r->total_us, tot, sizeof tot);
    fputs("</tbody>\n<tfoot><tr class=\"sum\">", f);
    td(f, NULL, "Sum");
    td(f, "num", sum);
    td(f, "num", spct);
    td(f, NULL, "");
    td(f, "num", scnt);
    fputs("<td colspan=\"5\"></td></tr>\n<tr class=\"total\">", f);
    td(f, NULL, "Total");
    td(f, "num", tot);
    td(f, NULL, "");
    td(f, NULL, "cpu");
    td(f, "num", "1");
    fputs("<td colspan=\"5\"></td></tr></tfoot>\n</table>\n", f);
}

static void kv(FILE *f, const char *k, const char *v)
{
    fputs("<tr><th>", f);
    esc(f, k);
    fputs("</th><td>", f);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

kiln_status kiln_report_write_html(FILE *f, const kiln_report *r, kiln_error *err)
{
    const kiln_report_config *c = &r->cfg;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>kiln "
          "profile: ",
          f);
    esc(f, c->model);
    fputs("</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
          "table{border-collapse:collapse;margin:1em 0}\n"
          "th,td{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}\n"
          "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
          "td.hash{font-family:monospace}\n"
          "tfoot td{font-weight:bold}\n"
          "svg.chart text{font-size:12px;font-family:sans-serif}\n"
          "rect.bar{fill:#d9652b}\n"
          "pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}\n"
          "</style>\n</head>\n<body>\n<h1>kiln profile: ",
          f);
    esc(f, c->model);
    char tot[48], sum[48];
    kiln_report_fmt_us(r->total_us, tot, sizeof tot);
    kiln_report_fmt_us(r->sum_us, sum, sizeof sum);
    fprintf(f, "</h1>\n<p>Total %s us per run (mean of %d instrumented runs), Sum %s us "
               "(%.1f%%); %d kernel%s, %d of %d rows shown (aggregated by %s, sorted by %s).</p>\n",
            tot, c->runs, sum, r->total_us > 0 ? 100.0 * r->sum_us / r->total_us : 0, r->n_steps,
            r->n_steps == 1 ? "" : "s", r->n_rows, r->rows_total,
            r->aggregate[0] ? r->aggregate : "none", r->sort[0] ? r->sort : "time");
    fputs("<h2>Where the time goes</h2>\n", f);
    chart(f, r);
    fputs("<h2>Kernels</h2>\n", f);
    table(f, r);
    fputs("<h2>Configuration</h2>\n<table class=\"config\">\n", f);
    char buf[256];
    kv(f, "Model", c->model ? c->model : "");
    snprintf(buf, sizeof buf, "%d", c->threads);
    kv(f, "Number of threads", buf);
    kv(f, "Binding", c->binding ? c->binding : "off");
    kv(f, "Target ISA", c->target && *c->target ? c->target : "(none)");
    kv(f, "Executor", c->executor ? c->executor : "");
    kv(f, "Build id", c->build_id && *c->build_id ? c->build_id : "(none)");
    if (c->records && *c->records)
        snprintf(buf, sizeof buf, "%s (%d tuned tasks)", c->records, c->tuned_tasks);
    else
        snprintf(buf, sizeof buf, "none (every kernel uses its default config)");
    kv(f, "Tuning records", buf);
    if (c->n_fallbacks == 0)
        kv(f, "Fallbacks", "none");
    for (int i = 0; i < c->n_fallbacks; i++)
        kv(f, "Fallback", c->fallbacks[i]);
    snprintf(buf, sizeof buf, "%d instrumented after %d warm-up", c->runs, c->warmup);
    kv(f, "Runs", buf);
    if (c->peak_gflops > 0) {
        snprintf(buf, sizeof buf, "%.1f GFLOP/s (%s)", c->peak_gflops,
                 c->peak_source ? c->peak_source : "");
        kv(f, "Peak", buf);
    }
    fputs("</table>\n<h2>Agreement</h2>\n<pre>", f);
    char agree[4096];
    kiln_report_agreement_text(r, agree, sizeof agree);
    esc(f, agree);
    fputs("</pre>\n</body>\n</html>\n", f);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "report: write error");
    return KILN_OK;
}
