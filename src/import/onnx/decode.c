/* import/onnx/decode.c: from bytes to a kiln graph's inputs and constants.
 *
 * Unpacking: protobuf-c allocates in proportion to what the wire declares, and
 * recurses once per nested message. Before unpacking, a scan of the wire format
 * guided by the generated descriptors checks that every length fits in its
 * parent and that messages nest at most ONNX_MAX_DEPTH deep (subgraphs inside
 * attributes could otherwise exhaust the stack); during unpacking, a counting
 * allocator refuses to hand out more than a fixed multiple of the input size.
 *
 * Initializers become constants (external data is read from files next to the
 * model, bounds-checked, and never from outside the model's directory); graph
 * inputs that are not initializers become kiln graph inputs with the dtype and
 * static shape of their type, or the shape/value the caller bound by name. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath */
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "util/bigmem.h"
#include "util/error.h"

#define ONNX_MAX_DEPTH 64

/* ---- wire scan ------------------------------------------------------------ */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static kiln_status scan_message(const uint8_t *base, const uint8_t *p, const uint8_t *end,
                                const ProtobufCMessageDescriptor *desc, int depth,
                                kiln_error *err)
{
    if (depth > ONNX_MAX_DEPTH)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "messages nest more than %d deep (at byte %zu): refusing the file",
                           ONNX_MAX_DEPTH, (size_t)(p - base));
    while (p < end) {
        const uint8_t *at = p;
        uint64_t tag, v;
        if (!read_varint(&p, end, &tag))
            return kiln_errorf(err, KILN_ERR_PARSE, "truncated field tag at byte %zu",
                               (size_t)(at - base));
        uint32_t field = (uint32_t)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &v))
                return kiln_errorf(err, KILN_ERR_PARSE, "truncated varint at byte %zu",
                                   (size_t)(at - base));
            break;
        case 1:
            if (end - p < 8)
                return kiln_errorf(err, KILN_ERR_PARSE, "truncated 64-bit field at byte %zu",
                                   (size_t)(at - base));
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return kiln_errorf(err, KILN_ERR_PARSE, "truncated 32-bit field at byte %zu",
                                   (size_t)(at - base));
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return kiln_errorf(err, KILN_ERR_PARSE,
                                   "field %u at byte %zu declares a length past the end of its "
                                   "message (truncated file?)",
                                   field, (size_t)(at - base));
            const ProtobufCFieldDescriptor *fd =
                desc ? protobuf_c_message_descriptor_get_field(desc, field) : NULL;
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                kiln_status s = scan_message(base, p, p + v, fd->descriptor, depth + 1, err);
                if (s != KILN_OK)
                    return s;
            }
            p += v;
            break;
        }
        default:
            return kiln_errorf(err, KILN_ERR_PARSE, "invalid wire type %u at byte %zu",
                               (unsigned)(tag & 7), (size_t)(at - base));
        }
    }
    return KILN_OK;
}

/* ---- counting allocator --------------------------------------------------- */

typedef struct budget {
    size_t used, limit;
    bool exceeded;
} budget;

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > b->limit - b->used) {
        b->exceeded = true;
        return NULL;
    }
    b->used += size;
    return kiln_big_malloc(size, NULL); /* a large raw_data on huge pages */
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

kiln_status onnx_decode_model(const void *buf, size_t size, Onnx__ModelProto **model,
                              kiln_error *err)
{
    if (!buf && size)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "no buffer");
    if (size == 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "empty model file");
    kiln_status s = scan_message(buf, buf, (const uint8_t *)buf + size,
                                 &onnx__model_proto__descriptor, 0, err);
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "not a valid ONNX model: ");
    /* protobuf-c's in-memory form is a small multiple of the wire form */
    budget b = {.used = 0, .limit = size > SIZE_MAX / 32 ? SIZE_MAX / 2 : size * 16 + (64u << 20)};
    ProtobufCAllocator alloc = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, size, buf);
    if (!m) {
        if (b.exceeded)
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "not a valid ONNX model: decoding needs more than %zu bytes for a "
                               "%zu-byte file",
                               b.limit, size);
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "not a valid ONNX model: the protobuf decoder rejected it (a field "
                           "of the wrong type, invalid UTF-8 or a missing required field)");
    }
    *model = m;
    return KILN_OK;
}

void onnx_free_model(Onnx__ModelProto *model)
{
    if (model)
        onnx__model_proto__free_unpacked(model, NULL);
}

/* ---- external data -------------------------------------------------------- */

static bool parse_i64(const char *s, int64_t *v)
{
    if (!s || !*s)
        return false;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < 0)
        return false;
    *v = x;
    return true;
}

/* `location` must name a file inside base_dir: relative, no "..", and (after
 * resolving symbolic links) still under the directory. */
static kiln_status resolve_location(const char *base_dir, const char *tname, const char *loc,
                                    char *out, size_t out_size, kiln_error *err)
{
    if (!loc || !*loc)
        return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': external data has no location",
                           tname);
    if (loc[0] == '/')
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "tensor '%s': external data location '%s' is an absolute path", tname,
                           loc);
    for (const char *p = loc; *p;) {
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "tensor '%s': external data location '%s' leaves the model's "
                               "directory",
                               tname, loc);
        p += len;
        while (*p == '/')
            p++;
    }
    char joined[PATH_MAX * 2];
    int n = snprintf(joined, sizeof joined, "%s/%s", base_dir, loc);
    if (n < 0 || (size_t)n >= sizeof joined)
        return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': external data path is too long",
                           tname);
    char rbase[PATH_MAX], rfile[PATH_MAX];
    if (!realpath(base_dir, rbase))
        return kiln_errorf(err, KILN_ERR_IO, "%s: %s", base_dir, strerror(errno));
    if (!realpath(joined, rfile))
        return kiln_errorf(err, KILN_ERR_IO, "tensor '%s': external data file %s: %s", tname,
                           joined, strerror(errno));
    size_t bl = strlen(rbase);
    if (strncmp(rfile, rbase, bl) != 0 || (rfile[bl] != '/' && strcmp(rbase, "/") != 0))
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "tensor '%s': external data file %s resolves outside the model's "
                           "directory",
                           tname, joined);
    if (strlen(rfile) >= out_size)
        return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': external data path is too long",
                           tname);
    strcpy(out, rfile);
    return KILN_OK;
}

static kiln_status load_external(const onnx_ctx *c, const Onnx__TensorProto *tp,
                                 kiln_tensor_alloc_fn alloc, void *ctx, kiln_tensor *out,
                                 kiln_error *err)
{
    const char *tname = tp->name ? tp->name : "";
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key)
            continue;
        if (strcmp(e->key, "location") == 0) {
            loc = e->value;
        } else if (strcmp(e->key, "offset") == 0) {
            if (!parse_i64(e->value, &offset))
                return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': bad external offset '%s'",
                                   tname, e->value ? e->value : "");
        } else if (strcmp(e->key, "length") == 0) {
            if (!parse_i64(e->value, &length))
                return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': bad external length '%s'",
                                   tname, e->value ? e->value : "");
        }
    }
    if (!c->base_dir)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "tensor '%s' keeps its data in an external file, but the model was "
                           "given as a buffer without a directory",
                           tname);
    /* the size the tensor needs, from its declaration */
    kiln_dtype dt = kiln_dtype_from_onnx(tp->data_type);
    if (dt == KILN_DTYPE_UNDEFINED)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "tensor '%s': data type %d is not supported",
                           tname, (int)tp->data_type);
    if (tp->n_dims > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "tensor '%s': rank %zu is above %d", tname,
                           tp->n_dims, KILN_MAX_RANK);
    kiln_tensor probe = {.dtype = dt, .shape = {.rank = (int32_t)tp->n_dims}};
    for (size_t d = 0; d < tp->n_dims; d++) {
        if (tp->dims[d] < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': negative dimension %lld", tname,
                               (long long)tp->dims[d]);
        probe.shape.dims[d] = tp->dims[d];
    }
    int64_t need = kiln_tensor_nbytes(&probe);
    if (need < 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "tensor '%s': size overflows", tname);
    if (length >= 0 && length != need)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "tensor '%s': external length %lld does not match the %lld bytes its "
                           "shape needs",
                           tname, (long long)length, (long long)need);
    char path[PATH_MAX];
    kiln_status s = resolve_location(c->base_dir, tname, loc, path, sizeof path, err);
    if (s != KILN_OK)
        return s;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "tensor '%s': %s: %s", tname, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return kiln_errorf(err, KILN_ERR_IO, "tensor '%s': %s is not a regular file", tname,
                           path);
    }
    if (offset > (int64_t)st.st_size || need > (int64_t)st.st_size - offset) {
        fclose(f);
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "tensor '%s': external data (offset %lld, %lld bytes) extends past "
                           "the end of %s (%lld bytes)",
                           tname, (long long)offset, (long long)need, path,
                           (long long)st.st_size);
    }
    void *data = malloc(need ? (size_t)need : 1);
    if (!data) {
        fclose(f);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "tensor '%s': cannot allocate %lld bytes",
                           tname, (long long)need);
    }
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 ||
        fread(data, 1, (size_t)need, f) != (size_t)need) {
        free(data);
        fclose(f);
        return kiln_errorf(err, KILN_ERR_IO, "tensor '%s': reading %s failed", tname, path);
    }
    fclose(f);
    Onnx__TensorProto copy = *tp;
    copy.has_raw_data = 1;
    copy.raw_data.len = (size_t)need;
    copy.raw_data.data = data;
    copy.has_data_location = 1;
    copy.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    copy.n_external_data = 0;
    copy.external_data = NULL;
    copy.n_float_data = copy.n_int32_data = copy.n_int64_data = 0;
    copy.n_double_data = copy.n_uint64_data = copy.n_string_data = 0;
    s = kiln_tensor_from_onnx_into(&copy, alloc, ctx, out, err);
    free(data);
    return s;
}

static kiln_status tensor_load(const onnx_ctx *c, const Onnx__TensorProto *tp,
                               kiln_tensor_alloc_fn alloc, void *ctx, kiln_tensor *out,
                               kiln_error *err)
{
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return load_external(c, tp, alloc, ctx, out, err);
    return kiln_tensor_from_onnx_into(tp, alloc, ctx, out, err);
}

kiln_status onnx_tensor_load(const onnx_ctx *c, const Onnx__TensorProto *tp, kiln_tensor *out,
                             kiln_error *err)
{
    return tensor_load(c, tp, NULL, NULL, out, err);
}

/* An initializer decoded straight into its graph constant: one copy of the
 * weights, not a tensor and then the constant. A model that stays the
 * caller's (kiln_onnx_load_proto: the VM's, imported once per shape class)
 * lends its large raw_data in place instead, as the passes' rewrites lend
 * constants from graph to graph: no copy at all. */
typedef struct const_dst {
    onnx_ctx *c;
    const Onnx__TensorProto *tp;
    int id;
} const_dst;

#define LEND_MIN_BYTES KILN_BIG_ALIGN_MIN /* decoded 64-byte aligned (budget_alloc) */

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void *alloc_const(void *ctx, const kiln_tensor *t)
{
    const_dst *d = ctx;
    const Onnx__TensorProto *tp = d->tp;
    bool lend = d->c->borrowed && tp->has_raw_data && tp->raw_data.len >= LEND_MIN_BYTES &&
                (uintptr_t)tp->raw_data.data % 64 == 0 && t->dtype != KILN_DTYPE_BOOL &&
                host_little_endian();
    void *data = NULL;
    d->id = kiln_graph_add_const_uninit(d->c->g, tp->name, t->dtype, &t->shape, !lend, &data);
    if (d->id < 0)
        return NULL;
    if (lend)
        data = d->c->g->values[d->id]->data = tp->raw_data.data;
    return data;
}

/* ---- graph inputs ---------------------------------------------------------- */

static const kiln_onnx_binding *find_binding(const onnx_ctx *c, const char *name)
{
    for (int i = 0; i < c->opts->n_bindings; i++)
        if (c->opts->bindings[i].name && strcmp(c->opts->bindings[i].name, name) == 0)
            return &c->opts->bindings[i];
    return NULL;
}

static kiln_status input_type(const Onnx__ValueInfoProto *vi, const kiln_onnx_binding *bind,
                              kiln_dtype *dtype, kiln_shape *shape, kiln_error *err)
{
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "input '%s' is not a tensor", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    *dtype = kiln_dtype_from_onnx(tt->elem_type);
    if (*dtype == KILN_DTYPE_UNDEFINED)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input '%s' has element type %d, which kiln does not support", name,
                           (int)tt->elem_type);
    if (bind && bind->shape) {
        if (bind->shape->rank < 0 || bind->shape->rank > KILN_MAX_RANK)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "input '%s': bound rank %d", name,
                               (int)bind->shape->rank);
        /* the bound shape must keep the declared rank and every fixed dim */
        const Onnx__TensorShapeProto *sp = tt->shape;
        if (sp && sp->n_dim != (size_t)bind->shape->rank)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input '%s' has rank %zu, bound to a shape of rank %d", name,
                               sp->n_dim, (int)bind->shape->rank);
        for (int d = 0; d < bind->shape->rank; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = sp ? sp->dim[d] : NULL;
            const char *param = dim && dim->value_case ==
                                               ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                    ? dim->dim_param
                                    : NULL;
            if (bind->shape->dims[d] < 0)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "input '%s' dim %d%s%s%s: bound to extent %lld", name, d,
                                   param ? " ('" : "", param ? param : "", param ? "')" : "",
                                   (long long)bind->shape->dims[d]);
            if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                dim->dim_value != bind->shape->dims[d])
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "input '%s' dim %d is %lld, bound to %lld", name, d,
                                   (long long)dim->dim_value, (long long)bind->shape->dims[d]);
        }
        *shape = *bind->shape;
        return KILN_OK;
    }
    if (!tt->shape)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input '%s' has no declared shape: pass its shape in the import "
                           "options",
                           name);
    if (tt->shape->n_dim > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "input '%s' has rank %zu, above kiln's %d",
                           name, tt->shape->n_dim, KILN_MAX_RANK);
    shape->rank = (int32_t)tt->shape->n_dim;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "input '%s' has a symbolic dimension '%s' (dim %zu): the "
                               "import needs static shapes (bind the input's shape in the "
                               "import options)",
                               name, dim->dim_param ? dim->dim_param : "", d);
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "input '%s' has an unknown dimension (dim %zu): the import "
                               "needs static shapes (bind the input's shape in the import "
                               "options)",
                               name, d);
        if (dim->dim_value < 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "input '%s': dimension %zu is %lld", name, d,
                               (long long)dim->dim_value);
        shape->dims[d] = dim->dim_value;
    }
    return KILN_OK;
}

/* The graph now holds a copy of the initializer's contents: give the
 * unpacked bytes back at once, so that a large model's weights are not held
 * twice (protobuf-c's free_unpacked skips NULL fields; the decoder allocated
 * them with malloc). */
static void release_tensor_data(Onnx__TensorProto *tp)
{
    if (tp->has_raw_data && tp->raw_data.data) {
        free(tp->raw_data.data);
        tp->raw_data.data = NULL;
        tp->raw_data.len = 0;
    }
    free(tp->float_data);
    tp->float_data = NULL;
    tp->n_float_data = 0;
    free(tp->int32_data);
    tp->int32_data = NULL;
    tp->n_int32_data = 0;
    free(tp->int64_data);
    tp->int64_data = NULL;
    tp->n_int64_data = 0;
    free(tp->double_data);
    tp->double_data = NULL;
    tp->n_double_data = 0;
    free(tp->uint64_data);
    tp->uint64_data = NULL;
    tp->n_uint64_data = 0;
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && strcmp(gp->initializer[i]->name, name) == 0)
            return true;
    return false;
}

/* The bindings' names and the data inputs' types, checked before any
 * initializer is copied: a model with a symbolic input dim (which the VM
 * then opens) fails in microseconds, not after copying its weights. */
static kiln_status check_input_types(const onnx_ctx *c, kiln_error *err)
{
    const Onnx__GraphProto *gp = c->model->graph;
    for (int i = 0; i < c->opts->n_bindings; i++) {
        const char *bn = c->opts->bindings[i].name;
        bool found = false;
        for (size_t k = 0; bn && k < gp->n_input && !found; k++)
            found = gp->input[k]->name && strcmp(gp->input[k]->name, bn) == 0;
        if (!found)
            return kiln_errorf(err, KILN_ERR_NOT_FOUND, "the model has no graph input named '%s'",
                               bn ? bn : "(null)");
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name || is_initializer(gp, vi->name))
            continue;
        const kiln_onnx_binding *bind = find_binding(c, vi->name);
        if (bind && bind->value)
            continue;
        kiln_dtype dt;
        kiln_shape sh;
        kiln_status s = input_type(vi, bind, &dt, &sh, err);
        if (s != KILN_OK)
            return s;
    }
    return KILN_OK;
}

/* ---- the inputs' check before the decode ------------------------------------ */

/* Appends the field at [at, end) of a message to *o (a buffer of the wire
 * form's size: a skeleton is never larger). */
static void put(uint8_t **o, const uint8_t *at, const uint8_t *end)
{
    memcpy(*o, at, (size_t)(end - at));
    *o += end - at;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        *o++ = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return o;
}

/* Copies message [p, end) into *o with, at `level` 0 (a ModelProto), the
 * graph (field 7) filtered at level 1, and at level 1 (a GraphProto) every
 * field but the initializers' (field 5) kept, which keep their name (field
 * 8) only: a skeleton that decodes in microseconds whatever the weights.
 * False on a malformed message. */
static bool skeleton(const uint8_t *p, const uint8_t *end, int level, uint8_t **o)
{
    while (p < end) {
        const uint8_t *at = p;
        uint64_t tag, v;
        if (!read_varint(&p, end, &tag))
            return false;
        uint32_t field = (uint32_t)(tag >> 3);
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &v))
                return false;
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return false;
            p += w;
            break;
        }
        case 2: {
            if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return false;
            const uint8_t *body = p;
            p += v;
            bool graph = level == 0 && field == 7, init = level == 1 && field == 5;
            bool name = level == 2 && field == 8;
            if (level == 2) {
                if (name)
                    put(o, at, p);
                continue;
            }
            if (!graph && !init)
                break;
            /* the filtered body first, then its tag and length before it */
            uint8_t *tmp = malloc(v ? v : 1);
            uint8_t *t = tmp;
            if (!tmp || !skeleton(body, p, level + 1, &t)) {
                free(tmp);
                return false;
            }
            *o = put_varint(put_varint(*o, tag), (uint64_t)(t - tmp));
            put(o, tmp, t);
            free(tmp);
            continue;
        }
        default:
            return false;
        }
        if (level < 2)
            put(o, at, p);
    }
    return true;
}

kiln_status onnx_check_inputs_early(const void *buf, size_t size, const kiln_onnx_options *opts,
                                    kiln_error *err)
{
    uint8_t *sk = malloc(size ? size : 1), *o = sk;
    Onnx__ModelProto *m = NULL;
    kiln_status s = KILN_OK;
    kiln_error ignored = {0}; /* a malformed file: the full decode says what */
    /* decoded as a whole file is: the nesting depth and allocation bounds */
    if (sk && skeleton(buf, (const uint8_t *)buf + size, 0, &o) && o > sk &&
        onnx_decode_model(sk, (size_t)(o - sk), &m, &ignored) == KILN_OK && m->graph) {
        onnx_ctx c = {.model = m, .opts = opts};
        s = check_input_types(&c, err);
    }
    onnx_free_model(m);
    free(sk);
    return s;
}

/* The graph's symbols (kiln_sym): the dims of a bound input that its
 * declaration does not fix (a dim_param, an unknown dim, or no shape). */
static void record_syms(kiln_graph *g, const Onnx__ValueInfoProto *vi, const kiln_shape *bound)
{
    const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape; /* input_type checked */
    for (int d = 0; d < bound->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp ? sp->dim[d] : NULL;
        if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            continue;
        kiln_graph_add_sym(g,
                           dim && dim->value_case ==
                                      ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                               ? dim->dim_param
                               : "",
                           bound->dims[d]);
    }
}

kiln_status onnx_decode_graph_inputs(onnx_ctx *c, kiln_error *err)
{
    const Onnx__GraphProto *gp = c->model->graph;
    kiln_status s = check_input_types(c, err);
    if (s != KILN_OK)
        return s;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name)
            return kiln_errorf(err, KILN_ERR_PARSE, "initializer %zu has no name", i);
        if (onnx_map_get(&c->names, tp->name) >= 0)
            return kiln_errorf(err, KILN_ERR_PARSE, "two initializers are named '%s'", tp->name);
        kiln_tensor t;
        const_dst dst = {.c = c, .tp = tp, .id = -1};
        s = tensor_load(c, tp, alloc_const, &dst, &t, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "initializer '%s': ", tp->name);
        int id = dst.id;
        if (!onnx_map_put(&c->names, tp->name, id))
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        if (!c->borrowed)
            release_tensor_data((Onnx__TensorProto *)tp);
    }
    if (gp->n_sparse_initializer)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "sparse initializers are not supported");
    onnx_map seen = {0};
    s = KILN_OK;
    for (size_t i = 0; i < gp->n_input && s == KILN_OK; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name) {
            s = kiln_errorf(err, KILN_ERR_PARSE, "graph input %zu has no name", i);
            break;
        }
        if (onnx_map_get(&seen, vi->name) >= 0) {
            s = kiln_errorf(err, KILN_ERR_PARSE, "two graph inputs are named '%s'", vi->name);
            break;
        }
        if (!onnx_map_put(&seen, vi->name, 1)) {
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        const kiln_onnx_binding *bind = find_binding(c, vi->name);
        if (bind && bind->value) {
            int id = onnx_add_const(c, vi->name, bind->value, err);
            if (id < 0)
                s = err ? err->status : KILN_ERR_OUT_OF_MEMORY;
            else if (!onnx_map_put(&c->names, vi->name, id))
                s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
            continue;
        }
        if (onnx_map_get(&c->names, vi->name) >= 0)
            continue; /* an initializer: a constant for inference */
        kiln_dtype dt = KILN_DTYPE_UNDEFINED;
        kiln_shape sh = {.rank = 0};
        s = input_type(vi, bind, &dt, &sh, err);
        if (s != KILN_OK)
            break;
        if (bind && bind->shape)
            record_syms(c->g, vi, &sh);
        int id = kiln_graph_add_input(c->g, vi->name, dt, &sh);
        if (id < 0 || !onnx_map_put(&c->names, vi->name, id))
            s = kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    onnx_map_free(&seen);
    return s;
}

/* ---- graph outputs --------------------------------------------------------- */

kiln_status onnx_check_outputs(onnx_ctx *c, kiln_error *err)
{
    const Onnx__GraphProto *gp = c->model->graph;
    for (size_t i = 0; i < gp->n_output && (int)i < c->g->n_outputs; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const kiln_value *v = kiln_graph_value(c->g, c->g->outputs[i]);
        const Onnx__TypeProto *tp = vi->type;
        if (!v || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            continue;
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        if (tt->has_elem_type && tt->elem_type != 0) {
            kiln_dtype dt = kiln_dtype_from_onnx(tt->elem_type);
            if (dt != v->dtype)
                return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                                   "output '%s' is declared as ONNX type %d (%s) but kiln infers "
                                   "%s",
                                   vi->name, (int)tt->elem_type, kiln_dtype_name(dt),
                                   kiln_dtype_name(v->dtype));
        }
        if (!tt->shape)
            continue;
        kiln_shape_buf b;
        if ((int)tt->shape->n_dim != v->shape.rank)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "output '%s' is declared with rank %zu but kiln infers %s",
                               vi->name, tt->shape->n_dim, kiln_shape_fmt(&v->shape, &b));
        for (size_t d = 0; d < tt->shape->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                dim->dim_value != v->shape.dims[d])
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "output '%s' is declared with extent %lld in dimension %zu "
                                   "but kiln infers %s",
                                   vi->name, (long long)dim->dim_value, d,
                                   kiln_shape_fmt(&v->shape, &b));
        }
    }
    return KILN_OK;
}
