/* A small deterministic generator (splitmix64) for reproducible test data. */
#ifndef PCOLL_TEST_RNG_H
#define PCOLL_TEST_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s;
} rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ULL + 1; }

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* uniform in [0, n) (n > 0; the tiny modulo bias does not matter here) */
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return rng_next(r) % n; }

#endif
