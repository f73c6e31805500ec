/* util/sb.c: the growable string (sb.h). */
#include "util/sb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(kiln_sb *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap * 2 : 1024;
    while (nc < b->len + extra + 1)
        nc *= 2;
    char *p = realloc(b->s, nc);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->s = p;
    b->cap = nc;
    return true;
}

void kiln_sb_printf(kiln_sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    if ((size_t)n < sizeof tmp) {
        memcpy(b->s + b->len, tmp, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void kiln_sb_puts(kiln_sb *b, const char *s)
{
    size_t n = strlen(s);
    if (!reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void kiln_sb_free(kiln_sb *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

char *kiln_sb_take(kiln_sb *b)
{
    if (b->oom) {
        kiln_sb_free(b);
        return NULL;
    }
    if (!b->s && !reserve(b, 0))
        return NULL;
    char *s = b->s;
    memset(b, 0, sizeof *b);
    return s;
}
