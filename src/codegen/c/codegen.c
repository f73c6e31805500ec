/* codegen/c/codegen.c: a task's kernel source, from its template's emit;
 * the names of kernels that take an extent at run time. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/c/codegen.h"
#include "codegen/c/ref_node.h"
#include "lower/hash.h"
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

kiln_status kiln_codegen_name_by_source(kiln_lowered *l, kiln_error *err)
{
    bool any = false;
    for (int i = 0; i < l->n_tasks; i++) {
        kiln_task *t = &l->tasks[i];
        if (t->extent <= 0 || kiln_task_is_fallback(l, t))
            continue;
        /* the source under a placeholder name (the name is in it) */
        snprintf(t->fn_name, sizeof t->fn_name, "kiln_k_%s_f32_rt", t->tpl->name);
        char *src = NULL;
        kiln_status s = kiln_codegen_kernel(l, t, &src, err);
        if (s != KILN_OK)
            return s;
        kiln_hash h;
        kiln_hash_init(&h, 13);
        kiln_hash_str(&h, src);
        free(src);
        char hex[33];
        kiln_hash_hex(&h, hex);
        hex[12] = 0;
        snprintf(t->fn_name, sizeof t->fn_name, "kiln_k_%s_f32_rt%s", t->tpl->name, hex);
        any = true;
    }
    if (any) /* tasks of one source share its kernel, whatever their extents */
        kiln_lowered_share_kernels(l);
    return KILN_OK;
}
