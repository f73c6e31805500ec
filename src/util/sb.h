/* util/sb.h: a growable string (generated code, workload keys, messages). A failed
 * allocation sets `oom` and later appends do nothing; check once at the end. */
#ifndef KILN_UTIL_SB_H
#define KILN_UTIL_SB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kiln_sb {
    char *s;
    size_t len, cap;
    bool oom;
} kiln_sb;

void kiln_sb_printf(kiln_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kiln_sb_puts(kiln_sb *b, const char *s);
void kiln_sb_free(kiln_sb *b);
/* Hands the string over (malloc'ed, never NULL unless oom) and resets b. */
char *kiln_sb_take(kiln_sb *b);

#endif
