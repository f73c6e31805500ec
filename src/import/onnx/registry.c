/* import/onnx/registry.c: which converter handles a node.
 *
 * Each family file exports a table of (op_type, since_version, fn, attrs).
 * For a node of the default domain ("" or "ai.onnx") the entry with the
 * highest since_version <= the model's opset wins, following ONNX's own
 * versioning: an op keeps the semantics of its latest version at or below the
 * model's opset. The entry's attribute list is then checked against the node:
 * an attribute kiln does not know is UNSUPPORTED (silently ignoring it could
 * change the result), one of the wrong type is TYPE_MISMATCH. */
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

static const onnx_converter *const tables[] = {
    onnx_nn_converters,
    onnx_elemwise_converters,
    onnx_shape_converters,
    onnx_norm_converters,
    onnx_reduce_converters,
    onnx_data_converters,
    onnx_composite_converters,
    onnx_misc_converters,
};

static const struct {
    const char *name;
    int type;
} type_names[] = {
    {"int", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT},
    {"float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT},
    {"string", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING},
    {"ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS},
    {"floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS},
    {"tensor", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR},
    {"strings", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS},
    {"graph", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH},
    {"tensors", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS},
    {"graphs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS},
    {"sparse_tensor", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR},
    {"type_proto", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO},
};

static const char *type_name(int t)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (type_names[i].type == t)
            return type_names[i].name;
    return "undefined";
}

static int type_from_name(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (strlen(type_names[i].name) == len && strncmp(type_names[i].name, s, len) == 0)
            return type_names[i].type;
    return -1;
}

/* The declared type of attribute `name` in `spec` ("axis:int perm:ints"), or
 * -1 if it is not listed. */
static int spec_type(const char *spec, const char *name)
{
    size_t nl = strlen(name);
    const char *p = spec ? spec : "";
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        const char *colon = memchr(p, ':', len);
        if (colon && (size_t)(colon - p) == nl && strncmp(p, name, nl) == 0)
            return type_from_name(colon + 1, len - nl - 1);
        p += len;
    }
    return -1;
}

static kiln_status check_attrs(const onnx_ctx *c, const onnx_converter *conv, kiln_error *err)
{
    const Onnx__NodeProto *np = c->node;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (!a->name || !*a->name)
            return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute %zu has no name", i);
        for (size_t j = 0; j < i; j++)
            if (np->attribute[j]->name && strcmp(np->attribute[j]->name, a->name) == 0)
                return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute '%s' appears twice",
                                       a->name);
        if (a->ref_attr_name && *a->ref_attr_name)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "attribute '%s' refers to a function attribute", a->name);
        int want = spec_type(conv->attrs, a->name);
        if (want < 0)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "unsupported attribute '%s' on op '%s' (node '%s', opset %lld)",
                               a->name, np->op_type, c->node_name, (long long)c->opset);
        int have = onnx_attr_type(a);
        if (have != want)
            return onnx_node_error(c, KILN_ERR_TYPE_MISMATCH, err,
                                   "attribute '%s' is %s, expected %s", a->name, type_name(have),
                                   type_name(want));
    }
    return KILN_OK;
}

kiln_status onnx_find_converter(const onnx_ctx *c, const onnx_converter **out, kiln_error *err)
{
    const Onnx__NodeProto *np = c->node;
    const char *domain = np->domain ? np->domain : "";
    if (*domain && strcmp(domain, "ai.onnx") != 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "unsupported op '%s' from domain '%s' (node '%s'): kiln converts "
                           "the default ONNX domain only",
                           np->op_type, domain, c->node_name);
    const onnx_converter *best = NULL;
    int lowest = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const onnx_converter *e = tables[t]; e->op_type; e++) {
            if (strcmp(e->op_type, np->op_type) != 0)
                continue;
            if (!lowest || e->since_version < lowest)
                lowest = e->since_version;
            if (e->since_version <= c->opset && (!best || e->since_version > best->since_version))
                best = e;
        }
    if (!best) {
        if (lowest)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "unsupported op '%s' (node '%s', opset %lld): kiln converts it "
                               "from opset %d on",
                               np->op_type, c->node_name, (long long)c->opset, lowest);
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "unsupported op '%s' (node '%s', opset %lld)",
                           np->op_type, c->node_name, (long long)c->opset);
    }
    kiln_status s = check_attrs(c, best, err);
    if (s != KILN_OK)
        return s;
    *out = best;
    return KILN_OK;
}
