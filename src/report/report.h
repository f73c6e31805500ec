/* report/report.h: the per-operator profile report (kiln profile): its data
 * model, how it is built from the instrumented runs' time stamps, and its
 * writers (table, CSV, JSON, Chrome trace, HTML), reader (JSON) and
 * comparison. The JSON schema and the formats are documented in
 * docs/PROFILE.md.
 *
 * A report holds every step (fused kernel, or reference-executor node) with
 * its median time over the instrumented runs, and the rows derived from the
 * steps (aggregated, sorted, cut to --top). All strings are malloc'ed and
 * owned by the report; kiln_report_free releases them (and accepts a zeroed
 * or partially filled report). Nothing here exits on bad input: a malformed
 * JSON file is a KILN_ERR_PARSE naming the field. */
#ifndef KILN_REPORT_REPORT_H
#define KILN_REPORT_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "kiln/types.h"

#define KILN_REPORT_VERSION 2

/* A run slower than the median run by more than this many median absolute
 * deviations of the runs' wall times, and by this fraction of the median at
 * least, is left out of the profile's times (report.c). */
#define KILN_REPORT_SLOW_MADS 4.0
#define KILN_REPORT_SLOW_FLOOR 0.02

typedef struct kiln_report_step {
    char *name, *op, *shapes, *layouts; /* never NULL once filled */
    uint64_t hash;       /* workload hash; has_hash 0 when the executor has none */
    int has_hash;
    double flops;        /* of one call; 0 if unknown */
    double time_us;      /* mean over the kept runs (report.c): what rows and Sum add */
    double median_us, min_us, max_us, mean_us; /* over every instrumented run */
    double start_us;     /* start in the representative run (the median wall time) */
    double trace_us;     /* duration in the representative run */
} kiln_report_step;

typedef struct kiln_report_row {
    char *name, *op, *shapes, *layouts;
    uint64_t hash;
    int has_hash;
    double duration_us;  /* sum of its steps' times */
    double percent;      /* of Total */
    int count;           /* steps (calls per run) aggregated in the row */
    double flops;        /* per run, of all its calls; 0 if unknown */
    double gflops;       /* 0 if unknown */
    double peak_fraction; /* gflops / peak; 0 if unknown */
    int order;           /* index of its first step */
} kiln_report_row;

typedef struct kiln_report_config {
    char *model, *executor, *target, *build_id, *binding, *records, *kiln_version;
    char *peak_source;   /* how peak_gflops was obtained */
    int threads, runs, warmup, tuned_tasks;
    int n_fallbacks;
    char **fallbacks;
    double peak_gflops;  /* of `threads` threads; 0 unknown */
    double peak_gflops_1; /* one thread; 0 unknown */
} kiln_report_config;

typedef struct kiln_report {
    kiln_report_config cfg;
    int n_steps;
    kiln_report_step *steps;   /* execution order */
    int n_rows, rows_total;    /* rows shown; rows before --top */
    kiln_report_row *rows;
    char aggregate[16], sort[16];
    double sum_us;             /* sum of every step's time (= total_us - between_us) */
    double sum_mean_us;        /* sum of every step's mean over every run */
    int sum_count;             /* steps */
    double total_us;           /* mean wall time of the kept runs (report.c) */
    int runs_kept;             /* of cfg.runs; the others were slowed (report.c) */
    double total_mean_us, total_median_us, total_min_us, total_max_us; /* over every run */
    double between_us;         /* mean over the kept runs of (run wall time - its kernels' time) */
    double clock_ns;           /* one clock read */
    double overhead_us;        /* estimated profiler overhead per run */
    int has_bench;
    double bench_mean_us, bench_median_us, bench_min_us, bench_max_us;
    int bench_number, bench_repeat;
} kiln_report;

void kiln_report_free(kiln_report *r);
/* Allocates r->steps (zeroed) for n steps. */
kiln_status kiln_report_alloc_steps(kiln_report *r, int n, kiln_error *err);
/* Sets step i's description (copies the strings; NULL counts as ""). */
kiln_status kiln_report_set_step(kiln_report *r, int i, const char *name, const char *op,
                                 const char *shapes, const char *layouts, int has_hash,
                                 uint64_t hash, double flops, kiln_error *err);
/* malloc'ed copy (NULL -> ""), or NULL when out of memory. */
char *kiln_report_strdup(const char *s);
/* Reads "records", "tuned_tasks" and "fallbacks" from a compiled model's
 * metadata JSON (kiln_module_metadata_json); missing fields stay unset. */
kiln_status kiln_report_set_metadata(kiln_report *r, const char *metadata_json, kiln_error *err);

/* Fills the steps' times, Sum and Total from `runs` runs of stamps
 * (runtime/profile.h layout) for r->n_steps steps. */
kiln_status kiln_report_from_stamps(kiln_report *r, const int64_t *stamps, int runs,
                                    kiln_error *err);

/* Derives r->rows from the steps: aggregate "none" (a row per step), "hash"
 * (steps with one workload hash and op; TVM's per-function rows) or "op" (per
 * kernel template / op type); sort "time" (descending), "order" (execution)
 * or "name"; top > 0 keeps the first `top` rows. */
kiln_status kiln_report_rows(kiln_report *r, const char *aggregate, const char *sort, int top,
                             kiln_error *err);

/* ---- writers (report_*.c) ------------------------------------------------
 * format: "table", "csv", "json", "chrome", "html". */
kiln_status kiln_report_write(FILE *f, const kiln_report *r, const char *format,
                              kiln_error *err);
kiln_status kiln_report_write_table(FILE *f, const kiln_report *r, kiln_error *err);
kiln_status kiln_report_write_csv(FILE *f, const kiln_report *r, kiln_error *err);
kiln_status kiln_report_write_json(FILE *f, const kiln_report *r, kiln_error *err);
kiln_status kiln_report_write_chrome(FILE *f, const kiln_report *r, kiln_error *err);
kiln_status kiln_report_write_html(FILE *f, const kiln_report *r, kiln_error *err);

/* The JSON writers (json, chrome, compare) build a cJSON tree: add() sets
 * *ok to 0 when v is NULL or cannot be attached (and frees v); emit() prints
 * the tree (pretty or compact) if ok, deletes it, and reports out of memory
 * or a write error. */
struct cJSON;
void kiln_report_json_add(struct cJSON *obj, const char *key, struct cJSON *v, int *ok);
kiln_status kiln_report_json_emit(FILE *f, struct cJSON *root, int ok, int pretty,
                                  kiln_error *err);

/* Reads a report written by kiln_report_write_json (every schema field is
 * checked; rows are re-derived from "steps" by kiln_report_rows). */
kiln_status kiln_report_read_json(const char *path, kiln_report *r, kiln_error *err);
kiln_status kiln_report_parse_json(const char *text, const char *what, kiln_report *r,
                                   kiln_error *err);

/* The agreement lines (Sum vs Total, overhead, Total vs bench), one per
 * line, into buf; shared by the table and HTML writers. */
void kiln_report_agreement_text(const kiln_report *r, char *buf, size_t size);

/* Compares two reports row by row (format "table", "csv" or "json"): rows
 * matched by workload hash and name, then by name, then by hash, then a
 * fused step "a+b+c" against rows named a, b and c (graph vs ref); per-row
 * delta and ratio B/A, Sum and Total deltas, rows in only one, and the
 * configuration settings that differ. Both reports must have rows. */
kiln_status kiln_report_compare(FILE *f, const kiln_report *a, const char *a_label,
                                const kiln_report *b, const char *b_label, const char *format,
                                int top, kiln_error *err);

/* "28,112.35" (fixed 2 decimals, thousands separators). */
char *kiln_report_fmt_us(double us, char *buf, size_t size);

/* ---- peak (report/peak.c) -------------------------------------------------
 * GFLOP/s of a register-only FMA loop (AVX-512 when the CPU has it, else
 * AVX2+FMA, else scalar) on `threads` threads, best of a few tries (about
 * 0.1 s). `how` receives e.g. "AVX-512 FMA loop". */
double kiln_peak_measure(int threads, char *how, size_t size);

/* The peak of `threads` threads (*peak) and of one (*peak1), as a profile
 * reports them. When n threads (threads, at most the online CPUs) read
 * under 1.3x one thread, they are measured again after a pause, up to 3
 * times; if they still do not scale and cpu0 has no SMT sibling (the VM's
 * vCPUs were sharing a core while measured), *peak is n x *peak1 and `how`
 * says so. */
void kiln_peak_measure_pair(int threads, double *peak, double *peak1, char *how, size_t size);

#endif
