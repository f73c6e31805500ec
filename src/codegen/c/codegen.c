/* codegen/c/codegen.c: a task's kernel source, from its template's emit. */
#include "codegen/c/codegen.h"
#include "util/error.h"

kiln_status kiln_codegen_kernel(const kiln_lowered *l, const kiln_task *t, char **source,
                                kiln_error *err)
{
    kiln_sb b = {0};
    kiln_status s = t->tpl->emit ? t->tpl->emit(&b, l, t) : KILN_ERR_UNSUPPORTED;
    if (s != KILN_OK) {
        kiln_sb_free(&b);
        return kiln_errorf(err, s, "no code generator for template '%s' (kernel %s)",
                           t->tpl->name, t->fn_name);
    }
    *source = kiln_sb_take(&b);
    if (!*source)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory generating %s", t->fn_name);
    return KILN_OK;
}
