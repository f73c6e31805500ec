/* util/rng.h: a small, seeded, platform-independent random generator
 * (xoshiro256** seeded through splitmix64). Same seed => same sequence on every
 * machine and compiler: zoo weights and test inputs depend on it. */
#ifndef KILN_UTIL_RNG_H
#define KILN_UTIL_RNG_H

#include <stdint.h>

typedef struct kiln_rng {
    uint64_t s[4];
} kiln_rng;

void kiln_rng_seed(kiln_rng *r, uint64_t seed);
uint64_t kiln_rng_next(kiln_rng *r);
/* Uniform in [0, 1). */
double kiln_rng_uniform(kiln_rng *r);
/* Uniform float in [lo, hi). */
float kiln_rng_uniformf(kiln_rng *r, float lo, float hi);
/* Standard normal (Box-Muller). */
double kiln_rng_normal(kiln_rng *r);
/* Fills n floats uniformly in [lo, hi). */
void kiln_rng_fill_uniform(kiln_rng *r, float *dst, int64_t n, float lo, float hi);

#endif
