/* codegen/c/emit_ref.c: the reference-kernel fallback. Not generated yet:
 * kiln_compile refuses graphs with untemplated ops before code generation
 * (docs/COMPILER.md, "Fallback"). */
#include "codegen/c/codegen.h"

kiln_status kiln_emit_ref(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    (void)b;
    (void)l;
    (void)t;
    return KILN_ERR_UNSUPPORTED;
}
