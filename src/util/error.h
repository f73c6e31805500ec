/* util/error.h: filling a kiln_error. */
#ifndef KILN_UTIL_ERROR_H
#define KILN_UTIL_ERROR_H

#include "kiln/types.h"

/* Stores `status` and a printf-formatted message into `err` (which may be
 * NULL) and returns `status`, so that callers can write
 *     return kiln_errorf(err, KILN_ERR_PARSE, "%s: truncated header", path); */
kiln_status kiln_errorf(kiln_error *err, kiln_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the message already in `err` with a formatted context
 * ("node 'conv1': ") and returns err->status (or `fallback` if err is NULL). */
kiln_status kiln_error_prefix(kiln_error *err, kiln_status fallback, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears `err` to KILN_OK with an empty message. NULL-safe. */
void kiln_error_clear(kiln_error *err);

#endif
