/* Deterministic random numbers for pcoll-train (splitmix64).  Every random
 * choice is a function of the seed and of what it is for (a step, a rank, a
 * data point), so that ranks agree without communicating and a run is
 * reproducible whatever the timing. */
#ifndef PCOLL_TRAIN_PRNG_H
#define PCOLL_TRAIN_PRNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s;
} rng_t;

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A key made of several values: hash(hash(hash(a) ^ b) ^ c).  Used to seed
 * independent streams such as (seed, purpose, step, rank). */
static inline uint64_t rng_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t h = rng_mix(a + 0x9E3779B97F4A7C15ULL);
    h = rng_mix(h ^ (b + 0x632BE59BD9B4E019ULL));
    h = rng_mix(h ^ (c + 0x8CB92BA72F3D8DD7ULL));
    return rng_mix(h ^ (d + 0xD6E8FEB86659FD93ULL));
}

static inline void rng_seed(rng_t *r, uint64_t key) { r->s = key; }

static inline uint64_t rng_next(rng_t *r)
{
    r->s += 0x9E3779B97F4A7C15ULL;
    return rng_mix(r->s);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform in [0, n) for n > 0 (the modulo bias is below 2^-40 for the n used here). */
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return rng_next(r) % n; }

/* Standard normal (Box-Muller; one of the pair is discarded for simplicity). */
static inline double rng_normal(rng_t *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300; /* log(0) */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
