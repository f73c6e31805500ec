/* util/error.c: status names and the error record. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kiln_status_str(kiln_status s)
{
    static const char *const names[KILN_STATUS_COUNT] = {
        [KILN_OK] = "ok",
        [KILN_ERR_INVALID_ARGUMENT] = "invalid argument",
        [KILN_ERR_INVALID_GRAPH] = "invalid graph",
        [KILN_ERR_SHAPE_MISMATCH] = "shape mismatch",
        [KILN_ERR_TYPE_MISMATCH] = "type mismatch",
        [KILN_ERR_UNSUPPORTED] = "unsupported",
        [KILN_ERR_PARSE] = "malformed input",
        [KILN_ERR_IO] = "i/o error",
        [KILN_ERR_OUT_OF_MEMORY] = "out of memory",
        [KILN_ERR_NOT_FOUND] = "not found",
        [KILN_ERR_MISMATCH] = "mismatch",
        [KILN_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)s >= KILN_STATUS_COUNT || !names[s])
        return "unknown status";
    return names[s];
}

kiln_status kiln_errorf(kiln_error *err, kiln_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

kiln_status kiln_error_prefix(kiln_error *err, kiln_status fallback, const char *fmt, ...)
{
    if (!err)
        return fallback;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* shift the old message right by the prefix length, truncating its end */
    size_t cap = sizeof err->msg - 1;
    size_t pl = strlen(prefix), ol = strnlen(err->msg, cap);
    if (pl > cap)
        pl = cap;
    if (ol > cap - pl)
        ol = cap - pl;
    memmove(err->msg + pl, err->msg, ol);
    memcpy(err->msg, prefix, pl);
    err->msg[pl + ol] = '\0';
    if (err->status == KILN_OK)
        err->status = fallback;
    return err->status;
}

void kiln_error_clear(kiln_error *err)
{
    if (err) {
        err->status = KILN_OK;
        err->msg[0] = '\0';
    }
}
