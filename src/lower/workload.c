/* lower/workload.c: workload keys, written (lowering names every task with
 * one) and parsed back (building one task alone), side by side so that the
 * grammar in workload.h has one home. The parser is a recursive descent over
 * the key with one cursor; it checks the syntax and the wiring (references
 * to earlier nodes, each output argument written once, inputs before
 * outputs), not the semantics: building the parsed task and comparing the
 * key lowering gives it is the real check (driver/tasks.c). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/hash.h"
#include "lower/workload.h"
#include "util/arena.h"
#include "util/error.h"

/* ---- writing -------------------------------------------------------------------- */

static bool int_dtype(kiln_dtype dt)
{
    switch (dt) {
    case KILN_DTYPE_INT8:
    case KILN_DTYPE_UINT8:
    case KILN_DTYPE_INT16:
    case KILN_DTYPE_UINT16:
    case KILN_DTYPE_INT32:
    case KILN_DTYPE_UINT32:
    case KILN_DTYPE_INT64:
    case KILN_DTYPE_UINT64:
    case KILN_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

/* Element i of integer data as int64 (uint64 as its bits). */
static int64_t int_at(const void *p, kiln_dtype dt, int64_t i)
{
    switch (dt) {
    case KILN_DTYPE_INT8:
        return ((const int8_t *)p)[i];
    case KILN_DTYPE_UINT8:
    case KILN_DTYPE_BOOL:
        return ((const uint8_t *)p)[i];
    case KILN_DTYPE_INT16:
        return ((const int16_t *)p)[i];
    case KILN_DTYPE_UINT16:
        return ((const uint16_t *)p)[i];
    case KILN_DTYPE_INT32:
        return ((const int32_t *)p)[i];
    case KILN_DTYPE_UINT32:
        return ((const uint32_t *)p)[i];
    default:
        return ((const int64_t *)p)[i];
    }
}

static void arg_desc(kiln_sb *b, const kiln_lowered *l, int tensor)
{
    const kiln_tensor_entry *e = &l->tensors[tensor];
    const kiln_value *v = l->ctx->g->values[e->value];
    char sb[160], lb[32];
    kiln_sb_printf(b, "%s%s:%s", kiln_dtype_name(v->dtype), kiln_shape_str(&v->shape, sb, sizeof sb),
                   kiln_layout_str(&v->shape, v->layout, lb, sizeof lb));
    if (!e->weights)
        return;
    kiln_sb_puts(b, ":w");
    if (!int_dtype(v->dtype) || !v->data)
        return;
    int64_t n = kiln_shape_numel(&v->shape);
    if (n > KILN_WL_MAX_DATA)
        return; /* run-time data to every template (a causal mask): not in the code */
    kiln_sb_puts(b, "=[");
    for (int64_t i = 0; i < n; i++) {
        int64_t x = int_at(v->data, v->dtype, i);
        if (v->dtype == KILN_DTYPE_UINT64)
            kiln_sb_printf(b, "%s%" PRIu64, i ? "," : "", (uint64_t)x);
        else
            kiln_sb_printf(b, "%s%" PRId64, i ? "," : "", x);
    }
    kiln_sb_puts(b, "]");
}

static void attr_desc(kiln_sb *b, const kiln_attr *a)
{
    kiln_sb_printf(b, "%s=", a->name);
    switch (a->type) {
    case KILN_ATTR_INT:
        kiln_sb_printf(b, "%lld", (long long)a->i);
        break;
    case KILN_ATTR_FLOAT:
        kiln_sb_printf(b, "%a", (double)a->f);
        break;
    case KILN_ATTR_STRING:
        kiln_sb_puts(b, "'");
        for (const unsigned char *p = (const unsigned char *)(a->s ? a->s : ""); *p; p++) {
            if (*p == '\\' || *p == '\'')
                kiln_sb_printf(b, "\\%c", *p);
            else if (*p < 0x20 || *p >= 0x7f)
                kiln_sb_printf(b, "\\x%02x", *p);
            else
                kiln_sb_printf(b, "%c", *p);
        }
        kiln_sb_puts(b, "'");
        break;
    case KILN_ATTR_INTS:
        kiln_sb_puts(b, "[");
        for (int i = 0; i < a->n; i++)
            kiln_sb_printf(b, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        kiln_sb_puts(b, "]");
        break;
    case KILN_ATTR_FLOATS:
        kiln_sb_puts(b, "f[");
        for (int i = 0; i < a->n; i++)
            kiln_sb_printf(b, "%s%a", i ? "," : "", (double)a->floats[i]);
        kiln_sb_puts(b, "]");
        break;
    }
    kiln_sb_puts(b, ";");
}

/* Input v of the group's node `at`: an argument, an earlier node's output,
 * or absent. */
static void ref_desc(kiln_sb *b, const kiln_lowered *l, const kiln_task *t, int at, int v)
{
    const kiln_graph *g = l->ctx->g;
    const kiln_group *gr = &l->ctx->groups[t->group];
    if (v < 0) {
        kiln_sb_puts(b, "-");
        return;
    }
    int a = kiln_task_arg(t, v);
    if (a >= 0) {
        kiln_sb_printf(b, "a%d", a);
        return;
    }
    const kiln_value *x = g->values[v];
    for (int j = 0; j < at; j++)
        if (x->kind == KILN_VALUE_NODE && gr->nodes[j] == x->producer) {
            if (x->output_index)
                kiln_sb_printf(b, "t%d.%d", j, x->output_index);
            else
                kiln_sb_printf(b, "t%d", j);
            return;
        }
    kiln_sb_puts(b, "?"); /* not in the group: a fusion bug; the parser refuses it */
}

void kiln_workload_write(kiln_sb *b, const kiln_lowered *l, const kiln_task *t)
{
    const kiln_pass_ctx *ctx = l->ctx;
    const kiln_graph *g = ctx->g;
    const kiln_group *gr = &ctx->groups[t->group];
    kiln_sb_printf(b, "%s|%s|", t->tpl->name, ctx->target.name);
    for (int i = 0; i < t->n_args; i++) {
        if (i)
            kiln_sb_puts(b, ",");
        arg_desc(b, l, t->args[i]);
    }
    kiln_sb_puts(b, "|");
    for (int i = 0; i < gr->n_nodes; i++) {
        const kiln_node *m = g->nodes[gr->nodes[i]];
        kiln_sb_printf(b, "%s%s(", i ? ">" : "", kiln_op_name(m->op));
        for (int k = 0; k < m->n_inputs; k++) {
            if (k)
                kiln_sb_puts(b, ",");
            ref_desc(b, l, t, i, m->inputs[k]);
        }
        kiln_sb_puts(b, "){");
        for (int k = 0; k < m->n_attrs; k++)
            attr_desc(b, &m->attrs[k]);
        kiln_sb_puts(b, "}->");
        for (int k = 0; k < m->n_outputs; k++) {
            const kiln_value *y = g->values[m->outputs[k]];
            int a = kiln_task_arg(t, y->id);
            char lb[32];
            if (k)
                kiln_sb_puts(b, ",");
            if (a >= 0)
                kiln_sb_printf(b, "a%d", a);
            else
                kiln_sb_puts(b, kiln_layout_str(&y->shape, y->layout, lb, sizeof lb));
        }
    }
}

/* ---- parsing -------------------------------------------------------------------- */

typedef struct cur {
    const char *s;
    size_t i;
    kiln_arena *arena;
    kiln_error *err;
    kiln_status st;
} cur;

static char peek(const cur *c)
{
    return c->s[c->i];
}

/* Records the first error: the offset and a glimpse of the key there. */
static bool fail(cur *c, kiln_status st, const char *what)
{
    if (c->st == KILN_OK) {
        c->st = kiln_errorf(c->err, st, "workload key, offset %zu: %s (at '%.24s')", c->i, what,
                            c->s + c->i);
    }
    return false;
}

static bool expect(cur *c, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(c->s + c->i, lit, n) != 0) {
        char what[64];
        snprintf(what, sizeof what, "expected '%s'", lit);
        return fail(c, KILN_ERR_PARSE, what);
    }
    c->i += n;
    return true;
}

static bool accept(cur *c, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(c->s + c->i, lit, n) != 0)
        return false;
    c->i += n;
    return true;
}

/* A decimal integer (optionally negative). */
static bool parse_i64(cur *c, int64_t *out)
{
    const char *p = c->s + c->i;
    if (!(isdigit((unsigned char)p[0]) || (p[0] == '-' && isdigit((unsigned char)p[1]))))
        return fail(c, KILN_ERR_PARSE, "expected an integer");
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno)
        return fail(c, KILN_ERR_PARSE, "integer out of range");
    *out = v;
    c->i += (size_t)(end - p);
    return true;
}

static bool parse_int(cur *c, int lo, int hi, int *out)
{
    int64_t v;
    if (!parse_i64(c, &v))
        return false;
    if (v < lo || v > hi)
        return fail(c, KILN_ERR_PARSE, "number out of range");
    *out = (int)v;
    return true;
}

/* A token of the characters not in `stop` (at least one), copied into buf. */
static bool token(cur *c, const char *stop, char *buf, size_t size, const char *what)
{
    size_t n = strcspn(c->s + c->i, stop);
    if (n == 0 || n >= size)
        return fail(c, KILN_ERR_PARSE, what);
    memcpy(buf, c->s + c->i, n);
    buf[n] = 0;
    c->i += n;
    return true;
}

static bool parse_layout(cur *c, const char *stop, kiln_layout *out)
{
    char buf[32];
    if (!token(c, stop, buf, sizeof buf, "expected a layout"))
        return false;
    int a, b;
    char tail;
    if (!strcmp(buf, "row-major") || !strcmp(buf, "NCHW"))
        *out = (kiln_layout){KILN_LAYOUT_ROW_MAJOR, 0, 0};
    else if (sscanf(buf, "NCHW%dc%c", &a, &tail) == 1 && a > 0)
        *out = (kiln_layout){KILN_LAYOUT_NCHWC, a, 0};
    else if (sscanf(buf, "OIHW%di%do%c", &a, &b, &tail) == 2 && a > 0 && b > 0)
        *out = (kiln_layout){KILN_LAYOUT_OIHWIO, a, b};
    else {
        c->i -= strlen(buf);
        return fail(c, KILN_ERR_PARSE, "unknown layout");
    }
    return true;
}

static bool parse_arg(cur *c, kiln_wl_arg *a)
{
    char name[32];
    if (!token(c, "[|,", name, sizeof name, "expected a dtype"))
        return false;
    a->dtype = KILN_DTYPE_UNDEFINED;
    for (int d = 1; d < KILN_DTYPE_COUNT; d++)
        if (!strcmp(kiln_dtype_name((kiln_dtype)d), name))
            a->dtype = (kiln_dtype)d;
    if (a->dtype == KILN_DTYPE_UNDEFINED) {
        c->i -= strlen(name);
        return fail(c, KILN_ERR_PARSE, "unknown dtype");
    }
    if (!expect(c, "["))
        return false;
    a->shape.rank = 0;
    if (!accept(c, "]")) {
        do {
            if (a->shape.rank == KILN_MAX_RANK)
                return fail(c, KILN_ERR_PARSE, "too many dimensions");
            int64_t d;
            if (!parse_i64(c, &d))
                return false;
            if (d < 0)
                return fail(c, KILN_ERR_PARSE, "a negative (symbolic) dimension");
            a->shape.dims[a->shape.rank++] = d;
        } while (accept(c, ", "));
        if (!expect(c, "]"))
            return false;
    }
    if (kiln_shape_numel(&a->shape) < 0)
        return fail(c, KILN_ERR_PARSE, "a shape with too many elements");
    if (!expect(c, ":") || !parse_layout(c, ":,|", &a->layout))
        return false;
    a->n_data = -1;
    if (!accept(c, ":w"))
        return true;
    a->weight = true;
    if (!accept(c, "=["))
        return true;
    int64_t n = kiln_shape_numel(&a->shape);
    if (n < 0 || n > KILN_WL_MAX_DATA)
        return fail(c, KILN_ERR_PARSE, "recorded values of a weight with too many elements");
    a->data = kiln_arena_alloc(c->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!a->data)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    a->n_data = 0;
    if (!accept(c, "]")) {
        do {
            if (a->n_data == n)
                return fail(c, KILN_ERR_PARSE, "more values than the shape has elements");
            if (a->dtype == KILN_DTYPE_UINT64 && isdigit((unsigned char)peek(c))) {
                char *end;
                errno = 0;
                unsigned long long u = strtoull(c->s + c->i, &end, 10);
                if (errno)
                    return fail(c, KILN_ERR_PARSE, "integer out of range");
                c->i = (size_t)(end - c->s);
                a->data[a->n_data++] = (int64_t)u;
            } else if (!parse_i64(c, &a->data[a->n_data++])) {
                return false;
            }
        } while (accept(c, ","));
        if (!expect(c, "]"))
            return false;
    }
    if (a->n_data != n)
        return fail(c, KILN_ERR_PARSE, "fewer values than the shape has elements");
    return true;
}

static bool parse_ref(cur *c, kiln_wl_ref *r)
{
    r->output = 0;
    if (accept(c, "-")) {
        r->kind = '-';
        r->index = -1;
        return true;
    }
    if (accept(c, "a")) {
        r->kind = 'a';
        return parse_int(c, 0, 1 << 20, &r->index);
    }
    if (accept(c, "t")) {
        r->kind = 't';
        if (!parse_int(c, 0, 1 << 20, &r->index))
            return false;
        return !accept(c, ".") || parse_int(c, 0, 1 << 20, &r->output);
    }
    return fail(c, KILN_ERR_PARSE, "expected an input: aN, tJ or -");
}

/* A string attribute's value between quotes, unescaped into the arena. */
static bool parse_string(cur *c, const char **out)
{
    size_t cap = strlen(c->s + c->i) + 1, n = 0;
    char *s = kiln_arena_alloc(c->arena, cap);
    if (!s)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (;;) {
        char ch = peek(c);
        if (ch == 0)
            return fail(c, KILN_ERR_PARSE, "unterminated string");
        c->i++;
        if (ch == '\'')
            break;
        if (ch == '\\') {
            char e = peek(c);
            if (e == '\\' || e == '\'') {
                s[n++] = e;
                c->i++;
            } else if (e == 'x' && isxdigit((unsigned char)c->s[c->i + 1]) &&
                       isxdigit((unsigned char)c->s[c->i + 2])) {
                char hx[3] = {c->s[c->i + 1], c->s[c->i + 2], 0};
                s[n++] = (char)strtol(hx, NULL, 16);
                c->i += 3;
            } else {
                return fail(c, KILN_ERR_PARSE, "bad escape in a string");
            }
            continue;
        }
        s[n++] = ch;
    }
    s[n] = 0;
    *out = s;
    return true;
}

/* A float written with %a (or inf / nan), up to one of `stop`. */
static bool parse_float(cur *c, const char *stop, float *out)
{
    char buf[64];
    if (!token(c, stop, buf, sizeof buf, "expected a number"))
        return false;
    char *end;
    double v = strtod(buf, &end);
    if (*end) {
        c->i -= strlen(buf);
        return fail(c, KILN_ERR_PARSE, "expected a number");
    }
    *out = (float)v;
    return true;
}

/* Counts the comma-separated items up to the closing ']'. */
static int list_len(const cur *c)
{
    const char *p = c->s + c->i;
    if (*p == ']')
        return 0;
    int n = 1;
    for (; *p && *p != ']'; p++)
        n += *p == ',';
    return n;
}

static bool parse_attr(cur *c, kiln_attr *a)
{
    char name[128];
    if (!token(c, "=;}", name, sizeof name, "expected an attribute name") || !expect(c, "="))
        return false;
    a->name = kiln_arena_strdup(c->arena, name);
    if (!a->name)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (accept(c, "'")) {
        a->type = KILN_ATTR_STRING;
        return parse_string(c, &a->s);
    }
    bool floats = accept(c, "f[");
    if (floats || accept(c, "[")) {
        int n = list_len(c);
        a->type = floats ? KILN_ATTR_FLOATS : KILN_ATTR_INTS;
        a->n = n;
        int64_t *iv = floats ? NULL : kiln_arena_alloc(c->arena, sizeof(int64_t) * (size_t)(n + 1));
        float *fv = floats ? kiln_arena_alloc(c->arena, sizeof(float) * (size_t)(n + 1)) : NULL;
        if (!iv && !fv)
            return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        for (int k = 0; k < n; k++) {
            if (k && !expect(c, ","))
                return false;
            if (floats ? !parse_float(c, ",]", &fv[k]) : !parse_i64(c, &iv[k]))
                return false;
        }
        a->ints = iv;
        a->floats = fv;
        return expect(c, "]");
    }
    /* a scalar: an integer is digits only; anything else is a float */
    size_t n = strcspn(c->s + c->i, ";");
    bool is_int = n > 0;
    for (size_t k = 0; k < n; k++) {
        char ch = c->s[c->i + k];
        if (!(isdigit((unsigned char)ch) || (k == 0 && ch == '-' && n > 1)))
            is_int = false;
    }
    if (is_int) {
        a->type = KILN_ATTR_INT;
        return parse_i64(c, &a->i);
    }
    a->type = KILN_ATTR_FLOAT;
    return parse_float(c, ";", &a->f);
}

static bool parse_node(cur *c, kiln_wl *w, int j)
{
    kiln_wl_node *nd = &w->nodes[j];
    char name[64];
    if (!token(c, "(", name, sizeof name, "expected an op name"))
        return false;
    nd->op = kiln_op_from_name(name);
    if (nd->op == KILN_OP_COUNT) {
        c->i -= strlen(name);
        return fail(c, KILN_ERR_PARSE, "unknown op");
    }
    const kiln_op_info *info = kiln_op_get(nd->op);
    if (!expect(c, "("))
        return false;
    /* inputs: at most as many as commas + 1 before ')' */
    int cap = 1;
    for (const char *p = c->s + c->i; *p && *p != ')'; p++)
        cap += *p == ',';
    nd->inputs = kiln_arena_calloc(c->arena, (size_t)cap, sizeof *nd->inputs);
    if (!nd->inputs)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    if (!accept(c, ")")) {
        do {
            kiln_wl_ref *r = &nd->inputs[nd->n_inputs];
            if (!parse_ref(c, r))
                return false;
            if (r->kind == 'a' && r->index >= w->n_args)
                return fail(c, KILN_ERR_PARSE, "no such argument");
            if (r->kind == 't' && (r->index >= j || r->output >= w->nodes[r->index].n_outputs ||
                                   w->nodes[r->index].out_arg[r->output] >= 0))
                return fail(c, KILN_ERR_PARSE,
                            "not an internal value of an earlier node of the key");
            nd->n_inputs++;
        } while (accept(c, ","));
        if (!expect(c, ")"))
            return false;
    }
    if (nd->n_inputs < info->min_inputs || nd->n_inputs > info->max_inputs)
        return fail(c, KILN_ERR_PARSE, "wrong number of inputs for the op");
    if (!expect(c, "{"))
        return false;
    int n_attrs = 0;
    for (const char *p = c->s + c->i; *p && *p != '}'; p++) {
        if (*p == '\'') { /* skip a string, escapes included */
            for (p++; *p && *p != '\''; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                break;
        } else if (*p == ';') {
            n_attrs++;
        }
    }
    nd->attrs = kiln_arena_calloc(c->arena, (size_t)n_attrs + 1, sizeof *nd->attrs);
    if (!nd->attrs)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    while (!accept(c, "}")) {
        if (nd->n_attrs == n_attrs)
            return fail(c, KILN_ERR_PARSE, "expected '}'");
        if (!parse_attr(c, &nd->attrs[nd->n_attrs++]) || !expect(c, ";"))
            return false;
    }
    if (!expect(c, "->"))
        return false;
    cap = 1;
    for (const char *p = c->s + c->i; *p && *p != '>'; p++)
        cap += *p == ',';
    nd->out_arg = kiln_arena_alloc(c->arena, sizeof(int) * (size_t)cap);
    nd->out_layout = kiln_arena_calloc(c->arena, (size_t)cap, sizeof *nd->out_layout);
    if (!nd->out_arg || !nd->out_layout)
        return fail(c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    do {
        int k = nd->n_outputs++;
        nd->out_arg[k] = -1;
        if (peek(c) == 'a' && isdigit((unsigned char)c->s[c->i + 1])) {
            c->i++;
            int a;
            if (!parse_int(c, 0, w->n_args - 1, &a))
                return false;
            kiln_wl_arg *arg = &w->args[a];
            if (arg->output || arg->weight)
                return fail(c, KILN_ERR_PARSE, "an argument written twice, or a weight written");
            arg->output = true;
            nd->out_arg[k] = a;
        } else if (!parse_layout(c, ",>", &nd->out_layout[k])) {
            return false;
        }
    } while (accept(c, ","));
    if (nd->n_outputs < info->min_outputs || nd->n_outputs > info->max_outputs)
        return fail(c, KILN_ERR_PARSE, "wrong number of outputs for the op");
    return true;
}

void kiln_wl_destroy(kiln_wl *w)
{
    if (w)
        kiln_arena_destroy(w->arena);
}

kiln_status kiln_wl_parse(const char *key, kiln_wl **out, kiln_error *err)
{
    if (!key || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_wl_parse: no key");
    kiln_arena *arena = kiln_arena_create();
    kiln_wl *w = arena ? kiln_arena_calloc(arena, 1, sizeof *w) : NULL;
    if (!w) {
        kiln_arena_destroy(arena);
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    w->arena = arena;
    cur c = {.s = key, .arena = arena, .err = err};
    /* template and target */
    if (!token(&c, "|", w->tpl, sizeof w->tpl, "expected a template name") || !expect(&c, "|") ||
        !token(&c, "|", w->target, sizeof w->target, "expected a target name") ||
        !expect(&c, "|"))
        goto done;
    /* arguments: count the top-level commas (shapes have ", " inside brackets) */
    int cap = 1, depth = 0;
    for (const char *p = key + c.i; *p && *p != '|'; p++) {
        depth += *p == '[';
        depth -= *p == ']';
        cap += *p == ',' && depth == 0;
    }
    w->args = kiln_arena_calloc(arena, (size_t)cap, sizeof *w->args);
    if (!w->args) {
        fail(&c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    do {
        if (w->n_args == cap) {
            fail(&c, KILN_ERR_PARSE, "too many arguments");
            goto done;
        }
        if (!parse_arg(&c, &w->args[w->n_args++]))
            goto done;
    } while (accept(&c, ","));
    if (!expect(&c, "|"))
        goto done;
    /* nodes: at most one per '>' outside strings (an upper bound) */
    cap = 1;
    for (const char *p = key + c.i; *p; p++)
        cap += *p == '>';
    w->nodes = kiln_arena_calloc(arena, (size_t)cap, sizeof *w->nodes);
    if (!w->nodes) {
        fail(&c, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    do {
        if (w->n_nodes == cap) {
            fail(&c, KILN_ERR_PARSE, "too many nodes");
            goto done;
        }
        if (!parse_node(&c, w, w->n_nodes))
            goto done;
        w->n_nodes++;
    } while (accept(&c, ">"));
    if (peek(&c) != 0) {
        fail(&c, KILN_ERR_PARSE, "unexpected text after the last node");
        goto done;
    }
    /* inputs first, then outputs; every output written */
    for (int i = 1; i < w->n_args; i++)
        if (w->args[i - 1].output && !w->args[i].output) {
            c.i = strlen(key);
            fail(&c, KILN_ERR_PARSE, "an input argument after an output argument");
            goto done;
        }
    if (!w->args[w->n_args - 1].output) {
        c.i = strlen(key);
        fail(&c, KILN_ERR_PARSE, "no node writes the last argument (an output)");
        goto done;
    }
done:
    if (c.st != KILN_OK) {
        kiln_arena_destroy(arena);
        return c.st;
    }
    *out = w;
    return KILN_OK;
}
