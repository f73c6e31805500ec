/* codegen/c/tpl_ref.c: the fallback for a node no template takes: its
 * reference kernel, run inside the compiled model (emit_ref.c). It matches
 * nothing by itself; the target hands it every node the templates of
 * templates.def do not take. */
#include "codegen/c/codegen.h"

const kiln_template kiln_tpl_ref = {
    .name = "ref",
    .emit = kiln_emit_ref,
};
