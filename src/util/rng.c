/* util/rng.c: xoshiro256** (Blackman & Vigna), seeded through splitmix64. */
#include "util/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void kiln_rng_seed(kiln_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t kiln_rng_next(kiln_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kiln_rng_uniform(kiln_rng *r)
{
    return (double)(kiln_rng_next(r) >> 11) * 0x1.0p-53;
}

float kiln_rng_uniformf(kiln_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)kiln_rng_uniform(r);
}

double kiln_rng_normal(kiln_rng *r)
{
    double u1 = kiln_rng_uniform(r), u2 = kiln_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void kiln_rng_fill_uniform(kiln_rng *r, float *dst, int64_t n, float lo, float hi)
{
    /* 24 random bits per float are enough and keep this fast for vgg-16's 138M
     * weights; two floats per 64-bit draw. */
    const float scale = (hi - lo) * 0x1.0p-24f;
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t v = kiln_rng_next(r);
        dst[i] = lo + scale * (float)(uint32_t)(v >> 40);
        dst[i + 1] = lo + scale * (float)(uint32_t)((v >> 8) & 0xffffff);
    }
    if (i < n)
        dst[i] = lo + scale * (float)(uint32_t)(kiln_rng_next(r) >> 40);
}
