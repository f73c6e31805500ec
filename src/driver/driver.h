/* driver/driver.h: the compile pipeline as stages with one handle
 * (kiln_build, public in kiln/kiln.h), shared by the driver's files.
 *
 *   create -> passes -> lower -> configure -> codegen -> link
 *
 * Each stage runs the ones before it that have not run. configure applies,
 * per task, an explicit configuration set with kiln_build_set_config, else
 * the best tuning record for its workload key (opts.records), else keeps the
 * template's analytic default (configs.c). */
#ifndef KILN_DRIVER_DRIVER_H
#define KILN_DRIVER_DRIVER_H

#include "kiln/kiln.h"
#include "kiln/runtime.h"
#include "lower/lower.h"
#include "toolchain/toolchain.h"

typedef enum build_stage {
    BUILD_CREATED = 0,
    BUILD_PASSES,
    BUILD_LOWERED,
    BUILD_CONFIGURED,
    BUILD_GENERATED,
    BUILD_LINKED,
} build_stage;

struct kiln_build {
    const kiln_graph *g;
    kiln_compile_options opts;
    char *records, *cache_dir, *dump_code_dir, *print_ir_after; /* copies of opts' strings */
    uint64_t knob_seed;  /* nonzero: knob values drawn at random (tests of the spaces) */
    kiln_target target;
    build_stage stage;
    kiln_pass_ctx *ctx;
    /* alter-layout: hints set by the tuner (kiln_build_set_layout_hints),
     * else the measured block times of the records (layout_records.c) */
    const struct kiln_layout_hints *layout_hints;
    struct kiln_layout_hints *rec_hints; /* owned, with its times and keys */
    kiln_lowered *low;
    /* configure */
    bool *explicit_cfg;  /* per task: set by kiln_build_set_config */
    int n_tuned;         /* tasks configured from records */
    /* codegen */
    kiln_tc_build *tc;
    int n_kernels;
    char build_id[33];
    char *meta;          /* the metadata JSON */
    char *out_path;      /* where link put the .so */
    bool from_cache;     /* the model cache had it: nothing compiled */
    /* kiln_build_share_weights: large weights in files of their own, and
     * the pack memo's disk tier in the model cache (the graph's memo, or
     * `memo`, owned, when it lends none) */
    bool share_weights;
    struct kiln_pack_memo *memo;
    double t_start, t_passes, t_lower, t_config, t_codegen, t_compile, t_link;
};

/* configs.c */
/* Applies the records file (b->records) to the tasks without an explicit
 * configuration; counts b->n_tuned. A malformed file is an error naming the
 * line. */
kiln_status kiln_driver_apply_records(kiln_build *b, kiln_error *err);
/* Sets task i's knobs from a JSON object {"knob": value, ...}; every knob
 * named must exist and the value be in its space. */
kiln_status kiln_driver_set_knobs(kiln_task *t, const char *config_json, const char *source,
                                  kiln_error *err);

/* Whether a record line is a layout stage's block time ("kind": "block"),
 * which configure skips. */
struct cJSON;
bool kiln_driver_is_block_record(const struct cJSON *rec);
/* The *.jsonl files of a records directory, in name order (malloc'ed). */
kiln_status kiln_driver_records_files(const char *dir, char ***names, int *n, kiln_error *err);

/* layout_records.c */
/* Reads the block times of b->records (a file or a shipped directory):
 * lines of kind "block", status "tuned", this CPU's fingerprint and this
 * kiln's template hash; b->rec_hints receives them (NULL when none). A line
 * that is not JSON is configure's to report: skipped here. */
kiln_status kiln_driver_read_layout_records(kiln_build *b, kiln_error *err);
void kiln_driver_free_layout_hints(struct kiln_layout_hints *h);
/* The block times of a records file or directory (tuned_only: status
 * "tuned", else "measured" too; a missing file then reads as empty): *out
 * NULL when there are none. */
kiln_status kiln_driver_block_times(const char *records, bool tuned_only,
                                    struct kiln_layout_hints **out, kiln_error *err);
/* After the passes: how many convs' blocks measured times decided (with
 * opts.verbose, or for shipped records when any did). */
void kiln_driver_report_layouts(const kiln_build *b);

/* Hints for alter-layout (pass/layout_dp.h; NULL: the records', if any),
 * before the passes run; the caller keeps them alive while the build is. */
void kiln_build_set_layout_hints(kiln_build *b, const struct kiln_layout_hints *h);
/* After the passes: the nodes offered block choices and what they took
 * (owned by the build), and how many were costed by measured times. */
const struct kiln_layout_decision *kiln_build_layout_decisions(const kiln_build *b, int *n,
                                                               int *measured);
/* After lower: the task whose anchor node is named `name`, or -1. */
int kiln_build_task_of_node(const kiln_build *b, const char *name);

double kiln_driver_now(void);

/* Knob values drawn at random from each template's space (nonzero seed;
 * before lower): tests of the spaces. */
void kiln_build_set_knob_seed(kiln_build *b, uint64_t knob_seed);
/* Before codegen, for a link into the model cache (out_path NULL): every
 * weights tensor of KILN_SHARE_MIN_BYTES or more is kept as a file of its
 * own, <cache>/models/<hash of its bytes>.w, which the runtime maps at load
 * (KILN_STORAGE_FILE), not in the .so: models holding the same tensor (a
 * VM's shape classes: BERT's packed weights at every sequence length)
 * share its file, written once, and nothing assembles or links it. The
 * .so is then not a single deployable file: the VM's builds only, never
 * `kiln compile`'s (an output path refuses it). */
void kiln_build_share_weights(kiln_build *b);
/* The shared weights' files beside the model cache path `model` (driver.c):
 * each one there is marked used, each missing one written. */
kiln_status kiln_driver_weight_files(kiln_build *b, const char *model, kiln_error *err);
/* A build into the model cache (shared weights) whose kernels the loaded
 * .so `kernels_so` already holds, run without compiling or linking anything
 * (reuse.c): its descriptor built in memory (kiln_codegen_model_desc), its
 * weights files written beside the model cache path it would have, and
 * loaded with kiln_module_load_desc. *out stays NULL, with KILN_OK, when
 * that does not apply: the model cache has the build (load that), the .so
 * is not loaded in this process, or it lacks a kernel; the build can then
 * be linked as usual. */
kiln_status kiln_build_load_reusing(kiln_build *b, const char *kernels_so,
                                    const kiln_module_options *mo, kiln_module **out,
                                    kiln_error *err);
#define KILN_SHARE_MIN_BYTES (64 << 10)
/* kiln_compile with kiln_build_set_knob_seed. */
kiln_status kiln_compile_ex(const kiln_graph *g, const kiln_compile_options *opts,
                            uint64_t knob_seed, const char *out_path, kiln_error *err);

/* The cost model of w's template (kiln_template.cost) at knob values
 * values[0..n_knobs) (the order of kiln_workload_knob), into *cost (any
 * unit; compare ratios). False when the template has no model. */
bool kiln_workload_cost(const kiln_workload *w, const int *values, double *cost);

#endif
