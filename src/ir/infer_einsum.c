/* ir/infer_einsum.c: Einsum's equation parser and shape inference.
 *
 * The equation is parsed in one pass per term into a label per operand
 * dimension (ir/einsum.h). A term's "..." stands for the operand's dims not
 * named by letters; the ellipsis dims of all operands are right-aligned and
 * broadcast (equal extents or 1), and get labels KILN_EINSUM_ELLIPSIS + j. A
 * letter repeated within a term takes a diagonal, so its extents must agree.
 * The output term lists the labels kept, in order; every other label is
 * summed over. */
#include <stdio.h>
#include <string.h>

#include "ir/einsum.h"
#include "util/error.h"

static int letter_label(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a';
    if (ch >= 'A' && ch <= 'Z')
        return 26 + (ch - 'A');
    return -1;
}

/* One term [p, end) without spaces into labels (ellipsis as -2); *n_out
 * entries, *has_ell when "..." was seen. */
static kiln_status parse_term(const char *p, const char *end, int *labels, int *n_out,
                              bool *has_ell, const char *what, kiln_error *err)
{
    int cnt = 0;
    *has_ell = false;
    while (p < end) {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*p == '.') {
            if (end - p < 3 || p[1] != '.' || p[2] != '.' || *has_ell)
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "equation: %s has a malformed or repeated '...'", what);
            *has_ell = true;
            if (cnt >= KILN_MAX_RANK + 1)
                return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "equation: %s is too long", what);
            labels[cnt++] = -2;
            p += 3;
            continue;
        }
        int l = letter_label(*p);
        if (l < 0)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "equation: %s has the character '%c', expected letters or '...'",
                               what, *p);
        if (cnt >= KILN_MAX_RANK + 1)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "equation: %s has more than %d labels",
                               what, KILN_MAX_RANK);
        labels[cnt++] = l;
        p++;
    }
    *n_out = cnt;
    return KILN_OK;
}

kiln_status kiln_einsum_parse(const char *eq, int n, const kiln_shape *const *shapes,
                              kiln_einsum *out, kiln_error *err)
{
    kiln_einsum e;
    memset(&e, 0, sizeof e);
    if (n < 1 || n > KILN_EINSUM_MAX_OPS)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%d operands (at most %d supported)", n,
                           KILN_EINSUM_MAX_OPS);
    e.n_ops = n;
    const char *arrow = strstr(eq, "->");
    const char *lhs_end = arrow ? arrow : eq + strlen(eq);
    int ell_rank[KILN_EINSUM_MAX_OPS] = {0}, max_ell = 0;
    int count[KILN_EINSUM_MAX_LABELS] = {0};
    const char *p = eq;
    for (int k = 0; k < n; k++) {
        const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
        const char *tend = comma ? comma : lhs_end;
        if (!comma && k != n - 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "equation '%s' has %d input terms for %d inputs", eq, k + 1, n);
        if (comma && k == n - 1)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "equation '%s' has more input terms than the %d inputs", eq, n);
        char what[32];
        snprintf(what, sizeof what, "term %d", k);
        int raw[KILN_MAX_RANK + 1], cnt;
        bool ell;
        kiln_status s = parse_term(p, tend, raw, &cnt, &ell, what, err);
        if (s != KILN_OK)
            return s;
        int rank = shapes[k]->rank, letters = ell ? cnt - 1 : cnt;
        if (ell ? letters > rank : letters != rank) {
            kiln_shape_buf b;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "equation term %d names %d dims but input %d has shape %s", k,
                               letters, k, kiln_shape_fmt(shapes[k], &b));
        }
        ell_rank[k] = rank - letters;
        if (ell_rank[k] > max_ell)
            max_ell = ell_rank[k];
        /* expand: ellipsis dims get provisional labels ELLIPSIS + j (j counted
         * from the ellipsis' own first dim; realigned below) */
        int r = 0;
        for (int i = 0; i < cnt; i++) {
            if (raw[i] == -2) {
                for (int j = 0; j < ell_rank[k]; j++)
                    e.op_label[k][r++] = -3 - j;
            } else {
                e.op_label[k][r++] = raw[i];
            }
        }
        e.op_rank[k] = rank;
        p = comma ? comma + 1 : tend;
    }
    /* realign ellipsis labels to the right and size every label */
    for (int l = 0; l < KILN_EINSUM_MAX_LABELS; l++)
        e.size[l] = -1;
    for (int k = 0; k < n; k++) {
        bool seen[KILN_EINSUM_MAX_LABELS] = {false};
        for (int d = 0; d < e.op_rank[k]; d++) {
            int l = e.op_label[k][d];
            if (l <= -3)
                l = e.op_label[k][d] = KILN_EINSUM_ELLIPSIS + (max_ell - ell_rank[k]) + (-3 - l);
            int64_t ext = shapes[k]->dims[d];
            e.used[l] = true;
            if (!seen[l])
                count[l]++;
            seen[l] = true;
            if (e.size[l] < 0 || (l >= KILN_EINSUM_ELLIPSIS && e.size[l] == 1)) {
                e.size[l] = ext;
            } else if (e.size[l] != ext && !(l >= KILN_EINSUM_ELLIPSIS && ext == 1)) {
                kiln_shape_buf b;
                if (l >= KILN_EINSUM_ELLIPSIS)
                    return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                       "the '...' dims of input %d (shape %s) do not broadcast "
                                       "with the other inputs' (%lld vs %lld)",
                                       k, kiln_shape_fmt(shapes[k], &b), (long long)ext,
                                       (long long)e.size[l]);
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "label '%c' has extent %lld in input %d (shape %s) but %lld "
                                   "elsewhere",
                                   l < 26 ? 'a' + l : 'A' + (l - 26), (long long)ext, k,
                                   kiln_shape_fmt(shapes[k], &b), (long long)e.size[l]);
            }
        }
    }
    /* output labels */
    e.out_rank = 0;
    if (arrow) {
        int raw[KILN_MAX_RANK + 1], cnt;
        bool ell;
        kiln_status s = parse_term(arrow + 2, arrow + strlen(arrow), raw, &cnt, &ell, "the output",
                                   err);
        if (s != KILN_OK)
            return s;
        bool in_out[KILN_EINSUM_MAX_LABELS] = {false};
        for (int i = 0; i < cnt; i++) {
            if (raw[i] == -2) {
                if (e.out_rank + max_ell > KILN_MAX_RANK)
                    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank above %d",
                                       KILN_MAX_RANK);
                for (int j = 0; j < max_ell; j++)
                    e.out_label[e.out_rank++] = KILN_EINSUM_ELLIPSIS + j;
                continue;
            }
            int l = raw[i];
            char ch = (char)(l < 26 ? 'a' + l : 'A' + (l - 26));
            if (!e.used[l])
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "output label '%c' appears in no input term", ch);
            if (in_out[l])
                return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                                   "output label '%c' appears twice", ch);
            in_out[l] = true;
            if (e.out_rank >= KILN_MAX_RANK)
                return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank above %d",
                                   KILN_MAX_RANK);
            e.out_label[e.out_rank++] = l;
        }
    } else {
        for (int j = 0; j < max_ell; j++)
            e.out_label[e.out_rank++] = KILN_EINSUM_ELLIPSIS + j;
        /* ASCII order: 'A'..'Z' (26..51) before 'a'..'z' (0..25) */
        for (int pass = 0; pass < 2; pass++)
            for (int l = pass ? 0 : 26; l < (pass ? 26 : 52); l++)
                if (count[l] == 1) {
                    bool twice = false; /* repeated within its one term: a diagonal sum */
                    for (int k = 0; k < n && !twice; k++) {
                        int c = 0;
                        for (int d = 0; d < e.op_rank[k]; d++)
                            c += e.op_label[k][d] == l;
                        twice = c > 1;
                    }
                    if (twice)
                        continue;
                    if (e.out_rank >= KILN_MAX_RANK)
                        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "output rank above %d",
                                           KILN_MAX_RANK);
                    e.out_label[e.out_rank++] = l;
                }
    }
    e.out_shape.rank = e.out_rank;
    for (int i = 0; i < e.out_rank; i++)
        e.out_shape.dims[i] = e.size[e.out_label[i]];
    *out = e;
    return KILN_OK;
}

/* Einsum: every input of one numeric dtype; the output shape from the
 * equation. */
kiln_status kiln_infer_einsum(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    kiln_status s = kiln_node_attr_check(n, "equation", KILN_ATTR_STRING, err);
    if (s != KILN_OK)
        return s;
    const char *eq = kiln_attr_string(n, "equation", NULL);
    if (!eq)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'equation' is required");
    if (n->n_inputs > KILN_EINSUM_MAX_OPS)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "%d inputs (at most %d supported)",
                           n->n_inputs, KILN_EINSUM_MAX_OPS);
    const kiln_shape *shapes[KILN_EINSUM_MAX_OPS];
    for (int k = 0; k < n->n_inputs; k++) {
        const kiln_value *v = in[k];
        kiln_shape_buf b;
        if (!v)
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "input %d is absent", k);
        if (v->dtype == KILN_DTYPE_UNDEFINED || v->dtype == KILN_DTYPE_BOOL ||
            v->dtype >= KILN_DTYPE_COUNT)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                               "input %d (Inputs) is %s, expected a number type", k,
                               kiln_dtype_name(v->dtype));
        if (v->dtype != in[0]->dtype)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (Inputs) is %s but input 0 is %s",
                               k, kiln_dtype_name(v->dtype), kiln_dtype_name(in[0]->dtype));
        if (kiln_shape_numel(&v->shape) < 0)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "input %d (Inputs) has shape %s: symbolic or too large", k,
                               kiln_shape_fmt(&v->shape, &b));
        shapes[k] = &v->shape;
    }
    kiln_einsum e;
    if ((s = kiln_einsum_parse(eq, n->n_inputs, shapes, &e, err)) != KILN_OK)
        return s;
    if (kiln_shape_numel(&e.out_shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "the output is too large");
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = e.out_shape;
    return KILN_OK;
}
