/* util/bigmem.c */
#define _DEFAULT_SOURCE 1 /* MADV_HUGEPAGE, posix_memalign */
#include "util/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

bool kiln_huge_pages_wanted(size_t bytes)
{
    const char *e = getenv("KILN_HUGE_PAGES");
    return bytes >= KILN_HUGE_PAGE_BYTES && !(e && strcmp(e, "0") == 0);
}

void *kiln_big_malloc(size_t bytes, bool *huge)
{
    if (huge)
        *huge = false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (kiln_huge_pages_wanted(bytes)) {
        void *p = NULL; /* posix_memalign: any size (aligned_alloc wants a multiple) */
        if (posix_memalign(&p, KILN_HUGE_PAGE_BYTES, bytes) == 0) {
            /* madvise wants whole small pages; the start is 2 MiB aligned */
            size_t len = (bytes + 4095) & ~(size_t)4095;
            bool ok = madvise(p, len, MADV_HUGEPAGE) == 0;
            if (huge)
                *huge = ok;
            return p;
        }
    }
#endif
    if (bytes < KILN_BIG_ALIGN_MIN)
        return malloc(bytes ? bytes : 1);
    void *p = NULL; /* cache-line aligned, as an arena's constants */
    return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}
