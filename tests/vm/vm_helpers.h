/* tests/vm/vm_helpers.h: what the VM tests share: setting an input and
 * running, failing the test with the VM's message; the kind (and flops) of
 * a step found by its node name or its op. */
#ifndef KILN_TESTS_VM_HELPERS_H
#define KILN_TESTS_VM_HELPERS_H

#include <stdbool.h>
#include <string.h>

#include "test_support.h"
#include "vm/vm.h"

static inline void kt_vm_set(kiln_vm *vm, int i, kiln_dtype dt, kiln_shape sh, const void *data)
{
    kiln_tensor t = {.dtype = dt, .shape = sh, .data = (void *)data};
    kiln_error err = {0};
    if (kiln_vm_set_input(vm, i, &t, &err) != KILN_OK)
        fail_msg("input %d: %s", i, err.msg);
}

/* A VM for the model at path (reference kernels or compiled, on `threads`
 * threads); fails the test with the VM's message. */
static inline kiln_vm *kt_vm_open(const char *path, bool reference, int threads)
{
    kiln_vm *vm = NULL;
    kiln_error err = {0};
    kiln_vm_options o = {.reference = reference, .num_threads = threads};
    if (kiln_vm_create(path, &o, &vm, &err) != KILN_OK)
        fail_msg("vm: %s", err.msg);
    return vm;
}

static inline void kt_vm_run(kiln_vm *vm)
{
    kiln_error err = {0};
    if (kiln_vm_run(vm, &err) != KILN_OK)
        fail_msg("run: %s", err.msg);
}

/* The kind of the first step whose node name (by_op: op) is `key`; its
 * flops in *flops when flops is not NULL. Fails the test when none is. */
static inline const char *kt_vm_step_kind(const kiln_vm *vm, const char *key, bool by_op,
                                          double *flops)
{
    for (int i = 0; i < kiln_vm_num_steps(vm); i++) {
        kiln_vm_step_desc d;
        if (kiln_vm_step_info(vm, i, &d, NULL, 0) == KILN_OK &&
            !strcmp(by_op ? d.op : d.name, key)) {
            if (flops)
                *flops = d.flops;
            return d.kind;
        }
    }
    fail_msg("no step '%s'", key);
    return NULL;
}

#endif
