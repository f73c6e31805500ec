/* vm/vm_api.c: what the CLI and bindings (the Python package) call beside
 * running a VM: which import failures the VM takes (kiln_vm_needed), its
 * threads, and timing it (kiln_vm_bench: what `kiln bench` does for a model
 * on the VM, the runtime's time evaluator over kiln_vm_run,
 * kiln_bench_function). Profiling it is libkiln's (vm/compiler/vm_profile.c:
 * the profiler's reports). */
#include <stdio.h>
#include <string.h>

#include "runtime/pool.h"
#include "runtime/profile.h"
#include "util/error.h"
#include "vm/vm_internal.h"

bool kiln_vm_needed(kiln_status st, const char *msg)
{
    static const char *const why[] = {
        "must be a constant", "has a symbolic dimension", "has an unknown dimension",
        "has no declared shape", "unsupported op 'If'", "unsupported op 'Loop'",
        "unsupported op 'Scan'", "unsupported op 'Sequence", "unsupported op 'ConcatFromSequence'",
        "unsupported op 'SplitToSequence'"};
    if (st != KILN_ERR_UNSUPPORTED || !msg)
        return false;
    for (size_t i = 0; i < sizeof why / sizeof *why; i++)
        if (strstr(msg, why[i]))
            return true;
    return false;
}

int kiln_vm_num_threads(const kiln_vm *vm)
{
    if (!vm || vm->reference)
        return 1;
    int n = 0;
    kiln_error err = {0};
    /* as a module resolves 0: $KILN_NUM_THREADS, else the physical cores */
    if (kiln_threads_resolve(vm->num_threads, &n, &err) != KILN_OK || n < 1)
        n = kiln_runtime_physical_cores();
    return n;
}

static kiln_status vm_run(void *ctx, kiln_error *err)
{
    return kiln_vm_run(ctx, err);
}

kiln_status kiln_vm_bench(kiln_vm *vm, const kiln_bench_options *opts, kiln_bench_result *out,
                          kiln_error *err)
{
    if (!vm || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_vm_bench: vm and out must not be NULL");
    return kiln_bench_function(vm_run, vm, kiln_vm_num_threads(vm), opts, out, err);
}

