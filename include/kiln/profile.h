/* kiln/profile.h: the per-operator profiler as a library call (what
 * `kiln profile` prints, for bindings such as the Python package).
 *
 * Part of libkiln (the reports need cJSON); the module comes from the runtime
 * API (kiln/runtime.h). Conventions as in kiln.h: kiln_status returns, an
 * optional kiln_error with a message, destroy(NULL) is a no-op, out-parameters
 * untouched on failure. A profile handle is not thread-safe; distinct handles
 * may be used from distinct threads. Formats and the JSON schema are in
 * docs/PROFILE.md.
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include "kiln/runtime.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_profile kiln_profile;

/* Zeros give `kiln profile`'s defaults. */
typedef struct kiln_profile_options {
    int runs;           /* instrumented runs (0: 20, more for fast models: ~0.4 s of runs) */
    int warmup;         /* warm-up runs (0: 3; negative: none) */
    int bench_number;   /* runs per agreement bench measurement (0: 10) */
    int bench_repeat;   /* bench measurements interleaved with the runs (0: 5) */
    int no_bench;       /* nonzero: no agreement bench */
    double peak_gflops; /* > 0: the peak for the fraction-of-peak column; 0: measured */
    const char *model;  /* the model's name in the report (NULL: the module's name) */
} kiln_profile_options;

/* Profiles the module on its current inputs (set them first with
 * kiln_module_set_input): warm-up runs, then instrumented runs (every step
 * timed with CLOCK_MONOTONIC, nothing allocated during them) interleaved with
 * kiln_module_bench measurements of the same module, exactly as
 * `kiln profile` does. Slow models (over 200 ms a run) get fewer runs unless
 * counts are given. */
kiln_status kiln_profile_module(kiln_module *m, const kiln_profile_options *opts,
                                kiln_profile **out, kiln_error *err);

/* A profile from the JSON report (`kiln profile --format json`, or
 * kiln_profile_format(.., "json", ..)); `what` names the text in messages. */
kiln_status kiln_profile_parse_json(const char *text, const char *what, kiln_profile **out,
                                    kiln_error *err);

void kiln_profile_destroy(kiln_profile *p); /* NULL: no-op */

/* The report as `format` ("table", "csv", "json", "chrome", "html"), its rows
 * aggregated ("none", "hash", "op"; NULL: "none"), sorted ("time", "order",
 * "name"; NULL: "time") and cut to the first `top` (0: all). *out receives
 * the text, malloc'ed: release it with kiln_free. */
kiln_status kiln_profile_format(kiln_profile *p, const char *format, const char *aggregate,
                                const char *sort, int top, char **out, kiln_error *err);

/* `kiln profile --compare`: a against b row by row, as "table", "csv" or
 * "json"; labels name the two sides (NULL: "A", "B"). *out as above. */
kiln_status kiln_profile_compare(kiln_profile *a, const char *a_label, kiln_profile *b,
                                 const char *b_label, const char *format, const char *aggregate,
                                 int top, char **out, kiln_error *err);

/* Releases memory kiln handed out (kiln_profile_format, ...); NULL: no-op. */
void kiln_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* KILN_PROFILE_H */
