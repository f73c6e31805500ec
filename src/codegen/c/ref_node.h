/* codegen/c/ref_node.h: the reference-kernel fallback's "code": a node no
 * template takes becomes a step with no kernel, carrying the node as text
 * (kiln_abi_step.ref_node, include/kiln/abi.h), which the runtime parses once
 * at load and runs with the op's reference kernel (runtime/ref_step.c;
 * format in docs/RUNTIME.md, "Fallback steps"). */
#ifndef KILN_CODEGEN_C_REF_NODE_H
#define KILN_CODEGEN_C_REF_NODE_H

#include "util/sb.h"
#include "lower/lower.h"

/* Whether task t runs its node's reference kernel (the fallback template). */
bool kiln_task_is_fallback(const kiln_lowered *l, const kiln_task *t);

/* The ref_node text of fallback task t (malloc'ed into *text). Fails, naming
 * the node and op, when the reference kernel cannot run it (an argument in a
 * blocked layout or packed). */
kiln_status kiln_ref_node_text(const kiln_lowered *l, const kiln_task *t, char **text,
                               kiln_error *err);

#endif
