/* io/tensor_npy.c: NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Layout: the magic "\x93NUMPY", a major and a minor version byte, the header
 * length (uint16 little-endian in 1.x, uint32 in 2.x/3.x), the header, then the
 * raw array bytes. The header is a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n'. It is parsed here by a small
 * hand-written scanner that accepts exactly the three keys, string values in
 * single or double quotes, True/False, and a tuple of non-negative integers.
 * Every declared size is checked against the bytes present before any
 * allocation; the data must fill the rest of the file exactly. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tensor_io.h"
#include "kiln/kiln.h"
#include "util/error.h"
#include "util/file.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ---- dtype descriptors --------------------------------------------------- */

static const struct {
    const char *code; /* without the byte-order character */
    kiln_dtype dtype;
} npy_types[] = {
    {"f2", KILN_DTYPE_FLOAT16}, {"f4", KILN_DTYPE_FLOAT32}, {"f8", KILN_DTYPE_FLOAT64},
    {"i1", KILN_DTYPE_INT8},    {"u1", KILN_DTYPE_UINT8},   {"i2", KILN_DTYPE_INT16},
    {"u2", KILN_DTYPE_UINT16},  {"i4", KILN_DTYPE_INT32},   {"u4", KILN_DTYPE_UINT32},
    {"i8", KILN_DTYPE_INT64},   {"u8", KILN_DTYPE_UINT64},  {"b1", KILN_DTYPE_BOOL},
};

/* Maps a descr string ("<f4", "|u1") to a dtype. */
static kiln_status npy_parse_descr(const char *descr, kiln_dtype *out, kiln_error *err)
{
    char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "dtype '%s' is not supported", descr);
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
        if (strcmp(descr + 1, npy_types[i].code) != 0)
            continue;
        kiln_dtype dt = npy_types[i].dtype;
        if (kiln_dtype_size(dt) > 1 && order == '|')
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "dtype '%s' has no byte order but is %zu bytes wide", descr,
                               kiln_dtype_size(dt));
        if (kiln_dtype_size(dt) > 1 && order == '>')
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "big-endian dtype '%s' is not supported (only little-endian)",
                               descr);
        *out = dt;
        return KILN_OK;
    }
    return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "dtype '%s' is not supported", descr);
}

static const char *npy_descr_of(kiln_dtype dt)
{
    switch (dt) {
    case KILN_DTYPE_FLOAT16: return "<f2";
    case KILN_DTYPE_FLOAT32: return "<f4";
    case KILN_DTYPE_FLOAT64: return "<f8";
    case KILN_DTYPE_INT8: return "|i1";
    case KILN_DTYPE_UINT8: return "|u1";
    case KILN_DTYPE_INT16: return "<i2";
    case KILN_DTYPE_UINT16: return "<u2";
    case KILN_DTYPE_INT32: return "<i4";
    case KILN_DTYPE_UINT32: return "<u4";
    case KILN_DTYPE_INT64: return "<i8";
    case KILN_DTYPE_UINT64: return "<u8";
    case KILN_DTYPE_BOOL: return "|b1";
    default: return NULL;
    }
}

/* ---- the header dict ----------------------------------------------------- */

typedef struct npy_scan {
    const char *p, *end;
} npy_scan;

static void skip_ws(npy_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int accept(npy_scan *s, char c)
{
    skip_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes, copied into buf. */
static kiln_status scan_string(npy_scan *s, char *buf, size_t size, const char *what,
                               kiln_error *err)
{
    skip_ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return kiln_errorf(err, KILN_ERR_PARSE, "header: expected a quoted %s", what);
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= size)
            return kiln_errorf(err, KILN_ERR_PARSE, "header: %s is too long or has escapes",
                               what);
        buf[n++] = *s->p++;
    }
    if (s->p >= s->end)
        return kiln_errorf(err, KILN_ERR_PARSE, "header: unterminated %s", what);
    s->p++;
    buf[n] = 0;
    return KILN_OK;
}

static int scan_word(npy_scan *s, const char *w)
{
    skip_ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && memcmp(s->p, w, n) == 0 &&
        ((size_t)(s->end - s->p) == n || !isalnum((unsigned char)s->p[n]))) {
        s->p += n;
        return 1;
    }
    return 0;
}

static kiln_status scan_shape(npy_scan *s, kiln_shape *shape, kiln_error *err)
{
    if (!accept(s, '('))
        return kiln_errorf(err, KILN_ERR_PARSE, "header: 'shape' is not a tuple");
    shape->rank = 0;
    for (;;) {
        if (accept(s, ')'))
            return KILN_OK;
        skip_ws(s);
        if (s->p < s->end && *s->p == '-')
            return kiln_errorf(err, KILN_ERR_PARSE, "header: shape has a negative dimension");
        if (s->p >= s->end || !isdigit((unsigned char)*s->p))
            return kiln_errorf(err, KILN_ERR_PARSE,
                               "header: 'shape' must be a tuple of non-negative integers");
        int64_t v = 0;
        while (s->p < s->end && isdigit((unsigned char)*s->p)) {
            int d = *s->p++ - '0';
            if (v > (INT64_MAX - d) / 10)
                return kiln_errorf(err, KILN_ERR_PARSE, "header: shape dimension overflows");
            v = v * 10 + d;
        }
        if (s->p < s->end && *s->p == 'L') /* written by Python 2 */
            s->p++;
        if (shape->rank == KILN_MAX_RANK)
            return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                               "header: shape has more than kiln's limit of %d dimensions",
                               KILN_MAX_RANK);
        shape->dims[shape->rank++] = v;
        if (accept(s, ','))
            continue;
        if (accept(s, ')'))
            return KILN_OK;
        return kiln_errorf(err, KILN_ERR_PARSE, "header: expected ',' or ')' in 'shape'");
    }
}

static kiln_status npy_parse_header(const char *hdr, size_t len, kiln_dtype *dtype,
                                    kiln_shape *shape, kiln_error *err)
{
    npy_scan s = {hdr, hdr + len};
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0, structured = 0;
    char descr[64];
    if (!accept(&s, '{'))
        return kiln_errorf(err, KILN_ERR_PARSE, "header is not a dict literal");
    for (;;) {
        if (accept(&s, '}'))
            break;
        char key[32];
        kiln_status st = scan_string(&s, key, sizeof key, "key", err);
        if (st != KILN_OK)
            return st;
        if (!accept(&s, ':'))
            return kiln_errorf(err, KILN_ERR_PARSE, "header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            skip_ws(&s);
            if (s.p < s.end && *s.p == '[') {
                /* a structured dtype: a list of tuples; skip it to the
                 * matching ']' so that syntax errors elsewhere still count */
                int depth = 0;
                do {
                    if (*s.p == '[')
                        depth++;
                    else if (*s.p == ']')
                        depth--;
                    s.p++;
                } while (depth > 0 && s.p < s.end);
                if (depth > 0)
                    return kiln_errorf(err, KILN_ERR_PARSE, "header: unterminated 'descr'");
                structured = 1;
            } else if ((st = scan_string(&s, descr, sizeof descr, "'descr'", err)) != KILN_OK) {
                return st;
            }
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (scan_word(&s, "True"))
                fortran = 1;
            else if (!scan_word(&s, "False"))
                return kiln_errorf(err, KILN_ERR_PARSE,
                                   "header: 'fortran_order' must be True or False");
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((st = scan_shape(&s, shape, err)) != KILN_OK)
                return st;
            have_shape = 1;
        } else {
            return kiln_errorf(err, KILN_ERR_PARSE, "header: unexpected or repeated key '%s'",
                               key);
        }
        if (accept(&s, ','))
            continue;
        if (accept(&s, '}'))
            break;
        return kiln_errorf(err, KILN_ERR_PARSE, "header: expected ',' or '}'");
    }
    skip_ws(&s);
    if (s.p != s.end)
        return kiln_errorf(err, KILN_ERR_PARSE, "header: unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return kiln_errorf(err, KILN_ERR_PARSE, "header: missing key '%s'",
                           !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    /* The header is well-formed; now what kiln cannot handle. */
    if (structured)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "structured dtypes are not supported");
    if (fortran)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "fortran_order True (column-major) arrays are not supported; save "
                           "with np.ascontiguousarray");
    return npy_parse_descr(descr, dtype, err);
}

/* ---- reading ------------------------------------------------------------- */

kiln_status kiln_tensor_read_npy_buffer(const void *buf, size_t size, kiln_tensor *out,
                                        kiln_error *err)
{
    if ((!buf && size) || !out)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "kiln_tensor_read_npy_buffer: NULL argument");
    const unsigned char *b = buf;
    if (size < 8 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "bad magic: not a NumPy .npy file");
    unsigned major = b[6], minor = b[7];
    size_t pre, hlen;
    if (major == 1) {
        pre = 10;
        if (size < pre)
            return kiln_errorf(err, KILN_ERR_PARSE, "truncated: file ends in the preamble");
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if (major == 2 || major == 3) {
        pre = 12;
        if (size < pre)
            return kiln_errorf(err, KILN_ERR_PARSE, "truncated: file ends in the preamble");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    } else {
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "format version %u.%u is not supported",
                           major, minor);
    }
    if (hlen > size - pre)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "truncated: header declares %zu bytes but only %zu follow", hlen,
                           size - pre);
    const char *hdr = (const char *)b + pre;
    if (memchr(hdr, 0, hlen))
        return kiln_errorf(err, KILN_ERR_PARSE, "header contains a NUL byte");

    kiln_tensor t = {.dtype = KILN_DTYPE_UNDEFINED, .shape = {.rank = 0}, .data = NULL};
    kiln_status st = npy_parse_header(hdr, hlen, &t.dtype, &t.shape, err);
    if (st != KILN_OK)
        return st;

    char sbuf[256];
    int64_t nbytes = kiln_tensor_nbytes(&t);
    size_t avail = size - pre - hlen;
    if (nbytes < 0)
        return kiln_errorf(err, KILN_ERR_PARSE, "shape %s: element count overflows",
                           kiln_shape_str(&t.shape, sbuf, sizeof sbuf));
    if ((uint64_t)nbytes != avail)
        return kiln_errorf(err, KILN_ERR_PARSE,
                           "%s shape %s needs %lld data bytes but the file has %zu",
                           kiln_dtype_name(t.dtype), kiln_shape_str(&t.shape, sbuf, sizeof sbuf),
                           (long long)nbytes, avail);
    t.data = malloc(avail ? avail : 1);
    if (!t.data)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", avail);
    size_t esize = kiln_dtype_size(t.dtype);
    kiln_io_copy_le(t.data, b + pre + hlen, avail / esize, esize);
    if (t.dtype == KILN_DTYPE_BOOL)
        for (size_t i = 0; i < avail; i++)
            ((uint8_t *)t.data)[i] = ((uint8_t *)t.data)[i] != 0;
    *out = t;
    return KILN_OK;
}

/* ---- writing ------------------------------------------------------------- */

kiln_status kiln_tensor_write_npy(const char *path, const kiln_tensor *t, kiln_error *err)
{
    size_t nbytes;
    if (!path)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_write_npy: NULL path");
    if (kiln_io_check_tensor(t, &nbytes, err) != KILN_OK)
        return kiln_error_prefix(err, KILN_ERR_INVALID_ARGUMENT, "%s: ", path);

    /* The dict, then spaces and '\n' so that preamble + header is a multiple
     * of 64 bytes (what numpy writes). The dict is at most ~250 bytes, so
     * version 1.0's 16-bit length always suffices. */
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     npy_descr_of(t->dtype));
    for (int i = 0; i < t->shape.rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld, ", (long long)t->shape.dims[i]);
    if (t->shape.rank > 1)
        n -= 2; /* "(2, 3)"; a 1-d shape keeps its comma: "(5,)" */
    else if (t->shape.rank == 1)
        n -= 1;
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t pre = 10, hlen = (size_t)n + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;

    size_t total = pre + hlen + nbytes;
    unsigned char *file = malloc(total);
    if (!file)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(file, npy_magic, sizeof npy_magic);
    file[6] = 1;
    file[7] = 0;
    file[8] = (unsigned char)(hlen & 0xff);
    file[9] = (unsigned char)(hlen >> 8);
    memcpy(file + pre, dict, (size_t)n);
    memset(file + pre + n, ' ', hlen - (size_t)n - 1);
    file[pre + hlen - 1] = '\n';
    size_t esize = kiln_dtype_size(t->dtype);
    kiln_io_copy_le(file + pre + hlen, t->data, nbytes / esize, esize);
    kiln_status st = kiln_file_write(path, file, total, err);
    free(file);
    return st;
}
