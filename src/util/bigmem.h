/* util/bigmem.h: large buffers on transparent huge pages.
 *
 * Each 4 KiB page of a fresh buffer costs a page fault when first written:
 * about 2 us on the VMs kiln is measured on, so importing and packing a
 * 435 MB model (BERT-base) spent more time in the kernel's fault handler
 * than in its own code. A buffer of at least 2 MiB is aligned to 2 MiB and
 * advised MADV_HUGEPAGE, so the kernel can back it with 2 MiB pages: one
 * fault instead of 512. It is not rounded up: a tail shorter than a huge
 * page stays on small pages and nothing is wasted. KILN_HUGE_PAGES=0 turns
 * the advice off (for the runtime's buffers too). */
#ifndef KILN_UTIL_BIGMEM_H
#define KILN_UTIL_BIGMEM_H

#include <stdbool.h>
#include <stddef.h>

#define KILN_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* Whether a buffer of `bytes` gets the advice (size and KILN_HUGE_PAGES). */
bool kiln_huge_pages_wanted(size_t bytes);

#define KILN_BIG_ALIGN_MIN ((size_t)64 << 10)

/* malloc(bytes) (never of 0 bytes), on huge pages when kiln_huge_pages_wanted;
 * *huge (may be NULL): whether the kernel took the advice. At least 64-byte
 * aligned from KILN_BIG_ALIGN_MIN bytes on. Freed by free(). */
void *kiln_big_malloc(size_t bytes, bool *huge);

#endif
