/* codegen/c/codegen.c: dispatch from a task's template to its emitter. */
#include "codegen/c/codegen.h"
#include "util/error.h"

kiln_status kiln_codegen_kernel(const kiln_lowered *l, const kiln_task *t, char **source,
                                kiln_error *err)
{
    kiln_sb b = {0};
    kiln_status s;
    switch (t->tpl) {
    case KILN_TPL_CONV2D_NCHWC:
        s = kiln_emit_conv_nchwc(&b, l, t);
        break;
    case KILN_TPL_DWCONV2D_NCHWC:
        s = kiln_emit_dwconv(&b, l, t);
        break;
    case KILN_TPL_CONV2D_DIRECT:
        s = kiln_emit_conv_direct(&b, l, t);
        break;
    case KILN_TPL_DENSE:
        s = kiln_emit_dense(&b, l, t);
        break;
    case KILN_TPL_MATMUL:
        s = kiln_emit_matmul(&b, l, t);
        break;
    case KILN_TPL_POOL2D:
        s = kiln_emit_pool(&b, l, t);
        break;
    case KILN_TPL_GLOBAL_POOL:
        s = kiln_emit_global_pool(&b, l, t);
        break;
    case KILN_TPL_SOFTMAX:
        s = kiln_emit_softmax(&b, l, t);
        break;
    case KILN_TPL_LAYERNORM:
        s = kiln_emit_layernorm(&b, l, t);
        break;
    case KILN_TPL_REDUCE:
        s = kiln_emit_reduce(&b, l, t);
        break;
    case KILN_TPL_ELEMWISE:
        s = kiln_emit_elemwise(&b, l, t);
        break;
    case KILN_TPL_TRANSPOSE:
    case KILN_TPL_COPY:
    case KILN_TPL_SLICE:
    case KILN_TPL_GATHER:
        s = kiln_emit_strided(&b, l, t);
        break;
    case KILN_TPL_CONCAT:
        s = kiln_emit_concat(&b, l, t);
        break;
    case KILN_TPL_SPLIT:
        s = kiln_emit_split(&b, l, t);
        break;
    case KILN_TPL_PAD:
        s = kiln_emit_pad(&b, l, t);
        break;
    case KILN_TPL_LAYOUT:
        s = kiln_emit_layout(&b, l, t);
        break;
    case KILN_TPL_REF:
        s = kiln_emit_ref(&b, l, t);
        break;
    default:
        s = KILN_ERR_UNSUPPORTED;
        break;
    }
    if (s != KILN_OK) {
        kiln_sb_free(&b);
        return kiln_errorf(err, s, "no code generator for template '%s' (kernel %s)",
                           kiln_tpl_name(t->tpl), t->fn_name);
    }
    *source = kiln_sb_take(&b);
    if (!*source)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory generating %s", t->fn_name);
    return KILN_OK;
}
