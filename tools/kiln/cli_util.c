/* tools/kiln/cli_util.c: argument parsing, tensor summaries (top-k, checksum),
 * timing and number formatting shared by the commands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "Try 'kiln %s --help'.\n", cmd);
    else
        fprintf(stderr, "Try 'kiln --help'.\n");
    return KILN_EXIT_ERROR;
}

int cli_lib_error(const kiln_error *err)
{
    if (err->msg[0])
        cli_error("%s", err->msg);
    else
        cli_error("%s", kiln_status_str(err->status));
    return KILN_EXIT_ERROR;
}

int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
                  const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return 0;
    char *end;
    errno = 0;
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
    if (errno || *end)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

int cli_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

int cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* IEEE 754 binary16 bits -> double. */
static double half_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24); /* subnormal or zero */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

double cli_tensor_get(const kiln_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case KILN_DTYPE_FLOAT32: return ((const float *)d)[i];
    case KILN_DTYPE_FLOAT16: return half_to_double(((const uint16_t *)d)[i]);
    case KILN_DTYPE_FLOAT64: return ((const double *)d)[i];
    case KILN_DTYPE_INT8: return ((const int8_t *)d)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)d)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)d)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case KILN_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case KILN_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    case KILN_DTYPE_BOOL: return ((const uint8_t *)d)[i] ? 1.0 : 0.0;
    default: return NAN;
    }
}

/* a ranks above b */
static int ranks_above(double a, int64_t ia, double b, int64_t ib)
{
    if (isnan(a))
        return isnan(b) && ia < ib;
    if (isnan(b))
        return 1;
    return a > b || (a == b && ia < ib);
}

int cli_top_k(const kiln_tensor *t, int k, int64_t *idx)
{
    int64_t n = kiln_shape_numel(&t->shape);
    int m = 0;
    if (n <= 0 || !t->data)
        return 0;
    /* insertion into a sorted list of at most k: O(n k) with k small */
    for (int64_t i = 0; i < n; i++) {
        double v = cli_tensor_get(t, i);
        int pos = m;
        while (pos > 0 && ranks_above(v, i, cli_tensor_get(t, idx[pos - 1]), idx[pos - 1]))
            pos--;
        if (pos >= k)
            continue;
        if (m < k)
            m++;
        memmove(idx + pos + 1, idx + pos, (size_t)(m - 1 - pos) * sizeof *idx);
        idx[pos] = i;
    }
    return m;
}

uint64_t cli_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

double cli_tensor_sum(const kiln_tensor *t)
{
    int64_t n = kiln_shape_numel(&t->shape);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += cli_tensor_get(t, i);
    return s;
}

kiln_status cli_write_tensor(const char *path, const kiln_tensor *t, const char *name,
                             kiln_error *err)
{
    if (cli_ends_with(path, ".npy"))
        return kiln_tensor_write_npy(path, t, err);
    return kiln_tensor_write_pb(path, t, name, err);
}

char *cli_multi_index(const kiln_shape *shape, int64_t flat, char *buf, size_t size)
{
    kiln_shape idx = {.rank = shape->rank};
    for (int d = shape->rank - 1; d >= 0; d--) {
        int64_t ext = shape->dims[d] > 0 ? shape->dims[d] : 1;
        idx.dims[d] = flat % ext;
        flat /= ext;
    }
    return kiln_shape_str(&idx, buf, size);
}

char *cli_type_str(kiln_dtype dt, const kiln_shape *s, char *buf, size_t size)
{
    char sb[256];
    snprintf(buf, size, "%s %s", kiln_dtype_name(dt), kiln_shape_str(s, sb, sizeof sb));
    return buf;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

char *cli_thousands(int64_t v, char *buf, size_t size)
{
    char digits[32];
    int neg = v < 0;
    unsigned long long u = neg ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int n = snprintf(digits, sizeof digits, "%llu", u);
    char tmp[48];
    size_t o = 0;
    if (neg)
        tmp[o++] = '-';
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            tmp[o++] = ',';
        tmp[o++] = digits[i];
    }
    tmp[o] = 0;
    snprintf(buf, size, "%s", tmp);
    return buf;
}
