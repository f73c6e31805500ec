/* codegen/c/registry.c: the C target's template set, from templates.def.
 * This is the only list of the C templates: target/query.c serves it to the
 * passes and to lowering. */
#include "codegen/c/codegen.h"

#define KILN_TEMPLATE(name) extern const kiln_template kiln_tpl_##name;
#include "codegen/c/templates.def"
#undef KILN_TEMPLATE
extern const kiln_template kiln_tpl_ref;

static const kiln_template *const c_templates[] = {
#define KILN_TEMPLATE(name) &kiln_tpl_##name,
#include "codegen/c/templates.def"
#undef KILN_TEMPLATE
};

const kiln_template_set kiln_c_template_set = {
    .name = "c",
    .tpl = c_templates,
    .n_tpl = (int)(sizeof c_templates / sizeof c_templates[0]),
    .fallback = &kiln_tpl_ref,
    .expr_op = kiln_expr_op,
};
