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

double kiln_driver_now(void);

/* Knob values drawn at random from each template's space (nonzero seed;
 * before lower): tests of the spaces. */
void kiln_build_set_knob_seed(kiln_build *b, uint64_t knob_seed);
/* kiln_compile with kiln_build_set_knob_seed. */
kiln_status kiln_compile_ex(const kiln_graph *g, const kiln_compile_options *opts,
                            uint64_t knob_seed, const char *out_path, kiln_error *err);

#endif
