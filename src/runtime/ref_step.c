/* runtime/ref_step.c: fallback steps (see ref_step.h).
 *
 * The text is a sequence of whitespace-separated tokens (docs/RUNTIME.md,
 * "Fallback steps"):
 *
 *   kiln-ref 1
 *   op <Name>
 *   in <n> (<arg> | -)...           per node input: step argument index, - absent
 *   out <n> <arg>...                per node output
 *   attrs <n> (<str> <type> <value>)...
 *       i <int64> | f <float> | s <str> | is <n> <int64>... | fs <n> <float>...
 *   args <n> (<dtype> <rank> <dim>...)...   every step argument, as compiled
 *
 * <str> is <byte length>:<bytes> (names and strings may hold anything);
 * floats are C99 hex floats (exact), "inf", "-inf" or "nan". The parse checks
 * every count against what is left of the text before allocating, so a
 * corrupt description is an error, never a huge allocation or a crash. */
#include "runtime/ref_step.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ref/scratch.h"
#include "util/error.h"

struct kiln_ref_step {
    int index;                /* step index, for messages */
    kiln_node node;           /* name: the step's; inputs/outputs: argument indices */
    kiln_ref_fn fn;
    const kiln_tensor **in;   /* node.n_inputs views, NULL where absent */
    kiln_tensor **out;        /* node.n_outputs views */
    void *scratch;            /* the kernel's temporaries (ref/scratch.h), in the arena */
    size_t scratch_bytes;
};

/* ---- tokens ------------------------------------------------------------------ */

typedef struct cursor {
    const char *p;
} cursor;

static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static void skip_space(cursor *c)
{
    while (is_space(*c->p))
        c->p++;
}

/* The next bare token into buf (false if none or longer than buf). */
static bool word(cursor *c, char *buf, size_t size)
{
    skip_space(c);
    size_t k = 0;
    while (*c->p && !is_space(*c->p)) {
        if (k + 1 >= size)
            return false;
        buf[k++] = *c->p++;
    }
    buf[k] = '\0';
    return k > 0;
}

static bool keyword(cursor *c, const char *kw)
{
    char b[16];
    return word(c, b, sizeof b) && strcmp(b, kw) == 0;
}

static bool int_tok(cursor *c, int64_t *v)
{
    char b[32], *end;
    if (!word(c, b, sizeof b))
        return false;
    errno = 0;
    long long x = strtoll(b, &end, 10);
    if (*end || errno)
        return false;
    *v = x;
    return true;
}

/* A count of items that each take at least two characters of the rest. */
static bool count_tok(cursor *c, int64_t max, int *n)
{
    int64_t v;
    if (!int_tok(c, &v) || v < 0 || v > max || v > (int64_t)strlen(c->p) / 2 + 1)
        return false;
    *n = (int)v;
    return true;
}

static bool float_tok(cursor *c, float *v)
{
    char b[64], *end;
    if (!word(c, b, sizeof b))
        return false;
    double x = strtod(b, &end);
    if (*end)
        return false;
    *v = (float)x;
    return true;
}

/* <len>:<bytes> copied into the arena, NUL-terminated. */
static const char *str_tok(cursor *c, kiln_arena *a)
{
    skip_space(c);
    int64_t len = 0;
    const char *p = c->p;
    while (*p >= '0' && *p <= '9' && len <= (1 << 24))
        len = len * 10 + (*p++ - '0');
    if (p == c->p || *p != ':' || len > (int64_t)strlen(p + 1))
        return NULL;
    char *s = kiln_arena_alloc(a, (size_t)len + 1);
    if (!s)
        return NULL;
    memcpy(s, p + 1, (size_t)len);
    s[len] = '\0';
    if (strlen(s) != (size_t)len)
        return NULL; /* a NUL inside */
    c->p = p + 1 + len;
    return s;
}

static kiln_dtype dtype_from_name(const char *s)
{
    for (int t = 1; t < KILN_DTYPE_COUNT; t++)
        if (strcmp(kiln_dtype_name((kiln_dtype)t), s) == 0)
            return (kiln_dtype)t;
    return KILN_DTYPE_UNDEFINED;
}

/* ---- parse ----------------------------------------------------------------------- */

static bool parse_attr(cursor *c, kiln_arena *a, kiln_attr *at)
{
    char type[8];
    if (!(at->name = str_tok(c, a)) || !word(c, type, sizeof type))
        return false;
    if (!strcmp(type, "i")) {
        at->type = KILN_ATTR_INT;
        return int_tok(c, &at->i);
    }
    if (!strcmp(type, "f")) {
        at->type = KILN_ATTR_FLOAT;
        return float_tok(c, &at->f);
    }
    if (!strcmp(type, "s")) {
        at->type = KILN_ATTR_STRING;
        return (at->s = str_tok(c, a)) != NULL;
    }
    bool ints = !strcmp(type, "is");
    if (!ints && strcmp(type, "fs"))
        return false;
    at->type = ints ? KILN_ATTR_INTS : KILN_ATTR_FLOATS;
    if (!count_tok(c, 1 << 24, &at->n))
        return false;
    int64_t *iv = ints ? kiln_arena_alloc(a, sizeof *iv * (size_t)at->n) : NULL;
    float *fv = ints ? NULL : kiln_arena_alloc(a, sizeof *fv * (size_t)at->n);
    if (!iv && !fv)
        return false;
    for (int k = 0; k < at->n; k++)
        if (ints ? !int_tok(c, &iv[k]) : !float_tok(c, &fv[k]))
            return false;
    at->ints = iv;
    at->floats = fv;
    return true;
}

/* Node input/output slots: argument indices (or -1 = absent, inputs only). */
static bool parse_slots(cursor *c, const char *kw, bool inputs, int n_args, kiln_arena *a, int *n,
                        int **slots)
{
    if (!keyword(c, kw) || !count_tok(c, 1 << 16, n))
        return false;
    *slots = kiln_arena_alloc(a, sizeof(int) * (size_t)(*n));
    if (!*slots)
        return false;
    for (int k = 0; k < *n; k++) {
        skip_space(c);
        if (inputs && c->p[0] == '-' && (c->p[1] == '\0' || is_space(c->p[1]))) {
            c->p++;
            (*slots)[k] = -1;
            continue;
        }
        int64_t v;
        if (!int_tok(c, &v) || v < 0 || v >= n_args)
            return false;
        (*slots)[k] = (int)v;
    }
    return true;
}

static kiln_status bad(kiln_error *err, const char *path, int s, const char *name, const char *what)
{
    return kiln_errorf(err, KILN_ERR_PARSE, "%s: step %d '%s': fallback node: %s", path, s, name,
                       what);
}

/* Shape inference of the node against the tensor table: catches a
 * description that does not match the tensors its kernel will be given. */
static kiln_status check_infer(const char *path, int s, kiln_ref_step *r, const kiln_abi_model *d,
                               kiln_arena *a, kiln_error *err)
{
    const kiln_abi_step *st = &d->steps[s];
    kiln_node *n = &r->node;
    const kiln_value **vin = kiln_arena_calloc(a, (size_t)n->n_inputs + 1, sizeof *vin);
    kiln_value **vout = kiln_arena_calloc(a, (size_t)n->n_outputs + 1, sizeof *vout);
    kiln_value *vals = kiln_arena_calloc(a, (size_t)(n->n_inputs + n->n_outputs) + 1, sizeof *vals);
    if (!vin || !vout || !vals)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        bool is_in = k < n->n_inputs;
        int slot = is_in ? n->inputs[k] : n->outputs[k - n->n_inputs];
        kiln_value *v = &vals[k];
        v->id = k;
        v->producer = -1;
        if (is_in && slot < 0)
            continue;
        const kiln_tensor *t = is_in ? r->in[k] : r->out[k - n->n_inputs];
        v->name = d->tensors[st->args[slot]].name;
        v->kind = d->tensors[st->args[slot]].storage != KILN_STORAGE_ARENA ? KILN_VALUE_CONST
                                                                              : KILN_VALUE_INPUT;
        if (is_in) {
            v->dtype = t->dtype;
            v->shape = t->shape;
            v->data = v->kind == KILN_VALUE_CONST ? t->data : NULL;
            vin[k] = v;
        } else {
            vout[k - n->n_inputs] = v;
        }
    }
    kiln_status e = kiln_op_get(n->op)->infer(n, vin, vout, err);
    if (e != KILN_OK)
        return kiln_error_prefix(err, KILN_ERR_PARSE, "%s: step %d '%s': fallback node (%s): ",
                                 path, s, n->name, kiln_op_name(n->op));
    for (int k = 0; k < n->n_outputs; k++) {
        const kiln_tensor *t = r->out[k];
        if (vout[k]->dtype != t->dtype || !kiln_shape_equal(&vout[k]->shape, &t->shape)) {
            char a1[160], a2[160];
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "%s: step %d '%s': fallback node (%s): output %d is %s%s, but its "
                               "shape inference gives %s%s",
                               path, s, n->name, kiln_op_name(n->op), k, kiln_dtype_name(t->dtype),
                               kiln_shape_str(&t->shape, a1, sizeof a1),
                               kiln_dtype_name(vout[k]->dtype),
                               kiln_shape_str(&vout[k]->shape, a2, sizeof a2));
        }
    }
    return KILN_OK;
}

kiln_status kiln_ref_step_create(const char *path, const kiln_abi_model *d, int s,
                                 void *const *args, kiln_arena *a, kiln_ref_step **out,
                                 kiln_error *err)
{
    const kiln_abi_step *st = &d->steps[s];
    const char *nm = st->name ? st->name : "(unnamed)";
    cursor c = {st->ref_node};
    char buf[64];
    kiln_ref_step *r = kiln_arena_calloc(a, 1, sizeof *r);
    if (!r)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    r->index = s;
    kiln_node *n = &r->node;
    n->name = nm;
    if (!keyword(&c, "kiln-ref") || !keyword(&c, "1"))
        return bad(err, path, s, nm, "not a node description of format 1");
    if (!keyword(&c, "op") || !word(&c, buf, sizeof buf))
        return bad(err, path, s, nm, "no op");
    n->op = kiln_op_from_name(buf);
    if (n->op == KILN_OP_COUNT)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "%s: step %d '%s': this runtime has no reference kernel for op '%s' "
                           "(recompile the model with this kiln)",
                           path, s, nm, buf);
    const kiln_op_info *info = kiln_op_get(n->op);
    if (!parse_slots(&c, "in", true, st->n_args, a, &n->n_inputs, &n->inputs))
        return bad(err, path, s, nm, "bad input list");
    if (!parse_slots(&c, "out", false, st->n_args, a, &n->n_outputs, &n->outputs))
        return bad(err, path, s, nm, "bad output list");
    if (n->n_inputs < info->min_inputs || n->n_inputs > info->max_inputs ||
        n->n_outputs < info->min_outputs || n->n_outputs > info->max_outputs) {
        snprintf(buf, sizeof buf, "%s with %d inputs and %d outputs", info->name, n->n_inputs,
                 n->n_outputs);
        return bad(err, path, s, nm, buf);
    }
    if (!keyword(&c, "attrs") || !count_tok(&c, 1 << 16, &n->n_attrs))
        return bad(err, path, s, nm, "bad attribute list");
    n->cap_attrs = n->n_attrs;
    n->attrs = kiln_arena_calloc(a, (size_t)n->n_attrs + 1, sizeof *n->attrs);
    if (!n->attrs)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (int k = 0; k < n->n_attrs; k++)
        if (!parse_attr(&c, a, &n->attrs[k])) {
            snprintf(buf, sizeof buf, "bad attribute %d", k);
            return bad(err, path, s, nm, buf);
        }
    /* every argument's dtype and shape, as the compiler saw them */
    int n_args;
    if (!keyword(&c, "args") || !count_tok(&c, 1 << 16, &n_args) || n_args != st->n_args)
        return bad(err, path, s, nm, "bad argument list");
    kiln_tensor *views = kiln_arena_calloc(a, (size_t)n_args + 1, sizeof *views);
    if (!views)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (int k = 0; k < n_args; k++) {
        const kiln_abi_tensor *t = &d->tensors[st->args[k]];
        int64_t rank, dim;
        bool ok = word(&c, buf, sizeof buf) && dtype_from_name(buf) == (kiln_dtype)t->dtype &&
                  int_tok(&c, &rank) && rank == t->rank;
        for (int i = 0; ok && i < t->rank; i++)
            ok = int_tok(&c, &dim) && dim == t->dims[i];
        if (!ok) {
            snprintf(buf, sizeof buf, "argument %d does not match tensor %d '%.20s'", k,
                     (int)st->args[k], t->name ? t->name : "");
            return bad(err, path, s, nm, buf);
        }
        views[k].dtype = (kiln_dtype)t->dtype;
        views[k].shape.rank = t->rank;
        for (int i = 0; i < t->rank; i++)
            views[k].shape.dims[i] = t->dims[i];
        views[k].data = args[k];
    }
    skip_space(&c);
    if (*c.p)
        return bad(err, path, s, nm, "unexpected text after the argument list");
    r->in = kiln_arena_calloc(a, (size_t)n->n_inputs + 1, sizeof *r->in);
    r->out = kiln_arena_calloc(a, (size_t)n->n_outputs + 1, sizeof *r->out);
    if (!r->in || !r->out)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (int k = 0; k < n->n_inputs; k++)
        r->in[k] = n->inputs[k] >= 0 ? &views[n->inputs[k]] : NULL;
    for (int k = 0; k < n->n_outputs; k++)
        r->out[k] = &views[n->outputs[k]];
    kiln_status e = check_infer(path, s, r, d, a, err);
    if (e != KILN_OK)
        return e;
    r->fn = info->ref;
    /* sized now, so that a run allocates nothing */
    r->scratch_bytes = kiln_ref_scratch_bytes(n, r->in, r->out);
    if (r->scratch_bytes && !(r->scratch = kiln_arena_alloc(a, r->scratch_bytes)))
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    *out = r;
    return KILN_OK;
}

kiln_status kiln_ref_step_run(const kiln_ref_step *r, kiln_error *err)
{
    kiln_ref_scratch_loan prev = {0};
    if (r->scratch)
        prev = kiln_ref_scratch_lend(r->scratch, r->scratch_bytes);
    kiln_status s = r->fn(&r->node, r->in, r->out, err);
    if (r->scratch)
        kiln_ref_scratch_end(prev);
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "step %d '%s' (ref:%s): ", r->index, r->node.name,
                                 kiln_op_name(r->node.op));
    return KILN_OK;
}

const char *kiln_ref_step_op(const kiln_ref_step *r)
{
    return kiln_op_name(r->node.op);
}
