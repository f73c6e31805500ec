/* lower/hash.c: the content hash (hash.h). Each lane absorbs 8-byte words
 * with a multiply and a xor-shift; the digest runs both lanes through the
 * murmur3 finalizer, crossing them. Streaming: updates may split the input
 * anywhere only at multiples of 16 bytes for identical results, so callers
 * hash whole buffers (strings, tensors) per update and the tail is mixed per
 * call. */
#include "lower/hash.h"

#include <stdio.h>
#include <string.h>

static uint64_t fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

void kiln_hash_init(kiln_hash *h, uint64_t seed)
{
    h->a = seed ^ 0x9e3779b97f4a7c15ULL;
    h->b = fmix(seed + 0x632be59bd9b4e019ULL);
}

void kiln_hash_update(kiln_hash *h, const void *data, size_t n)
{
    const unsigned char *s = data;
    uint64_t a = h->a, b = h->b;
    a ^= n * 0x87c37b91114253d5ULL;
    while (n >= 16) {
        uint64_t x, y;
        memcpy(&x, s, 8);
        memcpy(&y, s + 8, 8);
        a = (a ^ x) * 0x87c37b91114253d5ULL;
        a ^= a >> 31;
        b = (b ^ y) * 0x4cf5ad432745937fULL;
        b ^= b >> 29;
        s += 16;
        n -= 16;
    }
    if (n) {
        unsigned char tail[16] = {0};
        memcpy(tail, s, n);
        uint64_t x, y;
        memcpy(&x, tail, 8);
        memcpy(&y, tail + 8, 8);
        a = (a ^ x ^ n) * 0x87c37b91114253d5ULL;
        a ^= a >> 31;
        b = (b ^ y) * 0x4cf5ad432745937fULL;
        b ^= b >> 29;
    }
    h->a = fmix(a + b);
    h->b = fmix(b ^ (a << 1));
}

void kiln_hash_str(kiln_hash *h, const char *s)
{
    kiln_hash_update(h, s ? s : "", (s ? strlen(s) : 0) + 1);
}

void kiln_hash_hex(const kiln_hash *h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->a, (unsigned long long)h->b);
}

uint64_t kiln_hash64(const void *data, size_t n)
{
    kiln_hash h;
    kiln_hash_init(&h, 0);
    kiln_hash_update(&h, data, n);
    return h.a ^ h.b;
}
