/* runtime/ref_step.h: fallback steps, a node with no kernel template run by
 * its reference kernel (src/ref) inside a compiled model.
 *
 * At load, a step's ref_node text (include/kiln/abi.h; format in
 * docs/RUNTIME.md, "Fallback steps") becomes a one-node kiln_node and tensor
 * views onto the arena and the weights: parsed once, checked against the op
 * table (arity, the op's shape inference against the tensor table), all in
 * the module's arena. Running one is a call of the op's reference kernel:
 * no parsing, no lookup, no allocation (the few kernels that need scratch
 * borrow a buffer sized at load: ref/scratch.h). */
#ifndef KILN_RUNTIME_REF_STEP_H
#define KILN_RUNTIME_REF_STEP_H

#include "kiln/abi.h"
#include "kiln/types.h"
#include "util/arena.h"

typedef struct kiln_ref_step kiln_ref_step;

/* Builds fallback step `s` of descriptor d (validated; d->steps[s].ref_node
 * set) over its resolved argument pointers `args`. Everything lives in
 * `arena`. Errors (KILN_ERR_PARSE, naming `path`, the step and what is
 * wrong) leave *out untouched. */
kiln_status kiln_ref_step_create(const char *path, const kiln_abi_model *d, int s,
                                 void *const *args, kiln_arena *arena, kiln_ref_step **out,
                                 kiln_error *err);

/* Runs the node's reference kernel. A kernel error (an index out of range in
 * the data, ...) comes back with the step, node and op named. */
kiln_status kiln_ref_step_run(const kiln_ref_step *r, kiln_error *err);

/* The op's name ("Cast"). */
const char *kiln_ref_step_op(const kiln_ref_step *r);

#endif
