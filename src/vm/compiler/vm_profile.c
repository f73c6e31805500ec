/* vm/compiler/vm_profile.c: `kiln profile` for a model on the VM
 * (kiln_vm_profile), libkiln's: the profiler's reports live there.
 *
 * The profile describes the VM's steps after one run (a data-dependent
 * node's shapes are those of a run) and times them one by one
 * (kiln_profile_steps over kiln_vm_run_step), interleaved with bench
 * measurements (report/profile_run.h), so the VM's own rows (step 0, its
 * kernels, converted nodes, control flow) appear beside the compiled
 * kernels of the static part. */
#include <stdio.h>
#include <string.h>

#include "report/profile_run.h"
#include "runtime/profile.h"
#include "util/error.h"
#include "vm/vm_internal.h"

static kiln_status vm_run(void *ctx, kiln_error *err)
{
    return kiln_vm_run(ctx, err);
}

static kiln_status vm_step(void *ctx, int i, kiln_error *err)
{
    return kiln_vm_run_step(ctx, i, err);
}

static kiln_status vm_profile_runs(void *ctx, int runs, int64_t *stamps, kiln_error *err)
{
    return kiln_profile_steps(vm_step, ctx, kiln_vm_num_steps(ctx), runs, stamps, err);
}

static kiln_status vm_bench(void *ctx, const kiln_bench_options *opts, kiln_bench_result *out,
                           kiln_error *err)
{
    return kiln_vm_bench(ctx, opts, out, err);
}

kiln_status kiln_vm_report_describe(kiln_vm *vm, kiln_report *r, kiln_error *err)
{
    kiln_report_config *c = &r->cfg;
    kiln_status st;
    /* one run first: a data-dependent node's shapes are those of a run */
    if ((st = kiln_vm_run(vm, err)) != KILN_OK)
        return st;
    int n = kiln_vm_num_steps(vm);
    c->binding = kiln_report_strdup("off");
    char what[256];
    snprintf(what, sizeof what, "vm: %s static part%s, data-dependent nodes on the VM%s",
             kiln_vm_static_compiled(vm) ? "compiled" : "reference",
             kiln_vm_from_so(vm) ? " (from the .so)" : "",
             !kiln_vm_heavy_on_reference(vm) ? ""
             : kiln_vm_compiles(vm) ? "; heavy Gemm/MatMul/Conv on reference kernels (no C compiler)"
                                    : "; heavy Gemm/MatMul/Conv on reference kernels (the runtime "
                                      "alone: no compiler)");
    c->target = kiln_report_strdup(what);
    c->build_id = kiln_report_strdup("");
    if (!c->binding || !c->target || !c->build_id)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if ((st = kiln_report_alloc_steps(r, n, err)) != KILN_OK)
        return st;
    char shapes[2048];
    for (int i = 0; i < n; i++) {
        kiln_vm_step_desc sd;
        if (kiln_vm_step_info(vm, i, &sd, shapes, sizeof shapes) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_INTERNAL, "VM step %d: no info", i);
        /* the layouts column says what ran a step that is not a compiled kernel */
        const char *lay = strcmp(sd.kind, "compiled") == 0 ? sd.layouts : sd.kind;
        if ((st = kiln_report_set_step(r, i, sd.name, sd.op, shapes, lay, sd.workload_hash != 0,
                                       sd.workload_hash, sd.flops, err)) != KILN_OK)
            return st;
    }
    return KILN_OK;
}

static kiln_status vm_describe(void *ctx, const char *model, kiln_report *r, kiln_error *err)
{
    kiln_report_config *c = &r->cfg;
    c->model = kiln_report_strdup(model && *model ? model : "model.onnx");
    c->executor = kiln_report_strdup("vm");
    c->kiln_version = kiln_report_strdup(KILN_VERSION);
    c->threads = kiln_vm_num_threads(ctx);
    if (!c->model || !c->executor || !c->kiln_version)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "profile: out of memory");
    return kiln_vm_report_describe(ctx, r, err);
}

kiln_status kiln_vm_profile(kiln_vm *vm, const kiln_profile_options *opts, kiln_profile **out,
                            kiln_error *err)
{
    kiln_profile_target t = {.ctx = vm, .run = vm_run, .profile = vm_profile_runs,
                             .bench = vm_bench};
    return kiln_profile_target_run(&t, vm_describe, opts, "kiln_vm_profile", out, err);
}
