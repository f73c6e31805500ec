/* lower/hash.h: a fast 128-bit non-cryptographic hash for content keys
 * (workload names, the object cache, the compiled-model cache). Processes 16
 * bytes per step with two multiply-xorshift lanes; ~1 GB/s and more. */
#ifndef KILN_LOWER_HASH_H
#define KILN_LOWER_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_hash {
    uint64_t a, b;
} kiln_hash;

void kiln_hash_init(kiln_hash *h, uint64_t seed);
void kiln_hash_update(kiln_hash *h, const void *data, size_t n);
void kiln_hash_str(kiln_hash *h, const char *s); /* includes the terminating NUL */
/* 32 lowercase hex digits + NUL into out[33]. */
void kiln_hash_hex(const kiln_hash *h, char out[33]);
uint64_t kiln_hash64(const void *data, size_t n);

/* The identity of this kiln's code (code_id.c): 32 hex digits hashing the
 * library or executable that holds it, for keys kept across processes. When
 * that file cannot be read it is an id of this process alone, and
 * kiln_code_id_stable is false (nothing should then be kept on disk). */
const char *kiln_code_id(void);
bool kiln_code_id_stable(void);

#endif
